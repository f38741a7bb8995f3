/* device.c - accounting wrappers around a device backend. */
#include "device/device.h"
#include "device/latency.h"
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

const char *const as_cal_result_names[CAL_NRESULTS] = { "malloc", "free", "map", "unmap", "pool_malloc", "pool_grow",
	"pool_free", "pool_init", "vmm_create", "vmm_map", "vmm_setaccess", "vmm_unmap", "vmm_release" };

double as_dev_now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Events since the previous device call; 0 for the first. */
static uint64_t as_dev_gap(const as_device *d)
{
	return d->calls ? d->event - d->last_event : 0;
}

/* Charges one device call: its measured time, or the model's for the simulated device (its cost
 * for the size, times the idle factor for the events since the previous device call and the size). */
static double charge(as_device *d, int op, uint64_t size, double t0)
{
	double us = 0.0;
	d->gap = as_dev_gap(d);
	if (d->measured)
		us = as_dev_now_us() - t0;
	else if (d->model)
		us = as_lat_model_us(d->model, op, size) * as_lat_model_factor(d->model, op, d->gap, size);
	d->last_event = d->event;
	d->op_us += us;
	d->time_us += us;
	d->calls++;
	return us;
}

void as_dev_log_header(FILE *f)
{
	fputs(AS_DEVLOG_HEADER "\n", f);
}

/* One --device-log row, written after the call's accounting. */
static void log_call(as_device *d, const char *call, int op, uint64_t size, uint64_t addr, int fail, double us)
{
	if (d->log)
		fprintf(d->log, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s,%s,%" PRIu64 ",0x%" PRIx64 ",%s,%.3f,%" PRIu64 "\n", d->calls,
			d->event, d->gap, call, op >= 0 ? as_lat_op_names[op] : "", size, fail ? 0 : addr, fail ? "oom" : "ok", us, d->reserved);
}

static void note(as_device *d, int op, uint64_t addr, uint64_t size, uint64_t stream)
{
	if (d->observer)
		d->observer(d->observer_ctx, op, addr, size, stream);
}

/* The device's reserved bytes change here and only here: physical memory created or released. */
static void gain(as_device *d, uint64_t size)
{
	d->reserved += size;
	if (d->reserved > d->peak_reserved)
		d->peak_reserved = d->reserved;
}

static void lose(as_device *d, uint64_t size)
{
	d->reserved -= size;
}

static int too_big(const as_device *d, uint64_t size)
{
	return (d->capacity && !d->capacity_by_policy && d->reserved + size > d->capacity) ||
	       (d->total_memory && (size > d->total_memory || d->reserved + size > d->total_memory));
}

int as_dev_refuses(as_device *d, uint64_t size)
{
	if (!too_big(d, size))
		return 0;
	d->num_failed++;
	return 1;
}

uint64_t as_dev_mem_free(const as_device *d)
{
	if (d->real)
		d = d->real;
	uint64_t total = d->total_memory;
	if (d->capacity && (!total || d->capacity < total))
		total = d->capacity;
	return total > d->reserved ? total - d->reserved : 0;
}

int as_dev_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	if (as_dev_refuses(d, size))
		return 1;
	double t0 = d->measured ? as_dev_now_us() : 0;
	int fail = d->ops->alloc(d, size, stream, addr);
	double us = charge(d, LAT_MALLOC, size, t0);
	if (fail) {
		d->num_failed++;
		log_call(d, "cudaMalloc", LAT_MALLOC, size, 0, 1, us);
		return 1;
	}
	gain(d, size); /* a segment is physical memory with a range of its own */
	d->num_alloc++;
	log_call(d, "cudaMalloc", LAT_MALLOC, size, *addr, 0, us);
	note(d, DEV_OP_ALLOC, *addr, size, stream);
	return 0;
}

void as_dev_free(as_device *d, uint64_t addr, uint64_t size, uint64_t stream)
{
	double t0 = d->measured ? as_dev_now_us() : 0;
	d->ops->free(d, addr, size);
	double us = charge(d, LAT_FREE, size, t0);
	lose(d, size);
	d->num_free++;
	log_call(d, "cudaFree", LAT_FREE, size, addr, 0, us);
	note(d, DEV_OP_FREE, addr, size, stream);
}

int as_dev_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	return d->ops->reserve(d, size, addr);
}

void as_dev_unreserve(as_device *d, uint64_t addr, uint64_t size)
{
	d->ops->unreserve(d, addr, size);
}

int as_dev_phys_create(as_device *d, uint64_t size, as_phys *h)
{
	if (too_big(d, size) || d->ops->create(d, size, h))
		return 1;
	gain(d, size);
	return 0;
}

void as_dev_phys_release(as_device *d, as_phys h, uint64_t size)
{
	d->ops->release(d, h);
	lose(d, size);
}

int as_dev_phys_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	double t0 = d->measured ? as_dev_now_us() : 0;
	int fail = d->ops->map(d, addr, size, h, n);
	double us = charge(d, LAT_MAP, size, t0);
	log_call(d, "remap", LAT_MAP, size, addr, fail, us);
	return fail ? 1 : 0;
}

void as_dev_phys_unmap(as_device *d, uint64_t addr, uint64_t size)
{
	double t0 = d->measured ? as_dev_now_us() : 0;
	d->ops->unmap(d, addr, size);
	double us = charge(d, LAT_UNMAP, size, t0);
	log_call(d, "unmap_only", LAT_UNMAP, size, addr, 0, us);
}

int as_dev_map(as_device *d, uint64_t addr, uint64_t page, size_t n, as_phys *h, uint64_t stream)
{
	uint64_t size = page * n;
	if (as_dev_refuses(d, size))
		return 1;
	double t0 = d->measured ? as_dev_now_us() : 0;
	size_t made = 0;
	while (made < n && !d->ops->create(d, page, &h[made]))
		made++;
	int fail = made < n || d->ops->map(d, addr, size, h, n);
	double us = charge(d, LAT_MAP, size, t0);
	if (fail) {
		while (made)
			d->ops->release(d, h[--made]);
		d->num_failed++;
		log_call(d, "map", LAT_MAP, size, addr, 1, us);
		return 1;
	}
	gain(d, size); /* counted once the whole run is mapped: a failed call leaves no peak behind */
	d->num_alloc++;
	log_call(d, "map", LAT_MAP, size, addr, 0, us);
	note(d, DEV_OP_MAP, addr, size, stream);
	return 0;
}

void as_dev_unmap(as_device *d, uint64_t addr, uint64_t page, size_t n, const as_phys *h, uint64_t stream)
{
	uint64_t size = page * n;
	double t0 = d->measured ? as_dev_now_us() : 0;
	d->ops->unmap(d, addr, size);
	for (size_t i = 0; i < n; i++)
		d->ops->release(d, h[i]);
	double us = charge(d, LAT_UNMAP, size, t0);
	lose(d, size);
	d->num_free++;
	log_call(d, "unmap", LAT_UNMAP, size, addr, 0, us);
	note(d, DEV_OP_UNMAP, addr, size, stream);
}

as_device *as_device_new(const as_device_ops *ops, void *priv, uint64_t capacity, uint64_t total_memory, const as_device *over)
{
	as_device *d = xcalloc(1, sizeof(*d));
	d->ops = ops;
	d->priv = priv;
	d->capacity = capacity;
	d->total_memory = over ? over->total_memory : total_memory;
	d->real = over ? (over->real ? over->real : over) : NULL;
	return d;
}

void as_dev_set_model(as_device *d, const struct as_lat_model *m)
{
	d->model = m;
}

void as_dev_set_total(as_device *d, uint64_t total)
{
	if (total)
		d->total_memory = total;
}

void as_dev_set_log(as_device *d, FILE *log)
{
	d->log = log;
}

void as_dev_set_observer(as_device *d, as_dev_observer fn, void *ctx)
{
	d->observer = fn;
	d->observer_ctx = ctx;
}

void as_dev_set_capacity_by_policy(as_device *d)
{
	d->capacity_by_policy = 1;
}

void as_dev_hint(as_device *d, uint64_t addr, uint64_t size)
{
	if (d->ops->hint)
		d->ops->hint(d, addr, size);
}

void as_dev_placement(as_device *d, int mode)
{
	if (d->ops->placement)
		d->ops->placement(d, mode);
}

void as_device_destroy(as_device *d)
{
	if (d)
		d->ops->destroy(d);
}

/* The pool's physical memory where the driver creates it (the real pool): follow what it reports.
 * A backend that creates the pool's memory through as_dev_phys_create (the simulated pool) has it
 * counted there already. */
static void pool_sync(as_device *d)
{
	if (!d->ops->pool.reserved)
		return;
	uint64_t r = d->ops->pool.reserved(d);
	if (r > d->pool_bytes)
		gain(d, r - d->pool_bytes);
	else
		lose(d, d->pool_bytes - r);
	d->pool_bytes = r;
}

/* A pool call that made the pool grow counts as a device allocation. Its latency class (the model's
 * in simulation, the log's label on the GPU): pool_init for the process's first (all of it),
 * pool_grow when the pool's reserved memory grew, else pool_malloc. */
int as_dev_pool_alloc(as_device *d, uint64_t size, uint64_t *addr)
{
	uint64_t before = d->reserved;
	double t0 = d->measured ? as_dev_now_us() : 0;
	int fail = d->ops->pool.alloc(d, size, addr); /* the backend keeps the pool within the capacity */
	pool_sync(d);
	int grew = d->reserved > before;
	int op = !d->pool_used ? LAT_POOL_INIT : grew ? LAT_POOL_GROW : LAT_POOL_MALLOC;
	double us = charge(d, op, size, t0);
	d->pool_used = 1;
	if (fail) {
		d->num_failed++;
		log_call(d, "cudaMallocAsync", op, size, 0, 1, us);
		return 1;
	}
	if (grew)
		d->num_alloc++;
	log_call(d, "cudaMallocAsync", op, size, *addr, 0, us);
	return 0;
}

void as_dev_pool_free(as_device *d, uint64_t addr, uint64_t size)
{
	double t0 = d->measured ? as_dev_now_us() : 0;
	d->ops->pool.free(d, addr);
	double us = charge(d, LAT_POOL_FREE, size, t0);
	pool_sync(d);
	log_call(d, "cudaFreeAsync", LAT_POOL_FREE, size, addr, 0, us);
}

void as_dev_pool_trim(as_device *d, uint64_t keep)
{
	uint64_t before = d->reserved;
	double t0 = d->measured ? as_dev_now_us() : 0;
	d->ops->pool.trim(d, keep);
	pool_sync(d);
	if (d->reserved < before) {
		d->num_free++;
		/* not a modelled latency: a trim happens only at empty_cache */
		log_call(d, "cudaMemPoolTrimTo", -1, keep, 0, 0, d->measured ? as_dev_now_us() - t0 : 0.0);
	}
}

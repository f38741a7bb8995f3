/* device.c - accounting wrappers around a device backend. */
#include "device.h"
#include "latency.h"
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Charges one device call: its measured time, or the model's for the simulated device. */
static void charge(as_device *d, int op, uint64_t size, double t0)
{
	double us = d->measured ? now_us() - t0 : d->model ? as_lat_model_us(d->model, op, size) : 0.0;
	d->op_us += us;
	d->time_us += us;
	d->calls++;
}

static void note(as_device *d, int op, uint64_t addr, uint64_t size, uint64_t stream)
{
	if (d->observer)
		d->observer(d->observer_ctx, op, addr, size, stream);
}

static int too_big(const as_device *d, uint64_t size)
{
	return (d->capacity && d->reserved + size > d->capacity) ||
	       (d->total_memory && (size > d->total_memory || d->reserved + size > d->total_memory));
}

int as_dev_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	if (too_big(d, size)) {
		d->num_failed++;
		return 1;
	}
	double t0 = d->measured ? now_us() : 0;
	int fail = d->ops->alloc(d, size, stream, addr);
	charge(d, LAT_MALLOC, size, t0);
	if (fail) {
		d->num_failed++;
		return 1;
	}
	d->reserved += size;
	if (d->reserved > d->peak_reserved)
		d->peak_reserved = d->reserved;
	d->num_alloc++;
	note(d, DEV_OP_ALLOC, *addr, size, stream);
	return 0;
}

void as_dev_free(as_device *d, uint64_t addr, uint64_t size, uint64_t stream)
{
	double t0 = d->measured ? now_us() : 0;
	d->ops->free(d, addr, size);
	charge(d, LAT_FREE, size, t0);
	d->reserved -= size;
	d->num_free++;
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

int as_dev_map(as_device *d, uint64_t addr, uint64_t size, uint64_t stream)
{
	if (too_big(d, size)) {
		d->num_failed++;
		return 1;
	}
	double t0 = d->measured ? now_us() : 0;
	int fail = d->ops->map(d, addr, size);
	charge(d, LAT_MAP, size, t0);
	if (fail) {
		d->num_failed++;
		return 1;
	}
	d->reserved += size;
	if (d->reserved > d->peak_reserved)
		d->peak_reserved = d->reserved;
	d->num_alloc++;
	note(d, DEV_OP_MAP, addr, size, stream);
	return 0;
}

void as_dev_unmap(as_device *d, uint64_t addr, uint64_t size, uint64_t stream)
{
	double t0 = d->measured ? now_us() : 0;
	d->ops->unmap(d, addr, size);
	charge(d, LAT_UNMAP, size, t0);
	d->reserved -= size;
	d->num_free++;
	note(d, DEV_OP_UNMAP, addr, size, stream);
}

void as_device_destroy(as_device *d)
{
	if (d)
		d->ops->destroy(d);
}

static void pool_sync_reserved(as_device *d)
{
	uint64_t r = d->ops->pool_reserved(d);
	d->reserved = r;
	if (r > d->peak_reserved)
		d->peak_reserved = r;
}

int as_dev_pool_alloc(as_device *d, uint64_t size, uint64_t *addr)
{
	if (d->capacity && d->reserved + size > d->capacity) {
		d->num_failed++;
		return 1;
	}
	uint64_t before = d->ops->pool_reserved(d);
	double t0 = now_us();
	int fail = d->ops->pool_alloc(d, size, addr);
	charge(d, LAT_MALLOC, size, t0);
	pool_sync_reserved(d);
	if (fail) {
		d->num_failed++;
		return 1;
	}
	if (d->reserved > before)
		d->num_alloc++; /* the pool had to grow: a device allocation */
	return 0;
}

void as_dev_pool_free(as_device *d, uint64_t addr)
{
	double t0 = now_us();
	d->ops->pool_free(d, addr);
	charge(d, LAT_FREE, 0, t0);
	pool_sync_reserved(d);
}

void as_dev_pool_trim(as_device *d, uint64_t keep)
{
	uint64_t before = d->reserved;
	d->ops->pool_trim(d, keep);
	pool_sync_reserved(d);
	if (d->reserved < before)
		d->num_free++;
}

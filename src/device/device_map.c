/*
 * device_map.c - the simulated address space in front of a driver (issue 31).
 *
 * Policies decide on addresses: PyTorch breaks ties between free blocks of one stream and size by
 * address, expandable segments and GMLake's stitching map pages at offsets in a reserved range, and
 * the simulated device hands out the recorded segment addresses while its calls agree with the
 * recording. A real driver hands out other addresses, in another order; a policy that saw them would
 * decide differently from the simulation (and from the recording). So a device with a driver (the
 * real GPU, device_cuda.c; or the shuffled driver of the tests, device_sim.c) is wrapped here: every
 * address a policy sees comes from a simulated device (the shadow: the same placement model and
 * recorded-address hints as a plain simulation), and every call is made on the driver too, at the
 * driver's address, which the maps below translate to:
 *   - a segment (cudaMalloc): its simulated address -> the driver's pointer;
 *   - a reserved range (cuMemAddressReserve): its simulated base -> the driver's base; an address in
 *     it (cuMemMap, cuMemUnmap of pages) -> the driver's base plus the same offset.
 * The driver is asked first: when it refuses, nothing changes in the shadow (as a refusal by the
 * capacity leaves the simulated device as it was). Physical handles are the driver's own values and
 * pass through. The stream-ordered pool (cuda-async) is the driver's: its allocator, not the
 * policy, places the blocks, so its addresses pass through too.
 * An address the maps do not know is an internal error: said once on stderr, and the call fails
 * (map) or is not made (free, unmap), so that tests comparing the results see it.
 */
#include "device/device.h"
#include "util/idmap.h"
#include "util/tree.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define VA_GRAN (2ULL << 20) /* a reserved range's span: its size rounded up as both devices reserve it */

typedef struct vrange {
	uint64_t base, size, span, drv;   /* simulated base, bytes asked for, bytes held, the driver's base */
	RB_ENTRY(vrange) rb;
} vrange;

static int vrange_cmp(const vrange *a, const vrange *b)
{
	return a->base < b->base ? -1 : a->base > b->base;
}
RB_HEAD(vrange_tree, vrange);
RB_GENERATE_STATIC(vrange_tree, vrange, rb, vrange_cmp);

typedef struct mapdev {
	as_device *drv;          /* makes the calls */
	as_device *shadow;       /* decides the addresses (device_sim.c) */
	idmap segs;              /* simulated segment address -> the driver's address + 1 */
	struct vrange_tree vas;  /* reserved ranges by simulated base */
	int warned;
} mapdev;

static void lost(mapdev *m, const char *call, uint64_t addr, uint64_t size)
{
	if (m->warned++)
		return;
	fprintf(stderr, "%s: internal: %s at simulated address 0x%" PRIx64 " (%" PRIu64 " bytes) has no driver address; "
		"the call is not made\n", as_progname, call, addr, size);
}

static int mp_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	mapdev *m = d->priv;
	uint64_t real, sim;
	if (m->drv->ops->alloc(m->drv, size, stream, &real))
		return 1;
	if (m->shadow->ops->alloc(m->shadow, size, stream, &sim)) { /* (the simulated device refuses nothing) */
		m->drv->ops->free(m->drv, real, size);
		return 1;
	}
	idmap_put(&m->segs, sim, (void *)(uintptr_t)(real + 1));
	*addr = sim;
	return 0;
}

static void mp_free(as_device *d, uint64_t addr, uint64_t size)
{
	mapdev *m = d->priv;
	void *v = idmap_del(&m->segs, addr);
	if (!v) {
		lost(m, "cudaFree", addr, size);
		return;
	}
	m->drv->ops->free(m->drv, (uint64_t)(uintptr_t)v - 1, size);
	m->shadow->ops->free(m->shadow, addr, size);
}

static int mp_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	mapdev *m = d->priv;
	uint64_t real, sim;
	if (m->drv->ops->reserve(m->drv, size, &real))
		return 1;
	if (m->shadow->ops->reserve(m->shadow, size, &sim)) {
		m->drv->ops->unreserve(m->drv, real, size);
		return 1;
	}
	vrange *r = xcalloc(1, sizeof(*r));
	r->base = sim;
	r->size = size;
	r->span = size > UINT64_MAX - VA_GRAN ? size : (size + VA_GRAN - 1) / VA_GRAN * VA_GRAN;
	r->drv = real;
	if (RB_INSERT(vrange_tree, &m->vas, r)) { /* the shadow handed out a live base again: cannot happen */
		free(r);
		m->drv->ops->unreserve(m->drv, real, size);
		lost(m, "cuMemAddressReserve", sim, size);
		return 1;
	}
	*addr = sim;
	return 0;
}

/* The reserved range that holds [addr, addr + size), or NULL. */
static vrange *holding(mapdev *m, uint64_t addr, uint64_t size)
{
	vrange key = { .base = addr };
	vrange *r = RB_NFIND(vrange_tree, &m->vas, &key);
	if (!r || r->base != addr)
		r = r ? RB_PREV(vrange_tree, &m->vas, r) : RB_MAX(vrange_tree, &m->vas);
	if (!r || addr < r->base || addr - r->base > r->span || size > r->span - (addr - r->base))
		return NULL;
	return r;
}

static void mp_unreserve(as_device *d, uint64_t addr, uint64_t size)
{
	mapdev *m = d->priv;
	vrange key = { .base = addr };
	vrange *r = RB_FIND(vrange_tree, &m->vas, &key);
	if (!r) {
		lost(m, "cuMemAddressFree", addr, size);
		return;
	}
	RB_REMOVE(vrange_tree, &m->vas, r);
	m->drv->ops->unreserve(m->drv, r->drv, r->size);
	m->shadow->ops->unreserve(m->shadow, addr, size);
	free(r);
}

static int mp_create(as_device *d, uint64_t size, as_phys *h)
{
	mapdev *m = d->priv;
	return m->drv->ops->create(m->drv, size, h);
}

static void mp_release(as_device *d, as_phys h)
{
	mapdev *m = d->priv;
	m->drv->ops->release(m->drv, h);
}

static int mp_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	mapdev *m = d->priv;
	vrange *r = holding(m, addr, size);
	if (!r) {
		lost(m, "cuMemMap", addr, size);
		return 1;
	}
	return m->drv->ops->map(m->drv, r->drv + (addr - r->base), size, h, n);
}

static void mp_unmap(as_device *d, uint64_t addr, uint64_t size)
{
	mapdev *m = d->priv;
	vrange *r = holding(m, addr, size);
	if (!r) {
		lost(m, "cuMemUnmap", addr, size);
		return;
	}
	m->drv->ops->unmap(m->drv, r->drv + (addr - r->base), size);
}

/* The pool: the driver's, addresses and all (see the top). */
static int mp_pool_open(as_device *d, uint64_t threshold, int reuse)
{
	mapdev *m = d->priv;
	return m->drv->ops->pool.open ? m->drv->ops->pool.open(m->drv, threshold, reuse) : 1;
}

static int mp_pool_alloc(as_device *d, uint64_t size, uint64_t *addr)
{
	mapdev *m = d->priv;
	return m->drv->ops->pool.alloc(m->drv, size, addr);
}

static void mp_pool_free(as_device *d, uint64_t addr)
{
	mapdev *m = d->priv;
	m->drv->ops->pool.free(m->drv, addr);
}

static void mp_pool_trim(as_device *d, uint64_t keep)
{
	mapdev *m = d->priv;
	m->drv->ops->pool.trim(m->drv, keep);
}

/* What the driver's pool holds: its own report (the real pool), or what the simulated driver's pool
 * created on it (through as_dev_phys_create on the driver: the only memory counted there, since every
 * other call reaches the driver's ops directly). */
static uint64_t mp_pool_reserved(as_device *d)
{
	mapdev *m = d->priv;
	return m->drv->ops->pool.reserved ? m->drv->ops->pool.reserved(m->drv) : m->drv->reserved;
}

static int mp_pool_check(as_device *d, char *why, size_t n)
{
	mapdev *m = d->priv;
	return m->drv->ops->pool.check ? m->drv->ops->pool.check(m->drv, why, n) : 0;
}

static void mp_destroy(as_device *d)
{
	mapdev *m = d->priv;
	as_device_destroy(m->drv); /* returns everything the driver still holds */
	as_device_destroy(m->shadow);
	vrange *r, *n;
	RB_FOREACH_SAFE(r, vrange_tree, &m->vas, n) {
		RB_REMOVE(vrange_tree, &m->vas, r);
		free(r);
	}
	idmap_free(&m->segs);
	free(m);
	free(d);
}

/* Placement hints go to the simulated device, whose addresses the policy sees. */
static void mp_hint(as_device *d, uint64_t addr, uint64_t size)
{
	as_dev_hint(((mapdev *)d->priv)->shadow, addr, size);
}

static void mp_placement(as_device *d, int mode)
{
	as_dev_placement(((mapdev *)d->priv)->shadow, mode);
}

static const as_device_ops map_ops = {
	.name = "mapped",
	.alloc = mp_alloc, .free = mp_free,
	.reserve = mp_reserve, .unreserve = mp_unreserve,
	.create = mp_create, .release = mp_release, .map = mp_map, .unmap = mp_unmap,
	.destroy = mp_destroy,
	.pool = {
		.open = mp_pool_open,
		.alloc = mp_pool_alloc,
		.free = mp_pool_free,
		.trim = mp_pool_trim,
		.reserved = mp_pool_reserved,
		.check = mp_pool_check,
	},
	.hint = mp_hint,
	.placement = mp_placement,
};

as_device *as_mapped_device_new(as_device *drv, uint64_t capacity, int addr_mode)
{
	mapdev *m = xcalloc(1, sizeof(*m));
	m->drv = drv;
	m->shadow = as_sim_device_new(capacity, addr_mode);
	idmap_init(&m->segs);
	RB_INIT(&m->vas);
	drv->capacity = capacity; /* (the pool keeps to it) */
	as_device *d = as_device_new(&map_ops, m, capacity, drv->total_memory, NULL);
	d->measured = drv->measured;
	return d;
}

/*
 * device_sim.c - the simulated device: a capacity, an address space and call counts.
 *
 * Addresses matter because PyTorch breaks ties between equal-size free blocks by address.
 * The CUDA driver on the H200 placed cudaMalloc segments from the top of the address space
 * downwards; the model below does the same (highest free range first, 2 MiB granularity).
 * When the trace carries the recorded segment addresses, the device hands out exactly those
 * while its own calls agree with the recording (same sizes in the same order).
 * In JAX's process (jaxlib 0.11.2, the same driver and GPU; doc/policies.md) the driver placed the
 * BFC allocator's regions differently: those of 32 MiB and more bottom-up from 0x302000000, each
 * directly after the last, the smaller ones above them. ADDR_ASCENDING models that (first fit
 * from the bottom of each of the two ranges).
 * ADDR_SHUFFLED is no model of a process: it is the simulated driver behind device_map.c
 * (--backend shuffled), handing out addresses in another order than the model, as a real driver
 * does: segments first fit bottom-up from SHUF_BASE, reserved ranges top-down from SHUF_VA_TOP (kept
 * as live ranges too); a map or unmap outside a range it reserved fails, and is said on stderr.
 */
#include "device/device.h"
#include "device/pool_sim.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VA_TOP   0x7f0000000000ULL
#define VA_FLOOR 0x100000000000ULL
#define VMM_BASE 0x000302000000ULL
#define GRAN     (2ULL << 20)
#define LOW_BASE  0x000302000000ULL  /* ADDR_ASCENDING: allocations of at least LOW_MIN */
#define HIGH_BASE VA_TOP             /* ADDR_ASCENDING: the smaller ones */
#define LOW_MIN   (32ULL << 20)
#define SHUF_BASE   0x000100000000ULL /* ADDR_SHUFFLED: segments */
#define SHUF_VA_TOP 0x600000000000ULL /* ADDR_SHUFFLED: reserved ranges, downwards */

/* A live device range. gap: the free space the placement model sees just above it (from its end
 * rounded up to the granularity to the next range's start rounded down, or VA_TOP); maxgap: the
 * largest gap in its subtree, kept by the tree's rotations (RB_AUGMENT) and by fix_up(), so the
 * highest gap that fits is found in O(log n) instead of walking every range (quadratic for
 * passthrough, which keeps one range per live allocation). */
struct range;
static void range_aug(struct range *r);
#define RB_AUGMENT(x) range_aug(x)
#include "util/tree.h"

typedef struct range {
	uint64_t addr, size, gap, maxgap;
	int va;  /* ADDR_SHUFFLED: a reserved range */
	RB_ENTRY(range) rb;
} range;

static int range_cmp(const range *a, const range *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_HEAD(range_tree, range);
RB_GENERATE_STATIC(range_tree, range, rb, range_cmp);

static void range_aug(range *r)
{
	uint64_t m = r->gap;
	range *c;
	if ((c = RB_LEFT(r, rb)) && c->maxgap > m)
		m = c->maxgap;
	if ((c = RB_RIGHT(r, rb)) && c->maxgap > m)
		m = c->maxgap;
	r->maxgap = m;
}

static void fix_up(range *r)
{
	for (; r; r = RB_PARENT(r, rb))
		range_aug(r);
}

/* Where the free space above r ends for the model: the next range's start rounded down, or VA_TOP. */
static uint64_t top_above(range *r)
{
	range *n = r ? RB_NEXT(range_tree, NULL, r) : NULL;
	return n && n->addr / GRAN * GRAN < VA_TOP ? n->addr / GRAN * GRAN : VA_TOP;
}

/* The gap above r, as the placement model sees it: [roundup(end), top_above(r)). */
static void set_gap(range *r)
{
	uint64_t top = top_above(r);
	uint64_t end = r->addr + r->size;
	end = end > UINT64_MAX - GRAN ? UINT64_MAX : (end + GRAN - 1) / GRAN * GRAN;
	r->gap = end < top ? top - end : 0;
	fix_up(r);
}

typedef struct hint {
	uint64_t addr, size;
} hint;

typedef struct sim {
	struct range_tree live;
	int mode;
	int following;
	uint64_t served;
	hint *hints;
	size_t hhead, hlen, hcap;
	uint64_t vmm_next;
	as_simpool *pool;  /* the cuda-async policy's pool (pool_sim.c), once opened */
	as_phys handles;   /* physical handles created so far */
	int warned;        /* ADDR_SHUFFLED: a call outside its ranges was said */
} sim;

static int overlaps(sim *s, uint64_t addr, uint64_t size)
{
	range key = { .addr = addr };
	range *r = RB_NFIND(range_tree, &s->live, &key);
	if (r && r->addr < addr + size)
		return 1;
	r = r ? RB_PREV(range_tree, &s->live, r) : RB_MAX(range_tree, &s->live);
	return r && r->addr + r->size > addr;
}

static range *insert(sim *s, uint64_t addr, uint64_t size)
{
	range *r = xcalloc(1, sizeof(*r));
	r->addr = addr;
	r->size = size;
	if (RB_INSERT(range_tree, &s->live, r)) { /* a range at that address is live (cannot happen: sizes are >= 1) */
		free(r);
		return NULL;
	}
	set_gap(r);
	range *p = RB_PREV(range_tree, &s->live, r);
	if (p)
		set_gap(p);
	return r;
}

static void remove_range(sim *s, range *r)
{
	range *p = RB_PREV(range_tree, &s->live, r), *up = RB_PARENT(r, rb);
	RB_REMOVE(range_tree, &s->live, r);
	fix_up(up == NULL ? RB_ROOT(&s->live) : up);
	if (p)
		set_gap(p);
	free(r);
}

/* Highest gap below VA_TOP that fits size (rounded to the granularity); below the lowest range if
 * none. Recorded segments may lie anywhere, also across VA_TOP. */
static uint64_t model_place(sim *s, uint64_t size)
{
	uint64_t need = (size + GRAN - 1) / GRAN * GRAN;
	range *r = RB_ROOT(&s->live), *best = NULL;
	while (r && r->maxgap >= need) { /* the highest range whose gap fits */
		range *c = RB_RIGHT(r, rb);
		if (c && c->maxgap >= need) {
			r = c;
		} else if (r->gap >= need) {
			best = r;
			break;
		} else {
			r = RB_LEFT(r, rb);
		}
	}
	if (best)
		return top_above(best) - need;
	range *lo = RB_MIN(range_tree, &s->live);
	uint64_t top = lo && lo->addr / GRAN * GRAN < VA_TOP ? lo->addr / GRAN * GRAN : VA_TOP;
	return top - need;
}

/* Lowest gap at or above base that fits size (rounded to the granularity). */
static uint64_t ascending_place(sim *s, uint64_t base, uint64_t size)
{
	uint64_t need = (size + GRAN - 1) / GRAN * GRAN, at = base;
	range key = { .addr = base };
	range *r = RB_NFIND(range_tree, &s->live, &key);
	range *before = r ? RB_PREV(range_tree, &s->live, r) : RB_MAX(range_tree, &s->live);
	if (before && before->addr + before->size > at)
		at = (before->addr + before->size + GRAN - 1) / GRAN * GRAN;
	for (; r && r->addr < at + need; r = RB_NEXT(range_tree, &s->live, r)) {
		uint64_t end = (r->addr + r->size + GRAN - 1) / GRAN * GRAN;
		if (end > at)
			at = end;
	}
	return at;
}

static int sim_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	sim *s = d->priv;
	(void)stream;
	if (s->mode == ADDR_ASCENDING || s->mode == ADDR_SHUFFLED) {
		*addr = ascending_place(s, s->mode == ADDR_SHUFFLED ? SHUF_BASE : size >= LOW_MIN ? LOW_BASE : HIGH_BASE, size);
		insert(s, *addr, size);
		return 0;
	}
	if (s->following && s->hlen) {
		hint h = s->hints[s->hhead];
		if (h.size == size && !overlaps(s, h.addr, size)) {
			s->hhead++;
			s->hlen--;
			s->served++;
			*addr = h.addr;
			insert(s, h.addr, size);
			return 0;
		}
		s->following = 0; /* the calls no longer agree with the recording */
	} else if (s->following && s->mode == ADDR_AUTO && s->served) {
		s->following = 0;
	}
	*addr = model_place(s, size);
	insert(s, *addr, size);
	return 0;
}

/* ADDR_SHUFFLED: a call its ranges do not hold (a wrong translation in device_map.c), said once. */
static void shuf_wrong(sim *s, const char *call, uint64_t addr, uint64_t size)
{
	if (!s->warned++)
		fprintf(stderr, "%s: internal: the shuffled driver got %s at 0x%" PRIx64 " (%" PRIu64 " bytes), "
			"outside what it handed out\n", as_progname, call, addr, size);
}

static void sim_free(as_device *d, uint64_t addr, uint64_t size)
{
	sim *s = d->priv;
	range key = { .addr = addr };
	range *r = RB_FIND(range_tree, &s->live, &key);
	if (r && !r->va)
		remove_range(s, r);
	else if (s->mode == ADDR_SHUFFLED)
		shuf_wrong(s, "cudaFree", addr, size);
}

static int sim_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	sim *s = d->priv;
	uint64_t need = (size + GRAN - 1) / GRAN * GRAN;
	if (s->mode == ADDR_SHUFFLED) {
		if (need > s->vmm_next - SHUF_BASE || overlaps(s, s->vmm_next - need, need))
			return 1;
		s->vmm_next -= need;
		*addr = s->vmm_next;
		range *r = insert(s, *addr, need);
		if (r)
			r->va = 1;
		return 0;
	}
	*addr = s->vmm_next;
	s->vmm_next += need;
	return 0;
}

/* ADDR_SHUFFLED: the reserved range that holds [addr, addr + size), or NULL. */
static range *reserved_at(sim *s, uint64_t addr, uint64_t size)
{
	range key = { .addr = addr };
	range *r = RB_NFIND(range_tree, &s->live, &key);
	if (!r || r->addr != addr)
		r = r ? RB_PREV(range_tree, &s->live, r) : RB_MAX(range_tree, &s->live);
	if (!r || !r->va || addr < r->addr || addr - r->addr > r->size || size > r->size - (addr - r->addr))
		return NULL;
	return r;
}

static void sim_unreserve(as_device *d, uint64_t addr, uint64_t size)
{
	sim *s = d->priv;
	if (s->mode != ADDR_SHUFFLED)
		return;
	range *r = reserved_at(s, addr, 1);
	if (r && r->addr == addr)
		remove_range(s, r);
	else
		shuf_wrong(s, "cuMemAddressFree", addr, size);
}

/* Physical memory: handles are numbers; the simulation keeps no pages. */
static int sim_create(as_device *d, uint64_t size, as_phys *h)
{
	sim *s = d->priv;
	(void)size;
	*h = ++s->handles;
	return 0;
}

static void sim_release(as_device *d, as_phys h)
{
	(void)d; (void)h;
}

static int sim_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	sim *s = d->priv;
	(void)h; (void)n;
	if (s->mode == ADDR_SHUFFLED && !reserved_at(s, addr, size)) {
		shuf_wrong(s, "cuMemMap", addr, size);
		return 1;
	}
	return 0;
}

static void sim_unmap(as_device *d, uint64_t addr, uint64_t size)
{
	sim *s = d->priv;
	if (s->mode == ADDR_SHUFFLED && !reserved_at(s, addr, size))
		shuf_wrong(s, "cuMemUnmap", addr, size);
}

static int sim_pool_open(as_device *d, uint64_t threshold, int reuse)
{
	sim *s = d->priv;
	(void)threshold; (void)reuse; /* the model keeps freed memory until a trim; one stream */
	if (!s->pool)
		s->pool = as_simpool_new(d); /* its chunks are the device's physical memory */
	return 0;
}

static int sim_pool_alloc(as_device *d, uint64_t size, uint64_t *addr)
{
	sim *s = d->priv;
	/* the smaller of the capacity and the device's memory: a larger capacity cannot make the device
	 * create more than it has (the pool asked for it and the device refused: exit 70) */
	uint64_t lim = d->total_memory;
	if (d->capacity && (!lim || d->capacity < lim))
		lim = d->capacity;
	return as_simpool_alloc(s->pool, size, lim, addr);
}

static void sim_pool_free(as_device *d, uint64_t addr)
{
	as_simpool_release(((sim *)d->priv)->pool, addr);
}

static void sim_pool_trim(as_device *d, uint64_t keep)
{
	as_simpool_trim(((sim *)d->priv)->pool, keep);
}

static int sim_pool_check(as_device *d, char *why, size_t n)
{
	sim *s = d->priv;
	return s->pool ? as_simpool_check(s->pool, why, n) : 0;
}

static void sim_destroy(as_device *d)
{
	sim *s = d->priv;
	as_simpool_free(s->pool);
	range *r, *n;
	RB_FOREACH_SAFE(r, range_tree, &s->live, n) {
		RB_REMOVE(range_tree, &s->live, r);
		free(r);
	}
	free(s->hints);
	free(s);
	free(d);
}

static void sim_hint(as_device *d, uint64_t addr, uint64_t size);
static void sim_placement(as_device *d, int mode);

static const as_device_ops sim_ops = {
	.name = "sim",
	.alloc = sim_alloc, .free = sim_free,
	.reserve = sim_reserve, .unreserve = sim_unreserve,
	.create = sim_create, .release = sim_release, .map = sim_map, .unmap = sim_unmap,
	.destroy = sim_destroy,
	.pool = {
		.open = sim_pool_open,
		.alloc = sim_pool_alloc,
		.free = sim_pool_free,
		.trim = sim_pool_trim,
		.reserved = NULL, /* the pool's chunks are created through as_dev_phys_create */
		.check = sim_pool_check,
	},
	.hint = sim_hint,
	.placement = sim_placement,
};

as_device *as_sim_device_new(uint64_t capacity, int addr_mode)
{
	sim *s = xcalloc(1, sizeof(*s));
	RB_INIT(&s->live);
	s->mode = addr_mode;
	s->following = addr_mode == ADDR_AUTO || addr_mode == ADDR_RECORDED;
	s->vmm_next = addr_mode == ADDR_SHUFFLED ? SHUF_VA_TOP : VMM_BASE;
	return as_device_new(&sim_ops, s, capacity, AS_H200_TOTAL_MEMORY, NULL);
}

static void sim_placement(as_device *d, int mode)
{
	sim *s = d->priv;
	if (s->mode != ADDR_AUTO)
		return;
	s->mode = mode;
	s->following = mode == ADDR_RECORDED;
}

static void sim_hint(as_device *d, uint64_t addr, uint64_t size)
{
	sim *s = d->priv;
	if (!s->following)
		return;
	if (s->hhead + s->hlen == s->hcap) {
		if (s->hhead) {
			memmove(s->hints, s->hints + s->hhead, s->hlen * sizeof(hint));
			s->hhead = 0;
		} else {
			s->hcap = s->hcap ? s->hcap * 2 : 64;
			s->hints = xrealloc(s->hints, s->hcap * sizeof(hint));
		}
	}
	s->hints[s->hhead + s->hlen++] = (hint){ addr, size };
}

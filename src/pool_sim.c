/*
 * pool_sim.c - the simulated cudaMallocAsync pool.
 *
 * What the real pool does, as measured on an H200 (doc/real-gpu.md; 48 replays with every
 * cudaMallocAsync's address and the pool's reserved bytes after every call):
 *   - one virtual range per pool; requests are rounded up to 512 bytes and packed in it, freed
 *     blocks coalesce with their neighbours;
 *   - physical memory is held in 32 MiB chunks of that range: a chunk is backed while any live
 *     allocation touches it; memory freed without a synchronisation stays in the pool, and the pool
 *     remaps chunks it holds before it grows, so its reserved bytes are the running maximum of the
 *     number of touched chunks (exact, given the real addresses, on all 38 replays without trims);
 *   - cudaMemPoolTrimTo(keep) gives back held chunks that no live allocation touches.
 * The placement rule inside the range is the driver's own and not documented; the model uses
 * coalescing best fit (smallest hole, lowest address), then the end of the range.
 */
#include "pool_sim.h"
#include "common.h"
#include "tree.h"
#include <stdio.h>
#include <stdlib.h>

#define POOL_BASE 0x302000000ULL /* where the H200's driver put the first pool */

void as_chunks_init(as_chunks *c)
{
	idmap_init(&c->count);
	c->touched = 0;
}

void as_chunks_free(as_chunks *c)
{
	idmap_free(&c->count);
}

uint64_t as_chunks_new(const as_chunks *c, uint64_t addr, uint64_t size)
{
	uint64_t n = 0;
	for (uint64_t k = addr / AS_POOL_CHUNK; size && k <= (addr + size - 1) / AS_POOL_CHUNK; k++)
		n += !idmap_get(&c->count, k);
	return n;
}

uint64_t as_chunks_add(as_chunks *c, uint64_t addr, uint64_t size)
{
	uint64_t n = 0;
	for (uint64_t k = addr / AS_POOL_CHUNK; size && k <= (addr + size - 1) / AS_POOL_CHUNK; k++) {
		uintptr_t v = (uintptr_t)idmap_get(&c->count, k);
		n += !v;
		idmap_put(&c->count, k, (void *)(v + 1));
	}
	c->touched += n;
	return n;
}

void as_chunks_del(as_chunks *c, uint64_t addr, uint64_t size)
{
	for (uint64_t k = addr / AS_POOL_CHUNK; size && k <= (addr + size - 1) / AS_POOL_CHUNK; k++) {
		uintptr_t v = (uintptr_t)idmap_get(&c->count, k);
		if (v > 1) {
			idmap_put(&c->count, k, (void *)(v - 1));
		} else if (v == 1) {
			idmap_del(&c->count, k);
			c->touched--;
		}
	}
}

typedef struct hole {
	uint64_t addr, size;
	RB_ENTRY(hole) by_addr, by_size;
} hole;

static int addr_cmp(const hole *a, const hole *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int size_cmp(const hole *a, const hole *b)
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return addr_cmp(a, b);
}
RB_HEAD(addr_tree, hole);
RB_HEAD(size_tree, hole);
RB_GENERATE_STATIC(addr_tree, hole, by_addr, addr_cmp);
RB_GENERATE_STATIC(size_tree, hole, by_size, size_cmp);

struct as_simpool {
	struct addr_tree holes;
	struct size_tree fits;
	uint64_t top;       /* everything from here up is unused */
	idmap live;         /* address -> size */
	as_chunks chunks;
	uint64_t held;      /* chunks the pool holds */
};

as_simpool *as_simpool_new(void)
{
	as_simpool *p = xcalloc(1, sizeof(*p));
	RB_INIT(&p->holes);
	RB_INIT(&p->fits);
	p->top = POOL_BASE;
	idmap_init(&p->live);
	as_chunks_init(&p->chunks);
	return p;
}

void as_simpool_free(as_simpool *p)
{
	if (!p)
		return;
	hole *h, *n;
	RB_FOREACH_SAFE(h, addr_tree, &p->holes, n) {
		RB_REMOVE(addr_tree, &p->holes, h);
		free(h);
	}
	idmap_free(&p->live);
	as_chunks_free(&p->chunks);
	free(p);
}

static void hole_remove(as_simpool *p, hole *h)
{
	RB_REMOVE(addr_tree, &p->holes, h);
	RB_REMOVE(size_tree, &p->fits, h);
	free(h);
}

static void hole_add(as_simpool *p, uint64_t addr, uint64_t size)
{
	hole *h = xcalloc(1, sizeof(*h));
	h->addr = addr;
	h->size = size;
	RB_INSERT(addr_tree, &p->holes, h);
	RB_INSERT(size_tree, &p->fits, h);
}

/* Returns [addr, addr+size) to the range, coalescing with the holes beside it and the top. */
static void give_back(as_simpool *p, uint64_t addr, uint64_t size)
{
	hole key = { .addr = addr };
	hole *next = RB_NFIND(addr_tree, &p->holes, &key);
	hole *prev = next ? RB_PREV(addr_tree, &p->holes, next) : RB_MAX(addr_tree, &p->holes);
	if (next && next->addr == addr + size) {
		size += next->size;
		hole_remove(p, next);
	}
	if (prev && prev->addr + prev->size == addr) {
		addr = prev->addr;
		size += prev->size;
		hole_remove(p, prev);
	}
	if (addr + size == p->top)
		p->top = addr;
	else
		hole_add(p, addr, size);
}

int as_simpool_alloc(as_simpool *p, uint64_t size, uint64_t limit, uint64_t *addr)
{
	uint64_t n = (size + AS_POOL_ALIGN - 1) / AS_POOL_ALIGN * AS_POOL_ALIGN;
	if (!n)
		n = AS_POOL_ALIGN;
	hole key = { .addr = 0, .size = n };
	hole *h = RB_NFIND(size_tree, &p->fits, &key);
	uint64_t a = h ? h->addr : p->top;
	uint64_t fresh = as_chunks_new(&p->chunks, a, n);
	uint64_t want = p->chunks.touched + fresh > p->held ? p->chunks.touched + fresh : p->held;
	if (limit && want > limit / AS_POOL_CHUNK)
		return 1;
	if (h) {
		uint64_t rest = h->size - n, at = h->addr + n;
		hole_remove(p, h);
		if (rest)
			hole_add(p, at, rest);
	} else {
		p->top += n;
	}
	as_chunks_add(&p->chunks, a, n);
	p->held = want;
	idmap_put(&p->live, a, (void *)(uintptr_t)n);
	*addr = a;
	return 0;
}

void as_simpool_release(as_simpool *p, uint64_t addr)
{
	uint64_t n = (uint64_t)(uintptr_t)idmap_del(&p->live, addr);
	if (!n)
		return;
	as_chunks_del(&p->chunks, addr, n);
	give_back(p, addr, n);
}

void as_simpool_trim(as_simpool *p, uint64_t keep)
{
	uint64_t k = keep / AS_POOL_CHUNK;
	if (p->held > k)
		p->held = k > p->chunks.touched ? k : p->chunks.touched;
}

uint64_t as_simpool_reserved(const as_simpool *p)
{
	return p->held * AS_POOL_CHUNK;
}

int as_simpool_check(const as_simpool *p, char *why, size_t n)
{
	uint64_t at = POOL_BASE, bytes = 0, holes = 0;
	hole *h;
	RB_FOREACH(h, addr_tree, (struct addr_tree *)&p->holes) {
		if (h->addr < at || !h->size || h->addr + h->size >= p->top) {
			snprintf(why, n, "pool hole at 0x%llx overlaps or touches the top", (unsigned long long)h->addr);
			return -1;
		}
		at = h->addr + h->size;
		holes += h->size;
	}
	for (size_t i = 0; i < p->live.cap; i++)
		if (idmap_live(&p->live, i))
			bytes += (uint64_t)(uintptr_t)p->live.vals[i];
	if (bytes + holes != p->top - POOL_BASE) {
		snprintf(why, n, "pool blocks (%llu bytes) and holes (%llu) do not tile its range (%llu)",
			(unsigned long long)bytes, (unsigned long long)holes, (unsigned long long)(p->top - POOL_BASE));
		return -1;
	}
	if (p->held < p->chunks.touched) {
		snprintf(why, n, "pool holds %llu chunks but live blocks touch %llu", (unsigned long long)p->held,
			(unsigned long long)p->chunks.touched);
		return -1;
	}
	return 0;
}

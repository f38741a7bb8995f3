/*
 * pool_sim.c - the simulated cudaMallocAsync pool.
 *
 * What the real pool does, as measured on an H200 (doc/real-gpu.md): 48 replays with every
 * cudaMallocAsync's address and the pool's reserved bytes after every call, and 100 scripted probe
 * scenarios (traces/h200-pool-probes.txt) that isolate one rule each:
 *   - one virtual range per pool; requests are rounded up to 512 bytes and packed in it;
 *   - a freed block is pending until the pool synchronises; pending blocks coalesce with pending
 *     neighbours only, ready blocks with ready ones. A request takes the best-fitting pending block
 *     (ties: the first freed), else the best-fitting ready block (ties: the last freed); when neither
 *     fits and blocks are pending, the pool makes them ready (coalescing them with their ready
 *     neighbours; a ready block that then ends the range is given back to it) and tries again; else
 *     it carves from the end of the range, starting inside the (pending) free block that ends there
 *     if there is one. Allocations start at the block's start.
 *   - physical memory is held in 32 MiB chunks of that range: a chunk is backed while any live
 *     allocation touches it; memory freed without a synchronisation stays in the pool, and the pool
 *     remaps chunks it holds before it grows, so its reserved bytes are the running maximum of the
 *     number of touched chunks (exact, given the real addresses, on all 38 replays without trims);
 *   - cudaMemPoolTrimTo(keep) synchronises (as above) and gives back held chunks that no live
 *     allocation touches; free blocks left without memory are cold: used only when no pending or
 *     ready block fits.
 * The probes match in 99 of 100 scenarios (the 100th synchronises without trimming, which a trace
 * cannot express); on the 45 traces the real pool's peak is matched within 6% in 43.
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

/* A free block, of one of three kinds: pending (freed since the pool last synchronised: the driver
 * hands it out again on the same stream, but keeps it apart from ready memory), ready, and cold (a
 * ready block that a trim left without any physical memory under it: used after the others).
 * Pending blocks coalesce only with pending neighbours; ready and cold ones with each other. */
enum { READY, PENDING, COLD };
typedef struct hole {
	uint64_t addr, size, seq; /* seq: when it was (re)inserted */
	int kind;
	RB_ENTRY(hole) by_addr, by_size;
} hole;

static int addr_cmp(const hole *a, const hole *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int pend_cmp(const hole *a, const hole *b) /* best fit, then first freed */
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return addr_cmp(a, b);
}

static int ready_cmp(const hole *a, const hole *b) /* best fit, then last freed */
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq > b->seq ? -1 : 1;
	return addr_cmp(a, b);
}
RB_HEAD(addr_tree, hole);
RB_HEAD(pend_tree, hole);
RB_HEAD(ready_tree, hole);
RB_GENERATE_STATIC(addr_tree, hole, by_addr, addr_cmp);
RB_GENERATE_STATIC(pend_tree, hole, by_size, pend_cmp);
RB_GENERATE_STATIC(ready_tree, hole, by_size, ready_cmp);

struct as_simpool {
	struct addr_tree holes;  /* every free block, by address */
	struct pend_tree pend;   /* the pending ones, by size */
	struct ready_tree ready; /* the ready ones, by size */
	struct ready_tree cold;  /* the cold ones, by size */
	uint64_t top;            /* nothing from here up has been handed out */
	uint64_t seq;
	idmap live;              /* address -> size */
	as_chunks chunks;
	uint64_t held;           /* chunks the pool holds */
};

as_simpool *as_simpool_new(void)
{
	as_simpool *p = xcalloc(1, sizeof(*p));
	RB_INIT(&p->holes);
	RB_INIT(&p->pend);
	RB_INIT(&p->ready);
	RB_INIT(&p->cold);
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

static void size_unlink(as_simpool *p, hole *h)
{
	if (h->kind == PENDING)
		RB_REMOVE(pend_tree, &p->pend, h);
	else
		RB_REMOVE(ready_tree, h->kind == COLD ? &p->cold : &p->ready, h);
}

static void size_link(as_simpool *p, hole *h)
{
	if (h->kind == PENDING)
		RB_INSERT(pend_tree, &p->pend, h);
	else
		RB_INSERT(ready_tree, h->kind == COLD ? &p->cold : &p->ready, h);
}

static void hole_remove(as_simpool *p, hole *h)
{
	RB_REMOVE(addr_tree, &p->holes, h);
	size_unlink(p, h);
	free(h);
}

static void hole_add(as_simpool *p, uint64_t addr, uint64_t size, int kind, uint64_t seq)
{
	hole *h = xcalloc(1, sizeof(*h));
	h->addr = addr;
	h->size = size;
	h->kind = kind;
	h->seq = seq;
	RB_INSERT(addr_tree, &p->holes, h);
	size_link(p, h);
}

static int mergeable(int a, int b)
{
	return (a == PENDING) == (b == PENDING);
}

/* Adds a free block (PENDING or READY), coalescing it with the free blocks beside it that it may
 * merge with; a ready block that absorbs a cold one is ready. */
static void free_block(as_simpool *p, uint64_t addr, uint64_t size, int kind, uint64_t seq)
{
	hole key = { .addr = addr };
	hole *next = RB_NFIND(addr_tree, &p->holes, &key);
	hole *prev = next ? RB_PREV(addr_tree, &p->holes, next) : RB_MAX(addr_tree, &p->holes);
	if (next && next->addr == addr + size && mergeable(next->kind, kind)) {
		size += next->size;
		seq = next->seq > seq ? next->seq : seq;
		hole_remove(p, next);
	}
	if (prev && prev->addr + prev->size == addr && mergeable(prev->kind, kind)) {
		addr = prev->addr;
		size += prev->size;
		seq = prev->seq > seq ? prev->seq : seq;
		hole_remove(p, prev);
	}
	hole_add(p, addr, size, kind, seq);
}

/* Whether a live allocation touches any chunk of [addr, addr+size). */
static int backed(const as_simpool *p, uint64_t addr, uint64_t size)
{
	uint64_t chunks = (addr + size - 1) / AS_POOL_CHUNK - addr / AS_POOL_CHUNK + 1;
	return as_chunks_new(&p->chunks, addr, size) < chunks;
}

/* Synchronisation: every pending block becomes ready (and coalesces with ready neighbours); a free
 * block that then ends the range is given back to it. */
static void settle(as_simpool *p)
{
	hole *h;
	while ((h = RB_MIN(pend_tree, &p->pend))) {
		uint64_t addr = h->addr, size = h->size, seq = h->seq;
		hole_remove(p, h);
		free_block(p, addr, size, READY, seq);
	}
	h = RB_MAX(addr_tree, &p->holes);
	if (h && h->addr + h->size == p->top) {
		p->top = h->addr;
		hole_remove(p, h);
	}
}

/* Where a request of n bytes goes, as the driver decides (measured on an H200, doc/real-gpu.md):
 * the best-fitting pending block (ties: the first freed); else the best-fitting ready block (ties:
 * the last freed); else, when blocks are pending, the pool settles them and tries the ready blocks
 * again; else the best-fitting cold block; else the end of the range, starting inside the free
 * block that ends there if any. Returns the block to carve from, or NULL for the end of the range. */
static hole *place(as_simpool *p, uint64_t n)
{
	hole key = { .size = n, .seq = UINT64_MAX };
	hole *h = RB_NFIND(pend_tree, &p->pend, &(hole){ .size = n });
	if (h)
		return h;
	if ((h = RB_NFIND(ready_tree, &p->ready, &key)))
		return h;
	if (!RB_EMPTY(&p->pend)) {
		settle(p);
		if ((h = RB_NFIND(ready_tree, &p->ready, &key)))
			return h;
	}
	return RB_NFIND(ready_tree, &p->cold, &key);
}

int as_simpool_alloc(as_simpool *p, uint64_t size, uint64_t limit, uint64_t *addr)
{
	uint64_t n = (size + AS_POOL_ALIGN - 1) / AS_POOL_ALIGN * AS_POOL_ALIGN;
	if (!n)
		n = AS_POOL_ALIGN;
	hole *h = place(p, n);
	hole *last = h ? NULL : RB_MAX(addr_tree, &p->holes);
	if (last && last->addr + last->size != p->top)
		last = NULL;
	uint64_t a = h ? h->addr : last ? last->addr : p->top;
	uint64_t fresh = as_chunks_new(&p->chunks, a, n);
	uint64_t want = p->chunks.touched + fresh > p->held ? p->chunks.touched + fresh : p->held;
	if (limit && want > limit / AS_POOL_CHUNK)
		return 1;
	if (h) {
		uint64_t rest = h->size - n, at = h->addr + n;
		int kind = h->kind;
		hole_remove(p, h);
		if (rest) /* what an allocation leaves of a cold block is ready: the driver mapped memory for it */
			hole_add(p, at, rest, kind == COLD ? READY : kind, ++p->seq);
	} else {
		if (last)
			hole_remove(p, last);
		p->top = a + n;
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
	free_block(p, addr, n, PENDING, ++p->seq);
}

void as_simpool_trim(as_simpool *p, uint64_t keep)
{
	settle(p); /* a trim synchronises the stream first */
	hole *h;
	/* ready blocks over chunks that no live allocation touches lose their memory: cold */
	RB_FOREACH(h, addr_tree, &p->holes)
		if (h->kind == READY && !backed(p, h->addr, h->size)) {
			size_unlink(p, h);
			h->kind = COLD;
			size_link(p, h);
		}
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
	hole *h, *prev = NULL;
	RB_FOREACH(h, addr_tree, (struct addr_tree *)&p->holes) {
		if (h->addr < at || !h->size || h->addr + h->size > p->top) {
			snprintf(why, n, "pool hole at 0x%llx overlaps another or the top", (unsigned long long)h->addr);
			return -1;
		}
		if (prev && prev->addr + prev->size == h->addr && mergeable(prev->kind, h->kind)) {
			snprintf(why, n, "pool holes at 0x%llx and 0x%llx are of one kind and not coalesced",
				(unsigned long long)prev->addr, (unsigned long long)h->addr);
			return -1;
		}
		at = h->addr + h->size;
		holes += h->size;
		prev = h;
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

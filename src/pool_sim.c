/*
 * pool_sim.c - the simulated cudaMallocAsync pool.
 *
 * What the real pool does, as measured on an H200 (doc/real-gpu.md): 48 replays with every
 * cudaMallocAsync's address and the pool's reserved bytes after every call, and 150 scripted probe
 * scenarios (traces/h200-pool-probes.txt) that isolate one rule each:
 *   - one virtual range per pool; requests are rounded up to 512 bytes and packed in it;
 *   - a freed block is pending until the pool synchronises; pending blocks coalesce with pending
 *     neighbours only, ready blocks with ready ones. Time, stream queries and the number of pending
 *     blocks do not make a pending block ready;
 *   - physical memory is mapped under the range in 32 MiB chunks. A chunk no live allocation touches
 *     keeps its memory until an allocation that needs memory for a chunk of its own takes it (the
 *     nearest such chunk, the higher of two equally near); the pool grows by a chunk only when
 *     none is left, so its reserved bytes are the running maximum of the number of touched chunks
 *     (exact, given the real addresses, on all 38 replays without trims). A free block with a chunk
 *     that has no memory under it is cold;
 *   - a request takes the best-fitting pending block (ties: the first freed), else the best-fitting
 *     ready block that is not cold (ties: the last freed); when neither fits and blocks are pending,
 *     the pool makes them ready (coalescing them with their ready neighbours; a free block that then
 *     ends the range is given back to it) and tries again; else the best-fitting cold block; else it
 *     carves from the end of the range, starting inside the free block that ends there if there is
 *     one. Allocations start at the block's start;
 *   - cudaMemPoolTrimTo(keep) synchronises (as above) and unmaps every chunk that no live
 *     allocation touches, keeping at most keep bytes of the memory.
 * The probes match in 149 of 150 scenarios (the other synchronises without trimming, which a trace
 * cannot express).
 */
#include "pool_sim.h"
#include "device.h"
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

/* A free block: pending (freed since the pool last synchronised: the driver hands it out again on
 * the same stream, but keeps it apart from ready memory) or ready. Pending blocks coalesce only with
 * pending neighbours, ready ones with ready ones. Whether a ready block is cold (has a chunk without
 * memory under it) is a matter of the chunks, asked when a request is placed. */
enum { READY, PENDING };
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

/* A 32 MiB chunk of the range with memory under it; idle ones (no live allocation touches them)
 * are kept by index, for an allocation that needs memory to take the nearest. */
typedef struct chunk {
	uint64_t k;
	int idle;
	RB_ENTRY(chunk) link;
} chunk;
static int chunk_cmp(const chunk *a, const chunk *b)
{
	return a->k < b->k ? -1 : a->k > b->k;
}
RB_HEAD(chunk_tree, chunk);
RB_GENERATE_STATIC(chunk_tree, chunk, link, chunk_cmp);

struct as_simpool {
	struct addr_tree holes;  /* every free block, by address */
	struct pend_tree pend;   /* the pending ones, by size */
	struct ready_tree ready; /* the ready ones, by size */
	uint64_t top;            /* nothing from here up has been handed out */
	uint64_t seq;
	idmap live;              /* address -> size */
	as_chunks chunks;        /* how many live allocations touch each chunk */
	idmap mapped;            /* chunk index -> chunk, for the chunks with memory under them */
	struct chunk_tree idle;  /* the mapped chunks no live allocation touches */
	uint64_t nidle;
	uint64_t held;           /* chunks the pool holds: the mapped ones and spare memory */
	as_device *dev;          /* where the chunks' physical memory comes from (NULL: counted only) */
	as_phys *mem;            /* the held chunks' physical handles (dev set) */
	size_t capmem;
};

as_simpool *as_simpool_new(as_device *dev)
{
	as_simpool *p = xcalloc(1, sizeof(*p));
	p->dev = dev;
	RB_INIT(&p->holes);
	RB_INIT(&p->pend);
	RB_INIT(&p->ready);
	RB_INIT(&p->idle);
	p->top = POOL_BASE;
	idmap_init(&p->live);
	idmap_init(&p->mapped);
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
	for (size_t i = 0; i < p->mapped.cap; i++)
		if (idmap_live(&p->mapped, i))
			free(p->mapped.vals[i]);
	idmap_free(&p->mapped);
	idmap_free(&p->live);
	as_chunks_free(&p->chunks);
	free(p->mem); /* the device releases what it created with itself */
	free(p);
}

/* The pool takes one more chunk of physical memory from the device. The pool's own limit check
 * came first, so the device cannot refuse it. */
static void grow(as_simpool *p)
{
	if (p->dev) {
		if (p->held == p->capmem) {
			p->capmem = p->capmem ? p->capmem * 2 : 64;
			p->mem = xrealloc(p->mem, p->capmem * sizeof(*p->mem));
		}
		if (as_dev_phys_create(p->dev, AS_POOL_CHUNK, &p->mem[p->held])) {
			fprintf(stderr, "%s: internal error: the device refused a pool chunk within the pool's limit\n", as_progname);
			exit(AS_EXIT_SOFTWARE);
		}
	}
	p->held++;
}

/* The pool gives physical memory back to the device, down to k chunks. */
static void shrink(as_simpool *p, uint64_t k)
{
	while (p->held > k) {
		p->held--;
		if (p->dev)
			as_dev_phys_release(p->dev, p->mem[p->held], AS_POOL_CHUNK);
	}
}

static void size_unlink(as_simpool *p, hole *h)
{
	if (h->kind == PENDING)
		RB_REMOVE(pend_tree, &p->pend, h);
	else
		RB_REMOVE(ready_tree, &p->ready, h);
}

static void size_link(as_simpool *p, hole *h)
{
	if (h->kind == PENDING)
		RB_INSERT(pend_tree, &p->pend, h);
	else
		RB_INSERT(ready_tree, &p->ready, h);
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

/* Adds a free block (PENDING or READY), coalescing it with the free blocks of its kind beside it. */
static void free_block(as_simpool *p, uint64_t addr, uint64_t size, int kind, uint64_t seq)
{
	hole key = { .addr = addr };
	hole *next = RB_NFIND(addr_tree, &p->holes, &key);
	hole *prev = next ? RB_PREV(addr_tree, &p->holes, next) : RB_MAX(addr_tree, &p->holes);
	if (next && next->addr == addr + size && next->kind == kind) {
		size += next->size;
		seq = next->seq > seq ? next->seq : seq;
		hole_remove(p, next);
	}
	if (prev && prev->addr + prev->size == addr && prev->kind == kind) {
		addr = prev->addr;
		size += prev->size;
		seq = prev->seq > seq ? prev->seq : seq;
		hole_remove(p, prev);
	}
	hole_add(p, addr, size, kind, seq);
}

static uint64_t first_chunk(uint64_t addr) { return addr / AS_POOL_CHUNK; }
static uint64_t last_chunk(uint64_t addr, uint64_t size) { return (addr + size - 1) / AS_POOL_CHUNK; }

static void set_idle(as_simpool *p, chunk *c, int idle)
{
	if (c->idle == idle)
		return;
	if (idle)
		RB_INSERT(chunk_tree, &p->idle, c);
	else
		RB_REMOVE(chunk_tree, &p->idle, c);
	c->idle = idle;
	p->nidle += idle ? 1 : -1;
}

static void map_chunk(as_simpool *p, uint64_t k)
{
	chunk *c = xcalloc(1, sizeof(*c));
	c->k = k;
	idmap_put(&p->mapped, k, c);
}

static void unmap_chunk(as_simpool *p, chunk *c)
{
	set_idle(p, c, 0);
	idmap_del(&p->mapped, c->k);
	free(c);
}

/* Cold: a chunk of the block has no memory under it. */
static int cold(const as_simpool *p, const hole *h)
{
	for (uint64_t k = first_chunk(h->addr); k <= last_chunk(h->addr, h->size); k++)
		if (!idmap_get(&p->mapped, k))
			return 1;
	return 0;
}

/* The best-fitting ready block of at least n bytes that is cold or not (ties: the last freed). */
static hole *best_ready(as_simpool *p, uint64_t n, int want_cold)
{
	hole key = { .size = n, .seq = UINT64_MAX };
	for (hole *h = RB_NFIND(ready_tree, &p->ready, &key); h; h = RB_NEXT(ready_tree, &p->ready, h))
		if (cold(p, h) == want_cold)
			return h;
	return NULL;
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
 * the best-fitting pending block (ties: the first freed); else the best-fitting ready block that is
 * not cold (ties: the last freed); else, when blocks are pending, the pool settles them and tries
 * those again; else the best-fitting cold block; else the end of the range, starting inside the
 * free block that ends there if any. Returns the block to carve from, or NULL for the end. */
static hole *place(as_simpool *p, uint64_t n)
{
	hole *h = RB_NFIND(pend_tree, &p->pend, &(hole){ .size = n });
	if (h)
		return h;
	if ((h = best_ready(p, n, 0)))
		return h;
	if (!RB_EMPTY(&p->pend)) {
		settle(p);
		if ((h = best_ready(p, n, 0)))
			return h;
	}
	return best_ready(p, n, 1);
}

/* The chunks the pool would have to add to hold [a, a+n): the range's chunks without memory, less
 * its spare memory and the idle chunks outside the range that can be taken. */
static uint64_t growth(const as_simpool *p, uint64_t a, uint64_t n)
{
	uint64_t need = 0, idle_inside = 0;
	for (uint64_t k = first_chunk(a); k <= last_chunk(a, n); k++) {
		chunk *c = idmap_get(&p->mapped, k);
		need += !c;
		idle_inside += c && c->idle;
	}
	uint64_t avail = p->held - p->mapped.count + p->nidle - idle_inside;
	return need > avail ? need - avail : 0;
}

/* Memory for every chunk of [a, a+n): spare memory first, else the idle chunk nearest to it
 * outside the range gives its memory up, else the pool grows; then the chunks are touched. */
static void map_range(as_simpool *p, uint64_t a, uint64_t n)
{
	uint64_t k0 = first_chunk(a), k1 = last_chunk(a, n);
	for (uint64_t k = k0; k <= k1; k++) {
		if (idmap_get(&p->mapped, k))
			continue;
		if (p->held == p->mapped.count) { /* the idle chunk nearest to k outside the range (ties: the higher) */
			chunk key = { .k = k0 };
			chunk *hi = RB_NFIND(chunk_tree, &p->idle, &key);
			chunk *lo = hi ? RB_PREV(chunk_tree, &p->idle, hi) : RB_MAX(chunk_tree, &p->idle);
			while (hi && hi->k <= k1)
				hi = RB_NEXT(chunk_tree, &p->idle, hi);
			chunk *v = !lo ? hi : !hi ? lo : hi->k - k <= k - lo->k ? hi : lo;
			if (v)
				unmap_chunk(p, v);
			else
				grow(p);
		}
		map_chunk(p, k);
	}
	for (uint64_t k = k0; k <= k1; k++)
		set_idle(p, idmap_get(&p->mapped, k), 0);
	as_chunks_add(&p->chunks, a, n);
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
	if (limit && p->held + growth(p, a, n) > limit / AS_POOL_CHUNK)
		return 1;
	if (h) {
		uint64_t rest = h->size - n, at = h->addr + n;
		int kind = h->kind;
		hole_remove(p, h);
		if (rest)
			hole_add(p, at, rest, kind, ++p->seq);
	} else {
		if (last)
			hole_remove(p, last);
		p->top = a + n;
	}
	map_range(p, a, n);
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
	for (uint64_t k = first_chunk(addr); k <= last_chunk(addr, n); k++)
		if (!idmap_get(&p->chunks.count, k))
			set_idle(p, idmap_get(&p->mapped, k), 1);
	free_block(p, addr, n, PENDING, ++p->seq);
}

void as_simpool_trim(as_simpool *p, uint64_t keep)
{
	settle(p); /* a trim synchronises the stream first */
	chunk *c;
	while ((c = RB_MIN(chunk_tree, &p->idle))) /* memory no live allocation uses is unmapped */
		unmap_chunk(p, c);
	uint64_t k = keep / AS_POOL_CHUNK;
	if (p->held > k) /* and given back, down to keep */
		shrink(p, k > p->mapped.count ? k : p->mapped.count);
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
		if (prev && prev->addr + prev->size == h->addr && prev->kind == h->kind) {
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
	uint64_t idle = 0;
	for (size_t i = 0; i < p->mapped.cap; i++)
		if (idmap_live(&p->mapped, i)) {
			const chunk *c = p->mapped.vals[i];
			if (c->idle != !idmap_get(&p->chunks.count, c->k)) {
				snprintf(why, n, "pool chunk %llu is %s but %s", (unsigned long long)c->k,
					c->idle ? "idle" : "in use", c->idle ? "a live block touches it" : "no live block does");
				return -1;
			}
			idle += c->idle;
		}
	for (size_t i = 0; i < p->chunks.count.cap; i++)
		if (idmap_live(&p->chunks.count, i) && !idmap_get(&p->mapped, p->chunks.count.keys[i])) {
			snprintf(why, n, "pool chunk %llu is touched by a live block but has no memory",
				(unsigned long long)p->chunks.count.keys[i]);
			return -1;
		}
	if (idle != p->nidle || p->mapped.count > p->held || p->held < p->chunks.touched) {
		snprintf(why, n, "pool holds %llu chunks, maps %llu (%llu idle, %llu counted), live blocks touch %llu",
			(unsigned long long)p->held, (unsigned long long)p->mapped.count, (unsigned long long)idle,
			(unsigned long long)p->nidle, (unsigned long long)p->chunks.touched);
		return -1;
	}
	return 0;
}

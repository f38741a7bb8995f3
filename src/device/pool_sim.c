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
#include "device/pool_sim.h"
#include "device/device.h"
#include "util/common.h"
#include "util/idmap.h"
#include "util/tree.h"
#include <stdio.h>
#include <stdlib.h>

#define POOL_BASE 0x302000000ULL /* where the H200's driver put the first pool */
#define POOL_END (1ULL << 63)     /* where the model's range ends: a block past it is out of memory */

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

/* A run of consecutive 32 MiB chunks [lo, hi] of the range with memory under them, each touched by
 * cnt live allocations (0: idle, its memory can be taken). A chunk in no run has no memory. Runs
 * never overlap and neighbours of equal cnt are merged, so every operation costs a logarithm of the
 * number of runs (at most a few per live allocation and free block) and never depends on how many
 * chunks a block spans: a request of 2^60 bytes costs what one of 2 MiB does. (The earlier model
 * kept one record per chunk and walked every chunk of a request, minutes for a huge one.) */
typedef struct run {
	uint64_t lo, hi, cnt;
	RB_ENTRY(run) by_k, by_idle;
} run;
static int run_cmp(const run *a, const run *b)
{
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}
RB_HEAD(run_tree, run);
RB_HEAD(idle_tree, run);
RB_GENERATE_STATIC(run_tree, run, by_k, run_cmp);
RB_GENERATE_STATIC(idle_tree, run, by_idle, run_cmp);

struct as_simpool {
	struct addr_tree holes;  /* every free block, by address */
	struct pend_tree pend;   /* the pending ones, by size */
	struct ready_tree ready; /* the ready ones, by size */
	uint64_t top;            /* nothing from here up has been handed out */
	uint64_t seq;
	idmap live;              /* address -> size */
	struct run_tree runs;    /* the chunks with memory under them, by index */
	struct idle_tree idle;   /* the idle runs among them */
	uint64_t mapped;         /* chunks in runs */
	uint64_t nidle;          /* of which idle */
	uint64_t touched;        /* of which touched by a live allocation */
	uint64_t held;           /* chunks the pool holds: the mapped ones and spare memory */
	as_device *dev;          /* where the chunks' physical memory comes from (NULL: counted only) */
	struct memrun { as_phys h; uint64_t n; } *mem; /* the held chunks' handles, n chunks each (dev set) */
	size_t nmem, capmem;
};

static uint64_t run_len(const run *r) { return r->hi - r->lo + 1; }
static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void run_link(as_simpool *p, run *r)
{
	RB_INSERT(run_tree, &p->runs, r);
	p->mapped += run_len(r);
	if (r->cnt) {
		p->touched += run_len(r);
	} else {
		RB_INSERT(idle_tree, &p->idle, r);
		p->nidle += run_len(r);
	}
}

static void run_unlink(as_simpool *p, run *r)
{
	RB_REMOVE(run_tree, &p->runs, r);
	p->mapped -= run_len(r);
	if (r->cnt) {
		p->touched -= run_len(r);
	} else {
		RB_REMOVE(idle_tree, &p->idle, r);
		p->nidle -= run_len(r);
	}
}

static void run_add(as_simpool *p, uint64_t lo, uint64_t hi, uint64_t cnt)
{
	run *r = xcalloc(1, sizeof(*r));
	r->lo = lo;
	r->hi = hi;
	r->cnt = cnt;
	run_link(p, r);
}

static void run_drop(as_simpool *p, run *r)
{
	run_unlink(p, r);
	free(r);
}

/* The run that holds chunk k, else the first run after k, else NULL. */
static run *run_at(const as_simpool *p, uint64_t k)
{
	struct run_tree *t = (struct run_tree *)&p->runs;
	run key = { .lo = k };
	run *r = RB_NFIND(run_tree, t, &key);
	if (r && r->lo == k)
		return r;
	run *q = r ? RB_PREV(run_tree, t, r) : RB_MAX(run_tree, t);
	return q && q->hi >= k ? q : r;
}

/* The idle run with the highest chunk below k (NULL: none). */
static run *idle_below(const as_simpool *p, uint64_t k)
{
	struct idle_tree *t = (struct idle_tree *)&p->idle; /* RB_NEXT/RB_PREV name it, unused */
	(void)t;
	run key = { .lo = k };
	run *r = RB_NFIND(idle_tree, t, &key);
	return r ? RB_PREV(idle_tree, t, r) : RB_MAX(idle_tree, t);
}

/* The idle run with the lowest chunk from k up (NULL: none). */
static run *idle_from(const as_simpool *p, uint64_t k)
{
	run *q = idle_below(p, k);
	if (q && q->hi >= k)
		return q;
	return q ? RB_NEXT(idle_tree, (struct idle_tree *)&p->idle, q) : RB_MIN(idle_tree, (struct idle_tree *)&p->idle);
}

/* Makes k the first chunk of its run (when a run holds k-1 and k). */
static void split(as_simpool *p, uint64_t k)
{
	run *r = run_at(p, k);
	if (!r || r->lo >= k)
		return;
	uint64_t hi = r->hi;
	run_unlink(p, r);
	r->hi = k - 1;
	run_link(p, r);
	run_add(p, k, hi, r->cnt);
}

/* Merges neighbouring runs of equal count from chunk k0-1 to k1+1. */
static void merge(as_simpool *p, uint64_t k0, uint64_t k1)
{
	run *r = run_at(p, k0 ? k0 - 1 : 0);
	while (r && r->lo <= k1 + 1) {
		run *n = RB_NEXT(run_tree, &p->runs, r);
		if (n && n->lo == r->hi + 1 && n->cnt == r->cnt) {
			uint64_t hi = n->hi;
			run_drop(p, n);
			run_unlink(p, r);
			r->hi = hi;
			run_link(p, r);
		} else {
			r = n;
		}
	}
}

/* One more (delta 1) or one fewer (-1) live allocation touches every chunk of [k0, k1], all of
 * which have memory. */
static void touch(as_simpool *p, uint64_t k0, uint64_t k1, int delta)
{
	split(p, k0);
	split(p, k1 + 1);
	for (run *r = run_at(p, k0); r && r->lo <= k1; r = RB_NEXT(run_tree, &p->runs, r)) {
		run_unlink(p, r);
		r->cnt += (uint64_t)(int64_t)delta;
		run_link(p, r);
	}
	merge(p, k0, k1);
}

static uint64_t first_chunk(uint64_t addr) { return addr / AS_POOL_CHUNK; }
static uint64_t last_chunk(uint64_t addr, uint64_t size) { return (addr + size - 1) / AS_POOL_CHUNK; }

/* How many chunks of [k0, k1] have memory, and how many of those are idle. */
static void census(const as_simpool *p, uint64_t k0, uint64_t k1, uint64_t *mapped, uint64_t *idle)
{
	*mapped = *idle = 0;
	for (run *r = run_at(p, k0); r && r->lo <= k1; r = RB_NEXT(run_tree, (struct run_tree *)&p->runs, r)) {
		uint64_t n = min64(r->hi, k1) - max64(r->lo, k0) + 1;
		*mapped += n;
		*idle += r->cnt ? 0 : n;
	}
}

/* The next chunk from *k up to k1 without memory and how many follow it without: 0 when none. */
static uint64_t next_gap(const as_simpool *p, uint64_t *k, uint64_t k1)
{
	while (*k <= k1) {
		run *r = run_at(p, *k);
		if (!r || r->lo > *k)
			return (r ? min64(r->lo - 1, k1) : k1) - *k + 1;
		*k = r->hi + 1;
	}
	return 0;
}

/* Cold: a chunk of the block has no memory under it. */
static int cold(const as_simpool *p, const hole *h)
{
	uint64_t k = first_chunk(h->addr);
	return next_gap(p, &k, last_chunk(h->addr, h->size)) != 0;
}

as_simpool *as_simpool_new(as_device *dev)
{
	as_simpool *p = xcalloc(1, sizeof(*p));
	p->dev = dev;
	RB_INIT(&p->holes);
	RB_INIT(&p->pend);
	RB_INIT(&p->ready);
	RB_INIT(&p->runs);
	RB_INIT(&p->idle);
	p->top = POOL_BASE;
	idmap_init(&p->live);
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
	run *r, *s;
	RB_FOREACH_SAFE(r, run_tree, &p->runs, s) {
		RB_REMOVE(run_tree, &p->runs, r);
		free(r);
	}
	idmap_free(&p->live);
	free(p->mem); /* the device releases what it created with itself */
	free(p);
}

/* The pool takes n more chunks of physical memory from the device, as one handle (a growth of n
 * chunks costs one step, not n). The pool's own limit check came first, so the device cannot refuse. */
static void grow(as_simpool *p, uint64_t n)
{
	if (!n)
		return;
	if (p->dev) {
		AS_GROW(p->mem, p->nmem, p->capmem, 64);
		if (as_dev_phys_create(p->dev, n * AS_POOL_CHUNK, &p->mem[p->nmem].h)) {
			fprintf(stderr, "%s: error: internal: the device refused a pool chunk within the pool's limit\n", as_progname);
			exit(AS_EXIT_SOFTWARE);
		}
		p->mem[p->nmem++].n = n;
	}
	p->held += n;
}

/* The pool gives physical memory back to the device, down to k chunks: the newest handles first; a
 * handle of which only part goes is released and its rest created again. */
static void shrink(as_simpool *p, uint64_t k)
{
	if (!p->dev) {
		if (p->held > k)
			p->held = k;
		return;
	}
	while (p->held > k) {
		struct memrun r = p->mem[--p->nmem];
		uint64_t drop = p->held - k < r.n ? p->held - k : r.n;
		as_dev_phys_release(p->dev, r.h, r.n * AS_POOL_CHUNK);
		p->held -= r.n;
		if (drop < r.n)
			grow(p, r.n - drop);
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
	uint64_t k0 = first_chunk(a), k1 = last_chunk(a, n), in, idle_in;
	census(p, k0, k1, &in, &idle_in);
	uint64_t need = k1 - k0 + 1 - in;
	uint64_t avail = p->held - p->mapped + p->nidle - idle_in;
	return need > avail ? need - avail : 0;
}

/* The driver gives each chunk of [k0, k1] without memory, in order, spare memory while there is
 * some, else the memory of the idle chunk nearest to it outside the range (the higher of two
 * equally near), else a new chunk. The first skip chunks take spare memory, the next steal ones
 * idle memory: how many of those come from below the range and how many from above. Decided a
 * stretch at a time, not a chunk at a time: while the chunks given memory and the idle chunks taken
 * are consecutive, taking from above leaves both distances as they are (so it goes on), and taking
 * from below makes the distance below 2 longer and the one above 1 shorter a step (so it goes on
 * for a number of steps that has a closed form). */
static void steals(const as_simpool *p, uint64_t k0, uint64_t k1, uint64_t skip, uint64_t steal,
	uint64_t *below, uint64_t *above)
{
	struct idle_tree *t = (struct idle_tree *)&p->idle; /* RB_NEXT/RB_PREV name it, unused */
	(void)t;
	uint64_t u = k0, glen = next_gap(p, &u, k1); /* u: the next chunk given memory; glen: gap left from u */
	*below = *above = 0;
	while (skip) {
		uint64_t n = min64(skip, glen);
		skip -= n, u += n, glen -= n;
		if (!glen)
			glen = next_gap(p, &u, k1);
	}
	run *l = idle_below(p, k0), *h = idle_from(p, k1 + 1);
	uint64_t lo = l ? min64(l->hi, k0 - 1) : 0, hi = h ? max64(h->lo, k1 + 1) : 0;
	while (steal) {
		uint64_t n = min64(steal, glen);
		if (!l || (h && hi - u <= u - lo)) {
			n = min64(n, h->hi - hi + 1);
			*above += n;
			if (hi + n > h->hi) {
				h = RB_NEXT(idle_tree, t, h);
				hi = h ? h->lo : 0;
			} else {
				hi += n;
			}
		} else {
			n = min64(n, lo - l->lo + 1);
			if (h) /* steps j = 0, 1, ... while (hi - u) - (u - lo) - 3j > 0 */
				n = min64(n, ((hi - u) - (u - lo) + 2) / 3);
			*below += n;
			if (n == lo - l->lo + 1) {
				l = RB_PREV(idle_tree, t, l);
				lo = l ? l->hi : 0;
			} else {
				lo -= n;
			}
		}
		steal -= n, u += n, glen -= n;
		if (!glen && steal)
			glen = next_gap(p, &u, k1);
	}
}

/* The n highest idle chunks below k0 (up) or the n lowest above k1 (down) give their memory up. */
static void give_up(as_simpool *p, uint64_t k0, uint64_t k1, uint64_t n, int up)
{
	while (n) {
		run *r = up ? idle_from(p, k1 + 1) : idle_below(p, k0);
		uint64_t a = up ? max64(r->lo, k1 + 1) : 0, b = up ? 0 : min64(r->hi, k0 - 1);
		uint64_t m = min64(n, up ? r->hi - a + 1 : b - r->lo + 1);
		if (up)
			b = a + m - 1;
		else
			a = b - m + 1;
		split(p, a);
		split(p, b + 1);
		run_drop(p, run_at(p, a));
		n -= m;
	}
}

/* Memory for every chunk of [a, a+n): spare memory first, else the idle chunk nearest to it
 * outside the range gives its memory up, else the pool grows; then the chunks are touched. */
static void map_range(as_simpool *p, uint64_t a, uint64_t n)
{
	uint64_t k0 = first_chunk(a), k1 = last_chunk(a, n), in, idle_in, below, above;
	census(p, k0, k1, &in, &idle_in);
	uint64_t need = k1 - k0 + 1 - in, spare = p->held - p->mapped;
	uint64_t rest = need > spare ? need - spare : 0;
	uint64_t steal = min64(rest, p->nidle - idle_in);
	steals(p, k0, k1, need - rest, steal, &below, &above);
	grow(p, rest - steal);
	give_up(p, k0, k1, below, 0);
	give_up(p, k0, k1, above, 1);
	for (uint64_t k = k0, g; (g = next_gap(p, &k, k1)); k += g)
		run_add(p, k, k + g - 1, 0);
	touch(p, k0, k1, 1);
}

int as_simpool_alloc(as_simpool *p, uint64_t size, uint64_t limit, uint64_t *addr)
{
	if (size > POOL_END - POOL_BASE)
		return 1;
	uint64_t n = (size + AS_POOL_ALIGN - 1) / AS_POOL_ALIGN * AS_POOL_ALIGN;
	if (!n)
		n = AS_POOL_ALIGN;
	hole *h = place(p, n);
	hole *last = h ? NULL : RB_MAX(addr_tree, &p->holes);
	if (last && last->addr + last->size != p->top)
		last = NULL;
	uint64_t a = h ? h->addr : last ? last->addr : p->top;
	if (n > POOL_END - a) /* past the end of the address space: out of memory */
		return 1;
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
	touch(p, first_chunk(addr), last_chunk(addr, n), -1);
	free_block(p, addr, n, PENDING, ++p->seq);
}

void as_simpool_trim(as_simpool *p, uint64_t keep)
{
	settle(p); /* a trim synchronises the stream first */
	run *r;
	while ((r = RB_MIN(idle_tree, &p->idle))) /* memory no live allocation uses is unmapped */
		run_drop(p, r);
	uint64_t k = keep / AS_POOL_CHUNK;
	if (p->held > k) /* and given back, down to keep */
		shrink(p, k > p->mapped ? k : p->mapped);
}

uint64_t as_simpool_reserved(const as_simpool *p)
{
	return p->held * AS_POOL_CHUNK;
}

typedef struct edge {
	uint64_t k;
	int delta;
} edge;
static int edge_cmp(const void *a, const void *b)
{
	const edge *x = a, *y = b;
	return x->k < y->k ? -1 : x->k > y->k;
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
	size_t ne = 0;
	edge *e = xmalloc((2 * p->live.count + 1) * sizeof(*e));
	for (size_t i = 0; i < p->live.cap; i++)
		if (idmap_live(&p->live, i)) {
			uint64_t a = p->live.keys[i], s = (uint64_t)(uintptr_t)p->live.vals[i];
			bytes += s;
			e[ne++] = (edge){ first_chunk(a), 1 };
			e[ne++] = (edge){ last_chunk(a, s) + 1, -1 };
		}
	if (bytes + holes != p->top - POOL_BASE) {
		snprintf(why, n, "pool blocks (%llu bytes) and holes (%llu) do not tile its range (%llu)",
			(unsigned long long)bytes, (unsigned long long)holes, (unsigned long long)(p->top - POOL_BASE));
		free(e);
		return -1;
	}
	/* the runs: ordered, apart, merged, counted; their touch counts are the live blocks' */
	qsort(e, ne, sizeof(*e), edge_cmp);
	uint64_t mapped = 0, idle = 0, touched = 0, want = 0, cnt = 0, from = 0;
	size_t i = 0;
	run *r, *q = NULL;
	int bad = 0;
	RB_FOREACH(r, run_tree, (struct run_tree *)&p->runs) {
		if (r->lo > r->hi || (q && (q->hi >= r->lo || (q->hi + 1 == r->lo && q->cnt == r->cnt)))) {
			snprintf(why, n, "pool chunk runs at %llu and %llu overlap or are not merged",
				(unsigned long long)(q ? q->lo : 0), (unsigned long long)r->lo);
			bad = 1;
			break;
		}
		mapped += run_len(r);
		idle += r->cnt ? 0 : run_len(r);
		touched += r->cnt ? run_len(r) : 0;
		q = r;
	}
	/* walk the step function of live blocks per chunk and compare it with the runs' counts */
	for (; !bad && i <= ne; ) {
		uint64_t k = i < ne ? e[i].k : UINT64_MAX;
		if (cnt && k > from) { /* chunks [from, k) are touched by cnt live blocks */
			want += k - from;
			for (uint64_t c = from; c < k; ) {
				run *s = run_at(p, c);
				if (!s || s->lo > c || s->cnt != cnt) {
					snprintf(why, n, "pool chunk %llu is touched by %llu live blocks but %s",
						(unsigned long long)c, (unsigned long long)cnt,
						!s || s->lo > c ? "has no memory" : "counts another number");
					bad = 1;
					break;
				}
				c = s->hi + 1;
			}
		}
		if (i == ne)
			break;
		for (from = k; i < ne && e[i].k == k; i++)
			cnt += (uint64_t)(int64_t)e[i].delta;
	}
	free(e);
	if (bad)
		return -1;
	uint64_t nidle_tree = 0;
	RB_FOREACH(r, idle_tree, (struct idle_tree *)&p->idle)
		nidle_tree += r->cnt ? UINT64_MAX / 2 : run_len(r);
	if (mapped != p->mapped || idle != p->nidle || nidle_tree != idle || touched != p->touched || touched != want ||
	    p->mapped > p->held || mapped != idle + touched) {
		snprintf(why, n, "pool holds %llu chunks, maps %llu (%llu counted; %llu idle, %llu counted, %llu listed), live blocks touch %llu (%llu counted)",
			(unsigned long long)p->held, (unsigned long long)mapped, (unsigned long long)p->mapped,
			(unsigned long long)idle, (unsigned long long)p->nidle, (unsigned long long)nidle_tree,
			(unsigned long long)touched, (unsigned long long)p->touched);
		return -1;
	}
	return 0;
}

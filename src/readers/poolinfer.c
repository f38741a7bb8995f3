/*
 * poolinfer.c - the memory pool of each request of a PyTorch 2.11 snapshot (which records none),
 * from its segments. doc/pytorch-policy.md, "Private pools without annotation", says why each rule
 * holds; the rules' numbers are the document's.
 *
 * A unit is a segment from its segment_alloc to its segment_free (under expandable segments: one
 * reserved range, all its mappings); every request lies in the unit that served it and is in that
 * unit's pool. A unit is placed:
 *   1. by the end state: a unit still held at the snapshot has its 'segment_pool_id';
 *   2. by a full release (empty_cache(), or the out-of-memory flush where nothing partial can release):
 *      it gives back every wholly free segment (free page) of the default pool and of released pools,
 *      so a unit that stays wholly free through one is a live private pool's, and another pool than
 *      every segment it released;
 *   3. by a request passed over: a request that took a new segment while a unit on its stream, of its
 *      size class, had a free gap it fits is in another pool than that unit (gaps counted small); one
 *      that opened a new expandable range, another pool than the mapped ranges of its stream and class;
 *   4. by the release order: where one empty_cache()'s order starts again, another pool's release began;
 *   5. a plain segment under expandable_segments:True is a custom allocator's MemPool's;
 *   6. which private pool: that of the nearest request on its stream in a private pool it is not set
 *      apart from (rules 3, 4); none: a pool of its own;
 *   7. a unit no rule places takes the pool of the nearest placed request on its stream when that is a
 *      private pool it is not set apart from (the same capture or use_mem_pool block), else the default.
 * A pool whose units contradict rule 3 hands out blocks whole (no_split); its gaps beside live blocks
 * stop counting, and the units are placed again.
 */
#include "readers/poolinfer.h"
#include "util/common.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)
#define NIL UINT32_MAX
#define NOW UINT64_MAX
#define SEARCH_MAX 200000 /* requests looked at either side of a unit's first one (rules 6, 7) */
#define PAIRS_MAX 256 /* units one request is seen to pass over (rule 3), kept */

enum { L_NONE = -2, L_PRIV = -1 }; /* unit labels; >= 0: a pool (0 the default) */
enum { W_NONE, W_END, W_BEHAV, W_NEIGH };

typedef struct piv { uint64_t lo, hi; } piv;

typedef struct unit {
	uint64_t base, size, stream, born, died, live_bytes, first_req;
	uint32_t head, nlive;
	int exp, small, label, why, custom, r2, endpool, selfpass, ghost;
	int pre; /* made before the history began: its blocks then are unknown, so its free space is too */
	uint64_t last_done; /* the entry where a block of it was last given back (0: none) */
	uint64_t r2_maybe; /* the smallest release of a flush followed by a new segment it stayed free through (NOW: none) */
	piv *maps;
	size_t nmaps, capmaps;
	/* min_gap's cache: the unit's free gaps, ascending, valid while gdirty is 0: set when a block of
	 * it comes or goes, its small class is set, or the max_split_size changes */
	uint64_t *gaps;
	uint32_t ngaps, capgaps;
	int gdirty;
	uint64_t mg_need, mg_gap; /* the last answer from those gaps (mg_need 0: none) */
} unit;

typedef struct node { uint64_t addr, size; uint32_t unit, prev, next; } node;
typedef struct pipool { uint64_t a, b; uint32_t flags; int known; } pipool;
typedef struct pires { uint64_t index; uint32_t pool; } pires;

struct as_poolinfer {
	int light; /* detection only (as_poolinfer_new_light) */
	int expandable, gc, roundup;
	uint64_t max_split;
	unit *u;
	uint32_t nu, capu;
	uint64_t *ufree; /* per unit: size - live_bytes, 0 when the live bytes exceed it (passed_over's first
	                  * test on one compact array: most segments of a long history are full) */
	uint64_t *ubase; /* per unit: its base (upper()'s searches on one compact array) */
	uint32_t capufree; /* (of ufree and ubase) */
	uint32_t *segs; /* live non-expandable units by base */
	size_t nsegs, capsegs;
	uint32_t *regs; /* expandable ranges by base */
	size_t nregs, capregs;
	uint64_t mapped, peak_mapped;
	uint64_t spacing; /* the smallest distance between two ranges' bases (0: fewer than two) */
	node *nodes;
	uint32_t nnodes, capnodes, freenode;
	/* the live blocks by address: an open-addressing table of node numbers (NIL: empty), linear
	 * probing, deletion by backward shift (no tombstones to rehash away); the node holds the key */
	uint32_t *live;
	size_t nlivemap, livebits;
	piv *occ; /* occupied()'s array, reused */
	size_t capocc;
	/* requests, in order */
	uint64_t *rq_index, *rq_stream;
	uint32_t *rq_unit;
	size_t nrq, caprq;
	/* segment_alloc/segment_map entries */
	uint64_t *sg_index;
	uint32_t *sg_unit;
	size_t nsg, capsg;
	/* oom entries: index, the request before */
	uint64_t *oom_index, *oom_prev;
	size_t noom, capoom;
	/* rule 3's pairs */
	struct pineq { uint32_t u[2]; uint64_t need, gap; int empty; } *neq; /* u[0] passed u[1] over (u[1] wholly free: empty) */
	size_t nneq, capneq;
	/* the light detector's pairs from passed_over (as_poolinfer_evidence reads them, nothing else):
	 * per request, its unit, its need and its first pair; per pair the unit passed over and its gap */
	struct plcall { uint32_t u0; uint64_t need; size_t first; } *lcall;
	size_t nlcall, caplcall;
	uint32_t *lp_u1;
	uint64_t *lp_gap;
	size_t nlp, caplp;
	uint32_t *adj, *adj_at; /* (build_adjacency) */
	/* the release run under way */
	int in_run;
	uint64_t run_start;
	uint64_t run_small; /* the smallest segment (mapping) released in the run */
	uint32_t *run_rel, *prev_rel;
	size_t nrun_rel, caprun_rel, nprev_rel, capprev_rel;
	int last_seg_alloc, last_map_new;
	uint64_t prev_alloc; /* the entry of the request before (1 + its index; 0: none) */
	uint64_t last_map_lo, last_map_hi;
	uint64_t last_index;
	uint32_t last_unit;
	/* end state */
	struct { uint64_t addr, size, a, b; int exp, used; } *ends;
	/* segments freed that the history never showed made (it was cut), and the requests found in none */
	struct { uint64_t addr, size, died; } *ghosts;
	size_t nghosts, capghosts;
	struct { size_t r; uint64_t addr; } *unplaced;
	size_t nunplaced, capunplaced;
	size_t nends, capends;
	pipool *pools;
	uint32_t npools;
	pires *res;
	size_t nres, rescur;
	as_poolinfer_stats st;
};


as_poolinfer *as_poolinfer_new(void)
{
	as_poolinfer *pi = xcalloc(1, sizeof(*pi));
	pi->freenode = NIL;
	pi->last_unit = NIL;
	return pi;
}

as_poolinfer *as_poolinfer_new_light(void)
{
	as_poolinfer *pi = as_poolinfer_new();
	pi->light = 1;
	return pi;
}

void as_poolinfer_free(as_poolinfer *pi)
{
	if (!pi)
		return;
	for (uint32_t i = 0; i < pi->nu; i++) {
		free(pi->u[i].maps);
		free(pi->u[i].gaps);
	}
	free(pi->u);
	free(pi->ufree);
	free(pi->ubase);
	free(pi->occ);
	free(pi->segs);
	free(pi->regs);
	free(pi->nodes);
	free(pi->live);
	free(pi->rq_index);
	free(pi->rq_stream);
	free(pi->rq_unit);
	free(pi->sg_index);
	free(pi->sg_unit);
	free(pi->oom_index);
	free(pi->oom_prev);
	free(pi->neq);
	free(pi->lcall);
	free(pi->lp_u1);
	free(pi->lp_gap);
	free(pi->adj);
	free(pi->adj_at);
	free(pi->run_rel);
	free(pi->prev_rel);
	free(pi->ends);
	free(pi->ghosts);
	free(pi->unplaced);
	free(pi->pools);
	free(pi->res);
	free(pi);
}

void as_poolinfer_settings(as_poolinfer *pi, int expandable, uint64_t max_split, int gc, int roundup)
{
	pi->expandable = expandable;
	if (max_split != pi->max_split) /* min_gap's gaps were found with the old one */
		for (uint32_t i = 0; i < pi->nu; i++)
			pi->u[i].gdirty = 1;
	pi->max_split = max_split;
	pi->gc = gc;
	pi->roundup = roundup;
}

void as_poolinfer_end_segment(as_poolinfer *pi, uint64_t addr, uint64_t size, uint64_t pa, uint64_t pb, int exp)
{
	AS_GROW(pi->ends, pi->nends, pi->capends, 16);
	pi->ends[pi->nends].exp = exp;
	pi->ends[pi->nends].used = 0;
	pi->ends[pi->nends].addr = addr;
	pi->ends[pi->nends].size = size;
	pi->ends[pi->nends].a = pa;
	pi->ends[pi->nends++].b = pb;
}

/* ---- units ------------------------------------------------------------------------------- */

static void u_small_map(unit *u, uint64_t size)
{
	u->small = size < 20 * MiB;
}

static uint32_t unit_new(as_poolinfer *pi, int exp, uint64_t base, uint64_t size, uint64_t stream, uint64_t born)
{
	AS_GROW(pi->u, pi->nu, pi->capu, 16);
	if (pi->capufree < pi->capu) {
		pi->ufree = xrealloc(pi->ufree, (size_t)pi->capu * sizeof(uint64_t));
		pi->ubase = xrealloc(pi->ubase, (size_t)pi->capu * sizeof(uint64_t));
		pi->capufree = pi->capu;
	}
	pi->ufree[pi->nu] = size;
	pi->ubase[pi->nu] = base;
	unit *u = &pi->u[pi->nu];
	memset(u, 0, sizeof(*u));
	u->base = base;
	u->size = size;
	u->stream = stream;
	u->born = born;
	u->died = NOW;
	u->first_req = NOW;
	u->head = NIL;
	u->exp = exp;
	u->small = exp ? size < 20 * MiB : size <= 2 * MiB;
	u->label = L_NONE;
	u->endpool = -1;
	u->r2_maybe = NOW;
	u->gdirty = 1;
	return pi->nu++;
}

/* The position of the first of ARR[0..n) (unit ids by base) whose base is above ADDR. */
static size_t upper(const as_poolinfer *pi, const uint32_t *arr, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pi->ubase[arr[mid]] <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void sorted_insert(as_poolinfer *pi, uint32_t **arr, size_t *n, size_t *cap, uint32_t id)
{
	AS_GROW(*arr, *n, *cap, 16);
	size_t at = upper(pi, *arr, *n, pi->u[id].base);
	memmove(*arr + at + 1, *arr + at, (*n - at) * sizeof(uint32_t));
	(*arr)[at] = id;
	(*n)++;
}

/* The expandable range holding ADDR (a mapping of SIZE bytes there), or NIL. PyTorch reserves each
 * range's addresses whole (1.125 x the device's memory) and maps its pages from its start, so ranges
 * lie at least that far apart (the smallest distance between two bases seen bounds it), and what one
 * maps lies within twice the most ever mapped past its base (unmapped holes below it included). */
static uint32_t region_of(const as_poolinfer *pi, uint64_t addr, uint64_t size)
{
	size_t at = upper(pi, pi->regs, pi->nregs, addr);
	if (!at)
		return NIL;
	uint32_t id = pi->regs[at - 1];
	uint64_t reach = 2 * pi->peak_mapped + size;
	if (pi->spacing && pi->spacing < reach)
		reach = pi->spacing;
	return addr - pi->u[id].base < reach ? id : NIL;
}

static uint32_t unit_of(const as_poolinfer *pi, uint64_t addr)
{
	size_t at = upper(pi, pi->segs, pi->nsegs, addr);
	if (at) {
		const unit *u = &pi->u[pi->segs[at - 1]];
		if (addr - u->base < u->size)
			return pi->segs[at - 1];
	}
	return region_of(pi, addr, 0);
}

/* The unit of an end-state segment at ADDR: the segment starting there, else the expandable region
 * holding it (rule 1's match; NIL: none) */
static uint32_t end_unit(const as_poolinfer *pi, uint64_t addr)
{
	size_t at = upper(pi, pi->segs, pi->nsegs, addr);
	if (at && pi->u[pi->segs[at - 1]].base == addr)
		return pi->segs[at - 1];
	return region_of(pi, addr, 0);
}

static void map_add(unit *u, uint64_t lo, uint64_t hi)
{
	AS_GROW(u->maps, u->nmaps, u->capmaps, 16);
	u->maps[u->nmaps].lo = lo;
	u->maps[u->nmaps++].hi = hi;
}

static void map_remove(unit *u, uint64_t lo, uint64_t hi)
{
	size_t n = u->nmaps;
	for (size_t i = 0; i < n; i++) {
		piv m = u->maps[i];
		if (m.hi <= lo || m.lo >= hi)
			continue;
		u->maps[i].hi = u->maps[i].lo; /* emptied; the pieces outside stay */
		if (m.lo < lo)
			u->maps[i].hi = lo;
		if (m.hi > hi) {
			if (m.lo < lo)
				map_add(u, hi, m.hi);
			else
				u->maps[i].lo = hi, u->maps[i].hi = m.hi;
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < u->nmaps; i++)
		if (u->maps[i].hi > u->maps[i].lo)
			u->maps[k++] = u->maps[i];
	u->nmaps = k;
}

/* ---- live blocks ------------------------------------------------------------------------- */

static size_t live_home(const as_poolinfer *pi, uint64_t addr)
{
	return (size_t)((addr * 0x9e3779b97f4a7c15ULL) >> (64 - pi->livebits));
}

/* The slot of the live block at ADDR, or the empty slot where it would go. */
static size_t live_find(const as_poolinfer *pi, uint64_t addr)
{
	size_t mask = ((size_t)1 << pi->livebits) - 1;
	size_t i = live_home(pi, addr);
	while (pi->live[i] != NIL && pi->nodes[pi->live[i]].addr != addr)
		i = (i + 1) & mask;
	return i;
}

/* Room for one more live block (at most half the slots taken). */
static void live_reserve(as_poolinfer *pi)
{
	if (pi->live && 2 * (pi->nlivemap + 1) <= ((size_t)1 << pi->livebits))
		return;
	uint32_t *old = pi->live;
	size_t oldn = old ? (size_t)1 << pi->livebits : 0;
	pi->livebits = old ? pi->livebits + 1 : 10;
	size_t n = (size_t)1 << pi->livebits;
	pi->live = xmalloc(n * sizeof(uint32_t));
	memset(pi->live, 0xff, n * sizeof(uint32_t)); /* NIL */
	for (size_t i = 0; i < oldn; i++)
		if (old[i] != NIL)
			pi->live[live_find(pi, pi->nodes[old[i]].addr)] = old[i];
	free(old);
}

static inline void ufree_set(as_poolinfer *pi, uint32_t id)
{
	const unit *u = &pi->u[id];
	pi->ufree[id] = u->size >= u->live_bytes ? u->size - u->live_bytes : 0;
}

static void block_add(as_poolinfer *pi, uint32_t uid, uint64_t addr, uint64_t size)
{
	uint32_t n;
	if (pi->freenode != NIL) {
		n = pi->freenode;
		pi->freenode = pi->nodes[n].next;
	} else {
		AS_GROW(pi->nodes, pi->nnodes, pi->capnodes, 16);
		n = pi->nnodes++;
	}
	node *x = &pi->nodes[n];
	x->addr = addr;
	x->size = size;
	x->unit = uid;
	x->prev = NIL;
	x->next = NIL;
	if (uid != NIL) {
		unit *u = &pi->u[uid];
		x->next = u->head;
		if (u->head != NIL)
			pi->nodes[u->head].prev = n;
		u->head = n;
		u->nlive++;
		u->live_bytes += size;
		ufree_set(pi, uid);
		u->gdirty = 1;
	}
	live_reserve(pi);
	size_t at = live_find(pi, addr);
	uint32_t o = pi->live[at];
	if (o != NIL) { /* an address allocated twice without a free (the reader rejects it): forget the older */
		pi->nodes[o].addr = UINT64_MAX;
		if (pi->nodes[o].unit != NIL)
			pi->u[pi->nodes[o].unit].gdirty = 1;
	} else {
		pi->nlivemap++;
	}
	pi->live[at] = n;
}

static void block_del(as_poolinfer *pi, uint64_t addr, uint64_t index)
{
	if (!pi->live)
		return;
	size_t at = live_find(pi, addr);
	uint32_t n = pi->live[at];
	if (n == NIL)
		return;
	/* take it out: move each later block of the probe run back if its home allows */
	size_t mask = ((size_t)1 << pi->livebits) - 1, hole = at;
	for (size_t j = (at + 1) & mask; pi->live[j] != NIL; j = (j + 1) & mask) {
		size_t k = live_home(pi, pi->nodes[pi->live[j]].addr);
		if (hole <= j ? (hole < k && k <= j) : (hole < k || k <= j))
			continue; /* its home lies after the hole: it stays */
		pi->live[hole] = pi->live[j];
		hole = j;
	}
	pi->live[hole] = NIL;
	pi->nlivemap--;
	node *x = &pi->nodes[n];
	if (x->unit != NIL) {
		unit *u = &pi->u[x->unit];
		u->last_done = index + 1;
		if (x->prev != NIL)
			pi->nodes[x->prev].next = x->next;
		else
			u->head = x->next;
		if (x->next != NIL)
			pi->nodes[x->next].prev = x->prev;
		u->nlive--;
		u->live_bytes -= x->size;
		ufree_set(pi, x->unit);
		u->gdirty = 1;
	}
	x->next = pi->freenode;
	pi->freenode = n;
}

static int cmp_piv(const void *a, const void *b)
{
	const piv *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The unit's live blocks as address ranges, sorted, each widened by SLACK (an unsplit remainder), in
 * an array of PI's that the next call reuses. */
static piv *occupied(as_poolinfer *pi, const unit *u, uint64_t slack, size_t *n)
{
	if (pi->capocc < (size_t)u->nlive + 1) {
		pi->capocc = ((size_t)u->nlive + 1) * 2;
		pi->occ = xrealloc(pi->occ, pi->capocc * sizeof(piv));
	}
	piv *o = pi->occ;
	size_t k = 0;
	for (uint32_t i = u->head; i != NIL; i = pi->nodes[i].next) {
		uint64_t sz = (pi->nodes[i].size + 511) / 512 * 512;
		o[k].lo = pi->nodes[i].addr;
		/* a request of max_split_size or more takes its block whole (should_split), up to 20 MiB more */
		o[k++].hi = pi->nodes[i].addr + sz + (pi->max_split && sz >= pi->max_split && !u->exp ? 20 * MiB : slack);
	}
	qsort(o, k, sizeof(piv), cmp_piv);
	*n = k;
	return o;
}

/* Whether a free gap of GAP bytes surely serves a request of NEED bytes (PyTorch's get_free_block);
 * the smallest gap that fits decides, whatever the max_split_size (see min_gap). */
static int fits(const as_poolinfer *pi, uint64_t gap, uint64_t need)
{
	if (pi->max_split) {
		if (need < pi->max_split && gap + MiB >= pi->max_split)
			return 0; /* an oversize block serves no smaller request (gap counted small by < 1 MiB) */
		if (need >= pi->max_split && gap >= need + 20 * MiB)
			return 0;
	}
	return gap >= need;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The smallest free gap of non-expandable unit U of at least NEED bytes (0: none). The unit's gaps
 * are found again only after a block of it came or went: a new segment asks every segment of its
 * stream, most of them unchanged since the last one. U has NEED free bytes (the caller tests its ufree). */
static inline uint64_t min_gap(as_poolinfer *pi, unit *u, uint64_t need)
{
	if (u->gdirty) {
		size_t n;
		piv *o = occupied(pi, u, u->small ? 0 : MiB, &n);
		uint64_t p = u->base;
		u->ngaps = 0;
		for (size_t i = 0; i <= n; i++) {
			uint64_t end = i < n ? o[i].lo : u->base + u->size;
			if (end > p) {
				AS_GROW(u->gaps, u->ngaps, u->capgaps, 16);
				u->gaps[u->ngaps++] = end - p;
			}
			if (i < n && o[i].hi > p)
				p = o[i].hi;
		}
		if (u->ngaps > 1)
			qsort(u->gaps, u->ngaps, sizeof(uint64_t), cmp_u64);
		u->gdirty = 0;
		u->mg_need = 0;
	} else if (u->mg_need == need) { /* (the requests that take new segments repeat their sizes) */
		return u->mg_gap;
	}
	size_t lo = 0, hi = u->ngaps; /* the first gap of NEED bytes or more */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (u->gaps[mid] < need)
			lo = mid + 1;
		else
			hi = mid;
	}
	u->mg_need = need;
	return u->mg_gap = lo < u->ngaps ? u->gaps[lo] : 0;
}

/* Whether expandable range U has a mapped page that no live block touches. */
static int free_page(as_poolinfer *pi, const unit *u)
{
	uint64_t page = u->small ? 2 * MiB : 20 * MiB;
	size_t n;
	piv *o = occupied(pi, u, MiB, &n);
	int found = 0;
	for (size_t m = 0; m < u->nmaps && !found; m++) {
		for (uint64_t p = u->maps[m].lo; p + page <= u->maps[m].hi && !found; p += page) {
			size_t i = 0;
			while (i < n && !(o[i].lo < p + page && o[i].hi > p))
				i++;
			found = i == n;
		}
	}
	return found;
}

/* ---- release runs ------------------------------------------------------------------------ */

static inline void pass_over(as_poolinfer *pi, uint32_t uid, uint32_t other, uint64_t need, uint64_t gap);

/* Whether segment A can follow segment B in one pool's release (release_blocks of its large blocks and
 * of its small ones, each in the order of stream, size, address; the default pool's large ones first, a
 * private pool's small ones first), given the classes SEEN so far in that stretch (1 small, 2 large). */
static int may_follow(const unit *a, const unit *b, int seen)
{
	if (a->small != b->small)
		return !(seen & (a->small ? 1 : 2)); /* a class comes back: another pool */
	if (a->stream != b->stream)
		return a->stream > b->stream;
	if (a->size != b->size)
		return a->size > b->size;
	return a->base > b->base;
}

/* An empty_cache() releases each pool's free segments in turn, each pool's in one order: where the
 * order starts again, another pool's release began (rule 4), and the segments of
 * the two stretches are in different pools. */
static void release_order(as_poolinfer *pi)
{
	size_t start = 0, prev = 0; /* the stretch before [start, i) */
	int seen = pi->nrun_rel ? (pi->u[pi->run_rel[0]].small ? 1 : 2) : 0;
	for (size_t i = 1; i <= pi->nrun_rel; i++) {
		if (i < pi->nrun_rel && may_follow(&pi->u[pi->run_rel[i]], &pi->u[pi->run_rel[i - 1]], seen)) {
			seen |= pi->u[pi->run_rel[i]].small ? 1 : 2;
			continue;
		}
		if (i < pi->nrun_rel)
			seen = pi->u[pi->run_rel[i]].small ? 1 : 2;
		if (i == pi->nrun_rel && !start)
			break;
		if (start) /* stretches [prev, start) and [start, i) */
			for (size_t a = prev; a < start; a++)
				for (size_t b = start; b < i && (b - start) * (start - prev) < 4096; b++)
					pass_over(pi, pi->run_rel[b], pi->run_rel[a], 0, 0);
		prev = start;
		start = i;
	}
}

static void close_run(as_poolinfer *pi, int next)
{
	int definite = next != PI_SEG_ALLOC && next != PI_SEG_MAP && next != PI_OOM;
	/* a run followed by a new segment is a full release unless a partial one explains it: decided
	 * once the settings are known (as_poolinfer_solve), by the smallest segment it released */
	size_t npairs = 0;
	for (size_t i = 0; i < pi->nsegs; i++) {
		unit *u = &pi->u[pi->segs[i]];
		if (u->born < pi->run_start && !u->nlive && !u->pre) {
			/* kept while a segment it could share a pool with went: another pool than each released */
			for (size_t k = 0; definite && k < pi->nrun_rel && npairs < 4096; k++, npairs++)
				pass_over(pi, pi->run_rel[k], pi->segs[i], 0, 0);
			if (definite)
				u->r2 = 1;
			else if (pi->run_small < u->r2_maybe)
				u->r2_maybe = pi->run_small;
		}
	}
	for (size_t i = 0; i < pi->nregs; i++) {
		unit *u = &pi->u[pi->regs[i]];
		if (u->born < pi->run_start && !u->r2 && !u->pre && u->nmaps && (definite || pi->run_small < u->r2_maybe) && free_page(pi, u)) {
			if (definite)
				u->r2 = 1;
			else
				u->r2_maybe = pi->run_small;
		}
	}
	if (definite)
		release_order(pi);
	/* what the next request may be passed over for (rule 3): the segments just released */
	uint32_t *t = pi->prev_rel;
	size_t c = pi->capprev_rel;
	pi->prev_rel = pi->run_rel;
	pi->capprev_rel = pi->caprun_rel;
	pi->nprev_rel = pi->nrun_rel;
	pi->run_rel = t;
	pi->caprun_rel = c;
	pi->nrun_rel = 0;
	pi->in_run = 0;
}

static inline void pass_over(as_poolinfer *pi, uint32_t uid, uint32_t other, uint64_t need, uint64_t gap)
{
	AS_GROW(pi->neq, pi->nneq, pi->capneq, 16);
	pi->neq[pi->nneq].u[0] = uid;
	pi->neq[pi->nneq].u[1] = other;
	pi->neq[pi->nneq].need = need;
	pi->neq[pi->nneq].empty = !pi->u[other].nlive;
	pi->neq[pi->nneq++].gap = gap;
}

/* Rule 3 at a request that took the new non-expandable segment UID. */
static void passed_over(as_poolinfer *pi, uint32_t uid, uint64_t size, uint64_t stream)
{
	int small = pi->u[uid].small = size <= MiB;
	pi->u[uid].gdirty = 1; /* (its class may have changed: min_gap's gaps depend on it) */
	unsigned npairs = 0;
	uint64_t need = size < 512 ? 512 : (size + 511) / 512 * 512;
	/* (in locals: the pairs' stores could alias the fields of pi that the loop reads) */
	unit *const us = pi->u;
	const uint64_t *const ufree = pi->ufree;
	const uint32_t *const segs = pi->segs;
	const size_t nsegs = pi->nsegs;
	const uint64_t prev_alloc = pi->prev_alloc;
	uint32_t xs[PAIRS_MAX]; /* the pairs (uid, xs[k]) of gap gs[k] */
	uint64_t gs[PAIRS_MAX];
	for (size_t i = 0; i < nsegs; i++) {
		uint32_t x = segs[i];
		if (ufree[x] < need) /* (min_gap's first test first: on a long history most segments are full) */
			continue;
		unit *v = &us[x];
		if (v->stream != stream || v->small != small || x == uid)
			continue;
		/* a block given back since the request before may have come back in this request's own flush
		 * (synchronize_and_free_events), after it looked for a free block: no evidence there */
		if (v->last_done > prev_alloc || v->pre)
			continue;
		uint64_t g = min_gap(pi, v, need);
		if (g) {
			xs[npairs] = x;
			gs[npairs] = g;
			if (++npairs == PAIRS_MAX)
				break;
		}
	}
	if (!npairs)
		return;
	if (pi->light) { /* 12 bytes a pair, not pass_over's 32: the detector keeps a pair for most segments */
		AS_GROW(pi->lcall, pi->nlcall, pi->caplcall, 64);
		pi->lcall[pi->nlcall].u0 = uid;
		pi->lcall[pi->nlcall].need = need;
		pi->lcall[pi->nlcall++].first = pi->nlp;
		if (pi->caplp < pi->nlp + npairs) {
			size_t nc = pi->caplp ? pi->caplp : 1024;
			while (nc < pi->nlp + npairs)
				nc *= 2;
			pi->lp_u1 = xrealloc(pi->lp_u1, nc * sizeof(uint32_t));
			pi->lp_gap = xrealloc(pi->lp_gap, nc * sizeof(uint64_t));
			pi->caplp = nc;
		}
		memcpy(pi->lp_u1 + pi->nlp, xs, npairs * sizeof(uint32_t));
		memcpy(pi->lp_gap + pi->nlp, gs, npairs * sizeof(uint64_t));
		pi->nlp += npairs;
		return;
	}
	for (unsigned k = 0; k < npairs; k++)
		pass_over(pi, uid, xs[k], need, gs[k]);
}

/* Whether expandable range U had, before the mapping just made, a free mapped gap apart from it that
 * fits SIZE bytes: a request maps pages only when no mapped free block of its pool fits, so such a gap
 * means the pool hands out its blocks whole (MemPool(no_split=True)). */
static int mapped_gap(as_poolinfer *pi, const unit *u, uint64_t size)
{
	uint64_t need = size < 512 ? 512 : (size + 511) / 512 * 512;
	size_t n;
	piv *o = occupied(pi, u, 512, &n);
	int found = 0;
	for (size_t m = 0; m < u->nmaps && !found; m++) {
		uint64_t p = u->maps[m].lo, hi = u->maps[m].hi;
		for (size_t i = 0; i <= n && !found; i++) {
			uint64_t end = i < n ? o[i].lo : hi;
			if (end > hi)
				end = hi;
			/* a gap touching the new mapping is part of the block the request took */
			if (end > p && end - p >= need && end != pi->last_map_lo && p != pi->last_map_hi &&
			    !(p < pi->last_map_hi && end > pi->last_map_lo))
				found = 1;
			if (i < n && o[i].hi > p)
				p = o[i].hi;
		}
	}
	return found;
}

/* A request in memory the history never showed made (it was cut short): a segment of the end state
 * holding ADDR was there all along (made before the history began, never freed), or NIL. */
static uint32_t held_before(as_poolinfer *pi, uint64_t addr, uint64_t stream, uint64_t index)
{
	for (size_t e = 0; e < pi->nends; e++) {
		if (pi->ends[e].used || addr < pi->ends[e].addr || addr - pi->ends[e].addr >= pi->ends[e].size)
			continue;
		pi->ends[e].used = 1;
		uint32_t id;
		if (pi->ends[e].exp) {
			id = unit_new(pi, 1, pi->ends[e].addr, 0, stream, index);
			u_small_map(&pi->u[id], pi->ends[e].size);
			map_add(&pi->u[id], pi->ends[e].addr, pi->ends[e].addr + pi->ends[e].size);
			sorted_insert(pi, &pi->regs, &pi->nregs, &pi->capregs, id);
		} else {
			id = unit_new(pi, 0, pi->ends[e].addr, pi->ends[e].size, stream, index);
			sorted_insert(pi, &pi->segs, &pi->nsegs, &pi->capsegs, id);
		}
		pi->u[id].pre = 1;
		return id;
	}
	return NIL;
}

/* Rule 3 under expandable segments: a pool has one range per stream and size class, which it maps
 * more of as needed; a request that made a new one is another pool's than every range of that stream
 * and class still mapped. */
static void new_range(as_poolinfer *pi, uint32_t uid, uint64_t stream)
{
	for (size_t i = 0; i < pi->nregs; i++) {
		uint32_t x = pi->regs[i];
		const unit *v = &pi->u[x];
		if (x != uid && v->stream == stream && v->small == pi->u[uid].small && v->nmaps && v->first_req != NOW)
			pass_over(pi, uid, x, 0, 0);
	}
}

void as_poolinfer_entry(as_poolinfer *pi, int action, uint64_t index, uint64_t addr, uint64_t size, uint64_t stream)
{
	int in_run = action == PI_SEG_FREE || action == PI_SEG_UNMAP || (action == PI_FREE_DONE && pi->in_run);
	if (pi->in_run && !in_run)
		close_run(pi, action);
	if (in_run && !pi->in_run) {
		pi->in_run = 1;
		pi->run_start = index;
		pi->run_small = NOW;
	}
	int created = pi->last_seg_alloc && pi->last_index + 1 == index;
	pi->last_seg_alloc = 0;
	switch (action) {
	case PI_SEG_ALLOC: {
		uint32_t id = unit_new(pi, 0, addr, size, stream, index);
		sorted_insert(pi, &pi->segs, &pi->nsegs, &pi->capsegs, id);
		AS_GROW2(pi->sg_index, pi->sg_unit, pi->nsg, pi->capsg, 16);
		pi->sg_index[pi->nsg] = index;
		pi->sg_unit[pi->nsg++] = id;
		pi->last_seg_alloc = 1;
		pi->last_unit = id;
		break;
	}
	case PI_SEG_MAP: {
		uint32_t id = region_of(pi, addr, size);
		if (id == NIL) {
			id = unit_new(pi, 1, addr, 0, stream, index);
			u_small_map(&pi->u[id], size);
			sorted_insert(pi, &pi->regs, &pi->nregs, &pi->capregs, id);
			for (size_t i = 1; i < pi->nregs; i++) {
				uint64_t d = pi->u[pi->regs[i]].base - pi->u[pi->regs[i - 1]].base;
				if (!pi->spacing || d < pi->spacing)
					pi->spacing = d;
			}
			pi->last_seg_alloc = 1; /* a new range: its request is another pool's than the ranges of its kind there */
			pi->last_unit = id;
			pi->last_map_new = 1;
		}
		else {
			pi->last_seg_alloc = 1;
			pi->last_unit = id;
			pi->last_map_new = 0;
		}
		pi->last_map_lo = addr;
		pi->last_map_hi = addr + size;
		map_add(&pi->u[id], addr, addr + size);
		pi->mapped += size;
		if (pi->mapped > pi->peak_mapped)
			pi->peak_mapped = pi->mapped;
		AS_GROW2(pi->sg_index, pi->sg_unit, pi->nsg, pi->capsg, 16);
		pi->sg_index[pi->nsg] = index;
		pi->sg_unit[pi->nsg++] = id;
		break;
	}
	case PI_SEG_FREE: {
		size_t at = upper(pi, pi->segs, pi->nsegs, addr);
		if (at && pi->u[pi->segs[at - 1]].base == addr) {
			uint32_t id = pi->segs[at - 1];
			pi->u[id].died = index;
			free(pi->u[id].gaps); /* no longer asked */
			pi->u[id].gaps = NULL;
			pi->u[id].ngaps = pi->u[id].capgaps = 0;
			pi->u[id].gdirty = 1;
			memmove(pi->segs + at - 1, pi->segs + at, (pi->nsegs - at) * sizeof(uint32_t));
			pi->nsegs--;
			AS_GROW(pi->run_rel, pi->nrun_rel, pi->caprun_rel, 16);
			pi->run_rel[pi->nrun_rel++] = id;
		} else if (!pi->light) {
			AS_GROW(pi->ghosts, pi->nghosts, pi->capghosts, 16);
			pi->ghosts[pi->nghosts].addr = addr;
			pi->ghosts[pi->nghosts].size = size;
			pi->ghosts[pi->nghosts++].died = index;
		}
		if (size < pi->run_small)
			pi->run_small = size;
		break;
	}
	case PI_SEG_UNMAP: {
		uint32_t id = region_of(pi, addr, 0);
		if (id != NIL)
			map_remove(&pi->u[id], addr, addr + size);
		pi->mapped = pi->mapped > size ? pi->mapped - size : 0;
		if (size < pi->run_small)
			pi->run_small = size;
		break;
	}
	case PI_ALLOC: {
		uint32_t id = unit_of(pi, addr);
		if (id == NIL)
			id = held_before(pi, addr, stream, index);
		if (pi->light) { /* no request is kept: the evidence only */
			if (id != NIL) {
				unit *u = &pi->u[id];
				if (u->first_req == NOW)
					u->first_req = 0, u->stream = stream;
				if (created && id == pi->last_unit && u->exp && pi->last_map_new)
					new_range(pi, id, stream);
				else if (created && id == pi->last_unit && !u->exp)
					passed_over(pi, id, size, stream);
			}
			block_add(pi, id, addr, size);
			pi->prev_alloc = index + 1;
			break;
		}
		if (pi->nrq == pi->caprq) {
			AS_GROW2(pi->rq_index, pi->rq_stream, pi->nrq, pi->caprq, 16);
			pi->rq_unit = xrealloc(pi->rq_unit, pi->caprq * sizeof(uint32_t));
		}
		pi->rq_index[pi->nrq] = index;
		pi->rq_stream[pi->nrq] = stream;
		pi->rq_unit[pi->nrq] = id;
		if (id == NIL) {
			AS_GROW(pi->unplaced, pi->nunplaced, pi->capunplaced, 16);
			pi->unplaced[pi->nunplaced].r = pi->nrq;
			pi->unplaced[pi->nunplaced++].addr = addr;
		}
		if (id != NIL) {
			unit *u = &pi->u[id];
			if (u->first_req == NOW) {
				u->first_req = pi->nrq;
				u->stream = stream; /* a range's stream: its first request's */
			}
			if (created && id == pi->last_unit && !u->exp)
				passed_over(pi, id, size, stream);
			else if (created && id == pi->last_unit && pi->last_map_new)
				new_range(pi, id, stream);
			else if (created && id == pi->last_unit && !pi->roundup && mapped_gap(pi, u, size))
				u->selfpass = 1;
		}
		pi->nrq++;
		block_add(pi, id, addr, size);
		pi->prev_alloc = index + 1;
		pi->nprev_rel = 0;
		break;
	}
	case PI_OOM:
		if (pi->light)
			break;
		AS_GROW2(pi->oom_index, pi->oom_prev, pi->noom, pi->capoom, 16);
		pi->oom_index[pi->noom] = index;
		pi->oom_prev[pi->noom++] = pi->nrq ? pi->nrq - 1 : NOW;
		break;
	case PI_FREE_DONE:
		block_del(pi, addr, index);
		break;
	default:
		break;
	}
	pi->last_index = index;
}

/* ---- deciding ------------------------------------------------------------------------------ */

static int pool_of_id(as_poolinfer *pi, uint64_t a, uint64_t b, int known)
{
	if (!a && !b)
		return 0;
	for (uint32_t i = 1; i < pi->npools; i++)
		if (pi->pools[i].a == a && pi->pools[i].b == b)
			return (int)i;
	pi->pools = xrealloc(pi->pools, (pi->npools + 1) * sizeof(*pi->pools));
	pi->pools[pi->npools] = (pipool){ a, b, 0, known };
	return (int)pi->npools++;
}

/* Whether unit ID is passed over by (or passes over) a unit of pool L. In a pool that hands out
 * blocks whole, a gap beside a live block was not free: such a pair says nothing there. */
static int excluded(const as_poolinfer *pi, uint32_t id, int l)
{
	int whole = l > 0 && (pi->pools[l].flags & AS_POOL_NOSPLIT);
	for (uint32_t j = pi->adj_at[id]; j < pi->adj_at[id + 1]; j++) {
		const struct pineq *q = &pi->neq[pi->adj[j]];
		uint32_t o = q->u[0] == id ? q->u[1] : q->u[0];
		if (pi->u[o].label == l && !(whole && q->need && !q->empty))
			return 1;
	}
	return 0;
}

/* Each unit's pairs (adj[adj_at[u] .. adj_at[u + 1]) index neq). */
static void build_adjacency(as_poolinfer *pi)
{
	pi->adj_at = xcalloc((size_t)pi->nu + 1, sizeof(uint32_t));
	for (size_t i = 0; i < pi->nneq; i++) {
		pi->adj_at[pi->neq[i].u[0] + 1]++;
		pi->adj_at[pi->neq[i].u[1] + 1]++;
	}
	for (uint32_t i = 0; i < pi->nu; i++)
		pi->adj_at[i + 1] += pi->adj_at[i];
	pi->adj = xmalloc((2 * pi->nneq + 1) * sizeof(uint32_t));
	uint32_t *fill = xmalloc(((size_t)pi->nu + 1) * sizeof(uint32_t));
	memcpy(fill, pi->adj_at, ((size_t)pi->nu + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < pi->nneq; i++) {
		pi->adj[fill[pi->neq[i].u[0]]++] = (uint32_t)i;
		pi->adj[fill[pi->neq[i].u[1]]++] = (uint32_t)i;
	}
	free(fill);
}

/* The label of the nearest request on unit ID's stream around its first one that ACCEPT takes:
 * mode 0 (rule 6) the nearest private pool the unit is not excluded from; mode 1 (rule 7) the nearest
 * placed request's pool, L_NONE where that is the default pool or one it is excluded from. */
static int nearest(as_poolinfer *pi, uint32_t id, int mode)
{
	unit *u = &pi->u[id];
	size_t k = (size_t)u->first_req;
	for (size_t d = 1; d <= SEARCH_MAX; d++) {
		int any = 0;
		for (int side = 0; side < 2; side++) {
			size_t j;
			if (side == 0) {
				if (k < d)
					continue;
				j = k - d;
			} else {
				if (k + d >= pi->nrq)
					continue;
				j = k + d;
			}
			any = 1;
			uint32_t v = pi->rq_unit[j];
			if (pi->rq_stream[j] != u->stream || v == NIL || v == id)
				continue;
			int l = pi->u[v].label;
			if (l < 0)
				continue;
			int ok = l > 0 && !excluded(pi, id, l) && !!pi->u[v].custom == !!u->custom;
			if (mode == 1)
				return ok ? l : L_NONE;
			if (ok)
				return l;
		}
		if (!any)
			break;
	}
	return L_NONE;
}

static int cmp_res(const void *a, const void *b)
{
	const pires *x = a, *y = b;
	return x->index < y->index ? -1 : x->index > y->index;
}

static void add_res(as_poolinfer *pi, size_t *cap, uint64_t index, int l)
{
	if (l <= 0)
		return;
	AS_GROW(pi->res, pi->nres, *cap, 16);
	pi->res[pi->nres].index = index;
	pi->res[pi->nres++].pool = (uint32_t)l;
}

/* Rules 1, 5, 2, 3 and 4 (against the default pool), 6 and 7: every unit's label. */
static void label_all(as_poolinfer *pi, uint64_t *inferred)
{
	for (uint32_t i = 0; i < pi->nu; i++) {
		pi->u[i].label = L_NONE;
		pi->u[i].why = W_NONE;
	}
	for (uint32_t i = 0; i < pi->nu; i++) {
		unit *u = &pi->u[i];
		if (u->endpool >= 0) {
			u->label = u->endpool;
			u->why = W_END;
			if (u->endpool > 0 && pi->expandable && !u->exp)
				pi->pools[u->endpool].flags |= AS_POOL_CUSTOM;
		} else if (pi->expandable && !u->exp) {
			u->label = L_PRIV, u->custom = 1, u->why = W_BEHAV; /* rule 5 */
		} else if (u->r2) {
			u->label = L_PRIV, u->why = W_BEHAV; /* rule 2 */
		}
		if (u->label > 0 && (pi->pools[u->label].flags & AS_POOL_CUSTOM))
			u->custom = 1;
	}
	for (size_t i = 0; i < pi->nneq; i++) /* rule 3 against the default pool */
		for (int s = 0; s < 2; s++) {
			unit *u = &pi->u[pi->neq[i].u[s]], *v = &pi->u[pi->neq[i].u[!s]];
			if (u->label == L_NONE && v->label == 0)
				u->label = L_PRIV, u->why = W_BEHAV;
		}
	/* rule 6, in the order of the units' first requests (the units without one keep their label or
	 * go to the default pool) */
	for (size_t r = 0; r < pi->nrq; r++) {
		uint32_t id = pi->rq_unit[r];
		if (id == NIL || pi->u[id].first_req != r || pi->u[id].label != L_PRIV)
			continue;
		int l = nearest(pi, id, 0);
		if (l == L_NONE) {
			l = pool_of_id(pi, PI_INFERRED_A, ++*inferred, 0);
			if (pi->u[id].custom)
				pi->pools[l].flags |= AS_POOL_CUSTOM;
		}
		pi->u[id].label = l;
	}
	/* rule 7 */
	for (size_t r = 0; r < pi->nrq; r++) {
		uint32_t id = pi->rq_unit[r];
		if (id == NIL || pi->u[id].first_req != r || pi->u[id].label != L_NONE)
			continue;
		int l = nearest(pi, id, 1);
		pi->u[id].label = l > 0 ? l : 0;
		pi->u[id].why = l > 0 ? W_NEIGH : W_NONE;
	}
	for (uint32_t i = 0; i < pi->nu; i++)
		if (pi->u[i].label < 0)
			pi->u[i].label = pi->u[i].custom && pi->expandable ? pool_of_id(pi, PI_INFERRED_A, ++*inferred, 0) : 0;
}

void as_poolinfer_solve(as_poolinfer *pi)
{
	if (pi->in_run)
		close_run(pi, PI_OTHER);
	/* a request the history shows in no segment lies in one freed later that it never showed made:
	 * that segment is a unit too, from its first request (placed by its neighbours: rule 7) */
	for (size_t k = 0; k < pi->nunplaced; k++) {
		size_t r = pi->unplaced[k].r;
		uint64_t addr = pi->unplaced[k].addr;
		for (size_t g = 0; g < pi->nghosts; g++) {
			if (pi->ghosts[g].died < pi->rq_index[r] || addr < pi->ghosts[g].addr || addr - pi->ghosts[g].addr >= pi->ghosts[g].size)
				continue;
			uint32_t id = NIL;
			for (uint32_t i = 0; i < pi->nu && id == NIL; i++)
				if (pi->u[i].ghost && pi->u[i].base == pi->ghosts[g].addr && pi->u[i].died == pi->ghosts[g].died)
					id = i;
			if (id == NIL) {
				id = unit_new(pi, 0, pi->ghosts[g].addr, pi->ghosts[g].size, pi->rq_stream[r], pi->rq_index[r]);
				pi->u[id].died = pi->ghosts[g].died;
				pi->u[id].first_req = r;
				pi->u[id].ghost = 1;
			}
			pi->rq_unit[r] = id;
			break;
		}
	}
	pi->pools = xcalloc(1, sizeof(*pi->pools));
	pi->npools = 1;
	/* rule 2 for the flushes followed by a new segment: full where nothing partial can release
	 * (garbage collection off; without max_split_size_mb, or a segment below it released) */
	for (uint32_t i = 0; i < pi->nu; i++)
		if (pi->u[i].r2_maybe != NOW && !pi->gc && (!pi->max_split || pi->u[i].r2_maybe < pi->max_split))
			pi->u[i].r2 = 1;
	/* rule 3 with the recorded settings */
	size_t k = 0;
	for (size_t i = 0; i < pi->nneq; i++)
		if (!pi->neq[i].need || (!pi->roundup && fits(pi, pi->neq[i].gap, pi->neq[i].need)))
			pi->neq[k++] = pi->neq[i];
	pi->nneq = k;
	/* rule 1 */
	for (size_t e = 0; e < pi->nends; e++) {
		uint64_t addr = pi->ends[e].addr;
		uint32_t id = end_unit(pi, addr);
		if (id == NIL || pi->u[id].endpool >= 0)
			continue;
		pi->u[id].endpool = pool_of_id(pi, pi->ends[e].a, pi->ends[e].b, 1);
	}
	/* rule 3 between units of one known private pool: its blocks are handed out whole */
	for (size_t i = 0; i < pi->nneq; i++) {
		int a = pi->u[pi->neq[i].u[0]].endpool, b = pi->u[pi->neq[i].u[1]].endpool;
		if (a > 0 && a == b)
			pi->pools[a].flags |= AS_POOL_NOSPLIT;
	}
	build_adjacency(pi);
	uint64_t inferred;
	for (int round = 0; round < 8; round++) {
		inferred = 0;
		label_all(pi, &inferred);
		int more = 0;
		for (uint32_t i = 0; i < pi->nu; i++)
			if (pi->u[i].selfpass && pi->u[i].label > 0 && !(pi->pools[pi->u[i].label].flags & AS_POOL_NOSPLIT)) {
				pi->pools[pi->u[i].label].flags |= AS_POOL_NOSPLIT;
				more = 1;
			}
		if (!more)
			break;
	}
	/* every entry's pool */
	size_t cap = 0;
	for (size_t i = 0; i < pi->nsg; i++)
		add_res(pi, &cap, pi->sg_index[i], pi->u[pi->sg_unit[i]].label);
	for (size_t r = 0; r < pi->nrq; r++)
		if (pi->rq_unit[r] != NIL)
			add_res(pi, &cap, pi->rq_index[r], pi->u[pi->rq_unit[r]].label);
	for (size_t i = 0; i < pi->noom; i++) /* a failed request: the pool of the request before it */
		if (pi->oom_prev[i] != NOW && pi->rq_unit[pi->oom_prev[i]] != NIL)
			add_res(pi, &cap, pi->oom_index[i], pi->u[pi->rq_unit[pi->oom_prev[i]]].label);
	if (pi->nres)
		qsort(pi->res, pi->nres, sizeof(pires), cmp_res);
	if (getenv("ALLOCSIM_POOLS_DEBUG")) /* every unit and its pool, for a developer */
		for (uint32_t i = 0; i < pi->nu; i++) {
			const unit *u = &pi->u[i];
			fprintf(stderr, "unit %u %s %" PRIx64 " size %" PRIu64 " stream %" PRIx64 " born %" PRIu64 " died %" PRId64
				" first_req %" PRId64 " pool %d (%s) r2 %d custom %d flags %x\n", i, u->exp ? "exp" : "seg", u->base, u->size,
				u->stream, u->born, u->died == NOW ? (int64_t)-1 : (int64_t)u->died,
				u->first_req == NOW ? (int64_t)-1 : (int64_t)pi->rq_index[u->first_req], u->label,
				(const char *[]){ "none", "end", "behaviour", "neighbours" }[u->why], u->r2, u->custom,
				u->label > 0 ? pi->pools[u->label].flags : 0);
		}
	if (getenv("ALLOCSIM_POOLS_DEBUG"))
		for (size_t i = 0; i < pi->nneq; i++)
			fprintf(stderr, "passed over: unit %u / unit %u (need %" PRIu64 ", gap %" PRIu64 ")\n", pi->neq[i].u[0],
				pi->neq[i].u[1], pi->neq[i].need, pi->neq[i].gap);
	/* statistics */
	as_poolinfer_stats *s = &pi->st;
	memset(s, 0, sizeof(*s));
	s->units = pi->nu;
	s->requests = pi->nrq;
	for (uint32_t i = 0; i < pi->nu; i++) {
		const unit *u = &pi->u[i];
		s->private_units += u->label > 0;
		s->by_end_state += u->why == W_END;
		s->by_behaviour += u->why == W_BEHAV;
		s->by_neighbours += u->why == W_NEIGH;
		if (u->custom && u->label > 0)
			pi->pools[u->label].flags |= AS_POOL_CUSTOM;
	}
	for (size_t r = 0; r < pi->nrq; r++)
		s->unplaced += pi->rq_unit[r] == NIL || pi->u[pi->rq_unit[r]].ghost;
	s->pools = pi->npools - 1;
	for (uint32_t i = 1; i < pi->npools; i++) {
		s->inferred_pools += !pi->pools[i].known;
		s->nosplit_pools += !!(pi->pools[i].flags & AS_POOL_NOSPLIT);
		s->custom_pools += !!(pi->pools[i].flags & AS_POOL_CUSTOM);
	}
}

int as_poolinfer_pool(as_poolinfer *pi, uint64_t index, uint64_t *a, uint64_t *b, uint32_t *flags)
{
	size_t i = pi->rescur;
	if (i >= pi->nres || pi->res[i].index > index) { /* not the next one: search */
		size_t lo = 0, hi = pi->nres;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (pi->res[mid].index < index)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo;
	}
	while (i < pi->nres && pi->res[i].index < index)
		i++;
	pi->rescur = i;
	if (i >= pi->nres || pi->res[i].index != index)
		return 0;
	const pipool *p = &pi->pools[pi->res[i].pool];
	*a = p->a;
	*b = p->b;
	*flags = p->flags;
	return 1;
}

/* Whether unit ID is held at the end of the history but not in the end state (MARK: the units that
 * as_poolinfer_evidence found there). A snapshot's end state is the allocator's state when the history
 * ends, so a real one holds every segment its history leaves held; one that does not was made (copies
 * of a history, an end state left out or emptied) and says nothing of its pools. */
static int outside_end(const as_poolinfer *pi, uint32_t id, const unsigned char *mark)
{
	const unit *u = &pi->u[id];
	int held = u->exp ? u->nmaps > 0 : u->died == NOW;
	return held && !u->pre && !mark[id];
}

uint64_t as_poolinfer_evidence(as_poolinfer *pi)
{
	if (pi->in_run)
		close_run(pi, PI_OTHER);
	unsigned char *mark = xcalloc((size_t)pi->nu + 1, 1);
	for (size_t e = 0; e < pi->nends; e++) { /* the units of the end state */
		uint32_t id = end_unit(pi, pi->ends[e].addr);
		if (id != NIL)
			mark[id] = 1;
	}
	/* each unit's outside_end once (mark[] becomes it), not at each of its pairs */
	for (uint32_t i = 0; i < pi->nu; i++)
		mark[i] = (unsigned char)outside_end(pi, i, mark);
	/* two units told apart (rules 3, 4): one pool besides the default at least */
	for (size_t i = 0; i < pi->nneq; i++)
		if (!mark[pi->neq[i].u[0]] && !mark[pi->neq[i].u[1]] &&
		    (!pi->neq[i].need || (!pi->roundup && fits(pi, pi->neq[i].gap, pi->neq[i].need))))
			pi->u[pi->neq[i].u[0]].selfpass = pi->u[pi->neq[i].u[1]].selfpass = 1;
	for (size_t c = 0; c < pi->nlcall; c++) { /* the same test on passed_over's pairs, kept apart */
		const struct plcall *l = &pi->lcall[c];
		size_t end = c + 1 < pi->nlcall ? pi->lcall[c + 1].first : pi->nlp;
		if (mark[l->u0])
			continue;
		for (size_t k = l->first; k < end; k++)
			if (!mark[pi->lp_u1[k]] && (!l->need || (!pi->roundup && fits(pi, pi->lp_gap[k], l->need))))
				pi->u[l->u0].selfpass = pi->u[pi->lp_u1[k]].selfpass = 1;
	}
	uint64_t n = 0;
	pi->st.outside_end = 0;
	for (uint32_t i = 0; i < pi->nu; i++) {
		const unit *u = &pi->u[i];
		if (mark[i]) {
			pi->st.outside_end++;
			continue;
		}
		int r2 = u->r2 || (u->r2_maybe != NOW && !pi->gc && (!pi->max_split || u->r2_maybe < pi->max_split));
		n += r2 || (pi->expandable && !u->exp) || u->selfpass;
	}
	free(mark);
	return n;
}

void as_poolinfer_get_stats(const as_poolinfer *pi, as_poolinfer_stats *s)
{
	*s = pi->st;
}

/*
 * stitch.c - virtual-memory stitching as in GMLake (Guo et al., "GMLake: Efficient and Transparent GPU
 * Memory Defragmentation for Large-scale DNN Training with Virtual Memory Stitching", ASPLOS 2024),
 * following its public source: GMLake/src/CUDACachingAllocator.cpp and GMLake/include/cuda_vmm_allocator.h
 * of intelligent-machine-learning/glake at commit 0274a9c5966ab07fadd7224dfdbeb41ae87073bd (the file's
 * last change: 392d840a, 2023-10-12). Line numbers below are that file's. doc/policies.md (section
 * stitch) states what is modelled and what is not.
 *
 * Memory (cuda_vmm_allocator.h: PhyBlock, VirBlock, VmmSegment):
 * - A primitive segment is a reserved virtual range with one physical handle per granule (2 MiB)
 *   mapped in it (realloc_block, l. 3060-3245): as_dev_reserve + as_dev_map, one counted call.
 * - Primitive blocks (pBlocks) split and merge inside their segment at granule boundaries, as the
 *   caching allocator's blocks do; free ones sit in a best-fit set ordered by (stream, size, address).
 * - A stitched block (sBlock, a "fused" VmmSegment) is a new virtual range onto which the granules of
 *   several free pBlocks are mapped (get_fused_fragmented_blocks, l. 2704-2990): as_dev_reserve +
 *   as_dev_phys_map, reserved bytes unchanged. Each granule knows the pBlock that owns it and the
 *   sBlocks that map it (PhyBlock::mapped_blocks); it is free or in use by exactly one block.
 *
 * Allocation (malloc, l. 1086-1117), size rounded as round_size (l. 1949-1963): below 512 bytes 512,
 * else to 512 bytes, and above 1 MiB to the granule.
 *  1. get_free_block (l. 2259-2552): the best-fitting free pBlock of the stream (small pool for
 *     <= 1 MiB, large pool above); else, large requests only, the smallest cached free sBlock of the
 *     stream whose size is at most reuse_limit x the request. An sBlock serves the request with its
 *     first size / granule granules; the free pBlocks owning them are split into runs in use and free.
 *  2. stitching at level 0 (get_fused_fragmented_blocks(p, 0)).
 *  3. a new segment (realloc_block): 2 MiB by cudaMalloc for the small pool; 20 MiB for requests under
 *     10 MiB, else the rounded size, as granules mapped into a reserved range (cudaMalloc when
 *     stitching is off, l. 3094).
 *  4. stitching at level 1; 5. release of every wholly free segment (release_cached_blocks) and a
 *     new segment again (counted in alloc_retries); 6. stitching at level 2; then out of memory.
 *  A found pBlock is split when the rest is at least the granule (large) or 512 bytes (small).
 * Stitching (requests of at least frag_limit bytes, large pool, level >= defrag_level): the free
 *  large pBlocks of the stream, largest first (highest address among equals), are taken until they
 *  hold the request; at least two free blocks must exist. The last one taken is split if it holds
 *  more than needed. The new sBlock maps exactly the request's granules, in that order.
 * Free (update_block, l. 1593-1700): a pBlock's granules become free and it merges with its free
 *  neighbours; an sBlock's granules in use become free, the pBlocks they came from are freed (and
 *  merged) when wholly free, and the sBlock is cached: free when all its granules are, else
 *  "fragmented" until they are.
 * Garbage collection of sBlocks (garbage_collect_fused_blocks(2, 0), l. 2554-2702): every fragmented
 *  cached sBlock, then every free one, is unmapped and its range freed (physical memory stays with
 *  its pBlocks); when total_fuse_size exceeds gc_limit after a stitch (autoGC, l. 2980; the counter
 *  grows by each stitch and shrinks only by collection, not when an sBlock goes with a released
 *  segment, l. 3410-3455) and at
 *  empty_cache, after release_cached_blocks (emptyCache, l. 1751).
 * release_cached_blocks (l. 3369-3503): every wholly free segment is released, large pool first,
 *  each in the pool's order; cached sBlocks mapping its granules are dropped; an active sBlock whose
 *  unused tail maps one loses that granule (unmapped from its range here; GMLake drops its reference
 *  and unmaps at the sBlock's end) and is dropped when freed.
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "util/tree.h"

#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)
#define ST_MIN_BLOCK 512ULL              /* kMinBlockSize */
#define ST_SMALL_SIZE (1 * MiB)          /* kSmallSize */
#define ST_SMALL_BUFFER (2 * MiB)        /* kSmallBuffer */
#define ST_LARGE_BUFFER (20 * MiB)       /* kLargeBuffer */
#define ST_MIN_LARGE_ALLOC (10 * MiB)    /* kMinLargeAlloc */

typedef struct st_conf {
	uint64_t granule;     /* kGranularity */
	int stitch;           /* vmmDefragment */
	uint64_t frag_limit;  /* fragLimit */
	double reuse_limit;   /* reuseLimit */
	uint64_t defrag_level;/* defragLevel */
	uint64_t gc_limit;    /* autoGC (GiB in GMLake) */
} st_conf;

enum { SEG_SMALL, SEG_MALLOC, SEG_VMM };
enum { PB_FREE, PB_ALLOC, PB_STOLEN };
enum { SB_ACTIVE, SB_FREE, SB_FRAG };
enum { H_PBLOCK = 1, H_SBLOCK, H_ZERO };

struct pblk;
struct sblk;

typedef struct sgran {
	as_phys h;
	struct pblk *owner;
	int used;
	uint32_t nmaps, cap;
	struct sblk **maps;     /* sBlocks mapping this granule */
} sgran;

typedef struct pseg {
	uint64_t base, size, stream;
	uint64_t seq;           /* creation order (ties between blocks, see pblk_cmp) */
	int kind;
	size_t n;               /* granules (SEG_VMM) */
	as_phys *h;
	sgran *g;
	struct pblk *head;
	struct pseg *prev, *next;  /* every segment, in the order created */
} pseg;

typedef struct pblk {
	int tag;                /* H_PBLOCK */
	int state, pending;     /* pending: free requested, not yet completed */
	uint64_t addr, size, stream, req;
	size_t nused;           /* granules in use */
	pseg *seg;
	struct pblk *prev, *next;
	RB_ENTRY(pblk) rb;
} pblk;

typedef struct sblk {
	int tag;                /* H_SBLOCK */
	int state, to_gc, pending;
	uint64_t addr, size, stream, req;
	uint64_t seq;           /* creation order (ties, see sblk_cmp) */
	size_t n, nused, nfree, ndropped;
	sgran **g;              /* granules in mapping order; NULL where dropped */
	RB_ENTRY(sblk) rb;
	struct sblk *prev, *next; /* every sBlock, in the order stitched */
} sblk;

/* Ties between free blocks of one stream and size: GMLake's comparators take the lower address.
 * allocsim takes the block of the segment created first, then the lower address within it: the
 * same order wherever the driver places segments in ascending order, as the simulated device does,
 * and one that does not depend on where a real driver put them, so that a replay on the GPU
 * (--backend cuda) decides as the simulation does (tests/cuda.sh). */
static int pblk_cmp(const pblk *a, const pblk *b)
{
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	if (a->seg->seq != b->seg->seq)
		return a->seg->seq < b->seg->seq ? -1 : 1;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
/* lookup keys' segments: before and after every real one */
static pseg key_first = { .seq = 0 }, key_last = { .seq = UINT64_MAX };
RB_HEAD(ptree, pblk);
RB_GENERATE_STATIC(ptree, pblk, rb, pblk_cmp);

static int sblk_cmp(const sblk *a, const sblk *b)
{
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq; /* creation order (see pblk_cmp) */
}
RB_HEAD(stree, sblk);
RB_GENERATE_STATIC(stree, sblk, rb, sblk_cmp);

typedef struct stitch_pol {
	as_policy base;
	st_conf c;
	as_device *dev;
	as_counters *ctr;
	struct ptree small, large;
	struct stree sfree;
	sblk *sfirst, *slast;
	pseg *gfirst, *glast;
	uint64_t segments, seg_bytes;   /* primitive segments now */
	uint64_t fuse_bytes;            /* bytes of all sBlocks */
	uint64_t fuse_counted;          /* GMLake's total_fuse_size: grows with each stitch, shrinks only by garbage
	                                 * collection (sBlocks dropped with a released segment stay counted) */
	uint64_t allocated;
	uint64_t reqsum, pend;          /* requested bytes of blocks in use; bytes beyond them of pending ones */
	uint64_t stitches, reuses, gc_dropped, sblocks;
	uint64_t nextseq;               /* segments and sBlocks created so far (their seq) */
	int zero;                       /* what a request of 0 bytes gets */
} stitch_pol;

/* ---- options ---- */

static int parse_granule(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	st_conf *c = conf;
	if (as_opt_parse_size(conf, d, val, err))
		return -1;
	if (!c->granule || c->granule % (2 * MiB) || c->granule > ST_LARGE_BUFFER)
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a multiple of 2 MiB up to 20 MiB", d->name, val);
	return 0;
}

static int parse_ratio(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	char *end;
	double v = strtod(val, &end);
	if (end == val || *end || !(v >= 1 && v <= 1e6))
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a number from 1 to 1e6", d->name, val);
	((st_conf *)conf)->reuse_limit = v;
	return 0;
}

static int parse_level(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (as_parse_u64(val, &v) || v > 3)
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a level from 0 to 3", d->name, val);
	((st_conf *)conf)->defrag_level = v;
	return 0;
}

static const as_optdesc st_opts[] = {
	{ "granule", "size", "2MiB", "physical granule (kGranularity): segments, splits and stitches are in whole granules; a multiple of 2 MiB up to 20 MiB",
		parse_granule, offsetof(st_conf, granule) },
	{ "stitch", "True|False", "True", "virtual-memory stitching (vmmDefragment); False: large segments by cudaMalloc, no sBlocks",
		as_opt_parse_bool, offsetof(st_conf, stitch) },
	{ "frag_limit", "size", "512MiB", "stitch only for requests of at least this size (fragLimit)", as_opt_parse_size, offsetof(st_conf, frag_limit) },
	{ "reuse_limit", "number", "10", "a cached sBlock serves a request only if at most this many times its size (reuseLimit)",
		parse_ratio, offsetof(st_conf, reuse_limit) },
	{ "defrag_level", "0..3", "0", "stitch from this fallback step on (defragLevel): 0 before a new segment, 1 after one failed, 2 after releasing the cache, 3 never",
		parse_level, offsetof(st_conf, defrag_level) },
	{ "gc_limit", "size", "1000GiB", "drop every cached sBlock when total_fuse_size (bytes stitched, less those collected) exceeds this after a stitch (autoGC)",
		as_opt_parse_size, offsetof(st_conf, gc_limit) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

/* ---- granules and the sBlocks that map them ---- */

static sgran *gran_of(const stitch_pol *p, const pblk *b, size_t i)
{
	return &b->seg->g[(b->addr - b->seg->base) / p->c.granule + i];
}

static size_t ngran(const stitch_pol *p, const pblk *b)
{
	return b->size / p->c.granule;
}

static void mark_used(stitch_pol *p, sgran *g)
{
	g->used = 1;
	g->owner->nused++;
	for (uint32_t i = 0; i < g->nmaps; i++) {
		sblk *s = g->maps[i];
		s->nfree--;
		if (s->state == SB_FREE) {
			RB_REMOVE(stree, &p->sfree, s);
			s->state = SB_FRAG;
		}
	}
}

static void mark_free(stitch_pol *p, sgran *g)
{
	g->used = 0;
	g->owner->nused--;
	for (uint32_t i = 0; i < g->nmaps; i++) {
		sblk *s = g->maps[i];
		s->nfree++;
		if (s->state == SB_FRAG && s->nfree == s->n - s->ndropped) {
			s->state = SB_FREE;
			RB_INSERT(stree, &p->sfree, s);
		}
	}
}

static void gran_unlink(sgran *g, const sblk *s)
{
	for (uint32_t i = 0; i < g->nmaps; i++)
		if (g->maps[i] == s) {
			g->maps[i] = g->maps[--g->nmaps];
			return;
		}
}

/* The sBlock's range is unmapped and freed; its granules stay with their pBlocks. */
static void drop_sblock(stitch_pol *p, sblk *s)
{
	as_dev_phys_unmap(p->dev, s->addr, s->size);
	as_dev_unreserve(p->dev, s->addr, s->size);
	for (size_t i = 0; i < s->n; i++)
		if (s->g[i])
			gran_unlink(s->g[i], s);
	if (s->state == SB_FREE)
		RB_REMOVE(stree, &p->sfree, s);
	if (s->prev)
		s->prev->next = s->next;
	else
		p->sfirst = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		p->slast = s->prev;
	p->fuse_bytes -= s->size;
	p->sblocks--;
	free(s->g);
	free(s);
}

/* garbage_collect_fused_blocks(2, 0): fragmented cached sBlocks, then free ones. */
static void gc_sblocks(stitch_pol *p)
{
	for (int pass = 0; pass < 2; pass++)
		for (sblk *s = p->sfirst, *n; s; s = n) {
			n = s->next;
			if (s->state == (pass ? SB_FREE : SB_FRAG)) {
				p->fuse_counted -= s->size < p->fuse_counted ? s->size : p->fuse_counted;
				drop_sblock(p, s);
				p->gc_dropped++;
			}
		}
}

/* ---- primitive blocks ---- */

static struct ptree *pool_of(stitch_pol *p, const pblk *b)
{
	return b->seg->kind == SEG_SMALL ? &p->small : &p->large;
}

static void pool_insert(stitch_pol *p, pblk *b)
{
	b->state = PB_FREE;
	RB_INSERT(ptree, pool_of(p, b), b);
}

static void pool_remove(stitch_pol *p, pblk *b)
{
	RB_REMOVE(ptree, pool_of(p, b), b);
}

static void own(stitch_pol *p, pblk *b)
{
	if (b->seg->kind == SEG_VMM)
		for (size_t i = 0, n = ngran(p, b); i < n; i++)
			gran_of(p, b, i)->owner = b;
}

/* b keeps its first keep bytes; the rest becomes a block of its own (same state, not in a pool). */
static pblk *split(stitch_pol *p, pblk *b, uint64_t keep)
{
	pblk *r = xcalloc(1, sizeof(*r));
	r->tag = H_PBLOCK;
	r->state = b->state;
	r->addr = b->addr + keep;
	r->size = b->size - keep;
	r->stream = b->stream;
	r->seg = b->seg;
	r->prev = b;
	r->next = b->next;
	if (r->next)
		r->next->prev = r;
	b->next = r;
	b->size = keep;
	if (b->seg->kind == SEG_VMM) {
		own(p, r);
		for (size_t i = 0, n = ngran(p, r); i < n; i++)
			r->nused += gran_of(p, r, i)->used;
		b->nused -= r->nused;
	}
	return r;
}

/* free_block: merge with the free neighbours (previous, then next) and go back to the pool. */
static void pfree(stitch_pol *p, pblk *b)
{
	pblk *cand[2] = { b->prev, b->next };
	for (int k = 0; k < 2; k++) {
		pblk *c = cand[k];
		if (!c || c->state != PB_FREE)
			continue;
		pool_remove(p, c);
		if (c == b->prev) {
			b->addr = c->addr;
			b->prev = c->prev;
			if (b->prev)
				b->prev->next = b;
			else
				b->seg->head = b;
		} else {
			b->next = c->next;
			if (b->next)
				b->next->prev = b;
		}
		b->size += c->size;
		free(c);
	}
	own(p, b);
	pool_insert(p, b);
}

/* A free pBlock that lost some granules to an sBlock: runs in use become stolen blocks, free runs
 * go back to the pool (blocks2split). */
static void split_runs(stitch_pol *p, pblk *b)
{
	for (;;) {
		size_t n = ngran(p, b), r = 1;
		int u = gran_of(p, b, 0)->used;
		while (r < n && gran_of(p, b, r)->used == u)
			r++;
		pblk *rest = r < n ? split(p, b, r * p->c.granule) : NULL;
		if (u)
			b->state = PB_STOLEN;
		else
			pool_insert(p, b);
		if (!rest)
			return;
		b = rest;
	}
}

typedef struct tailpos {
	uint64_t addr; /* of the granule in the sBlock's range */
} tailpos;

static int tailpos_cmp(const void *a, const void *b)
{
	uint64_t x = ((const tailpos *)a)->addr, y = ((const tailpos *)b)->addr;
	return x < y ? -1 : x > y;
}

static void release_segment(stitch_pol *p, pblk *b)
{
	pseg *sg = b->seg;
	pool_remove(p, b);
	if (sg->kind == SEG_VMM) {
		tailpos *tail = NULL;
		size_t ntail = 0, captail = 0;
		for (size_t i = 0; i < sg->n; i++) {
			sgran *g = &sg->g[i];
			while (g->nmaps) {
				sblk *s = g->maps[g->nmaps - 1];
				if (s->state != SB_ACTIVE) {
					drop_sblock(p, s);
					continue;
				}
				/* an active sBlock's unused tail: that granule leaves its range */
				size_t j = 0;
				while (s->g[j] != g)
					j++;
				AS_GROW(tail, ntail, captail, 16);
				tail[ntail++] = (tailpos){ s->addr + j * p->c.granule };
				s->g[j] = NULL;
				s->ndropped++;
				s->nfree--;
				s->to_gc = 1;
				g->nmaps--;
			}
			free(g->maps);
		}
		/* one unmap per run of adjacent granules in the sBlocks' ranges */
		if (ntail)
			qsort(tail, ntail, sizeof(*tail), tailpos_cmp);
		for (size_t k = 0; k < ntail;) {
			size_t e = k + 1;
			while (e < ntail && tail[e].addr == tail[e - 1].addr + p->c.granule)
				e++;
			as_dev_phys_unmap(p->dev, tail[k].addr, (e - k) * p->c.granule);
			k = e;
		}
		free(tail);
		as_dev_unmap(p->dev, sg->base, p->c.granule, sg->n, sg->h, sg->stream);
		as_dev_unreserve(p->dev, sg->base, sg->size);
		free(sg->h);
		free(sg->g);
	} else {
		as_dev_free(p->dev, sg->base, sg->size, sg->stream);
	}
	p->segments--;
	p->seg_bytes -= sg->size;
	if (sg->prev)
		sg->prev->next = sg->next;
	else
		p->gfirst = sg->next;
	if (sg->next)
		sg->next->prev = sg->prev;
	else
		p->glast = sg->prev;
	free(sg);
	free(b);
}

/* release_cached_blocks: every wholly free segment, large pool first, each in its pool's order. */
static void release_cached(stitch_pol *p)
{
	struct ptree *pools[2] = { &p->large, &p->small };
	for (int k = 0; k < 2; k++) {
		pblk *b, *n;
		RB_FOREACH_SAFE(b, ptree, pools[k], n)
			if (!b->prev && !b->next)
				release_segment(p, b);
	}
}

/* realloc_block: a new segment of alloc bytes, its one block returned (not in a pool). */
static pblk *new_segment(stitch_pol *p, uint64_t alloc, int small, uint64_t stream)
{
	if ((p->dev->total_memory && alloc > p->dev->total_memory) || (p->dev->capacity && alloc > p->dev->capacity))
		return NULL; /* no device holds it: refused before a handle array of its size is made */
	pseg *sg = xcalloc(1, sizeof(*sg));
	sg->seq = p->nextseq++;
	sg->size = alloc;
	sg->stream = stream;
	sg->kind = small ? SEG_SMALL : p->c.stitch ? SEG_VMM : SEG_MALLOC;
	if (sg->kind == SEG_VMM) {
		if (as_dev_reserve(p->dev, alloc, &sg->base)) {
			free(sg);
			return NULL;
		}
		/* a map the device refuses for its size makes no handle array (a run of refused 128 GiB
		 * requests made and zeroed a 512 KiB array each: found by fuzz_native) */
		sg->n = alloc / p->c.granule;
		if (as_dev_refuses(p->dev, p->c.granule * sg->n)) {
			as_dev_unreserve(p->dev, sg->base, alloc);
			free(sg);
			return NULL;
		}
		sg->h = xmalloc(sg->n * sizeof(*sg->h)); /* as_dev_map fills it (granule >= 2 MiB: n * 8 < 2^47) */
		if (as_dev_map(p->dev, sg->base, p->c.granule, sg->n, sg->h, stream)) {
			as_dev_unreserve(p->dev, sg->base, alloc);
			free(sg->h);
			free(sg);
			return NULL;
		}
		sg->g = xcalloc(sg->n, sizeof(*sg->g));
		for (size_t i = 0; i < sg->n; i++)
			sg->g[i].h = sg->h[i];
	} else if (as_dev_alloc(p->dev, alloc, stream, &sg->base)) {
		free(sg);
		return NULL;
	}
	pblk *b = xcalloc(1, sizeof(*b));
	b->tag = H_PBLOCK;
	b->addr = sg->base;
	b->size = alloc;
	b->stream = stream;
	b->seg = sg;
	sg->head = b;
	own(p, b);
	sg->prev = p->glast;
	if (p->glast)
		p->glast->next = sg;
	else
		p->gfirst = sg;
	p->glast = sg;
	p->segments++;
	p->seg_bytes += alloc;
	return b;
}

/* ---- stitched blocks ---- */

/* A cached free sBlock serves size bytes with its first granules. */
static sblk *use_sblock(stitch_pol *p, sblk *s, uint64_t size)
{
	size_t keep = size / p->c.granule, nsplit = 0;
	pblk **tosplit = xmalloc(keep * sizeof(*tosplit));
	RB_REMOVE(stree, &p->sfree, s);
	s->state = SB_ACTIVE;
	for (size_t i = 0; i < keep; i++) {
		sgran *g = s->g[i];
		pblk *o = g->owner;
		if (o->state == PB_FREE) {
			pool_remove(p, o);
			o->state = PB_STOLEN; /* split below */
			tosplit[nsplit++] = o;
		}
		mark_used(p, g);
	}
	for (size_t k = 0; k < nsplit; k++)
		split_runs(p, tosplit[k]);
	free(tosplit);
	s->nused = keep;
	p->reuses++;
	return s;
}

/* get_fused_fragmented_blocks: the largest free blocks of the stream mapped into one new range. */
static sblk *stitch(stitch_pol *p, int level, int small, uint64_t size, uint64_t stream)
{
	if (small || !p->c.stitch || (uint64_t)level < p->c.defrag_level || size < p->c.frag_limit)
		return NULL;
	pblk lo = { .stream = stream, .size = 0, .addr = 0, .seg = &key_first };
	pblk hi = { .stream = stream, .size = UINT64_MAX, .addr = UINT64_MAX, .seg = &key_last };
	pblk *first = RB_NFIND(ptree, &p->large, &lo);
	if (!first || first->stream != stream)
		return NULL;
	pblk *end = RB_NFIND(ptree, &p->large, &hi);
	pblk *last = end ? RB_PREV(ptree, &p->large, end) : RB_MAX(ptree, &p->large);
	if (last == first)
		return NULL; /* one free block: nothing to stitch */
	uint64_t sum = 0;
	size_t nb = 0;
	for (pblk *b = last; b && sum < size; b = b == first ? NULL : RB_PREV(ptree, &p->large, b)) {
		sum += b->size;
		nb++;
	}
	if (sum < size)
		return NULL;
	size_t n = size / p->c.granule;
	pblk **take = xmalloc(nb * sizeof(*take));
	as_phys *h = xmalloc(n * sizeof(*h));
	sgran **g = xmalloc(n * sizeof(*g));
	size_t k = 0, j = 0;
	for (pblk *b = last; k < nb; b = RB_PREV(ptree, &p->large, b)) {
		take[k++] = b;
		for (size_t i = 0, m = ngran(p, b); i < m && j < n; i++, j++) {
			g[j] = gran_of(p, b, i);
			h[j] = g[j]->h;
		}
	}
	uint64_t addr;
	if (as_dev_reserve(p->dev, size, &addr)) {
		free(take), free(h), free(g);
		return NULL;
	}
	if (as_dev_phys_map(p->dev, addr, size, h, n)) {
		as_dev_unreserve(p->dev, addr, size);
		free(take), free(h), free(g);
		return NULL;
	}
	free(h);
	for (k = 0; k < nb; k++) {
		pool_remove(p, take[k]);
		take[k]->state = PB_STOLEN;
	}
	if (sum > size) {
		pblk *b = take[nb - 1];
		pblk *r = split(p, b, b->size - (sum - size));
		pool_insert(p, r);
	}
	free(take);
	for (j = 0; j < n; j++)
		mark_used(p, g[j]);
	sblk *s = xcalloc(1, sizeof(*s));
	s->tag = H_SBLOCK;
	s->state = SB_ACTIVE;
	s->seq = p->nextseq++;
	s->addr = addr;
	s->size = size;
	s->stream = stream;
	s->n = s->nused = n;
	s->g = g;
	for (j = 0; j < n; j++) {
		AS_GROW(g[j]->maps, g[j]->nmaps, g[j]->cap, 2);
		g[j]->maps[g[j]->nmaps++] = s;
	}
	s->prev = p->slast;
	if (p->slast)
		p->slast->next = s;
	else
		p->sfirst = s;
	p->slast = s;
	p->sblocks++;
	p->stitches++;
	p->fuse_bytes += size;
	p->fuse_counted += size;
	if (p->fuse_counted > p->c.gc_limit)
		gc_sblocks(p);
	return s;
}

/* ---- the policy ---- */

static int st_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_stitch;
	stitch_pol *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(st_opts, &p->c, err) || as_conf_parse(config, st_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	if (p->c.stitch) {
		/* stitching needs virtual ranges and physical handles: a layer over another policy has none */
		uint64_t a;
		if (as_dev_reserve(dev, p->c.granule, &a)) {
			free(p);
			return as_fail(err, AS_EXIT_USAGE, "stitch: the device offers no virtual address ranges (CUDA VMM); "
				"stitch sits at the bottom of a stack, or use stitch:False");
		}
		as_dev_unreserve(dev, a, p->c.granule);
	}
	p->base.ops = &as_policy_stitch;
	p->dev = dev;
	p->ctr = ctr;
	p->zero = H_ZERO;
	RB_INIT(&p->small);
	RB_INIT(&p->large);
	RB_INIT(&p->sfree);
	*out = &p->base;
	return 0;
}

static int st_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	stitch_pol *p = (stitch_pol *)pol;
	uint64_t n = rq->size, stream = rq->stream, gran = p->c.granule;
	if (n == 0) {
		*handle = &p->zero;
		*bsize = 0;
		*addr = 0;
		return 0;
	}
	if (n > UINT64_MAX - 2 * ST_LARGE_BUFFER)
		return 1;
	uint64_t size = n < ST_MIN_BLOCK ? ST_MIN_BLOCK : (n + ST_MIN_BLOCK - 1) / ST_MIN_BLOCK * ST_MIN_BLOCK;
	int small = size <= ST_SMALL_SIZE;
	if (!small)
		size = (n + gran - 1) / gran * gran;
	uint64_t alloc = small ? ST_SMALL_BUFFER : size < ST_MIN_LARGE_ALLOC ? (ST_LARGE_BUFFER + gran - 1) / gran * gran : size;
	struct ptree *pool = small ? &p->small : &p->large;

	/* get_free_block */
	pblk key = { .stream = stream, .size = size, .addr = 0, .seg = &key_first };
	pblk *b = RB_NFIND(ptree, pool, &key);
	sblk *s = NULL;
	if (b && b->stream == stream) {
		pool_remove(p, b);
	} else {
		b = NULL;
		if (!small && p->c.stitch) {
			sblk skey = { .stream = stream, .size = size, .addr = 0 };
			sblk *c = RB_NFIND(stree, &p->sfree, &skey);
			if (c && c->stream == stream && !((double)c->size > (double)size * p->c.reuse_limit))
				s = use_sblock(p, c, size);
		}
	}
	if (!b && !s && !(s = stitch(p, 0, small, size, stream)) && !(b = new_segment(p, alloc, small, stream)) &&
	    !(s = stitch(p, 1, small, size, stream))) {
		release_cached(p);
		p->ctr->alloc_retries++;
		if (!(b = new_segment(p, alloc, small, stream)) && !(s = stitch(p, 2, small, size, stream)))
			return 1;
	}
	p->reqsum += n;
	if (s) {
		s->req = n;
		s->pending = 0;
		p->allocated += size;
		*handle = s;
		*bsize = size;
		*addr = s->addr;
		return 0;
	}
	/* should_split: the rest is a free block of at least 512 bytes (small) or one granule (large) */
	if (b->size - size >= (small ? ST_MIN_BLOCK : gran)) {
		pblk *r = split(p, b, size);
		pool_insert(p, r);
	}
	if (b->seg->kind == SEG_VMM)
		for (size_t i = 0, m = ngran(p, b); i < m; i++)
			mark_used(p, gran_of(p, b, i));
	b->state = PB_ALLOC;
	b->req = n;
	b->pending = 0;
	p->allocated += b->size;
	*handle = b;
	*bsize = b->size;
	*addr = b->addr;
	return 0;
}

static void st_free(as_policy *pol, void *h)
{
	stitch_pol *p = (stitch_pol *)pol;
	int tag = *(int *)h;
	if (tag == H_ZERO)
		return;
	if (tag == H_PBLOCK) {
		pblk *b = h;
		p->allocated -= b->size;
		p->reqsum -= b->req;
		if (b->pending)
			p->pend -= b->size - b->req;
		if (b->seg->kind == SEG_VMM)
			for (size_t i = 0, m = ngran(p, b); i < m; i++)
				mark_free(p, gran_of(p, b, i));
		pfree(p, b);
		return;
	}
	sblk *s = h;
	p->allocated -= s->nused * p->c.granule;
	p->reqsum -= s->req;
	if (s->pending)
		p->pend -= s->nused * p->c.granule - s->req;
	for (size_t i = 0; i < s->nused; i++) {
		sgran *g = s->g[i];
		mark_free(p, g);
		pblk *o = g->owner;
		if (o->state == PB_STOLEN && o->nused == 0)
			pfree(p, o);
	}
	s->nused = 0;
	if (s->to_gc) {
		drop_sblock(p, s);
		return;
	}
	if (s->nfree == s->n) {
		s->state = SB_FREE;
		RB_INSERT(stree, &p->sfree, s);
	} else {
		s->state = SB_FRAG;
	}
}

/* A free requested on the block's stream while other streams may still use it: the policy keeps it
 * in use until the free completes (GMLake's cross-stream events); only the waste attribution moves. */
static void st_free_requested(as_policy *pol, void *h)
{
	stitch_pol *p = (stitch_pol *)pol;
	int tag = *(int *)h;
	if (tag == H_PBLOCK) {
		pblk *b = h;
		b->pending = 1;
		p->pend += b->size - b->req;
	} else if (tag == H_SBLOCK) {
		sblk *s = h;
		s->pending = 1;
		p->pend += s->nused * p->c.granule - s->req;
	}
}

static void st_empty_cache(as_policy *pol)
{
	stitch_pol *p = (stitch_pol *)pol;
	release_cached(p);
	gc_sblocks(p);
}

#define BAD(...) return as_fail(err, AS_EXIT_SOFTWARE, "stitch: " __VA_ARGS__)

static int check_segment(stitch_pol *p, pseg *sg, uint64_t *allocated, as_err *err)
{
	uint64_t at = sg->base;
	for (pblk *b = sg->head; b; b = b->next) {
		if (b->seg != sg || b->addr != at || !b->size || (b->next && b->next->prev != b) || (b == sg->head) != !b->prev)
			BAD("block at 0x%" PRIx64 " breaks its segment's chain", b->addr);
		if (b->state == PB_FREE && ((b->next && b->next->state == PB_FREE) || RB_FIND(ptree, pool_of(p, b), b) != b))
			BAD("free block at 0x%" PRIx64 " is not merged or not in its pool", b->addr);
		if (b->state == PB_ALLOC)
			*allocated += b->size;
		if (sg->kind == SEG_VMM) {
			size_t used = 0, m = ngran(p, b);
			if (b->size % p->c.granule)
				BAD("block at 0x%" PRIx64 " is not whole granules", b->addr);
			for (size_t i = 0; i < m; i++) {
				sgran *g = gran_of(p, b, i);
				if (g->owner != b || g->used != (b->state != PB_FREE))
					BAD("granule %zu of block 0x%" PRIx64 " (state %d) has the wrong owner or use", i, b->addr, b->state);
				used += g->used;
			}
			if (used != b->nused)
				BAD("block at 0x%" PRIx64 " counts %zu granules in use, has %zu", b->addr, b->nused, used);
		}
		at += b->size;
	}
	if (at != sg->base + sg->size)
		BAD("segment at 0x%" PRIx64 " is not covered by its blocks", sg->base);
	return 0;
}

static int st_check(as_policy *pol, as_err *err)
{
	stitch_pol *p = (stitch_pol *)pol;
	uint64_t bytes = 0, allocated = 0, fuse = 0, segs = 0, sbs = 0;
	struct ptree *pools[2] = { &p->small, &p->large };
	for (int k = 0; k < 2; k++) {
		pblk *b;
		RB_FOREACH(b, ptree, pools[k])
			if (b->state != PB_FREE || pool_of(p, b) != pools[k])
				BAD("block at 0x%" PRIx64 " in a pool is not free or in the wrong pool", b->addr);
	}
	for (pseg *sg = p->gfirst; sg; sg = sg->next) {
		if (check_segment(p, sg, &allocated, err))
			return -1;
		bytes += sg->size;
		segs++;
	}
	for (sblk *s = p->sfirst; s; s = s->next) {
		size_t nfree = 0, nn = 0;
		for (size_t i = 0; i < s->n; i++) {
			sgran *g = s->g[i];
			if (!g) {
				nn++;
				continue;
			}
			nfree += !g->used;
			int mapped = 0;
			for (uint32_t j = 0; j < g->nmaps; j++)
				mapped |= g->maps[j] == s;
			if (!mapped)
				BAD("sBlock at 0x%" PRIx64 " maps a granule that does not list it", s->addr);
			if (i < s->nused && !g->used)
				BAD("sBlock at 0x%" PRIx64 " uses a free granule", s->addr);
		}
		if (nfree != s->nfree || nn != s->ndropped || (nn && (!s->to_gc || s->state != SB_ACTIVE)))
			BAD("sBlock at 0x%" PRIx64 " counts %zu free and %zu dropped granules, has %zu and %zu", s->addr, s->nfree,
				s->ndropped, nfree, nn);
		int in_tree = RB_FIND(stree, &p->sfree, s) == s;
		if (in_tree != (s->state == SB_FREE) || (s->state != SB_ACTIVE && (s->nused || (s->state == SB_FREE) != (nfree == s->n))))
			BAD("sBlock at 0x%" PRIx64 " is in state %d with %zu of %zu granules free", s->addr, s->state, nfree, s->n);
		if (s->state == SB_ACTIVE)
			allocated += s->nused * p->c.granule;
		fuse += s->size;
		sbs++;
	}
	if (fuse != p->fuse_bytes || sbs != p->sblocks)
		BAD("%" PRIu64 " sBlocks hold %" PRIu64 " bytes, the running sums say %" PRIu64 " and %" PRIu64, sbs, fuse, p->sblocks,
			p->fuse_bytes);
	if (bytes != p->seg_bytes || segs != p->segments || bytes != p->dev->reserved)
		BAD("%" PRIu64 " segments hold %" PRIu64 " bytes, the policy counts %" PRIu64 " and %" PRIu64 ", the device reserves %" PRIu64,
			segs, bytes, p->segments, p->seg_bytes, p->dev->reserved);
	if (allocated != p->allocated)
		BAD("blocks in use hold %" PRIu64 " bytes, the running sum says %" PRIu64, allocated, p->allocated);
	return 0;
}

static void st_segments(stitch_pol *p, as_seg_cb cb, void *ctx)
{
	as_segbuf buf = { 0 };
	for (pseg *sg = p->gfirst; sg; sg = sg->next) {
		for (pblk *b = sg->head; b; b = b->next)
			as_segbuf_push(&buf, b->size, b->state != PB_FREE); /* stolen blocks are in use through an sBlock */
		as_seg_view v = { .addr = sg->base, .size = sg->size, .stream = sg->stream, .is_small = sg->kind == SEG_SMALL };
		as_segbuf_emit(&buf, &v, cb, ctx);
	}
	as_segbuf_free(&buf);
}

static int st_query(as_policy *pol, int what, void *arg)
{
	stitch_pol *p = (stitch_pol *)pol;
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		uint64_t cached = 0, cached_bytes = 0;
		for (sblk *s = p->sfirst; s; s = s->next)
			if (s->state != SB_ACTIVE) {
				cached++;
				cached_bytes += s->size;
			}
		q->cb(q->ctx, "segments", (int64_t)p->segments);
		q->cb(q->ctx, "segment_bytes", (int64_t)p->seg_bytes);
		q->cb(q->ctx, "stitches", (int64_t)p->stitches);
		q->cb(q->ctx, "sblock_reuses", (int64_t)p->reuses);
		q->cb(q->ctx, "sblocks", (int64_t)p->sblocks);
		q->cb(q->ctx, "sblock_bytes", (int64_t)p->fuse_bytes);
		q->cb(q->ctx, "total_fuse_size", (int64_t)p->fuse_counted);
		q->cb(q->ctx, "sblocks_cached", (int64_t)cached);
		q->cb(q->ctx, "sblocks_cached_bytes", (int64_t)cached_bytes);
		q->cb(q->ctx, "sblocks_dropped_by_gc", (int64_t)p->gc_dropped);
		return 0;
	}
	case AS_Q_SEGMENTS: {
		as_q_segments *q = arg;
		st_segments(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_FREE_STATS: {
		as_q_free_stats *q = arg;
		struct ptree *pools[2] = { &p->small, &p->large };
		q->largest = 0;
		for (int k = 0; k < 2; k++) {
			pblk *b;
			RB_FOREACH(b, ptree, pools[k])
				if (b->size > q->largest)
					q->largest = b->size;
		}
		q->total = p->seg_bytes - p->allocated; /* free pBlocks: the rest is in use, directly or through sBlocks */
		return 0;
	}
	case AS_Q_FIT_VALUES: {
		as_q_fit_values *q = arg;
		if (strcmp(q->option, "frag_limit"))
			return AS_Q_UNKNOWN;
		q->values = "0,2097152..1073741824:x2"; /* 0, then 2 MiB to 1 GiB (GMLake's default 512 MiB among them) */
		return 0;
	}
	case AS_Q_WASTE: {
		as_waste *w = arg;
		memset(w, 0, sizeof(*w));
		w->rounding = p->allocated - p->reqsum - p->pend;
		w->pending_free = p->pend;
		w->free_cached = p->seg_bytes - p->allocated;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

/* Frees the model's memory; the device's goes with the device. */
static void st_destroy(as_policy *pol)
{
	stitch_pol *p = (stitch_pol *)pol;
	for (sblk *s = p->sfirst, *n; s; s = n) {
		n = s->next;
		free(s->g);
		free(s);
	}
	for (pseg *sg = p->gfirst, *n; sg; sg = n) {
		n = sg->next;
		for (pblk *b = sg->head, *bn; b; b = bn) {
			bn = b->next;
			free(b);
		}
		for (size_t i = 0; i < sg->n; i++)
			free(sg->g[i].maps);
		free(sg->g);
		free(sg->h);
		free(sg);
	}
	free(p);
}

const as_policy_ops as_policy_stitch = {
	.name = "stitch",
	.summary = "GMLake's virtual-memory stitching: free 2 MiB granules of several blocks mapped into one new range (CUDA VMM)",
	.opts = st_opts,
	.flags = AS_CAP_STATS | AS_CAP_SEGMENTS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_NO_INFERRED_EMPTY,
	.create = st_create,
	.malloc = st_malloc,
	.free_requested = st_free_requested,
	.free = st_free,
	.empty_cache = st_empty_cache,
	.check = st_check,
	.query = st_query,
	.destroy = st_destroy,
};

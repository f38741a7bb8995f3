/*
 * pytorch.c - PyTorch 2.11's native CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp),
 * decision for decision: 512-byte rounding, small/large pools keyed (stream, size, address),
 * best fit with splitting and merging, max_split_size and its oversize tolerance,
 * roundup_power2_divisions, garbage collection, expandable segments, and the fallback chain
 * on a miss (GC, new segment, oversize release, flush and retry, OOM), and private pools (CUDA
 * graphs' and torch.cuda.MemPool's: requests the trace routes to a pool are served from that pool's
 * own small/large pools, its segments serve no one else, and empty_cache and the OOM flush release
 * them only once the program has let go of the pool).
 * doc/pytorch-policy.md lists the rules with the spec sections they come from.
 */
#include "pytorch.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "util/fitset_inline.h" /* the index's common operations inline (fit_*) */
#include "util/tree.h"

typedef struct ppool ppool;
typedef struct expseg expseg;

typedef struct pblock {
	/* first, on the block's cache line (slabs are aligned): what the free-block index's descents read */
	union {                           /* a block is in one set at most: */
		as_fitnode fit;           /* pool->blocks (free and mapped) */
		RB_ENTRY(pblock) rb;      /* pool->unmapped or pool->untouched */
	};
	uint64_t ptr, size, requested, stream;
	uint64_t rounded;                 /* pt_round_size(requested), while allocated or pending */
	struct pblock *prev, *next;       /* address neighbours in the same segment */
	ppool *pool;
	expseg *es;                       /* expandable segment, or NULL */
	uint64_t gc_base;                 /* pool's get_free_block count when inserted */
	uint8_t allocated, mapped, pending;
	uint8_t untouched;                /* a whole segment never mapped: in pool->untouched */
	uint8_t picked;                   /* in a pick list (a fallback stage's select): gone for the next select */
	struct pblock *all_prev, *all_next;
} __attribute__((aligned(64))) pblock;

static int cmp_addr(const pblock *a, const pblock *b)
{
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

RB_HEAD(uset, pblock);
RB_GENERATE_STATIC(uset, pblock, rb, cmp_addr);

struct ppool {
	as_fitset blocks;    /* free blocks by (stream, size, address): PyTorch's BlockPool::blocks */
	struct uset unmapped;
	/* Expandable segments reserved but never mapped (one unmapped block each, the whole range; a
	 * request too large to map leaves one behind, as PyTorch does). They are PyTorch's unmapped
	 * blocks too, kept apart so find_expandable_block need not walk them one by one: all have the
	 * pool's va_size, so the lowest of a stream stands for all of them. */
	struct uset untouched;
	int is_small;
	int expandable;      /* new segments are expandable (the setting, unless a MemPool with its own allocator) */
	int nosplit;         /* a MemPool(no_split=True)'s: blocks are handed out whole */
	uint64_t gc_calls;
	pt_stat *priv_res;   /* a private pool's reserved_bytes_by_private_pools stat array (NULL: default pool) */
};

/* pool->blocks, PyTorch's BlockPool::blocks: a std::set of free blocks ordered by (stream, size,
 * address), here a fitset (src/util/fitset.h: the same order and answers, size classes inside). A
 * block's key there is its stream, size and ptr as inserted: a member's size or ptr changes only
 * through bs_rekey. */
static inline pblock *fb(as_fitnode *n)
{
	return n ? (pblock *)(void *)((char *)n - offsetof(pblock, fit)) : NULL;
}
static inline pblock *bs_next(ppool *pool, pblock *b)
{
	return fb(as_fitset_next(&pool->blocks, &b->fit));
}
static inline pblock *bs_prev(ppool *pool, pblock *b)
{
	return fb(as_fitset_prev(&pool->blocks, &b->fit));
}
static inline pblock *bs_min(ppool *pool)
{
	return fb(as_fitset_min(&pool->blocks));
}
static inline pblock *bs_max(ppool *pool)
{
	return fb(as_fitset_max(&pool->blocks));
}
/* RB_NFIND of (stream, size, 0): the first block at or after that key, of a later stream too. */
static inline pblock *bs_nfind(ppool *pool, uint64_t stream, uint64_t size)
{
	return fb(as_fitset_nfind(&pool->blocks, stream, size));
}
static inline void bs_remove(ppool *pool, pblock *b)
{
	fit_remove(&pool->blocks, &b->fit);
}
/* A member's new ptr and size. */
static inline void bs_rekey(ppool *pool, pblock *b, uint64_t ptr, uint64_t size)
{
	fit_rekey(&pool->blocks, &b->fit, size, ptr);
	b->ptr = ptr;
	b->size = size;
}
#define BS_FOREACH(b, pool) for ((b) = bs_min(pool); (b); (b) = bs_next((pool), (b)))

/* A private pool (PyTorch's PrivatePool): its own small and large BlockPools. */
typedef struct privpool {
	ppool large, small;
	int released;        /* use count 0: the program let go of it (EV_POOL_RELEASE) */
	int use_on_oom;      /* a MemPool(use_on_oom=True): its free blocks serve requests that ran out of memory */
	pt_stat reserved[PT_NTYPES]; /* reserved_bytes_by_private_pools[its id]: alloc_block and map_block add,
	                              * release_block and unmap_block take (CUDACachingAllocator.cpp 076f0279) */
} privpool;

struct expseg {
	uint64_t base, va_size, page, stream;
	/* one physical handle per mapped page (ExpandableSegment::handles_), for the pages below
	 * nhandles: grown on mapping, so a segment costs memory for the pages it has mapped, not
	 * for the whole reserved range */
	as_phys *handles;
	uint64_t nhandles;
	expseg *next;
};

/* A fallback stage's choice (its select; pick_apply does it): a whole segment to release (cudaFree)
 * or an expandable segment's free block whose whole pages to unmap, with the bytes that go back. */
typedef struct pick {
	pblock *b;
	uint64_t bytes;
	int unmap;
} pick;

typedef struct picks {
	pick *v;
	size_t n, cap;
} picks;

typedef struct ptpol {
	as_policy base;
	pt_conf c;
	as_device *dev;
	as_counters *ctr;
	ppool large, small;
	privpool **priv;                 /* private pool n at priv[n - 1] (AS_POOL_INDEX), made on first use */
	size_t npriv;
	pt_stats st;
	uint64_t max_compared;           /* the largest size compared with max_split_size (AS_Q_SAME_RUN) */
	uint64_t ms_lo, ms_hi;           /* every limit in (ms_lo, ms_hi] answers each comparison with
	                                  * max_split_size this replay made alike (at_limit) */
	int plain_round;                 /* no roundup_power2_divisions: round_size is 512-byte steps */
	int lean;                        /* AS_Q_LEAN: memory_stats() is not asked for; the per-request
	                                  * counters (alloc_found_block, free_block, pt_free_requested) are
	                                  * not kept (a tenth of a replay's time); the segment ones are */
	uint64_t total_allocated;        /* total_allocated_memory */
	pblock *all;                     /* every block, for segment views and checks */
	expseg *segs;
	uint64_t device_total;
	int rejected;                    /* throw_on_cudamalloc_oom rejected a segment of this request (oom_rejects) */
	as_phys *scratch;                /* map_block's handles before they go to their segment */
	size_t nscratch;
	void (*flush_hook)(void *ctx);   /* completes pending frees at the flush (engine) */
	void *flush_ctx;
	as_waste w;                      /* the waste attribution, kept as running sums (waste_in/out) */
	pblock *spare;                   /* freed blocks, reused (linked by all_next) */
	void **slabs;                    /* blocks come from slabs of PT_SLAB: no malloc per block */
	size_t nslabs;
	picks pk;                        /* the fallback stages' picks, reused (pick_apply empties it) */
} ptpol;

#define PT_SLAB 256

/* A block's share of the waste attribution (doc/metrics.md): every change of a block's size or
 * state takes its share out first (waste_out) and puts it back after (waste_in), so that pt_waste
 * reads sums instead of walking every block at each new reserved peak. */
/* Inline (always: it runs several times per event, and sign is a constant at each call). */
/* x >= max_split_size, the one way the limit enters a decision or a number (see pt_same_run): the
 * answer is noted as the range of limits that would have given it. */
static inline int at_limit(ptpol *p, uint64_t x)
{
	if (p->c.max_split_size == PT_NO_LIMIT)
		return 0; /* (no size reaches it; and pt_same_run reads no range without a limit) */
	if (x >= p->c.max_split_size) {
		p->ms_hi = x < p->ms_hi ? x : p->ms_hi;
		return 1;
	}
	p->ms_lo = x > p->ms_lo ? x : p->ms_lo;
	return 0;
}

/* What bs_nfind(pool, stream, max_split_size) found, as answers of at_limit: it (when on the
 * stream) is at or above the limit, the block before it (when on the stream) below. */
static void note_limit_search(ptpol *p, uint64_t stream, pblock *it, pblock *before)
{
	if (it && it->stream == stream)
		(void)at_limit(p, it->size);
	if (before && before->stream == stream)
		(void)at_limit(p, before->size);
}

static inline __attribute__((always_inline)) void waste_share(ptpol *p, const pblock *b, uint64_t sign)
{
	as_waste *w = &p->w;
	if (!b->mapped)
		return;
	if (b->pending) {
		w->pending_free += sign * (b->size - b->requested); /* its requested bytes are still live */
	} else if (!b->allocated) {
		w->free_cached += sign * b->size;
	} else {
		uint64_t r = b->rounded;
		w->rounding += sign * (r - b->requested);
		if (at_limit(p, b->size))
			w->oversize += sign * (b->size - r);
		else
			w->unsplit += sign * (b->size - r);
	}
}
#define waste_in(p, b) waste_share(p, b, 1)
#define waste_out(p, b) waste_share(p, b, (uint64_t)-1) /* unsigned: subtracting what was added */

/* The hot path's shares as one change each (the same sums as waste_out, the change, waste_in):
 * a free cached block b allocated for a request of n bytes rounded to r; an allocated block let go
 * of (its rounding and unsplit or oversize bytes leave); a pending free completed. */
static inline __attribute__((always_inline)) void waste_take(ptpol *p, const pblock *b, uint64_t r, uint64_t n)
{
	as_waste *w = &p->w;
	w->free_cached -= b->size;
	w->rounding += r - n;
	if (at_limit(p, b->size))
		w->oversize += b->size - r;
	else
		w->unsplit += b->size - r;
}
static inline __attribute__((always_inline)) void waste_let_go(ptpol *p, const pblock *b)
{
	as_waste *w = &p->w;
	uint64_t r = b->rounded;
	w->rounding -= r - b->requested;
	if (at_limit(p, b->size))
		w->oversize -= b->size - r;
	else
		w->unsplit -= b->size - r;
}

static void waste_walk(ptpol *p, as_waste *w);

/* round_size with its common case inline (no roundup_power2_divisions: 512-byte steps, as
 * pt_round_size computes it then). */
static inline uint64_t round_req(const ptpol *p, uint64_t n)
{
	if (p->plain_round)
		return n < PT_MIN_BLOCK ? PT_MIN_BLOCK : (n + PT_MIN_BLOCK - 1) / PT_MIN_BLOCK * PT_MIN_BLOCK;
	return pt_round_size(&p->c, n);
}

/* ---- block bookkeeping ---------------------------------------------------------------- */

/* p->all holds every block but the untouched segments' (pool->untouched): those have no
 * neighbours, nothing mapped, nothing allocated, so the walks over p->all (check, waste, segment
 * heads) would only skip them, and a trace can leave one per request behind. */
static void all_link(ptpol *p, pblock *b)
{
	b->all_prev = NULL;
	b->all_next = p->all;
	if (p->all)
		p->all->all_prev = b;
	p->all = b;
}

static void all_unlink(ptpol *p, pblock *b)
{
	if (b->all_prev)
		b->all_prev->all_next = b->all_next;
	else
		p->all = b->all_next;
	if (b->all_next)
		b->all_next->all_prev = b->all_prev;
}

/* A slab of PT_SLAB blocks into the (empty) spares. */
static __attribute__((noinline)) void spares_grow(ptpol *p)
{
	/* on a cache line each (pblock's alignment): a tree descent reads the first 48 bytes */
	char *raw = xmalloc(PT_SLAB * sizeof(pblock) + 63);
	pblock *slab = (pblock *)(void *)(raw + (-(uintptr_t)raw & 63));
	p->slabs = xrealloc(p->slabs, (p->nslabs + 1) * sizeof(*p->slabs));
	p->slabs[p->nslabs++] = raw;
	for (size_t i = 0; i < PT_SLAB; i++) {
		slab[i].all_next = p->spare;
		p->spare = &slab[i];
	}
}

/* A new free mapped block whose share of the waste its caller counts (block_new counts it). Inline:
 * a split takes one per allocation. */
static inline pblock *block_get(ptpol *p, ppool *pool, uint64_t stream, uint64_t ptr, uint64_t size)
{
	if (__builtin_expect(!p->spare, 0))
		spares_grow(p);
	pblock *b = p->spare;
	p->spare = b->all_next;
	/* every field but the set links (fit, rb: set on insertion) and all_* (all_link) */
	b->ptr = ptr;
	b->size = size;
	b->stream = stream;
	b->requested = b->rounded = 0;
	b->prev = b->next = NULL;
	b->pool = pool;
	b->es = NULL;
	b->gc_base = 0;
	b->allocated = b->pending = b->untouched = b->picked = 0;
	b->mapped = 1;
	all_link(p, b);
	return b;
}

static pblock *block_new(ptpol *p, ppool *pool, uint64_t stream, uint64_t ptr, uint64_t size)
{
	pblock *b = block_get(p, pool, stream, ptr, size);
	waste_in(p, b);
	return b;
}

/* Returns a block to the spares, its share of the waste left to the caller (block_delete takes it out). */
static void block_put(ptpol *p, pblock *b)
{
	all_unlink(p, b);
	b->all_next = p->spare;
	p->spare = b;
}

static void block_delete(ptpol *p, pblock *b)
{
	waste_out(p, b);
	block_put(p, b);
}

static int is_split(const pblock *b)
{
	return b->prev || b->next;
}

static void insert_into_blocks(ppool *pool, pblock *b)
{
	b->gc_base = pool->gc_calls;
	as_fitset_insert(&pool->blocks, &b->fit, b->stream, b->size, b->ptr);
}

/* insert_into_blocks, inline: a free's (free_block) */
static inline __attribute__((always_inline)) void insert_into_blocks_hot(ppool *pool, pblock *b)
{
	b->gc_base = pool->gc_calls;
	fit_insert(&pool->blocks, &b->fit, b->stream, b->size, b->ptr);
}

static int gc_enabled(const ptpol *p)
{
	return p->c.gc_threshold > 0.0 && p->dev->capacity;
}

/* ---- lookup ----------------------------------------------------------------------------- */

static uint64_t expandable_size(const pblock *b)
{
	return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* get_free_block's max_split_size rules: a request under the limit takes no oversize block, and one
 * above it only a block less than max_non_split_rounding larger. */
static inline int oversize_refuses(ptpol *p, const pblock *b, uint64_t s)
{
	if (!at_limit(p, s))
		return at_limit(p, b->size);
	return b->size >= s + p->c.max_non_split_rounding;
}

/* The block get_free_block would take, without taking it: the first block at or after
 * (stream, s, 0) on the same stream, with the expandable descent and the oversize rules. */
static inline __attribute__((always_inline)) pblock *lookup(ptpol *p, ppool *pool, uint64_t stream, uint64_t s)
{
	pblock *it = fb(fit_nfind(&pool->blocks, stream, s)); /* bs_nfind, inline: every malloc's */
	if (!it || it->stream != stream)
		return NULL;
	if (it->es && p->c.expandable) {
		/* Prefer interior free blocks over the growable tail (local descent). */
		pblock *next = bs_next(pool, it);
		while (it->es && next && next->stream == stream && expandable_size(next) < expandable_size(it)) {
			it = next;
			next = bs_next(pool, next);
		}
	}
	return oversize_refuses(p, it, s) ? NULL : it;
}

/* PyTorch's get_free_block: the block found stays in pool->blocks here; alloc_found_block takes it
 * out (or, split, keeps the remainder where it is when the order allows: see there). */
static pblock *get_free_block(ptpol *p, ppool *pool, uint64_t stream, uint64_t s)
{
	if (gc_enabled(p))
		pool->gc_calls++;
	return lookup(p, pool, stream, s);
}

/* ---- merging and freeing ---------------------------------------------------------------- */

static uint64_t try_merge(ptpol *p, pblock *dst, pblock *src)
{
	if (!src || src->allocated || src->pending || dst->mapped != src->mapped)
		return 0;
	if (dst->prev == src) {
		dst->ptr = src->ptr;
		dst->prev = src->prev;
		if (dst->prev)
			dst->prev->next = dst;
	} else {
		dst->next = src->next;
		if (dst->next)
			dst->next->prev = dst;
	}
	uint64_t sub = src->size;
	waste_out(p, dst);
	dst->size += sub;
	waste_in(p, dst);
	if (src->mapped)
		bs_remove(src->pool, src);
	else
		RB_REMOVE(uset, &src->pool->unmapped, src);
	block_delete(p, src);
	return sub;
}

static inline int mergeable(const pblock *dst, const pblock *src)
{
	return src && !src->allocated && !src->pending && dst->mapped == src->mapped;
}

/* free_block's merges (try_merge with the previous then the next block, then the insert of the
 * result), with the same set and sums as the result (the waste's too: the merged bytes were free
 * cached and stay so, b counted already): the merged block is one of the free
 * neighbours, already in pool->blocks, not b; its key only grows (a larger size), so it keeps its
 * place in the set when the order allows (bs_rekey), instead of a removal and an insert.
 * Which block object stands for the merged range is invisible (handles of free blocks are never
 * held). Returns the merged block; counts the merges into nblocks and nbytes as free_block does. */
static pblock *merge_free(ptpol *p, pblock *b, int64_t *nblocks, int64_t *nbytes)
{
	ppool *pool = b->pool;
	pblock *pv = b->prev, *nx = b->next;
	int mp = mergeable(b, pv), mn = mergeable(b, nx);
	pblock *m = mp ? pv : nx; /* the survivor, in pool->blocks */
	uint64_t ptr = mp ? pv->ptr : b->ptr, size = b->size;
	pblock *prev = mp ? pv->prev : b->prev, *next = mn ? nx->next : b->next;
	if (mp) {
		*nblocks -= 1;
		*nbytes -= (int64_t)pv->size;
		size += pv->size;
	}
	if (mn) {
		*nblocks -= 1;
		*nbytes -= (int64_t)nx->size;
		size += nx->size;
	}
	if (mp && mn)
		bs_remove(pool, nx);
	bs_rekey(pool, m, ptr, size);
	m->prev = prev;
	m->next = next;
	m->requested = b->requested;
	m->rounded = b->rounded;
	if (prev)
		prev->next = m;
	if (next)
		next->prev = m;
	m->gc_base = pool->gc_calls;
	block_put(p, b);
	if (mp && mn)
		block_put(p, nx);
	return m;
}

/* free_block, for a block no longer pending (its waste share already free cached: pt_free). */
static void free_block(ptpol *p, pblock *b)
{
	uint64_t orig = b->size, req = b->requested;
	ppool *pool = b->pool;
	int64_t nblocks = 0, nbytes = 0;
	pblock *cand[2] = { b->prev, b->next };
	if (mergeable(b, cand[0]) || mergeable(b, cand[1])) {
		b = merge_free(p, b, &nblocks, &nbytes);
	} else {
		insert_into_blocks_hot(pool, b);
	}
	if (is_split(b)) {
		nblocks += 1;
		nbytes += (int64_t)b->size;
	}
	if (p->lean)
		return;
	int sm = pool->is_small;
	if (!b->es) {
		if (nblocks > 0)
			pt_inc2(p->st.inactive_split, sm, nblocks);
		else if (nblocks < 0)
			pt_dec2(p->st.inactive_split, sm, -nblocks);
		if (nbytes > 0)
			pt_inc2(p->st.inactive_split_bytes, sm, nbytes);
		else if (nbytes < 0)
			pt_dec2(p->st.inactive_split_bytes, sm, -nbytes);
	}
	pt_dec2(p->st.active, sm, 1);
	pt_dec2(p->st.active_bytes, sm, (int64_t)orig);
	pt_dec2(p->st.requested_bytes, sm, (int64_t)req);
}

/* ---- segments ----------------------------------------------------------------------------- */

/* Memory the device gave the pool (a segment, mapped pages) or took back: total_allocated,
 * reserved_bytes and, for a private pool, its reserved_bytes_by_private_pools entry. */
static inline void reserved_add(ptpol *p, ppool *pool, uint64_t bytes)
{
	p->total_allocated += bytes;
	pt_inc2(p->st.reserved_bytes, pool->is_small, (int64_t)bytes);
	if (pool->priv_res)
		pt_inc2(pool->priv_res, pool->is_small, (int64_t)bytes);
}

static inline void reserved_take(ptpol *p, ppool *pool, uint64_t bytes)
{
	p->total_allocated -= bytes;
	pt_dec2(p->st.reserved_bytes, pool->is_small, (int64_t)bytes);
	if (pool->priv_res)
		pt_dec2(pool->priv_res, pool->is_small, (int64_t)bytes);
}

static void release_block(ptpol *p, pblock *b)
{
	ppool *pool = b->pool;
	as_dev_free(p->dev, b->ptr, b->size, b->stream);
	reserved_take(p, pool, b->size);
	pt_dec2(p->st.segment, pool->is_small, 1);
	p->st.num_device_free++;
	if (at_limit(p, b->size))
		pt_dec(&p->st.oversize_segments, 1);
	bs_remove(pool, b);
	block_delete(p, b);
}

static uint64_t seg_left(const expseg *es, uint64_t ptr)
{
	return (ptr - es->base) / es->page;
}

static uint64_t seg_right(const expseg *es, uint64_t ptr)
{
	return (ptr - es->base + es->page - 1) / es->page;
}

static int map_block(ptpol *p, pblock *b, uint64_t size)
{
	expseg *es = b->es;
	ppool *pool = b->pool;
	uint64_t begin = seg_left(es, b->ptr), end = seg_right(es, b->ptr + size);
	uint64_t bytes = (end - begin) * es->page;
	if (!bytes)
		return 0;
	/* the handles come into a buffer of the policy's first, so a request the device refuses
	 * (too large for it) grows nothing */
	size_t n = (size_t)(end - begin);
	if (n > p->nscratch) {
		p->scratch = xrealloc(p->scratch, n * sizeof(*p->scratch));
		p->nscratch = n;
	}
	if (as_dev_map(p->dev, b->ptr, es->page, n, p->scratch, b->stream))
		return 0;
	if (end > es->nhandles) {
		uint64_t grow = es->nhandles * 2 > end ? es->nhandles * 2 : end;
		uint64_t all = es->va_size / es->page;
		if (grow > all)
			grow = all;
		es->handles = xrealloc(es->handles, (size_t)grow * sizeof(*es->handles));
		memset(es->handles + es->nhandles, 0, (size_t)(grow - es->nhandles) * sizeof(*es->handles));
		es->nhandles = grow;
	}
	memcpy(&es->handles[begin], p->scratch, n * sizeof(*p->scratch));
	if (b->untouched) {
		RB_REMOVE(uset, &pool->untouched, b);
		b->untouched = 0;
		all_link(p, b);
	} else {
		RB_REMOVE(uset, &pool->unmapped, b);
	}
	waste_out(p, b);
	b->mapped = 1;
	if (bytes < b->size) {
		pblock *rem = block_new(p, pool, b->stream, b->ptr + bytes, b->size - bytes);
		waste_out(p, rem);
		rem->mapped = 0;
		rem->es = es;
		rem->prev = b;
		rem->next = b->next;
		if (b->next)
			b->next->prev = rem;
		b->next = rem;
		RB_INSERT(uset, &pool->unmapped, rem);
		b->size = bytes;
	}
	waste_in(p, b);
	try_merge(p, b, b->prev);
	try_merge(p, b, b->next);
	insert_into_blocks(pool, b);
	reserved_add(p, pool, bytes);
	p->st.num_device_alloc++;
	return 1;
}

static int allocatable(const pblock *b)
{
	return b && !b->allocated && !b->pending;
}

static int has_room(const pblock *b, uint64_t size)
{
	uint64_t bytes = 0;
	while (bytes < size && allocatable(b)) {
		bytes += b->size;
		b = b->next;
	}
	return bytes >= size;
}

static pblock *find_expandable_block(ptpol *p, ppool *pool, uint64_t stream, uint64_t size)
{
	pblock key = { .stream = stream, .ptr = 0 };
	/* PyTorch walks every unmapped block of the stream in address order and takes the first with
	 * room. An untouched segment has room iff the request fits its va_size, the same for all of
	 * the pool's: only the lowest of the stream can be the first, so the walk covers the blocks of
	 * segments with mapped pages (live memory) and stops at that one. */
	pblock *u = RB_NFIND(uset, &pool->untouched, &key);
	if (u && (u->stream != stream || u->size < size))
		u = NULL;
	for (pblock *it = RB_NFIND(uset, &pool->unmapped, &key); it && it->stream == stream && !(u && it->ptr > u->ptr);
	     it = RB_NEXT(uset, &pool->unmapped, it)) {
		pblock *c = it;
		if (allocatable(c->prev))
			c = c->prev;
		if (has_room(c, size))
			return c;
	}
	if (u)
		return u;
	expseg *es = xcalloc(1, sizeof(*es));
	es->page = pool->is_small ? PT_SMALL_BUF : p->c.large_segment_size;
	uint64_t total = p->device_total;
	uint64_t pages = (total + total / 8 + es->page - 1) / es->page;
	es->va_size = pages * es->page;
	es->stream = stream;
	as_dev_reserve(p->dev, es->va_size, &es->base);
	es->next = p->segs;
	p->segs = es;
	pblock *c = block_new(p, pool, stream, es->base, es->va_size);
	waste_out(p, c);
	c->mapped = 0;
	c->es = es;
	c->untouched = 1;
	all_unlink(p, c);
	RB_INSERT(uset, &pool->untouched, c);
	return c;
}

static pblock *try_allocate_expandable(ptpol *p, ppool *pool, uint64_t stream, uint64_t size)
{
	pblock *c = find_expandable_block(p, pool, stream, size);
	if (!c->mapped && !map_block(p, c, c->size < size ? c->size : size))
		return NULL;
	while (c->size < size) {
		uint64_t remaining = size - c->size;
		pblock *nc = c->next;
		if (!nc) /* the request exceeds the reserved range: the driver could never map it */
			return NULL;
		if (!map_block(p, nc, remaining < nc->size ? remaining : nc->size))
			return NULL;
		c = nc;
	}
	bs_remove(pool, c);
	return c;
}

static void release_expandable_segment(ptpol *p, pblock *b)
{
	expseg *es = b->es, **pp;
	if (b->untouched) { /* (not reached: only segments that mapped pages are released) */
		RB_REMOVE(uset, &b->pool->untouched, b);
		all_link(p, b);
	} else
		RB_REMOVE(uset, &b->pool->unmapped, b);
	for (pp = &p->segs; *pp; pp = &(*pp)->next)
		if (*pp == es) {
			*pp = es->next;
			break;
		}
	as_dev_unreserve(p->dev, es->base, es->va_size);
	free(es->handles);
	free(es);
	block_delete(p, b);
}

static void unmap_block(ptpol *p, pblock *b)
{
	expseg *es = b->es;
	ppool *pool = b->pool;
	uint64_t begin = es->base + seg_right(es, b->ptr) * es->page;
	uint64_t end = es->base + seg_left(es, b->ptr + b->size) * es->page;
	if (begin >= end)
		return;
	bs_remove(pool, b);
	uint64_t before = begin - b->ptr;
	if (before) {
		pblock *bf = block_new(p, pool, b->stream, b->ptr, before);
		bf->es = es;
		bf->prev = b->prev;
		bf->next = b;
		if (b->prev)
			b->prev->next = bf;
		b->prev = bf;
		insert_into_blocks(pool, bf);
	}
	uint64_t after = b->size - before - (end - begin);
	if (after) {
		pblock *af = block_new(p, pool, b->stream, end, after);
		af->es = es;
		af->prev = b;
		af->next = b->next;
		if (b->next)
			b->next->prev = af;
		b->next = af;
		insert_into_blocks(pool, af);
	}
	waste_out(p, b);
	b->ptr = begin;
	b->size = end - begin;
	b->mapped = 0;
	try_merge(p, b, b->prev);
	try_merge(p, b, b->next);
	RB_INSERT(uset, &pool->unmapped, b);
	reserved_take(p, pool, end - begin);
	p->st.num_device_free++;
	as_dev_unmap(p->dev, begin, es->page, (size_t)((end - begin) / es->page), &es->handles[seg_left(es, begin)], b->stream);
}

/* ---- the fallback stages -------------------------------------------------------------------
 * Each stage of a malloc that finds no free block (garbage collection, the oversize release, the
 * flush of a pool's cache, the MemPool fallback) is a select, which says which blocks the stage
 * takes and changes nothing (but the comparisons with max_split_size it notes: at_limit), and an
 * apply (pick_apply for the releases). pt_malloc runs select then apply, stage after stage; predict
 * (reconciliation's question: what would this request release?) runs the selects alone, each
 * passing over the blocks the stages before it picked, as the real run no longer has them. */

static void pick_add(picks *r, pblock *b, uint64_t bytes, int unmap)
{
	AS_GROW(r->v, r->n, r->cap, 16);
	r->v[r->n++] = (pick){ b, bytes, unmap };
	b->picked = 1;
}

/* Forgets the picks without doing them (predict). */
static void pick_clear(picks *r)
{
	for (size_t i = 0; i < r->n; i++)
		r->v[i].b->picked = 0;
	r->n = 0;
}

/* Does the picks in order: a whole segment is released (cudaFree), an expandable block's whole
 * pages unmapped (and its segment released once nothing of it is mapped), as PyTorch's
 * release_blocks does. */
static void pick_apply(ptpol *p, picks *r)
{
	for (size_t i = 0; i < r->n; i++) {
		pblock *b = r->v[i].b;
		b->picked = 0;
		if (!r->v[i].unmap) {
			release_block(p, b);
			continue;
		}
		unmap_block(p, b);
		if (!b->prev && !b->next && !b->mapped)
			release_expandable_segment(p, b);
	}
	r->n = 0;
}

/* A pool's free blocks in order, passing over those a stage before picked. */
static pblock *live_next(ppool *pool, pblock *b)
{
	do
		b = bs_next(pool, b);
	while (b && b->picked);
	return b;
}
static pblock *live_prev(ppool *pool, pblock *b)
{
	do
		b = bs_prev(pool, b);
	while (b && b->picked);
	return b;
}
static pblock *live_min(ppool *pool)
{
	pblock *b = bs_min(pool);
	return b && b->picked ? live_next(pool, b) : b;
}
static pblock *live_max(ppool *pool)
{
	pblock *b = bs_max(pool);
	return b && b->picked ? live_prev(pool, b) : b;
}

/* release_blocks' choice for one pool: its whole free segments (not expandable, not split) in the
 * pool's order, then the whole pages of each free block of an expandable segment. */
static void flush_select_pool(ppool *pool, picks *r)
{
	pblock *b;
	for (b = live_min(pool); b; b = live_next(pool, b))
		if (!b->es && !b->prev && !b->next)
			pick_add(r, b, b->size, 0);
	for (b = live_min(pool); b; b = live_next(pool, b)) {
		if (!b->es)
			continue;
		uint64_t lo = b->es->base + seg_right(b->es, b->ptr) * b->es->page;
		uint64_t hi = b->es->base + seg_left(b->es, b->ptr + b->size) * b->es->page;
		if (hi > lo)
			pick_add(r, b, hi - lo, 1);
	}
}

/* The pools of the default pool or of a private pool. */
static void pool_init(ppool *large, ppool *small, int expandable)
{
	small->is_small = 1;
	large->expandable = small->expandable = expandable;
	as_fitset_init(&large->blocks);
	as_fitset_init(&small->blocks);
	RB_INIT(&large->unmapped);
	RB_INIT(&small->unmapped);
	RB_INIT(&large->untouched);
	RB_INIT(&small->untouched);
}

/* The private pool a request names (made on first use; a request into a released pool takes it
 * back, as beginAllocateToPool raises its use count again). Allocates only at a pool's first request. */
static privpool *private_pool(ptpol *p, uint32_t pool)
{
	size_t i = AS_POOL_INDEX(pool) - 1;
	if (i >= p->npriv) {
		size_t n = i + 1 > 2 * p->npriv ? i + 1 : 2 * p->npriv;
		p->priv = xrealloc(p->priv, n * sizeof(*p->priv));
		memset(p->priv + p->npriv, 0, (n - p->npriv) * sizeof(*p->priv));
		p->npriv = n;
	}
	if (!p->priv[i]) {
		p->priv[i] = xcalloc(1, sizeof(privpool));
		pool_init(&p->priv[i]->large, &p->priv[i]->small, p->c.expandable && !(pool & AS_POOL_CUSTOM));
		p->priv[i]->large.nosplit = p->priv[i]->small.nosplit = (pool & AS_POOL_NOSPLIT) != 0;
		p->priv[i]->use_on_oom = (pool & AS_POOL_ONOOM) != 0;
		p->priv[i]->large.priv_res = p->priv[i]->small.priv_res = p->priv[i]->reserved;
	}
	p->priv[i]->released = 0;
	return p->priv[i];
}

/* releasePool (use count 0); with empty, then emptyCache(the pool's id) as a MemPool's destructor
 * does: that pool's free segments, small then large, and nothing else's. */
static void pt_pool_release(as_policy *pol, uint32_t pool, int empty)
{
	ptpol *p = (ptpol *)pol;
	size_t i = AS_POOL_INDEX(pool) - 1;
	if (i >= p->npriv || !p->priv[i])
		return;
	p->priv[i]->released = 1;
	if (empty) {
		p->st.num_sync_all_streams++;
		flush_select_pool(&p->priv[i]->small, &p->pk);
		flush_select_pool(&p->priv[i]->large, &p->pk);
		pick_apply(p, &p->pk);
	}
}

/* release_cached_blocks' choice: the default pool's large then small blocks, then those of each
 * pool the program let go of (use count 0), small before large. */
static void flush_select(ptpol *p, picks *r)
{
	flush_select_pool(&p->large, r);
	flush_select_pool(&p->small, r);
	for (size_t i = 0; i < p->npriv; i++)
		if (p->priv[i] && p->priv[i]->released) {
			flush_select_pool(&p->priv[i]->small, r);
			flush_select_pool(&p->priv[i]->large, r);
		}
}

static void release_cached_blocks(ptpol *p)
{
	/* synchronize_and_free_events: the engine completes the pending frees the trace shows
	 * completing here; otherwise they complete when the trace says so. (Before the select: the
	 * blocks freed there are released too.) */
	if (p->flush_hook) {
		void (*hook)(void *) = p->flush_hook;
		p->flush_hook = NULL;
		hook(p->flush_ctx);
	}
	p->st.num_sync_all_streams++;
	flush_select(p, &p->pk);
	pick_apply(p, &p->pk);
}

/* release_available_cached_blocks' choice (max_split_size set): the smallest block of the stream at
 * or above the request's size (or, for a request under the limit, the limit), else the stream's
 * oversize blocks from the largest down until they add up to that size. Returns whether they do;
 * *bytes is what was picked. */
static int oversize_select(ptpol *p, ppool *pool, uint64_t stream, uint64_t s, picks *r, uint64_t *bytes)
{
	uint64_t ms = p->c.max_split_size;
	*bytes = 0;
	if (ms == PT_NO_LIMIT)
		return 0;
	int by_limit = !at_limit(p, s); /* the key is the limit itself */
	uint64_t k = by_limit ? ms : s; /* the search key: (stream, k, 0) */
	pblock *it = bs_nfind(pool, stream, k);
	while (it && it->picked)
		it = bs_next(pool, it);
	pblock *cur = it ? live_prev(pool, it) : live_max(pool);
	if (by_limit)
		note_limit_search(p, stream, it, cur);
	if (!it || it->stream != stream || it->es) {
		if (!cur)
			return 0;
		uint64_t released = 0;
		while (cur && (by_limit ? !at_limit(p, released) : released < k) && at_limit(p, cur->size) &&
		       cur->stream == stream) {
			pblock *prev = live_prev(pool, cur);
			if (!cur->es) {
				released += cur->size;
				pick_add(r, cur, cur->size, 0);
			}
			cur = prev;
		}
		*bytes = released;
		return by_limit ? at_limit(p, released) : released >= k;
	}
	*bytes = it->size;
	pick_add(r, it, it->size, 0);
	return 1;
}

static int release_available_cached_blocks(ptpol *p, ppool *pool, uint64_t stream, uint64_t s)
{
	uint64_t bytes;
	int done = oversize_select(p, pool, stream, s, &p->pk, &bytes);
	pick_apply(p, &p->pk);
	return done;
}

/* garbage_collect's choice (garbage_collection_threshold set, above it): the large pool's whole
 * segments at least as old as the mean age (in get_free_block calls), rounds of it until the
 * bytes over the threshold are picked or a round picks none. Returns the bytes picked. */
static uint64_t gc_select(ptpol *p, picks *r)
{
	uint64_t thr = (uint64_t)(p->c.gc_threshold * (double)p->dev->capacity);
	if (p->total_allocated <= thr)
		return 0;
	uint64_t target = p->total_allocated - thr, reclaimed = 0;
	uint64_t total_age = 0;
	int64_t count = 0;
	ppool *pool = &p->large;
	pblock *b, *next;
	for (b = live_min(pool); b; b = live_next(pool, b)) {
		if (!is_split(b)) {
			total_age += pool->gc_calls - b->gc_base;
			count++;
		}
	}
	if (!count)
		return 0;
	int freed = 1;
	while (reclaimed < target && freed && count > 0) {
		double thr_age = (double)total_age / (double)count;
		freed = 0;
		for (b = live_min(pool); b; b = next) {
			next = live_next(pool, b);
			uint64_t age = pool->gc_calls - b->gc_base;
			if (!is_split(b) && !b->es && (double)age >= thr_age) {
				freed = 1;
				reclaimed += b->size;
				total_age -= age;
				count--;
				pick_add(r, b, b->size, 0);
			}
		}
	}
	return reclaimed;
}

static void garbage_collect(ptpol *p)
{
	gc_select(p, &p->pk);
	pick_apply(p, &p->pk);
}

/* throw_on_cudamalloc_oom (2.12+), after the fraction check in alloc_block, before the device is
 * asked (expandable growth included): the config key per_process_memory_fraction (not the run's
 * capacity, set_per_process_memory_fraction) x the device total, converted to size_t as
 * static_cast<size_t>(fraction * double(totalGlobalMem)), bounds total_allocated_memory + the
 * segment's size; past it num_oom_rejections counts one and the request is marked rejected
 * (AllocParams::oom_rejection_info), which malloc then fails without the retry chain.
 * cyyever/pytorch 076f0279 c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::alloc_block. */
static int oom_rejects(ptpol *p, uint64_t alloc_size)
{
	if (!p->c.throw_on_oom || p->total_allocated + alloc_size <= (uint64_t)(p->c.fraction * (double)p->device_total))
		return 0;
	p->st.num_oom_rejections++;
	p->rejected = 1;
	return 1;
}

/* A new segment (or expandable growth); isRetry counts num_alloc_retries. */
static pblock *alloc_block(ptpol *p, ppool *pool, uint64_t stream, uint64_t s, uint64_t alloc_size, int retry)
{
	if (retry) {
		p->st.num_alloc_retries++;
		p->ctr->alloc_retries++;
	}
	if (p->dev->capacity && p->total_allocated + alloc_size > p->dev->capacity)
		return NULL;
	if (oom_rejects(p, alloc_size))
		return NULL;
	if (pool->expandable)
		return try_allocate_expandable(p, pool, stream, s);
	uint64_t addr;
	if (as_dev_alloc(p->dev, alloc_size, stream, &addr))
		return NULL;
	pblock *b = block_new(p, pool, stream, addr, alloc_size);
	reserved_add(p, pool, alloc_size);
	pt_inc2(p->st.segment, pool->is_small, 1);
	if (at_limit(p, alloc_size))
		pt_inc(&p->st.oversize_segments, 1);
	p->st.num_device_alloc++;
	return b;
}

static int should_split(ptpol *p, const pblock *b, uint64_t s)
{
	uint64_t rem = b->size - s;
	if (b->pool->nosplit)
		return 0;
	/* the expandable rule for blocks of expandable segments: AllocParams' is_expandable_segments_active,
	 * false for a custom-allocator MemPool (the H200 captures' mempool_custom__exp) and for the
	 * use_on_oom fallback, which takes only plain blocks */
	if (b->pool->is_small || b->es)
		return rem >= PT_MIN_BLOCK;
	return !at_limit(p, s) && rem > PT_SMALL_SIZE;
}

/* Allocates s bytes (the rounded size of the request n) from block b: a cached block still in
 * pool->blocks (in_pool, from get_free_block) or a new one. */
static pblock *alloc_found_block(ptpol *p, pblock *b, uint64_t s, uint64_t n, uint64_t stream, int in_pool)
{
	ppool *pool = b->pool;
	int sm = pool->is_small;
	int already_split = is_split(b);
	int split = should_split(p, b, s);
	if (in_pool && !split)
		bs_remove(pool, b);
	if (split) {
		/* the waste: the free cached bytes still count the whole block; waste_take below takes
		 * b's s bytes out of them, the remainder's stay */
		pblock *rem = b;
		b = block_get(p, pool, stream, rem->ptr, s);
		b->es = rem->es;
		b->prev = rem->prev;
		if (b->prev)
			b->prev->next = b;
		b->next = rem;
		rem->prev = b;
		if (in_pool) {
			/* PyTorch takes the block out and inserts the remainder: the same set as the new
			 * key in place where the order allows (bs_rekey). The age is reset, as an insert. */
			bs_rekey(pool, rem, rem->ptr + s, rem->size - s);
			rem->gc_base = pool->gc_calls;
		} else {
			rem->ptr += s;
			rem->size -= s;
			insert_into_blocks(pool, rem);
		}
		if (!p->lean && !b->es) {
			if (already_split) {
				pt_dec2(p->st.inactive_split_bytes, sm, (int64_t)b->size);
			} else {
				pt_inc2(p->st.inactive_split_bytes, sm, (int64_t)rem->size);
				pt_inc2(p->st.inactive_split, sm, 1);
			}
		}
	} else if (already_split && !b->es && !p->lean) {
		pt_dec2(p->st.inactive_split_bytes, sm, (int64_t)b->size);
		pt_dec2(p->st.inactive_split, sm, 1);
	}
	waste_take(p, b, s, n); /* (an allocated block is mapped) */
	b->allocated = 1;
	b->requested = n;
	b->rounded = s; /* pt_round_size(n) */
	if (p->lean)
		return b;
	pt_inc2(p->st.allocation, sm, 1);
	pt_inc2(p->st.allocated_bytes, sm, (int64_t)b->size);
	pt_inc2(p->st.active, sm, 1);
	pt_inc2(p->st.active_bytes, sm, (int64_t)b->size);
	pt_inc2(p->st.requested_bytes, sm, (int64_t)n);
	if (at_limit(p, b->size))
		pt_inc(&p->st.oversize_allocations, 1);
	return b;
}

/* try_mempool_fallback's choice: an ordinary request that found no new device memory takes a cached
 * block of a MemPool made with use_on_oom=True (in the order the pools came), never a new segment there.
 * Its lookup runs with expandable segments inactive (AllocParams(..., false)), so get_free_block
 * passes over blocks of expandable segments: under expandable_segments:True such a pool serves
 * nothing (mempool_flags__p110_exp on the H200 ran out of memory with 280 MiB free in it). */
static pblock *mempool_select(ptpol *p, uint64_t s, uint64_t stream, size_t *upto)
{
	for (size_t i = 0; i < p->npriv; i++) {
		privpool *pp = p->priv[i];
		if (!pp || !pp->use_on_oom)
			continue;
		ppool *pool = s <= PT_SMALL_SIZE ? &pp->small : &pp->large;
		pblock *b = bs_nfind(pool, stream, s);
		while (b && b->stream == stream && b->es)
			b = bs_next(pool, b);
		if (b && b->stream == stream && !oversize_refuses(p, b, s)) {
			*upto = i + 1;
			return b;
		}
	}
	*upto = p->npriv;
	return NULL;
}

/* mempool_select's side effect: each pool it looked in (those below *upto) counted a
 * get_free_block call, the age garbage collection reads. (The block found is then allocated as
 * any cached block: alloc_found_block.) */
static void mempool_apply(ptpol *p, uint64_t s, size_t upto)
{
	if (!gc_enabled(p))
		return;
	for (size_t i = 0; i < upto; i++) {
		privpool *pp = p->priv[i];
		if (pp && pp->use_on_oom)
			(s <= PT_SMALL_SIZE ? &pp->small : &pp->large)->gc_calls++;
	}
}

/* ---- policy interface ------------------------------------------------------------------- */

static int pt_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	uint64_t n = rq->size, stream = rq->stream;
	ptpol *p = (ptpol *)pol;
	uint64_t s = round_req(p, n);
	ppool *pool;
	if (__builtin_expect(AS_POOL_INDEX(rq->pool) != 0, 0)) {
		privpool *pp = private_pool(p, rq->pool);
		pool = s <= PT_SMALL_SIZE ? &pp->small : &pp->large;
	} else {
		pool = s <= PT_SMALL_SIZE ? &p->small : &p->large;
	}
	uint64_t alloc_size = pt_allocation_size(&p->c, s);
	/* Every size compared with max_split_size is a request's s, a block's or a segment's size;
	 * blocks lie within segments (expandable ones aside), and a segment is alloc_size of some
	 * request, at least its s: this maximum bounds them all (pt_same_run). */
	if (alloc_size > p->max_compared)
		p->max_compared = alloc_size;
	pblock *b = get_free_block(p, pool, stream, s);
	int in_pool = b != NULL;
	if (!b) {
		if (gc_enabled(p))
			garbage_collect(p);
		p->rejected = 0;
		b = alloc_block(p, pool, stream, s, alloc_size, 0);
		if (!b && p->rejected) /* malloc: a rejection skips the retry chain; no num_ooms, no oom entry */
			return 1;
		if (!b && !AS_POOL_INDEX(rq->pool)) {
			size_t upto;
			b = mempool_select(p, s, stream, &upto);
			mempool_apply(p, s, upto);
			in_pool = b != NULL;
		}
		if (!b && release_available_cached_blocks(p, pool, stream, s))
			b = alloc_block(p, pool, stream, s, alloc_size, 0);
		/* no flush while a capture or a MemPool routes requests (captures_underway is not empty):
		 * a request into a private pool is made in one (mempool__p110_exp on the H200) */
		if (!b && !AS_POOL_INDEX(rq->pool)) {
			release_cached_blocks(p);
			b = alloc_block(p, pool, stream, s, alloc_size, 1);
		}
		if (!b) {
			if (!p->rejected) /* a rejection in the chain's retries fails as one too */
				p->st.num_ooms++;
			return 1;
		}
	}
	b = alloc_found_block(p, b, s, n, stream, in_pool);
	*handle = b;
	*bsize = b->size;
	*addr = b->ptr;
	return 0;
}

/* An allocated block let go of (free_requested's part of a free): its waste and statistics. */
static inline __attribute__((always_inline)) void let_go(ptpol *p, pblock *b)
{
	waste_let_go(p, b);
	b->allocated = 0;
	if (p->lean)
		return;
	int sm = b->pool->is_small;
	pt_dec2(p->st.allocation, sm, 1);
	pt_dec2(p->st.allocated_bytes, sm, (int64_t)b->size);
	if (at_limit(p, b->size))
		pt_dec(&p->st.oversize_allocations, 1);
}

static void pt_free_requested(as_policy *pol, void *h)
{
	ptpol *p = (ptpol *)pol;
	pblock *b = h;
	let_go(p, b);
	p->w.pending_free += b->size - b->requested;
	b->pending = 1;
}

/* A free: free_requested (unless the request came earlier), then free_block. (Pending in
 * between: its waste share goes in and out of pending_free, which a direct free skips.) */
static void pt_free(as_policy *pol, void *h)
{
	ptpol *p = (ptpol *)pol;
	pblock *b = h;
	if (b->allocated)
		let_go(p, b);
	else
		p->w.pending_free -= b->size - b->requested;
	p->w.free_cached += b->size; /* (a pending or allocated block is mapped) */
	b->pending = 0;
	free_block(p, b);
}

/* What the fallback chain would do for this request, without doing it: the selects of pt_malloc's
 * stages in its order, into r (each select passing over what the ones before it picked). Returns
 * the stage reached: 0 served from the cache, a new segment or a MemPool's cached block without
 * releasing, 1 released by GC or the oversize release, 2 the full flush. r's blocks stay picked:
 * the caller clears them (pick_clear). */
static int predict(ptpol *p, uint64_t n, uint64_t stream, picks *r)
{
	uint64_t s = pt_round_size(&p->c, n);
	ppool *pool = s <= PT_SMALL_SIZE ? &p->small : &p->large;
	uint64_t alloc_size = pt_allocation_size(&p->c, s), cap = p->dev->capacity;
	if (lookup(p, pool, stream, s))
		return 0;
	uint64_t total = p->total_allocated, bytes;
	if (gc_enabled(p))
		total -= gc_select(p, r);
	int fits = !cap || total + alloc_size <= cap;
	size_t upto;
	if (!fits && mempool_select(p, s, stream, &upto))
		return r->n ? 1 : 0;
	if (!fits) {
		int done = oversize_select(p, pool, stream, s, r, &bytes);
		total -= bytes;
		/* (throw_on_cudamalloc_oom never rejects this retry: oversize blocks are whole segments, 2 MiB
		 * multiples of at least the key, so the release freed at least alloc_size, and every segment
		 * made passed the bound; a rejection of the first try returns before any release, and before
		 * the MemPool fallback: the capacity passed there, so predict found it fits) */
		fits = done && total + alloc_size <= cap;
	}
	if (fits)
		return r->n ? 1 : 0;
	flush_select(p, r);
	return 2;
}

static int pt_explains_release(ptpol *pol, uint64_t n, uint64_t stream, const uint64_t *sizes, size_t nsizes)
{
	picks r = { 0 };
	predict(pol, n, stream, &r);
	int same = r.n == nsizes;
	for (size_t i = 0; same && i < nsizes; i++)
		same = r.v[i].bytes == sizes[i];
	pick_clear(&r);
	free(r.v);
	return same;
}

static int pt_needs_flush(ptpol *pol, uint64_t n, uint64_t stream)
{
	picks r = { 0 };
	int stage = predict(pol, n, stream, &r);
	pick_clear(&r);
	free(r.v);
	return stage == 2;
}

static void pt_empty_cache(as_policy *pol)
{
	release_cached_blocks((ptpol *)pol);
}

static int cmp_u64p(const void *a, const void *b)
{
	const pblock *x = *(pblock *const *)a, *y = *(pblock *const *)b;
	return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

/* Segment heads in address order: a segment starts at a block with no prev; for expandable
 * segments, a snapshot segment is a maximal run of mapped blocks. */
static pblock **segment_heads(ptpol *p, size_t *count)
{
	size_t n = 0, cap = 64;
	pblock **v = xmalloc(cap * sizeof(*v));
	for (pblock *b = p->all; b; b = b->all_next) {
		int head = b->es ? (b->mapped && (!b->prev || !b->prev->mapped)) : !b->prev;
		if (!head)
			continue;
		if (n == cap) {
			cap *= 2;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n++] = b;
	}
	qsort(v, n, sizeof(*v), cmp_u64p);
	*count = n;
	return v;
}

static void pt_segments(ptpol *p, as_seg_cb cb, void *ctx)
{
	size_t n;
	pblock **heads = segment_heads(p, &n);
	as_segbuf sb = { 0 };
	for (size_t i = 0; i < n; i++) {
		as_seg_view v = { .addr = heads[i]->ptr, .stream = heads[i]->stream, .is_small = heads[i]->pool->is_small,
			.is_expandable = heads[i]->es != NULL };
		for (pblock *b = heads[i]; b && b->mapped; b = b->next)
			as_segbuf_push(&sb, b->size, b->allocated ? 1 : b->pending ? 2 : 0);
		as_segbuf_emit(&sb, &v, cb, ctx);
	}
	as_segbuf_free(&sb);
	free(heads);
}

static int pt_check(as_policy *pol, as_err *err)
{
	ptpol *p = (ptpol *)pol;
	uint64_t mapped = 0, alloc_bytes = 0;
	for (pblock *b = p->all; b; b = b->all_next) {
		if (b->next && b->ptr + b->size != b->next->ptr)
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: block 0x%" PRIx64 "+%" PRIu64 " does not end where its neighbour starts",
				b->ptr, b->size);
		if (b->next && b->next->prev != b)
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: broken neighbour links at 0x%" PRIx64, b->ptr);
		int is_free = !b->allocated && !b->pending;
		if (is_free && b->next && !b->next->allocated && !b->next->pending && b->next->mapped == b->mapped)
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: free neighbours 0x%" PRIx64 " and 0x%" PRIx64 " are not merged",
				b->ptr, b->next->ptr);
		as_fitnode *found = b->mapped ? as_fitset_find(&b->pool->blocks, b->stream, b->size, b->ptr) : NULL;
		if (is_free && b->mapped && found != &b->fit)
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: free block 0x%" PRIx64 " is missing from its pool", b->ptr);
		if (!is_free && b->mapped && found == &b->fit)
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: block 0x%" PRIx64 " in use but in the free pool", b->ptr);
		if (b->mapped)
			mapped += b->size;
		if (b->allocated)
			alloc_bytes += b->size;
	}
	if (mapped != p->total_allocated || (!p->lean && (int64_t)mapped != p->st.reserved_bytes[PT_ALL].current))
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: blocks cover %" PRIu64 " bytes but reserved_bytes is %" PRId64,
			mapped, p->st.reserved_bytes[PT_ALL].current);
	if (!p->lean && (int64_t)p->w.free_cached != p->st.reserved_bytes[PT_ALL].current - p->st.active_bytes[PT_ALL].current)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: free cached bytes %" PRIu64 " differ from reserved - active %" PRId64,
			p->w.free_cached, p->st.reserved_bytes[PT_ALL].current - p->st.active_bytes[PT_ALL].current);
	if (!p->lean && (int64_t)alloc_bytes != p->st.allocated_bytes[PT_ALL].current)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: allocated blocks sum to %" PRIu64 " but allocated_bytes is %" PRId64,
			alloc_bytes, p->st.allocated_bytes[PT_ALL].current);
	if (p->dev->reserved != p->total_allocated)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: device holds %" PRIu64 " bytes, allocator counts %" PRIu64,
			p->dev->reserved, p->total_allocated);
#define X(n) \
	if (!p->lean && p->st.n[PT_ALL].current != p->st.n[PT_SMALL].current + p->st.n[PT_LARGE].current) \
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: %s.all differs from small_pool + large_pool", #n);
	PT_STAT_ARRAYS(X)
#undef X
	as_waste w;
	waste_walk(p, &w);
#define X(n, d) \
	if (w.n != p->w.n) \
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch: waste %s is %" PRIu64 " by the blocks, %" PRIu64 " by the running sum", \
			#n, w.n, p->w.n);
	AS_WASTE_CATEGORIES(X)
#undef X
	return 0;
}

/* Free cached bytes = reserved - active (allocated or pending); the largest free block is the
 * largest of each stream's last block in the two pools: O(streams log n), not a walk of all blocks. */
/* Every BlockPool: 0 and 1 the default large and small, then each private pool's (NULL: none). */
static ppool *pt_pool_at(ptpol *p, size_t k)
{
	if (k < 2)
		return k ? &p->small : &p->large;
	privpool *pp = p->priv[(k - 2) / 2];
	return !pp ? NULL : (k & 1) ? &pp->small : &pp->large;
}

static void pt_free_stats(ptpol *p, uint64_t *largest, uint64_t *total)
{
	*largest = 0;
	*total = p->w.free_cached; /* = reserved_bytes.all - active_bytes.all (pt_check), kept when lean too */
	for (size_t k = 0; k < 2 + 2 * p->npriv; k++) {
		ppool *pk = pt_pool_at(p, k);
		if (!pk)
			continue;
		uint64_t m = as_fitset_largest(&pk->blocks);
		if (m > *largest)
			*largest = m;
	}
}

static void pt_waste(ptpol *p, as_waste *w)
{
	*w = p->w;
}

/* The waste attribution by a walk of every block (pt_check compares it with the running sums). */
static void waste_walk(ptpol *p, as_waste *w)
{
	memset(w, 0, sizeof(*w));
	for (pblock *b = p->all; b; b = b->all_next) {
		if (!b->mapped)
			continue;
		if (b->pending) {
			w->pending_free += b->size - b->requested; /* its requested bytes are still live */
		} else if (!b->allocated) {
			w->free_cached += b->size;
		} else {
			uint64_t r = pt_round_size(&p->c, b->requested);
			w->rounding += r - b->requested;
			if (at_limit(p, b->size))
				w->oversize += b->size - r;
			else
				w->unsplit += b->size - r;
		}
	}
}

/*
 * AS_Q_SAME_RUN: whether a replay with config would have been this one. max_split_size enters a
 * decision or a number (the oversize counters and waste, the summary's columns) only as the answer
 * of x >= max_split_size for a request's rounded size, a block's or segment's size, or the bytes
 * release_available_cached_blocks has freed so far (at_limit), and as the key of that function's
 * search, whose result is the same answers for the blocks on both sides of it (note_limit_search).
 * So, by induction over the events, a replay with any limit that answers every comparison this one
 * made alike, one in (ms_lo, ms_hi], makes the same decisions and the same comparisons: it is this
 * replay. Without a limit (PT_NO_LIMIT) release_available_cached_blocks and predict's copy of it do
 * not run at all; with one above every size this replay compared (max_compared) they find no block
 * at or above the limit and release nothing, as without one: so a run without a limit and one with
 * a limit above max_compared are alike too (expandable segments left out there: a mapped block can
 * outgrow any one request's segment).
 */
static int pt_same_run(const ptpol *p, const char *config)
{
	pt_conf c;
	as_err err = { 0, "" };
	if (pt_conf_parse(&c, config, &err))
		return 0;
	const pt_conf *a = &p->c;
	if (a->max_split_size != PT_NO_LIMIT && c.max_split_size != PT_NO_LIMIT) {
		if (c.max_split_size <= p->ms_lo || c.max_split_size > p->ms_hi)
			return 0;
	} else if (a->expandable || c.expandable || a->max_split_size <= p->max_compared ||
		   c.max_split_size <= p->max_compared) {
		return 0;
	}
	/* every other setting equal, byte for byte (pt_conf_parse zeroes the struct first, so a key
	 * added later is compared too, and its padding is equal) */
	c.max_split_size = a->max_split_size;
	return !memcmp(&c, a, sizeof c);
}

/* The optional queries (policy.h): statistics, segment map, fragmentation, waste, the
 * memory_summary() table, and what snapshot reconciliation asks (src/engine/reconcile.c). */
static int pt_query(as_policy *pol, int what, void *arg)
{
	ptpol *p = (ptpol *)pol;
	switch (what) {
	case AS_Q_SAME_RUN: {
		as_q_same *q = arg;
		q->answer = pt_same_run(p, q->config);
		return 0;
	}
	case AS_Q_LEAN:
		p->lean = 1;
		return 0;
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		if (p->lean)
			return AS_Q_UNKNOWN;
		/* reserved_bytes_by_private_pools, of each private pool that reserved memory (a stat of newer
		 * releases than 2.11, whose recordings have none: only under an explicit version:2.12 or newer,
		 * so that a run's memory_stats() keys stay 2.11's by default) */
		const pt_stat **res = xmalloc((p->npriv + 1) * sizeof(*res));
		uint32_t *ids = xmalloc((p->npriv + 1) * sizeof(*ids));
		size_t nres = 0;
		for (size_t i = 0; i < p->npriv && p->c.version_given && p->c.version >= 12; i++)
			if (p->priv[i] && p->priv[i]->reserved[PT_ALL].allocated) {
				res[nres] = p->priv[i]->reserved;
				ids[nres++] = (uint32_t)(i + 1);
			}
		pt_stats_emit_pools(&p->st, res, ids, nres, q->cb, q->ctx);
		free(res);
		free(ids);
		return 0;
	}
	case AS_Q_SEGMENTS: {
		as_q_segments *q = arg;
		pt_segments(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_FREE_STATS: {
		as_q_free_stats *q = arg;
		pt_free_stats(p, &q->largest, &q->total);
		return 0;
	}
	case AS_Q_WASTE:
		pt_waste(p, arg);
		return 0;
	case AS_Q_SUMMARY:
		if (p->lean)
			return AS_Q_UNKNOWN;
		pt_memory_summary(&p->st, 0, arg);
		return 0;
	case AS_Q_FIT_VALUES: {
		as_q_fit_values *q = arg;
		if (strcmp(q->option, "max_split_size_mb"))
			return AS_Q_UNKNOWN;
		q->values = "none,20..2048:x2";
		return 0;
	}
	case AS_Q_EXPLAINS_RELEASE: {
		as_q_release *q = arg;
		/* a private pool's request never flushes (no flush while a capture routes requests) */
		q->answer = !AS_POOL_INDEX(q->rq->pool) && pt_explains_release(p, q->rq->size, q->rq->stream, q->sizes, q->n);
		return 0;
	}
	case AS_Q_NEEDS_FLUSH: {
		as_q_flush *q = arg;
		q->answer = !AS_POOL_INDEX(q->rq->pool) && pt_needs_flush(p, q->rq->size, q->rq->stream);
		return 0;
	}
	case AS_Q_FLUSH_HOOK: {
		as_q_hook *q = arg;
		p->flush_hook = q->hook;
		p->flush_ctx = q->ctx;
		return 0;
	}
	case AS_Q_ROUND: { /* round_size(); 0 counts as 0 (a lower bound whatever a 0-byte request gets) */
		as_q_round *q = arg;
		q->size = q->size ? pt_round_size(&p->c, q->size) : 0;
		q->granule = PT_MIN_BLOCK; /* without roundup_power2_divisions, round_size is 512-byte rounding */
		for (int i = 0; i < 16; i++)
			if (p->c.divisions[i] > 1)
				q->granule = 0;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void pt_destroy(as_policy *pol)
{
	ptpol *p = (ptpol *)pol;
	for (size_t k = 0; k < 2 + 2 * p->npriv; k++) {
		ppool *pk = pt_pool_at(p, k);
		if (pk)
			as_fitset_destroy(&pk->blocks);
	}
	for (size_t i = 0; i < p->nslabs; i++)
		free(p->slabs[i]);
	free(p->slabs);
	for (expseg *e = p->segs, *n; e; e = n) {
		n = e->next;
		free(e->handles);
		free(e);
	}
	for (size_t i = 0; i < p->npriv; i++)
		free(p->priv[i]);
	free(p->priv);
	free(p->scratch);
	free(p->pk.v);
	free(p);
}

static int pt_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_pytorch;
	ptpol *p = xcalloc(1, sizeof(*p));
	if (pt_conf_parse(&p->c, config, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_pytorch;
	p->dev = dev;
	p->ctr = ctr;
	p->ms_hi = UINT64_MAX;
	p->plain_round = 1;
	for (int i = 0; i < 16; i++)
		if (p->c.divisions[i] > 1)
			p->plain_round = 0;
	as_dev_set_capacity_by_policy(dev); /* alloc_block's fraction check, as PyTorch's */
	pool_init(&p->large, &p->small, p->c.expandable);
	p->device_total = dev->total_memory ? dev->total_memory : AS_H200_TOTAL_MEMORY; /* sizes the VA reservation */
	p->st.max_split_size = p->c.max_split_size == PT_NO_LIMIT ? -1 : (int64_t)p->c.max_split_size;
	p->st.emit_rejections = p->c.throw_on_oom;
	*out = &p->base;
	return 0;
}

const as_policy_ops as_policy_pytorch = {
	.name = "pytorch",
	.summary = "PyTorch 2.11 native CUDA caching allocator; -c takes a PYTORCH_CUDA_ALLOC_CONF string",
	.opts = pt_opts,
	.flags = AS_CAP_STATS | AS_CAP_SEGMENTS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_SUMMARY | AS_CAP_RECONCILE | AS_CAP_ROUND,
	.create = pt_create,
	.malloc = pt_malloc,
	.free_requested = pt_free_requested,
	.free = pt_free,
	.empty_cache = pt_empty_cache,
	.pool_release = pt_pool_release,
	.check = pt_check,
	.query = pt_query,
	.prepare = as_pytorch_prepare,
	.same_settings = as_pytorch_same_settings,
	.destroy = pt_destroy,
};

/*
 * rmm_arena.c - RMM's arena_memory_resource (rapidsai/rmm v26.06.00, commit
 * 871841839b94c67a61c8ed0d31feecfd92a07156: cpp/include/rmm/mr/detail/arena.hpp,
 * cpp/src/mr/detail/arena_memory_resource_impl.cpp).
 *
 * - One global arena: a single upstream allocation of arena_size bytes (default: half of the free
 *   device memory, aligned down to 256), cut into superblocks. A superblock is at least 1 MiB
 *   (superblock::minimum_size) and keeps its own address-ordered set of free blocks.
 * - Requests round up to 256 bytes (RMM_ARENA_USE_SIZE_CLASSES is off in RMM's build). A request
 *   goes to an arena: the per-thread arena of the requesting thread when the stream is the
 *   per-thread default stream (0x2, or 0 with `ptds`), else the arena of its stream.
 * - Above 1 MiB (global_arena::handles) the global arena serves the request directly: the first
 *   superblock in address order with a free block that fits; an empty one is split at
 *   max(1 MiB, size) when at least 1 MiB would remain; the block is the superblock's first fit, and
 *   the superblock stays in the global arena.
 * - Up to 1 MiB: the first superblock of the arena (address order) with a free block that fits,
 *   first fit inside it; else a superblock acquired from the global arena (the same first fit over
 *   the global superblocks, split at 1 MiB when empty and large enough) moves into the arena.
 * - A free coalesces the block in its superblock. A superblock in an arena stays there, even empty;
 *   an empty superblock in the global arena merges with empty neighbours.
 * - A request that fails defragments (every thread and stream arena hands all its superblocks back
 *   to the global arena, where empty neighbours merge) and tries once more, then fails
 *   (rmm::out_of_memory "No room in arena").
 * - Not modelled: a thread's exit (its arena_cleaner hands its superblocks back; a log does not say
 *   when a thread ends), the synchronisation of streams and devices (no time in the simulation).
 * - RMM never returns the arena to the device before the resource is destroyed, and defragment() is
 *   private (arena_memory_resource.hpp): an empty_cache event does nothing by default (an RMM program
 *   has no such call); empty_cache_releases:True (allocsim's what-if: the resource re-created when
 *   nothing is allocated) defragments, and releases the whole arena when no block is allocated; the next request then
 *   allocates it again.
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Both trees are augmented (as src/device/device_sim.c's): a free block's `sub` is the largest free
 * block in its subtree, a superblock's the largest free block of any superblock in its subtree, kept
 * by the rotations (RB_AUGMENT) and by fix_up, so RMM's address-ordered first fits (the first free
 * block, the first superblock with one that fits) take O(log n) instead of a walk: a walk over the
 * global arena's superblocks at every request was quadratic (found by fuzz_native). */
struct afree;
struct sblk;
static void afree_aug(struct afree *f);
static void sblk_aug(struct sblk *s);
#define RB_AUGMENT(x) _Generic((x), struct afree *: afree_aug, struct sblk *: sblk_aug)(x)
#include "util/tree.h"
#include <sys/queue.h>

#define RMM_ALIGN 256ULL
#define SB_MIN (1ULL << 20)              /* superblock::minimum_size */
#define STREAM_PER_THREAD 2ULL

typedef struct ra_conf {
	uint64_t arena_size;
	double arena_pct;
	int ptds, empty_cache_releases;
} ra_conf;

typedef struct afree {
	uint64_t addr, size;
	uint64_t sub;                        /* the largest size in its subtree */
	RB_ENTRY(afree) rb;
} afree;
static int afree_cmp(const afree *a, const afree *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_HEAD(afrees, afree);
RB_GENERATE_STATIC(afrees, afree, rb, afree_cmp);

struct aarena;
typedef struct sblk {
	uint64_t addr, size;
	struct afrees free;                  /* free blocks, address order */
	size_t nfree;
	uint64_t free_bytes, max_free;       /* max_free: the root's sub */
	uint64_t sub;                        /* the largest max_free in its subtree of a superblock set */
	struct aarena *owner;                /* NULL: the global arena */
	int in_set;
	RB_ENTRY(sblk) rb;
	size_t live;                         /* allocated blocks in it */
} sblk;
static int sblk_cmp(const sblk *a, const sblk *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_HEAD(sblks, sblk);
RB_GENERATE_STATIC(sblks, sblk, rb, sblk_cmp);

static void afree_aug(afree *f)
{
	uint64_t m = f->size;
	afree *c;
	if ((c = RB_LEFT(f, rb)) && c->sub > m)
		m = c->sub;
	if ((c = RB_RIGHT(f, rb)) && c->sub > m)
		m = c->sub;
	f->sub = m;
}

static void sblk_aug(sblk *s)
{
	uint64_t m = s->max_free;
	sblk *c;
	if ((c = RB_LEFT(s, rb)) && c->sub > m)
		m = c->sub;
	if ((c = RB_RIGHT(s, rb)) && c->sub > m)
		m = c->sub;
	s->sub = m;
}

static void afree_fix(afree *f)
{
	for (; f; f = RB_PARENT(f, rb))
		afree_aug(f);
}

static void sblk_fix(sblk *s)
{
	for (; s; s = RB_PARENT(s, rb))
		sblk_aug(s);
}

/* insert and remove with the augmentation kept up to the root */
static void afree_insert(struct afrees *t, afree *f)
{
	RB_INSERT(afrees, t, f);
	afree_fix(f);
}

static void afree_remove(struct afrees *t, afree *f)
{
	afree *up = RB_PARENT(f, rb);
	RB_REMOVE(afrees, t, f);
	afree_fix(up ? up : RB_ROOT(t));
}

static void sblk_insert(struct sblks *t, sblk *s)
{
	RB_INSERT(sblks, t, s);
	s->in_set = 1;
	sblk_fix(s);
}

static void sblk_remove(struct sblks *t, sblk *s)
{
	sblk *up = RB_PARENT(s, rb);
	RB_REMOVE(sblks, t, s);
	s->in_set = 0;
	sblk_fix(up ? up : RB_ROOT(t));
}

/* The first (lowest-address) free block of at least size bytes. */
static afree *afree_first_fit(struct afrees *t, uint64_t size)
{
	afree *f = RB_ROOT(t);
	if (!f || f->sub < size)
		return NULL;
	for (;;) {
		afree *l = RB_LEFT(f, rb);
		if (l && l->sub >= size)
			f = l;
		else if (f->size >= size)
			return f;
		else
			f = RB_RIGHT(f, rb);
	}
}

/* The first superblock of a set with a free block of at least size bytes. */
static sblk *sblk_first_fit(struct sblks *t, uint64_t size)
{
	sblk *s = RB_ROOT(t);
	if (!s || s->sub < size)
		return NULL;
	for (;;) {
		sblk *l = RB_LEFT(s, rb);
		if (l && l->sub >= size)
			s = l;
		else if (s->max_free >= size)
			return s;
		else
			s = RB_RIGHT(s, rb);
	}
}

typedef struct aarena {
	int per_thread;
	uint64_t key;                        /* thread, or stream */
	struct sblks set;
	size_t n;
} aarena;

typedef struct aalloc {
	uint64_t addr, size, req;
	sblk *sb;
	LIST_ENTRY(aalloc) link; /* the allocated blocks */
} aalloc;

typedef struct rmm_arena {
	as_policy base;
	ra_conf c;
	as_device *dev;
	as_counters *ctr;
	uint64_t size;                       /* the global arena's size */
	uint64_t base_addr;                  /* its upstream block */
	int have_upstream;
	struct sblks global;
	size_t nglobal;
	aarena **arenas;
	size_t narenas, caparenas;
	LIST_HEAD(, aalloc) live;
	uint64_t used, rounding, peak_used;
	uint64_t defrags, inits;
	aalloc zero;
} rmm_arena;

static int parse_arena_size(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	ra_conf *c = conf;
	size_t n = strlen(val);
	if (n && val[n - 1] == '%') {
		char *end;
		double v = strtod(val, &end);
		if (end != val + n - 1 || end == val || !(v > 0 && v <= 100))
			return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a percentage above 0%% and at most 100%%", d->name, val);
		c->arena_pct = v;
		c->arena_size = 0;
		return 0;
	}
	c->arena_pct = 0;
	return as_opt_parse_size(conf, d, val, err);
}

#define OFF(f) offsetof(ra_conf, f)
static const as_optdesc ra_opts[] = {
	{ "arena_size", "size|N%", "50%", "the global arena (one upstream allocation, aligned down to 256): bytes, or N% of the free device memory (RMM's default: half)", parse_arena_size, OFF(arena_size) },
	{ "ptds", "True|False", "False", "built with CUDA_API_PER_THREAD_DEFAULT_STREAM: stream 0 uses per-thread arenas too", as_opt_parse_bool, OFF(ptds) },
	{ "empty_cache_releases", "True|False", "False", "an empty_cache event defragments and releases the arena when nothing is allocated (RMM has no such call, so by default it does nothing)", as_opt_parse_bool, OFF(empty_cache_releases) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

/* ---- superblocks (arena::superblock) ---- */

/* s's largest free block changed: its own value, then the set it is in */
static void sb_refresh(sblk *s)
{
	afree *r = RB_ROOT(&s->free);
	s->max_free = r ? r->sub : 0;
	if (s->in_set)
		sblk_fix(s);
}

static sblk *sb_new(uint64_t addr, uint64_t size)
{
	sblk *s = xcalloc(1, sizeof(*s));
	s->addr = addr;
	s->size = size;
	RB_INIT(&s->free);
	afree *f = xcalloc(1, sizeof(*f));
	f->addr = addr;
	f->size = size;
	afree_insert(&s->free, f);
	s->nfree = 1;
	s->free_bytes = s->max_free = size;
	return s;
}

static void sb_del(sblk *s)
{
	afree *f;
	while ((f = RB_MIN(afrees, &s->free))) { /* removed first: a freed node's parent links are gone */
		afree_remove(&s->free, f);
		free(f);
	}
	free(s);
}

static int sb_empty(const sblk *s)
{
	return s->nfree == 1 && s->free_bytes == s->size;
}

/* superblock::first_fit: the first free block (address order) that fits, split at size. */
static int sb_first_fit(sblk *s, uint64_t size, uint64_t *addr)
{
	afree *f = afree_first_fit(&s->free, size);
	if (!f)
		return 0;
	*addr = f->addr;
	if (f->size > size) {
		f->addr += size; /* the tail keeps the block's place in the order */
		f->size -= size;
		afree_fix(f);
	} else {
		afree_remove(&s->free, f);
		free(f);
		s->nfree--;
	}
	s->free_bytes -= size;
	sb_refresh(s);
	return 1;
}

/* superblock::coalesce */
static void sb_coalesce(sblk *s, uint64_t addr, uint64_t size)
{
	afree key = { .addr = addr };
	afree *next = RB_NFIND(afrees, &s->free, &key);
	afree *prev = next ? RB_PREV(afrees, &s->free, next) : RB_MAX(afrees, &s->free);
	int mp = prev && prev->addr + prev->size == addr;
	int mn = next && addr + size == next->addr;
	if (mp && mn) {
		prev->size += size + next->size;
		afree_remove(&s->free, next);
		free(next);
		afree_fix(prev);
		s->nfree--;
	} else if (mp) {
		prev->size += size;
		afree_fix(prev);
	} else if (mn) {
		next->addr = addr;
		next->size += size;
		afree_fix(next);
	} else {
		afree *f = xcalloc(1, sizeof(*f));
		f->addr = addr;
		f->size = size;
		afree_insert(&s->free, f);
		s->nfree++;
	}
	s->free_bytes += size;
	sb_refresh(s);
}

/* ---- the global arena (arena::global_arena) ---- */

static void global_insert(rmm_arena *p, sblk *s)
{
	s->owner = NULL;
	sblk_insert(&p->global, s);
	p->nglobal++;
}

static void global_remove(rmm_arena *p, sblk *s)
{
	sblk_remove(&p->global, s);
	p->nglobal--;
}

/* global_arena::coalesce: an empty superblock merges with empty contiguous neighbours. */
static void global_coalesce(rmm_arena *p, sblk *s)
{
	sblk *next = RB_NFIND(sblks, &p->global, s);
	sblk *prev = next ? RB_PREV(sblks, &p->global, next) : RB_MAX(sblks, &p->global);
	int mp = prev && sb_empty(prev) && sb_empty(s) && prev->addr + prev->size == s->addr;
	int mn = next && sb_empty(next) && sb_empty(s) && s->addr + s->size == next->addr;
	uint64_t addr = s->addr, size = s->size;
	if (!mp && !mn) {
		global_insert(p, s);
		return;
	}
	if (mp) {
		global_remove(p, prev);
		addr = prev->addr;
		size += prev->size;
		sb_del(prev);
	}
	if (mn) {
		global_remove(p, next);
		size += next->size;
		sb_del(next);
	}
	sb_del(s);
	global_insert(p, sb_new(addr, size));
}

/* global_arena::first_fit: the first superblock that fits, removed from the global arena; an
 * empty one is split at max(1 MiB, size) when 1 MiB or more would remain. */
static sblk *global_first_fit(rmm_arena *p, uint64_t size)
{
	sblk *s = sblk_first_fit(&p->global, size);
	if (!s)
		return NULL;
	global_remove(p, s);
	uint64_t min = size > SB_MIN ? size : SB_MIN;
	if (sb_empty(s) && s->size >= min + SB_MIN) {
		sblk *tail = sb_new(s->addr + min, s->size - min);
		sblk *head = sb_new(s->addr, min);
		sb_del(s);
		global_insert(p, tail);
		return head;
	}
	return s;
}

/* ---- arenas ---- */

static aarena *arena_for(rmm_arena *p, uint64_t stream, uint64_t thread)
{
	int pt = stream == STREAM_PER_THREAD || (p->c.ptds && stream == 0);
	uint64_t key = pt ? thread : stream;
	for (size_t i = 0; i < p->narenas; i++)
		if (p->arenas[i]->per_thread == pt && p->arenas[i]->key == key)
			return p->arenas[i];
	AS_GROW(p->arenas, p->narenas, p->caparenas, 8);
	aarena *a = xcalloc(1, sizeof(*a));
	a->per_thread = pt;
	a->key = key;
	RB_INIT(&a->set);
	p->arenas[p->narenas++] = a;
	return a;
}

static void arena_insert(aarena *a, sblk *s)
{
	s->owner = a;
	sblk_insert(&a->set, s);
	a->n++;
}

/* arena::allocate_sync (and global_arena::allocate_sync above 1 MiB): the block's superblock, or NULL. */
static sblk *arena_alloc(rmm_arena *p, aarena *a, uint64_t size, uint64_t *addr)
{
	if (size > SB_MIN) { /* global_arena::handles */
		sblk *s = global_first_fit(p, size);
		if (!s)
			return NULL;
		sb_first_fit(s, size, addr);
		global_insert(p, s);
		return s;
	}
	sblk *s = sblk_first_fit(&a->set, size); /* arena::first_fit */
	if (s) {
		sb_first_fit(s, size, addr);
		return s;
	}
	s = global_first_fit(p, size); /* expand_arena: global_arena::acquire */
	if (!s)
		return NULL;
	sb_first_fit(s, size, addr);
	arena_insert(a, s);
	return s;
}

/* arena_memory_resource_impl::defragment: every arena cleaned into the global arena. */
static void defragment(rmm_arena *p)
{
	p->defrags++;
	for (size_t i = 0; i < p->narenas; i++) {
		aarena *a = p->arenas[i];
		sblk *s, *ns;
		RB_FOREACH_SAFE(s, sblks, &a->set, ns) {
			sblk_remove(&a->set, s);
			a->n--;
			global_coalesce(p, s);
		}
	}
}

static int arena_init(rmm_arena *p)
{
	uint64_t addr;
	if (as_dev_alloc(p->dev, p->size, 0, &addr))
		return 1;
	p->base_addr = addr;
	p->have_upstream = 1;
	p->inits++;
	global_insert(p, sb_new(addr, p->size));
	return 0;
}

static int ra_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_rmm_arena;
	rmm_arena *p = xcalloc(1, sizeof(*p));
	LIST_INIT(&p->live);
	if (as_conf_defaults(ra_opts, &p->c, err) || as_conf_parse(config, ra_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_rmm_arena;
	p->dev = dev;
	p->ctr = ctr;
	RB_INIT(&p->global);
	/* default_size(): free / 2; an explicit size; either aligned down to 256 */
	uint64_t size = p->c.arena_pct == 50 ? as_dev_mem_free(dev) / 2
		: p->c.arena_pct > 0 ? (uint64_t)((double)as_dev_mem_free(dev) * (p->c.arena_pct / 100.0)) : p->c.arena_size;
	p->size = size / RMM_ALIGN * RMM_ALIGN;
	if (p->size < SB_MIN) {
		free(p);
		return as_fail(err, AS_EXIT_USAGE, "rmm-arena: Arena size smaller than minimum superblock size (%" PRIu64 " < 1 MiB)", size);
	}
	if (arena_init(p)) {
		free(p);
		return as_fail(err, AS_EXIT_USAGE, "rmm-arena: the arena of %" PRIu64 " bytes does not fit the device (rmm::out_of_memory at construction)", size);
	}
	*out = &p->base;
	return 0;
}

static int ra_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	rmm_arena *p = (rmm_arena *)pol;
	if (rq->size == 0) {
		*handle = &p->zero;
		*bsize = 0;
		*addr = 0;
		return 0;
	}
	if (rq->size > UINT64_MAX - RMM_ALIGN)
		return 1;
	uint64_t size = (rq->size + RMM_ALIGN - 1) / RMM_ALIGN * RMM_ALIGN;
	if (!p->have_upstream && arena_init(p))
		return 1;
	aarena *a = arena_for(p, rq->stream, rq->thread);
	sblk *s = arena_alloc(p, a, size, addr);
	if (!s) {
		defragment(p);
		s = arena_alloc(p, a, size, addr);
		if (!s)
			return 1;
	}
	aalloc *h = xmalloc(sizeof(*h));
	h->addr = *addr;
	h->size = size;
	h->req = rq->size;
	h->sb = s;
	s->live++;
	LIST_INSERT_HEAD(&p->live, h, link);
	p->used += size;
	p->rounding += size - rq->size;
	if (p->used > p->peak_used)
		p->peak_used = p->used;
	*handle = h;
	*bsize = size;
	return 0;
}

/* deallocate: the block's superblock, wherever it is now (an arena's, or the global arena's, after a
 * defragmentation or a direct allocation), coalesces it; an emptied global superblock merges. */
static void ra_free(as_policy *pol, void *hv)
{
	rmm_arena *p = (rmm_arena *)pol;
	aalloc *h = hv;
	if (h == &p->zero)
		return;
	sblk *s = h->sb;
	s->live--;
	sb_coalesce(s, h->addr, h->size);
	if (!s->owner && sb_empty(s)) {
		global_remove(p, s);
		global_coalesce(p, s);
	}
	LIST_REMOVE(h, link);
	p->used -= h->size;
	p->rounding -= h->size - h->req;
	free(h);
}

static void ra_empty_cache(as_policy *pol)
{
	rmm_arena *p = (rmm_arena *)pol;
	if (!p->c.empty_cache_releases || !p->have_upstream)
		return;
	defragment(p);
	sblk *s = RB_MIN(sblks, &p->global);
	if (!LIST_EMPTY(&p->live) || p->nglobal != 1 || !sb_empty(s) || s->size != p->size)
		return;
	global_remove(p, s);
	sb_del(s);
	as_dev_free(p->dev, p->base_addr, p->size, 0);
	p->have_upstream = 0;
}

/* the augmented values recomputed: 1 when every node's sub is right */
static int afree_sub_ok(const afree *f, uint64_t *m)
{
	uint64_t l = 0, r = 0;
	if (!f) {
		*m = 0;
		return 1;
	}
	int good = afree_sub_ok(RB_LEFT(f, rb), &l) & afree_sub_ok(RB_RIGHT(f, rb), &r);
	*m = f->size > l ? f->size : l;
	*m = r > *m ? r : *m;
	return good && f->sub == *m;
}

static int sblk_sub_ok(const sblk *s, uint64_t *m)
{
	uint64_t l = 0, r = 0;
	if (!s) {
		*m = 0;
		return 1;
	}
	int good = sblk_sub_ok(RB_LEFT(s, rb), &l) & sblk_sub_ok(RB_RIGHT(s, rb), &r);
	*m = s->max_free > l ? s->max_free : l;
	*m = r > *m ? r : *m;
	return good && s->sub == *m && s->in_set;
}

static int ra_check(as_policy *pol, as_err *err)
{
	rmm_arena *p = (rmm_arena *)pol;
	uint64_t total = 0, fr = 0, used = 0, rounding = 0, end = p->base_addr;
	/* every superblock, in address order, from the global arena and every arena */
	size_t n = p->nglobal;
	for (size_t i = 0; i < p->narenas; i++)
		n += p->arenas[i]->n;
	sblk **v = xmalloc((n + 1) * sizeof(*v));
	size_t k = 0;
	sblk *s;
	RB_FOREACH(s, sblks, &p->global)
		v[k++] = s;
	for (size_t i = 0; i < p->narenas; i++)
		RB_FOREACH(s, sblks, &p->arenas[i]->set)
			v[k++] = s;
	int rc = 0;
	if (k != n)
		rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: %zu superblocks found, the counts say %zu", k, n);
	for (size_t i = 1; i < k && !rc; i++) /* insertion sort by address: superblocks are few */
		for (size_t j = i; j > 0 && v[j - 1]->addr > v[j]->addr; j--) {
			sblk *t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	for (size_t i = 0; i < k && !rc; i++) {
		s = v[i];
		if (s->addr != end || s->size < SB_MIN)
			rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: superblock 0x%" PRIx64 " (%" PRIu64 " bytes) does not tile the arena", s->addr, s->size);
		end = s->addr + s->size;
		uint64_t b = 0, m = 0, last = s->addr;
		size_t nf = 0;
		afree *f, *prev = NULL;
		RB_FOREACH(f, afrees, &s->free) {
			if (f->size == 0 || f->addr < last || f->addr + f->size > s->addr + s->size || (prev && prev->addr + prev->size == f->addr))
				rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: free block 0x%" PRIx64 " is outside its superblock, overlaps or is not coalesced", f->addr);
			last = f->addr + f->size;
			b += f->size;
			m = f->size > m ? f->size : m;
			nf++;
			prev = f;
		}
		uint64_t am;
		if (!rc && !afree_sub_ok(RB_ROOT(&s->free), &am))
			rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: superblock 0x%" PRIx64 ": its free-block tree's largest sizes are stale", s->addr);
		if (!rc && (b != s->free_bytes || m != s->max_free || nf != s->nfree))
			rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: superblock 0x%" PRIx64 " counts disagree with its free blocks", s->addr);
		if (!rc && !s->owner && sb_empty(s) && i + 1 < k && !v[i + 1]->owner && sb_empty(v[i + 1]) && v[i + 1]->addr == end)
			rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: empty global superblocks at 0x%" PRIx64 " are not merged", s->addr);
		total += s->size;
		fr += b;
	}
	free(v);
	uint64_t sm;
	if (!rc && !sblk_sub_ok(RB_ROOT(&p->global), &sm))
		rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: the global arena's superblock tree is stale");
	for (size_t i = 0; i < p->narenas && !rc; i++)
		if (!sblk_sub_ok(RB_ROOT(&p->arenas[i]->set), &sm))
			rc = as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: an arena's superblock tree is stale");
	if (rc)
		return rc;
	aalloc *h;
	LIST_FOREACH(h, &p->live, link) {
		used += h->size;
		rounding += h->size - h->req;
	}
	uint64_t want = p->have_upstream ? p->size : 0;
	if (total != want || fr + used != total || used != p->used || rounding != p->rounding || p->dev->reserved != want)
		return as_fail(err, AS_EXIT_SOFTWARE, "rmm-arena: superblocks hold %" PRIu64 " bytes (arena %" PRIu64 ", device %" PRIu64 "), free %" PRIu64 " + used %" PRIu64 " (counted %" PRIu64 ")",
			total, want, p->dev->reserved, fr, used, p->used);
	return 0;
}

static void ra_stats(rmm_arena *p, as_stat_cb cb, void *ctx)
{
	size_t ns = p->nglobal, threads = 0, streams = 0;
	for (size_t i = 0; i < p->narenas; i++) {
		ns += p->arenas[i]->n;
		if (p->arenas[i]->per_thread)
			threads++;
		else
			streams++;
	}
	cb(ctx, "arena_size", (int64_t)p->size);
	cb(ctx, "used_bytes", (int64_t)p->used);
	cb(ctx, "peak_used_bytes", (int64_t)p->peak_used);
	cb(ctx, "superblocks", (int64_t)ns);
	cb(ctx, "global_superblocks", (int64_t)p->nglobal);
	cb(ctx, "thread_arenas", (int64_t)threads);
	cb(ctx, "stream_arenas", (int64_t)streams);
	cb(ctx, "defragmentations", (int64_t)p->defrags);
	cb(ctx, "upstream_allocations", (int64_t)p->inits);
}

/* One segment: the arena's upstream allocation, its free and allocated blocks in address order. */
typedef struct ablk {
	uint64_t addr, size;
	int state;
} ablk;
static int ablk_cmp(const void *a, const void *b)
{
	const ablk *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void ra_segments(rmm_arena *p, as_seg_cb cb, void *ctx)
{
	if (!p->have_upstream)
		return;
	size_t n = 0, cap = 64;
	ablk *v = xmalloc(cap * sizeof(*v));
	sblk *s;
	afree *f;
	for (size_t i = 0; i <= p->narenas; i++) {
		struct sblks *set = i < p->narenas ? &p->arenas[i]->set : &p->global;
		RB_FOREACH(s, sblks, set)
			RB_FOREACH(f, afrees, &s->free) {
				AS_GROW(v, n, cap, 1);
				v[n++] = (ablk){ f->addr, f->size, 0 };
			}
	}
	aalloc *h;
	LIST_FOREACH(h, &p->live, link) {
		AS_GROW(v, n, cap, 1);
		v[n++] = (ablk){ h->addr, h->size, 1 };
	}
	qsort(v, n, sizeof(*v), ablk_cmp);
	as_segbuf b = { 0 };
	for (size_t i = 0; i < n; i++)
		as_segbuf_push(&b, v[i].size, v[i].state);
	as_seg_view view = { .addr = p->base_addr, .size = p->size };
	as_segbuf_emit(&b, &view, cb, ctx);
	as_segbuf_free(&b);
	free(v);
}

static int ra_query(as_policy *pol, int what, void *arg)
{
	rmm_arena *p = (rmm_arena *)pol;
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		ra_stats(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_SEGMENTS: {
		as_q_segments *q = arg;
		ra_segments(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_FREE_STATS: {
		as_q_free_stats *q = arg;
		sblk *r = RB_ROOT(&p->global);
		q->largest = r ? r->sub : 0;
		for (size_t i = 0; i < p->narenas; i++)
			if ((r = RB_ROOT(&p->arenas[i]->set)) && r->sub > q->largest)
				q->largest = r->sub;
		q->total = (p->have_upstream ? p->size : 0) - p->used;
		return 0;
	}
	case AS_Q_WASTE: {
		as_waste *w = arg;
		memset(w, 0, sizeof(*w));
		w->rounding = p->rounding;
		w->free_cached = (p->have_upstream ? p->size : 0) - p->used;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void ra_destroy(as_policy *pol)
{
	rmm_arena *p = (rmm_arena *)pol;
	sblk *s;
	while ((s = RB_MIN(sblks, &p->global))) {
		sblk_remove(&p->global, s);
		sb_del(s);
	}
	for (size_t i = 0; i < p->narenas; i++) {
		while ((s = RB_MIN(sblks, &p->arenas[i]->set))) {
			sblk_remove(&p->arenas[i]->set, s);
			sb_del(s);
		}
		free(p->arenas[i]);
	}
	aalloc *h, *nh;
	LIST_FOREACH_SAFE(h, &p->live, link, nh)
		free(h);
	free(p->arenas);
	free(p);
}

const as_policy_ops as_policy_rmm_arena = {
	.name = "rmm-arena",
	.summary = "RMM 26.06's arena_memory_resource: one global arena of superblocks, per-thread (0x2 stream) and per-stream arenas, first fit, defragment on failure",
	.opts = ra_opts,
	.flags = AS_CAP_STATS | AS_CAP_SEGMENTS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_NO_INFERRED_EMPTY | AS_CAP_FREE_AT_REQUEST,
	.create = ra_create,
	.malloc = ra_malloc,
	.free = ra_free,
	.empty_cache = ra_empty_cache,
	.check = ra_check,
	.query = ra_query,
	.destroy = ra_destroy,
};

/* optimal_place.c - the offline placement of a trace's allocations (optimal.h): the peak-live-bytes
 * bound, the size-decreasing first-fit heuristic and a branch-and-bound search for small traces.
 * Written here because no library solves dynamic storage allocation (GSL and libbsd have nothing
 * of the kind; XLA's heap simulator, whose GlobalDecreasingSizeBestFitHeap the heuristic follows,
 * is C++ inside a compiler). */
#include "policies/optimal.h"
#include "util/common.h"
#include "util/tree.h"
#include "util/work.h"
#include <stdlib.h>
#include <string.h>

static int overlap(const opt_item *a, const opt_item *b)
{
	return a->start < b->end && b->start < a->end;
}

/* ---- the bound: a sweep over allocations (in start order) and frees (sorted by end) ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t opt_clique_bound(const opt_item *v, size_t n)
{
	/* (end, size) pairs sorted by end; the k-th allocation comes before every free at index >= its start */
	uint64_t *ends = xmalloc((n + 1) * 2 * sizeof(uint64_t));
	size_t nd = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].end != UINT64_MAX) {
			ends[2 * nd] = v[i].end;
			ends[2 * nd + 1] = v[i].size;
			nd++;
		}
	qsort(ends, nd, 2 * sizeof(uint64_t), cmp_u64);
	uint64_t cur = 0, peak = 0;
	size_t f = 0;
	for (size_t a = 0; a < n; a++) {
		while (f < nd && ends[2 * f] <= v[a].start)
			cur -= ends[2 * f++ + 1];
		cur += v[a].size;
		if (cur > peak)
			peak = cur;
	}
	free(ends);
	return peak;
}

/* ---- the heuristic ---- */

/* The items placed so far that are live when an item starts: item j is live at the starts of the
 * items j+1 .. r_j - 1 (r_j: the first item starting at or after j's end), an index range kept in
 * the O(log n) nodes of a segment tree over item indices that cover it exactly; the items live at
 * item i's start are then those in the nodes on the path from leaf i to the root. */
typedef struct stab_list {
	uint32_t *v;
	uint32_t n, cap;
} stab_list;
/* Over the same tree, by item index: how many items are placed below a node (cnt) and the highest
 * top among them (rtop), so that the placed items starting during i's life are found without
 * looking at the others, and counted and topped in O(log n). */
typedef struct placed_tree {
	size_t leaves;
	stab_list *node;    /* 2 * leaves */
	uint64_t *nodetop;  /* the highest top in each node's list */
	uint32_t *cnt;      /* placed items below each node, by index */
	uint64_t *rtop;     /* their highest top */
	const opt_item *v;
	size_t n;
} placed_tree;

static void pt_init(placed_tree *t, const opt_item *v, size_t n)
{
	t->leaves = 1;
	while (t->leaves < n)
		t->leaves *= 2;
	t->node = xcalloc(2 * t->leaves, sizeof(stab_list));
	t->nodetop = xcalloc(2 * t->leaves, sizeof(uint64_t));
	t->cnt = xcalloc(2 * t->leaves, sizeof(uint32_t));
	t->rtop = xcalloc(2 * t->leaves, sizeof(uint64_t));
	t->v = v;
	t->n = n;
}

static void pt_free(placed_tree *t)
{
	for (size_t k = 0; k < 2 * t->leaves; k++)
		free(t->node[k].v);
	free(t->node);
	free(t->nodetop);
	free(t->cnt);
	free(t->rtop);
}

/* r_i: the first item starting at or after i's end (by bisection over the starts). */
static size_t pt_end(const placed_tree *t, size_t i)
{
	size_t lo = i + 1, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->v[mid].start < t->v[i].end)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* How many placed items overlap item i, and the highest top among them. */
static size_t pt_count(const placed_tree *t, size_t i, size_t r, uint64_t *top)
{
	size_t c = 0;
	uint64_t m = 0;
	for (size_t k = t->leaves + i; k >= 1; k /= 2) {
		c += t->node[k].n;
		if (t->nodetop[k] > m)
			m = t->nodetop[k];
	}
	for (size_t l = i + 1 + t->leaves, h = r + t->leaves; l < h; l /= 2, h /= 2) {
		if (l & 1) {
			c += t->cnt[l];
			m = t->rtop[l] > m ? t->rtop[l] : m;
			l++;
		}
		if (h & 1) {
			--h;
			c += t->cnt[h];
			m = t->rtop[h] > m ? t->rtop[h] : m;
		}
	}
	*top = m;
	return c;
}

static void node_add(stab_list *l, uint32_t j)
{
	AS_GROW(l->v, l->n, l->cap, 4);
	l->v[l->n++] = j;
}

static void pt_add(placed_tree *t, size_t j, size_t rj, uint64_t top)
{
	for (size_t l = j + 1 + t->leaves, r = rj + t->leaves; l < r; l /= 2, r /= 2) {
		if (l & 1) {
			t->nodetop[l] = top > t->nodetop[l] ? top : t->nodetop[l];
			node_add(&t->node[l++], (uint32_t)j);
		}
		if (r & 1) {
			--r;
			t->nodetop[r] = top > t->nodetop[r] ? top : t->nodetop[r];
			node_add(&t->node[r], (uint32_t)j);
		}
	}
	for (size_t k = t->leaves + j; k >= 1; k /= 2) {
		t->cnt[k]++;
		if (top > t->rtop[k])
			t->rtop[k] = top;
	}
}

typedef struct hit {
	uint64_t off, top;
} hit;
typedef struct hits {
	hit *h, *tmp;      /* tmp: the sorts' second buffer */
	size_t n, cap;
	size_t *count, ncount; /* lowest_fit's bucket counts */
} hits;

static void push_hit(hits *out, uint64_t off, uint64_t top)
{
	AS_GROW2(out->h, out->tmp, out->n, out->cap, 256);
	out->h[out->n++] = (hit){ off, top };
}

/* Every placed item live when item i starts. */
static void pt_query(const placed_tree *t, size_t i, const uint64_t *off, hits *out)
{
	for (size_t k = t->leaves + i; k >= 1; k /= 2)
		for (uint32_t x = 0; x < t->node[k].n; x++) {
			uint32_t j = t->node[k].v[x];
			push_hit(out, off[j], off[j] + t->v[j].size);
		}
}

/* Every placed item with index in [lo, hi) below node k (covering [nlo, nhi)). */
static void pt_range(const placed_tree *t, size_t k, size_t nlo, size_t nhi, size_t lo, size_t hi, const uint64_t *off,
	hits *out)
{
	if (!t->cnt[k] || nhi <= lo || hi <= nlo)
		return;
	if (nhi - nlo == 1) {
		push_hit(out, off[nlo], off[nlo] + t->v[nlo].size);
		return;
	}
	size_t mid = nlo + (nhi - nlo) / 2;
	pt_range(t, 2 * k, nlo, mid, lo, hi, off, out);
	pt_range(t, 2 * k + 1, mid, nhi, lo, hi, off, out);
}

/* Sorts the hits by offset: a least-significant-digit radix sort, 8 bits a pass, only over the bytes
 * the largest offset has (qsort's comparisons were three quarters of the heuristic's time). */
static hit *sort_hits(hits *hs)
{
	hit *a = hs->h, *b = hs->tmp;
	uint64_t maxoff = 0;
	for (size_t i = 0; i < hs->n; i++)
		maxoff |= a[i].off;
	for (unsigned shift = 0; shift < 64 && (maxoff >> shift); shift += 8) {
		size_t count[257] = { 0 };
		for (size_t i = 0; i < hs->n; i++)
			count[((a[i].off >> shift) & 255) + 1]++;
		if (count[((a[0].off >> shift) & 255) + 1] == hs->n)
			continue; /* every key has this digit */
		for (int d = 0; d < 256; d++)
			count[d + 1] += count[d];
		for (size_t i = 0; i < hs->n; i++)
			b[count[(a[i].off >> shift) & 255]++] = a[i];
		hit *t = a;
		a = b;
		b = t;
	}
	return a;
}

/* The lowest offset where `size` bytes fit among the hits. The hits are distributed into about as
 * many buckets of consecutive offsets as there are hits (one counting pass), and the buckets are
 * sorted and scanned in order only until the gap is found: most placements end low, so most of the
 * hits are never sorted. A bucket of many hits (offsets that cluster) is radix-sorted. */
static uint64_t lowest_fit(hits *hs, uint64_t size)
{
	size_t n = hs->n;
	if (n < 64) {
		hit *h = n ? sort_hits(hs) : hs->h;
		uint64_t cur = 0;
		for (size_t i = 0; i < n; i++) {
			if (h[i].off >= cur && h[i].off - cur >= size)
				return cur;
			if (h[i].top > cur)
				cur = h[i].top;
		}
		return cur;
	}
	hit *a = hs->h, *b = hs->tmp;
	uint64_t maxoff = 0;
	for (size_t i = 0; i < n; i++)
		if (a[i].off > maxoff)
			maxoff = a[i].off;
	unsigned lgb = 4, bits = 0;
	while (((size_t)1 << lgb) < n && lgb < 20)
		lgb++;
	while (bits < 64 && (maxoff >> bits))
		bits++;
	unsigned shift = bits > lgb ? bits - lgb : 0;
	size_t nb = (size_t)(maxoff >> shift) + 1;
	if (nb > hs->ncount) {
		hs->ncount = nb;
		hs->count = xrealloc(hs->count, (nb + 1) * sizeof(size_t));
	}
	size_t *count = hs->count;
	memset(count, 0, (nb + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		count[(a[i].off >> shift) + 1]++;
	for (size_t k = 0; k < nb; k++)
		count[k + 1] += count[k];
	for (size_t i = 0; i < n; i++)
		b[count[a[i].off >> shift]++] = a[i];
	/* now count[k] is the end of bucket k in b */
	uint64_t cur = 0;
	size_t lo = 0;
	for (size_t k = 0; k < nb; k++) {
		size_t hi = count[k];
		if (hi - lo > 32) {
			hits sub = { b + lo, a + lo, hi - lo, hi - lo, NULL, 0 };
			hit *sorted = sort_hits(&sub);
			if (sorted != b + lo)
				memcpy(b + lo, sorted, (hi - lo) * sizeof(hit));
		} else {
			for (size_t x = lo + 1; x < hi; x++)
				for (size_t y = x; y > lo && b[y - 1].off > b[y].off; y--) {
					hit t = b[y];
					b[y] = b[y - 1];
					b[y - 1] = t;
				}
		}
		for (size_t i = lo; i < hi; i++) {
			if (b[i].off >= cur && b[i].off - cur >= size)
				return cur;
			if (b[i].top > cur)
				cur = b[i].top;
		}
		lo = hi;
	}
	return cur;
}

static int cmp_decreasing(const void *a, const void *b, void *ctx)
{
	const opt_item *v = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	if (v[i].size != v[j].size)
		return v[i].size > v[j].size ? -1 : 1;
	uint64_t li = v[i].end - v[i].start, lj = v[j].end - v[j].start;
	if (li != lj)
		return li > lj ? -1 : 1;
	return i < j ? -1 : i > j; /* items are in start order */
}

uint64_t opt_place_decreasing(const opt_item *v, size_t n, size_t fit_max, uint64_t *off, size_t *stacked)
{
	size_t *order = xmalloc((n + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(size_t), cmp_decreasing, (void *)v);
	placed_tree t;
	pt_init(&t, v, n);
	hits h = { NULL, NULL, 0, 0, NULL, 0 };
	uint64_t height = 0;
	*stacked = 0;
	for (size_t r = 0; r < n; r++) {
		size_t i = order[r];
		if (!(r & 4095))
			as_work_report("optimal", r, n); /* (a bar on a terminal: seconds on large traces) */
		if (!v[i].size) {
			off[i] = 0; /* occupies nothing: never placed among the others */
			continue;
		}
		size_t ri = pt_end(&t, i);
		uint64_t sky;
		if (pt_count(&t, i, ri, &sky) > fit_max) {
			off[i] = sky; /* above every placed item it overlaps: the cost stays bounded */
			++*stacked;
		} else {
			/* the placed items live when i starts (they started before it: the stabbing lists),
			 * and those that start while i lives (items i+1 .. ri-1 in start order) */
			h.n = 0;
			pt_query(&t, i, off, &h);
			pt_range(&t, 1, 0, t.leaves, i + 1, ri, off, &h);
			off[i] = lowest_fit(&h, v[i].size);
		}
		if (off[i] + v[i].size > height)
			height = off[i] + v[i].size;
		pt_add(&t, i, ri, off[i] + v[i].size);
	}
	as_work_report("optimal", n, n);
	free(h.h);
	free(h.tmp);
	free(h.count);
	pt_free(&t);
	free(order);
	return height;
}

/* ---- the exact search ----
 * Every placement is no lower than the first-fit placement of some order: sort its items by offset
 * and place them in that order, each at the lowest offset free of the items before it; by induction
 * each lands at or below its offset in the placement, so the height is no greater. The search
 * therefore branches on which item comes next, each placed first-fit, and prunes with:
 *  - the bound: every item not yet placed will sit at or above its first-fit offset now (placing
 *    more items only raises it), so the height is at least the largest such offset + size;
 *  - orders that differ only in swapping consecutive items not live at the same time give the same
 *    placement: an item may follow one it does not overlap only if its index is larger;
 *  - identical items (same lifetime and size) are placed in index order.
 * Items are renumbered by size, largest first, so the first leaf is the heuristic's placement. */
typedef struct xsearch {
	size_t n;
	uint64_t size[OPT_SEARCH_MAX], ov[OPT_SEARCH_MAX], pos[OPT_SEARCH_MAX], best_pos[OPT_SEARCH_MAX];
	int twin[OPT_SEARCH_MAX];
	uint64_t placed, best, bound, nodes, max_nodes;
	int stop, exhausted;
} xsearch;

static uint64_t x_fit(const xsearch *x, size_t i)
{
	hit h[OPT_SEARCH_MAX];
	size_t n = 0;
	for (uint64_t m = x->placed & x->ov[i]; m; m &= m - 1) {
		size_t j = (size_t)__builtin_ctzll(m);
		h[n++] = (hit){ x->pos[j], x->pos[j] + x->size[j] };
	}
	/* insertion sort: at most 64 */
	for (size_t a = 1; a < n; a++)
		for (size_t b = a; b > 0 && h[b - 1].off > h[b].off; b--) {
			hit t = h[b];
			h[b] = h[b - 1];
			h[b - 1] = t;
		}
	uint64_t cur = 0;
	for (size_t a = 0; a < n; a++) {
		if (h[a].off >= cur && h[a].off - cur >= x->size[i])
			return cur;
		if (h[a].top > cur)
			cur = h[a].top;
	}
	return cur;
}

static void x_dfs(xsearch *x, int last, uint64_t height, size_t depth)
{
	if (depth == x->n) {
		if (height < x->best) {
			x->best = height;
			memcpy(x->best_pos, x->pos, sizeof x->pos);
			if (x->best <= x->bound)
				x->stop = 1;
		}
		return;
	}
	if (x->nodes >= x->max_nodes) {
		x->stop = x->exhausted = 1;
		return;
	}
	x->nodes++;
	uint64_t fit[OPT_SEARCH_MAX], lb = height;
	for (size_t i = 0; i < x->n; i++)
		if (!(x->placed >> i & 1)) {
			fit[i] = x_fit(x, i);
			if (fit[i] + x->size[i] > lb)
				lb = fit[i] + x->size[i];
		}
	if (lb >= x->best)
		return;
	for (size_t i = 0; i < x->n && !x->stop; i++) {
		if (x->placed >> i & 1)
			continue;
		if (last >= 0 && i < (size_t)last && !(x->ov[last] >> i & 1))
			continue;
		if (x->twin[i] >= 0 && !(x->placed >> x->twin[i] & 1))
			continue;
		uint64_t top = fit[i] + x->size[i];
		if (top >= x->best)
			continue;
		x->pos[i] = fit[i];
		x->placed |= 1ULL << i;
		x_dfs(x, (int)i, top > height ? top : height, depth + 1);
		x->placed &= ~(1ULL << i);
	}
}

uint64_t opt_place_exact(const opt_item *v, size_t n, uint64_t bound, uint64_t *off, uint64_t height, opt_search *s)
{
	s->nodes = 0;
	s->proved = height <= bound;
	if (s->proved)
		return height;
	/* the items that occupy bytes, largest first */
	size_t idx[OPT_SEARCH_MAX], m = 0, *order = xmalloc((n + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(size_t), cmp_decreasing, (void *)v);
	for (size_t r = 0; r < n; r++)
		if (v[order[r]].size) {
			if (m == OPT_SEARCH_MAX) {
				free(order);
				return height; /* too many: the caller checks n first */
			}
			idx[m++] = order[r];
		}
	free(order);
	xsearch *x = xcalloc(1, sizeof(*x));
	x->n = m;
	for (size_t a = 0; a < m; a++) {
		x->size[a] = v[idx[a]].size;
		x->twin[a] = -1;
		for (size_t b = 0; b < m; b++)
			if (a != b && overlap(&v[idx[a]], &v[idx[b]]))
				x->ov[a] |= 1ULL << b;
		for (size_t b = 0; b < a; b++)
			if (v[idx[b]].start == v[idx[a]].start && v[idx[b]].end == v[idx[a]].end && v[idx[b]].size == v[idx[a]].size)
				x->twin[a] = (int)b; /* the latest identical one before it */
	}
	x->best = height;
	x->bound = bound;
	x->max_nodes = s->max_nodes;
	x_dfs(x, -1, 0, 0);
	s->nodes = x->nodes;
	s->proved = !x->exhausted || x->best <= bound;
	if (x->best < height)
		for (size_t a = 0; a < m; a++)
			off[idx[a]] = x->best_pos[a];
	uint64_t best = x->best;
	free(x);
	return best;
}

/* ---- checking a placement: a sweep in time with the live items in address order ---- */

typedef struct live_item {
	uint64_t off, top;
	size_t i;
	RB_ENTRY(live_item) rb;
} live_item;
static int live_cmp(const live_item *a, const live_item *b)
{
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}
RB_HEAD(live_tree, live_item);
RB_GENERATE_STATIC(live_tree, live_item, rb, live_cmp)

size_t opt_check(const opt_item *v, size_t n, const uint64_t *off)
{
	live_item *it = xcalloc(n + 1, sizeof(*it));
	size_t *byend = xmalloc((n + 1) * sizeof(size_t)), nd = 0, bad = n;
	for (size_t i = 0; i < n; i++)
		if (v[i].size && v[i].end != UINT64_MAX)
			byend[nd++] = i;
	/* by end: insertion order does not matter between equal ends (distinct event indices) */
	uint64_t *keys = xmalloc((nd + 1) * 2 * sizeof(uint64_t));
	for (size_t k = 0; k < nd; k++) {
		keys[2 * k] = v[byend[k]].end;
		keys[2 * k + 1] = byend[k];
	}
	qsort(keys, nd, 2 * sizeof(uint64_t), cmp_u64);
	struct live_tree t = RB_INITIALIZER(&t);
	size_t f = 0;
	for (size_t i = 0; i < n && bad == n; i++) {
		while (f < nd && keys[2 * f] <= v[i].start) {
			RB_REMOVE(live_tree, &t, &it[keys[2 * f + 1]]);
			f++;
		}
		if (!v[i].size)
			continue;
		it[i] = (live_item){ .off = off[i], .top = off[i] + v[i].size, .i = i };
		RB_INSERT(live_tree, &t, &it[i]);
		live_item *p = RB_PREV(live_tree, &t, &it[i]), *q = RB_NEXT(live_tree, &t, &it[i]);
		if ((p && p->top > it[i].off) || (q && q->off < it[i].top))
			bad = i;
	}
	free(keys);
	free(byend);
	free(it);
	return bad;
}

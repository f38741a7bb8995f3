/* gaptree.c - address ranges with the highest-gap query in logarithmic time (see gaptree.h).
 *
 * The gap of a range p is the room between p's end (rounded up to the granularity) and the start
 * of the next range above it (rounded down), capped at top; a linear scan from the highest range
 * down returns top(p) - need for the first p whose gap holds need, and otherwise the lowest start
 * (rounded down, capped at top) - need. Each node keeps its own gap and its subtree's largest. */
#include "gaptree.h"
#include "common.h"
#include <stdlib.h>

struct gt_node {
	uint64_t addr, size, gap, maxgap, prio;
	gt_node *l, *r;
};

static uint64_t down(const gaptree *t, uint64_t a)
{
	return a / t->gran * t->gran;
}

static uint64_t up(const gaptree *t, uint64_t a)
{
	return (a + t->gran - 1) / t->gran * t->gran;
}

static uint64_t gap_of(const gaptree *t, const gt_node *p, const gt_node *next)
{
	uint64_t top = t->top;
	if (next && down(t, next->addr) < top)
		top = down(t, next->addr);
	uint64_t e = up(t, p->addr + p->size);
	return top > e ? top - e : 0;
}

static void pull(gt_node *x)
{
	uint64_t m = x->gap;
	if (x->l && x->l->maxgap > m)
		m = x->l->maxgap;
	if (x->r && x->r->maxgap > m)
		m = x->r->maxgap;
	x->maxgap = m;
}

/* Splits into keys < addr and keys >= addr (or <= addr when le). */
static void split(gt_node *x, uint64_t addr, int le, gt_node **a, gt_node **b)
{
	if (!x) {
		*a = *b = NULL;
		return;
	}
	if (x->addr < addr || (le && x->addr == addr)) {
		split(x->r, addr, le, &x->r, b);
		*a = x;
	} else {
		split(x->l, addr, le, a, &x->l);
		*b = x;
	}
	pull(x);
}

static gt_node *merge(gt_node *a, gt_node *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->r = merge(a->r, b);
		pull(a);
		return a;
	}
	b->l = merge(a, b->l);
	pull(b);
	return b;
}

static gt_node *find(const gaptree *t, uint64_t addr)
{
	gt_node *x = t->root;
	while (x && x->addr != addr)
		x = addr < x->addr ? x->l : x->r;
	return x;
}

/* The range with the largest start below addr, or NULL. */
static gt_node *pred(const gaptree *t, uint64_t addr)
{
	gt_node *x = t->root, *best = NULL;
	while (x) {
		if (x->addr < addr) {
			best = x;
			x = x->r;
		} else {
			x = x->l;
		}
	}
	return best;
}

/* The range with the smallest start above addr (at or above when ge), or NULL. */
static gt_node *succ(const gaptree *t, uint64_t addr, int ge)
{
	gt_node *x = t->root, *best = NULL;
	while (x) {
		if (x->addr > addr || (ge && x->addr == addr)) {
			best = x;
			x = x->l;
		} else {
			x = x->r;
		}
	}
	return best;
}

/* Sets the gap of the node at addr and the subtree maxima on the path to it. */
static void set_gap(gt_node *x, uint64_t addr, uint64_t gap)
{
	if (x->addr == addr)
		x->gap = gap;
	else
		set_gap(addr < x->addr ? x->l : x->r, addr, gap);
	pull(x);
}

void gt_init(gaptree *t, uint64_t top, uint64_t gran)
{
	t->root = NULL;
	t->top = top;
	t->gran = gran;
	t->seed = 0x9e3779b97f4a7c15ULL;
	t->n = 0;
}

static void free_nodes(gt_node *x)
{
	while (x) { /* the left spine iteratively, the right subtrees recursively (depth is logarithmic) */
		free_nodes(x->r);
		gt_node *l = x->l;
		free(x);
		x = l;
	}
}

void gt_free(gaptree *t)
{
	free_nodes(t->root);
	t->root = NULL;
	t->n = 0;
}

int gt_insert(gaptree *t, uint64_t addr, uint64_t size)
{
	if (find(t, addr))
		return -1;
	gt_node *x = xmalloc(sizeof(*x));
	t->seed ^= t->seed << 13; /* xorshift64 */
	t->seed ^= t->seed >> 7;
	t->seed ^= t->seed << 17;
	*x = (gt_node){ addr, size, 0, 0, t->seed, NULL, NULL };
	x->gap = x->maxgap = gap_of(t, x, succ(t, addr, 0));
	gt_node *a, *b;
	split(t->root, addr, 0, &a, &b);
	t->root = merge(merge(a, x), b);
	t->n++;
	gt_node *p = pred(t, addr);
	if (p)
		set_gap(t->root, p->addr, gap_of(t, p, x));
	return 0;
}

void gt_remove(gaptree *t, uint64_t addr)
{
	if (!find(t, addr))
		return;
	gt_node *a, *m, *b;
	split(t->root, addr, 0, &a, &b);
	split(b, addr, 1, &m, &b);
	free(m);
	t->root = merge(a, b);
	t->n--;
	gt_node *p = pred(t, addr);
	if (p)
		set_gap(t->root, p->addr, gap_of(t, p, succ(t, addr, 0)));
}

int gt_overlaps(const gaptree *t, uint64_t addr, uint64_t size)
{
	const gt_node *r = succ(t, addr, 1);
	if (r && r->addr < addr + size)
		return 1;
	r = pred(t, addr);
	return r && r->addr + r->size > addr;
}

uint64_t gt_place(const gaptree *t, uint64_t need)
{
	uint64_t th = need ? need : 1; /* a gap exists only when it is not empty */
	const gt_node *x = t->root;
	while (x && x->maxgap >= th) {
		if (x->r && x->r->maxgap >= th)
			x = x->r;
		else if (x->gap >= th)
			return up(t, x->addr + x->size) + x->gap - need;
		else
			x = x->l;
	}
	const gt_node *lo = t->root;
	while (lo && lo->l)
		lo = lo->l;
	uint64_t top = t->top;
	if (lo && down(t, lo->addr) < top)
		top = down(t, lo->addr);
	return top - need;
}

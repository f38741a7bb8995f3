/* optimal.h - the offline placement behind the `optimal` policy (optimal_place.c): the dynamic storage
 * allocation problem on a trace's lifetimes. Every allocation is a rectangle: its lifetime (event
 * indices) by its bytes; a placement gives each an offset so that rectangles that overlap in time do
 * not overlap in address; its height is the largest offset + size, the address space a clairvoyant
 * allocator needs. */
#ifndef ALLOCSIM_OPTIMAL_H
#define ALLOCSIM_OPTIMAL_H
#include <stddef.h>
#include <stdint.h>

/* One allocation: live over event indices [start, end); end UINT64_MAX: never freed. Items are in
 * allocation order (start increasing, as a plan's lifetimes are). */
typedef struct opt_item {
	uint64_t start, end, size;
} opt_item;

/* The peak of live bytes (the maximal clique of the interval graph, weighted): no placement is lower. */
uint64_t opt_clique_bound(const opt_item *v, size_t n);

/* The heuristic: items by size, largest first (ties: longer lifetime, then earlier start), each at
 * the lowest offset where it overlaps no item placed before it that is live at the same time; an
 * item that overlaps more than fit_max placed items goes directly above the highest of them
 * (*stacked counts those), so the cost is at most n x fit_max (and log factors). Fills off[n];
 * returns the height. */
uint64_t opt_place_decreasing(const opt_item *v, size_t n, size_t fit_max, uint64_t *off, size_t *stacked);

/* The exact search (branch and bound) for at most OPT_SEARCH_MAX items. */
#define OPT_SEARCH_MAX 64
typedef struct opt_search {
	uint64_t max_nodes;    /* in: the budget (search nodes; deterministic, unlike a time budget) */
	uint64_t nodes;        /* out: nodes visited */
	int proved;            /* out: the height returned is optimal (search finished, or met the bound) */
} opt_search;
/* off holds a placement of height `height` (the heuristic's); the search improves it in place and
 * returns the best height found. `bound` is a lower bound (opt_clique_bound): reaching it stops. */
uint64_t opt_place_exact(const opt_item *v, size_t n, uint64_t bound, uint64_t *off, uint64_t height, opt_search *s);

/* Checks a placement: every pair of items live at the same time is disjoint in address. Returns the
 * index of an item that collides, or n if none (O(n log n + overlaps)). */
size_t opt_check(const opt_item *v, size_t n, const uint64_t *off);
#endif

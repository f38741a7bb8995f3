/* t_optimal.c - the offline placement (src/policies/optimal_place.c) against brute force: the exact
 * search finds the lowest height of all orders placed first-fit, the bound is the largest load, the
 * heuristic is a valid placement no lower than the optimum, and the checker finds a collision. */
#include "policies/optimal.h"
#include "tap.h"
#include <gsl/gsl_permutation.h>
#include <inttypes.h>
#include <gsl/gsl_rng.h>
#include <stdlib.h>
#include <string.h>

/* First fit in the given order: each item at the lowest offset free of the items before it. */
static uint64_t first_fit(const opt_item *v, size_t n, const size_t *order, uint64_t *off)
{
	uint64_t height = 0;
	for (size_t r = 0; r < n; r++) {
		size_t i = order[r];
		uint64_t y = 0;
		for (int moved = 1; moved;) {
			moved = 0;
			for (size_t q = 0; q < r; q++) {
				size_t j = order[q];
				if (v[i].start < v[j].end && v[j].start < v[i].end && v[i].size && v[j].size &&
				    off[j] < y + v[i].size && y < off[j] + v[j].size) {
					y = off[j] + v[j].size;
					moved = 1;
				}
			}
		}
		off[i] = y;
		if (y + v[i].size > height)
			height = y + v[i].size;
	}
	return height;
}

/* A random instance: n allocations interleaved with frees over one event numbering. */
static size_t random_items(gsl_rng *rng, opt_item *v, size_t n)
{
	uint64_t t = 0;
	size_t live[16], nlive = 0, k = 0;
	while (k < n || nlive) {
		if (k < n && (!nlive || gsl_rng_uniform(rng) < 0.55)) {
			v[k] = (opt_item){ t++, UINT64_MAX, (1 + gsl_rng_uniform_int(rng, 5)) * 512 };
			live[nlive++] = k++;
		} else {
			size_t x = gsl_rng_uniform_int(rng, nlive);
			if (gsl_rng_uniform(rng) < 0.9) /* some are never freed */
				v[live[x]].end = t;
			t++;
			live[x] = live[--nlive];
		}
	}
	return k;
}

/* The heuristic's order: size, largest first; then the longer lifetime; then the earlier start. */
static const opt_item *sort_v;
static int cmp_dec(const void *a, const void *b)
{
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const opt_item *v = sort_v;
	if (v[i].size != v[j].size)
		return v[i].size > v[j].size ? -1 : 1;
	uint64_t li = v[i].end - v[i].start, lj = v[j].end - v[j].start;
	if (li != lj)
		return li > lj ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* Whether the items (sizes in units) fit under height H, trying every integer offset of every item:
 * no theorem about orders involved. */
static int fits_under(const opt_item *v, size_t n, uint64_t H, uint64_t *off, size_t k)
{
	if (k == n)
		return 1;
	for (off[k] = 0; off[k] + v[k].size <= H; off[k]++) {
		size_t j = 0;
		for (; j < k; j++)
			if (v[k].start < v[j].end && v[j].start < v[k].end && off[j] < off[k] + v[k].size && off[k] < off[j] + v[j].size)
				break;
		if (j == k && fits_under(v, n, H, off, k + 1))
			return 1;
	}
	return 0;
}

static uint64_t max_load(const opt_item *v, size_t n)
{
	uint64_t best = 0;
	for (size_t i = 0; i < n; i++) { /* the load peaks at some allocation */
		uint64_t load = 0;
		for (size_t j = 0; j < n; j++)
			if (v[j].start <= v[i].start && v[i].start < v[j].end)
				load += v[j].size;
		if (load > best)
			best = load;
	}
	return best;
}

int main(void)
{
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 17);
	size_t bad_exact = 0, bad_bound = 0, bad_heur = 0, unproved = 0, beaten = 0, above_bound = 0, runs = 300;
	for (size_t r = 0; r < runs; r++) {
		opt_item v[7];
		size_t n = random_items(rng, v, 3 + r % 5);
		uint64_t off[7], tmp[7], best = UINT64_MAX;
		gsl_permutation *p = gsl_permutation_alloc(n);
		gsl_permutation_init(p);
		do {
			uint64_t h = first_fit(v, n, gsl_permutation_data(p), tmp);
			if (h < best)
				best = h;
		} while (gsl_permutation_next(p) == GSL_SUCCESS);
		gsl_permutation_free(p);
		uint64_t bound = opt_clique_bound(v, n);
		bad_bound += bound != max_load(v, n);
		size_t st;
		uint64_t h = opt_place_decreasing(v, n, SIZE_MAX, off, &st);
		bad_heur += h < best || opt_check(v, n, off) != n;
		opt_search s = { .max_nodes = 1000000 };
		uint64_t x = opt_place_exact(v, n, bound, off, h, &s);
		bad_exact += x != best || opt_check(v, n, off) != n;
		unproved += !s.proved;
		beaten += x < h;
		above_bound += x > bound;
	}
	is_u64(bad_bound, 0, "the bound is the largest load at any allocation (%zu random instances)", runs);
	is_u64(bad_heur, 0, "the heuristic's placement is valid and no lower than the brute-force optimum");
	is_u64(bad_exact, 0, "the exact search finds the brute-force optimum (the best first-fit order of all n!)");
	is_u64(unproved, 0, "... and proves it within its budget");
	ok(beaten > 0, "the search beats the heuristic on some instances (%zu of %zu)", beaten, runs);
	printf("# the optimum lies above the peak of live bytes on %zu of %zu instances\n", above_bound, runs);

	/* the heuristic's data structures (stabbing tree, bucketed scan) against the plain quadratic rule
	 * on a large instance: thousands live at once, offsets far apart */
	{
		size_t n = 3000, live[400], nlive = 0, k = 0;
		opt_item *v = calloc(n, sizeof(*v));
		uint64_t *o1 = calloc(n, sizeof(uint64_t)), *o2 = calloc(n, sizeof(uint64_t)), t = 0;
		size_t *order = calloc(n, sizeof(size_t));
		while (k < n || nlive) {
			if (k < n && nlive < 400 && (!nlive || gsl_rng_uniform(rng) < 0.6)) {
				uint64_t sz = gsl_rng_uniform(rng) < 0.1 ? (1 + gsl_rng_uniform_int(rng, 4096)) << 20 : (1 + gsl_rng_uniform_int(rng, 2048)) * 512;
				v[k] = (opt_item){ t++, UINT64_MAX, sz };
				live[nlive++] = k++;
			} else {
				size_t x = gsl_rng_uniform_int(rng, nlive);
				v[live[x]].end = t++;
				live[x] = live[--nlive];
			}
		}
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		sort_v = v;
		qsort(order, n, sizeof(size_t), cmp_dec);
		size_t st, st0;
		uint64_t h1 = opt_place_decreasing(v, n, SIZE_MAX, o1, &st), h2 = first_fit(v, n, order, o2);
		is_u64(h1, h2, "the heuristic's height on %zu allocations is the plain rule's", n);
		is_u64((uint64_t)memcmp(o1, o2, n * sizeof(uint64_t)) != 0, 0, "... and so is every offset");
		is_u64(opt_check(v, n, o1), n, "... a sound placement");
		uint64_t h3 = opt_place_decreasing(v, n, 100, o2, &st0);
		ok(st == 0 && st0 > 0 && st0 < n && opt_check(v, n, o2) == n && h3 >= h1,
			"fit_max 100: %zu allocations go above all they overlap, soundly, no lower (%" PRIu64 " >= %" PRIu64 ")", st0, h3, h1);
		uint64_t h4 = opt_place_decreasing(v, n, 0, o2, &st0), want = 0;
		for (size_t r = 0; r < n; r++) { /* fit_max 0: each above the highest placed one it overlaps */
			size_t i = order[r];
			uint64_t y = 0;
			for (size_t q = 0; q < r; q++) {
				size_t j = order[q];
				if (v[i].start < v[j].end && v[j].start < v[i].end && o2[j] + v[j].size > y)
					y = o2[j] + v[j].size;
			}
			want += o2[i] != y;
		}
		ok(want == 0 && st0 > st && opt_check(v, n, o2) == n && h4 >= h1,
			"fit_max 0: every allocation directly above the highest placed one it overlaps (%" PRIu64 ")", h4);
		free(v);
		free(o1);
		free(o2);
		free(order);
	}

	/* an instance whose optimum lies above the peak of live bytes (tests/bound/optimum-above-bound.trace):
	 * brute force over all 9! orders agrees with the search, which proves it by exhausting its tree */
	{
		const opt_item u[9] = { { 0, 350, 2 }, { 1, 351, 2 }, { 202, 452, 3 }, { 403, 553, 1 }, { 404, 654, 3 },
			{ 505, 655, 1 }, { 606, 756, 3 }, { 707, 1257, 2 }, { 708, 1058, 2 } };
		uint64_t off[9], tmp[9], best = UINT64_MAX;
		gsl_permutation *p = gsl_permutation_alloc(9);
		gsl_permutation_init(p);
		do {
			uint64_t h = first_fit(u, 9, gsl_permutation_data(p), tmp);
			if (h < best)
				best = h;
		} while (gsl_permutation_next(p) == GSL_SUCCESS);
		gsl_permutation_free(p);
		size_t st;
		uint64_t b = opt_clique_bound(u, 9), h = opt_place_decreasing(u, 9, SIZE_MAX, off, &st);
		opt_search s = { .max_nodes = 1000000 };
		uint64_t x = opt_place_exact(u, 9, b, off, h, &s);
		is_u64(b, 7, "optimum above the bound: the peak of live units is 7");
		is_u64(best, 8, "... brute force over all 9! first-fit orders needs 8");
		ok(!fits_under(u, 9, 7, tmp, 0) && fits_under(u, 9, 8, tmp, 0), "... and no placement at any offsets fits under 7 (one fits under 8)");
		ok(x == 8 && s.proved && s.nodes < s.max_nodes, "... the search finds 8 and proves it by exhausting its tree (%" PRIu64 " nodes)", s.nodes);
		s.max_nodes = 100;
		x = opt_place_exact(u, 9, b, off, h, &s);
		ok(x == 8 && !s.proved && s.nodes == 100, "... with 100 nodes it stops unproved");
	}

	/* the checker: a planted collision is found */
	opt_item w[3] = { { 0, 4, 1024 }, { 1, 3, 512 }, { 2, 5, 512 } };
	uint64_t good[3] = { 0, 1024, 1536 }, bad[3] = { 0, 512, 1536 };
	is_u64(opt_check(w, 3, good), 3, "a sound placement passes the check");
	is_u64(opt_check(w, 3, bad), 1, "an allocation placed over a live one is reported (item 1 inside item 0)");
	uint64_t o2[3];
	size_t st;
	is_u64(opt_place_decreasing(w, 3, SIZE_MAX, o2, &st), 2048, "three overlapping allocations stack to 2048 bytes");
	gsl_rng_free(rng);
	return done_testing();
}

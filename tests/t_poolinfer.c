/* t_poolinfer.c - the pool inference of src/readers/poolinfer.c on small made-up histories, one per rule
 * (doc/pytorch-policy.md, "Private pools without annotation"); the real captures are in
 * tests/fidelity.sh and tests/pools.sh. */
#include "tap.h"
#include "util/common.h"
#include "readers/poolinfer.h"
#include <stdlib.h>

#define MiB (1ULL << 20)
#define A(pi, i, addr, size) as_poolinfer_entry(pi, PI_ALLOC, i, addr, size, 0)
#define F(pi, i, addr) as_poolinfer_entry(pi, PI_FREE_DONE, i, addr, 0, 0)
#define SA(pi, i, addr, size) as_poolinfer_entry(pi, PI_SEG_ALLOC, i, addr, size, 0)
#define SF(pi, i, addr, size) as_poolinfer_entry(pi, PI_SEG_FREE, i, addr, size, 0)

/* The pool of entry I: 0 default, else 1 + its b (PI_INFERRED_A pools: 100 + k). */
static int pool(as_poolinfer *pi, uint64_t i, uint32_t *flags)
{
	uint64_t a, b;
	uint32_t f = 0;
	int in = as_poolinfer_pool(pi, i, &a, &b, &f);
	if (flags)
		*flags = f;
	if (!in)
		return 0;
	return a == PI_INFERRED_A ? 100 + (int)b : 1 + (int)b;
}

static as_poolinfer *fresh(int expandable, uint64_t max_split)
{
	as_poolinfer *pi = as_poolinfer_new();
	as_poolinfer_settings(pi, expandable, max_split, 0, 0);
	return pi;
}

int main(void)
{
	as_poolinfer_stats st;
	uint64_t n_ev;

	/* rule 1: the end state names the pool of a segment still held; its requests take it */
	as_poolinfer *pi = fresh(0, 0);
	as_poolinfer_end_segment(pi, 0x10000000, 20 * MiB, 0, 1, 0);
	as_poolinfer_end_segment(pi, 0x20000000, 20 * MiB, 0, 0, 0);
	SA(pi, 0, 0x20000000, 20 * MiB);
	A(pi, 1, 0x20000000, 4 * MiB);
	SA(pi, 2, 0x10000000, 20 * MiB);
	A(pi, 3, 0x10000000, 4 * MiB);
	A(pi, 4, 0x10400000, 4 * MiB);
	as_poolinfer_solve(pi);
	ok(pool(pi, 1, NULL) == 0 && pool(pi, 2, NULL) == 2 && pool(pi, 3, NULL) == 2 && pool(pi, 4, NULL) == 2,
		"rule 1: the segment held in pool (0, 1) and its two requests are in it; the other is the default pool's");
	as_poolinfer_get_stats(pi, &st);
	is_u64(st.pools * 10 + st.by_end_state, 12, "... one pool, two units placed by the end state");
	as_poolinfer_free(pi);

	/* rule 2: a wholly free segment kept through empty_cache() is a live private pool's */
	pi = fresh(0, 0);
	SA(pi, 0, 0x10000000, 20 * MiB); /* B: freed before the end, never named */
	A(pi, 1, 0x10000000, 4 * MiB);
	F(pi, 2, 0x10000000);
	SA(pi, 3, 0x20000000, 20 * MiB); /* C: released by the empty_cache */
	A(pi, 4, 0x20000000, 4 * MiB);
	F(pi, 5, 0x20000000);
	SF(pi, 6, 0x20000000, 20 * MiB); /* empty_cache(): C goes, B stays */
	as_poolinfer_entry(pi, PI_OTHER, 7, 0, 0, 0);
	SF(pi, 8, 0x10000000, 20 * MiB); /* the pool's release */
	as_poolinfer_solve(pi);
	ok(pool(pi, 0, NULL) == 101 && pool(pi, 1, NULL) == 101 && pool(pi, 4, NULL) == 0,
		"rule 2: the segment kept through empty_cache() while free is a pool's of its own; the released one the default's");
	as_poolinfer_free(pi);

	/* ... and the same history where empty_cache() released both: no pool */
	pi = fresh(0, 0);
	SA(pi, 0, 0x10000000, 20 * MiB);
	A(pi, 1, 0x10000000, 4 * MiB);
	F(pi, 2, 0x10000000);
	SA(pi, 3, 0x20000000, 20 * MiB);
	A(pi, 4, 0x20000000, 4 * MiB);
	F(pi, 5, 0x20000000);
	SF(pi, 6, 0x20000000, 20 * MiB);
	SF(pi, 7, 0x10000000, 20 * MiB);
	as_poolinfer_entry(pi, PI_OTHER, 8, 0, 0, 0);
	as_poolinfer_solve(pi);
	as_poolinfer_get_stats(pi, &st);
	ok(st.pools == 0 && pool(pi, 1, NULL) == 0, "... both released: no private pool");
	as_poolinfer_free(pi);

	/* a release followed by a new segment is a full one only where nothing partial explains it: with
	 * max_split_size_mb:128 and only a 200 MiB (oversize) segment released, the free one kept proves nothing */
	for (int ms = 0; ms < 2; ms++) {
		pi = fresh(0, ms ? 128 * MiB : 0);
		SA(pi, 0, 0x10000000, 20 * MiB);
		A(pi, 1, 0x10000000, 4 * MiB);
		F(pi, 2, 0x10000000);
		SA(pi, 3, 0x80000000, 200 * MiB);
		A(pi, 4, 0x80000000, 200 * MiB);
		F(pi, 5, 0x80000000);
		SF(pi, 6, 0x80000000, 200 * MiB);
		SA(pi, 7, 0x40000000, 300 * MiB);
		A(pi, 8, 0x40000000, 300 * MiB);
		as_poolinfer_end_segment(pi, 0x40000000, 300 * MiB, 0, 0, 0);
		as_poolinfer_solve(pi);
		ok(pool(pi, 1, NULL) == (ms ? 0 : 101), "%s: a free segment kept through a flush followed by a new segment is %s",
			ms ? "max_split_size_mb:128, only an oversize segment released" : "no max_split_size_mb",
			ms ? "not placed (the oversize release may explain it)" : "a private pool's (the flush was full)");
		as_poolinfer_free(pi);
	}

	/* rule 3: a default-pool request that took a new segment while a free gap it fits was there: that gap
	 * is another pool's */
	pi = fresh(0, 0);
	as_poolinfer_end_segment(pi, 0x20000000, 20 * MiB, 0, 0, 0);
	SA(pi, 0, 0x10000000, 20 * MiB);
	A(pi, 1, 0x10000000, 4 * MiB); /* 15 MiB free behind it */
	SA(pi, 2, 0x20000000, 20 * MiB);
	A(pi, 3, 0x20000000, 8 * MiB); /* would have fitted: another pool */
	SF(pi, 4, 0x10000000, 20 * MiB);
	as_poolinfer_solve(pi);
	ok(pool(pi, 1, NULL) == 101 && pool(pi, 3, NULL) == 0, "rule 3: the segment passed over by a default-pool request is a private pool's");
	as_poolinfer_free(pi);
	/* ... not when the request needed more than the gap (counted small: 4 MiB + 1 MiB of unsplit remainder) */
	pi = fresh(0, 0);
	as_poolinfer_end_segment(pi, 0x20000000, 20 * MiB, 0, 0, 0);
	SA(pi, 0, 0x10000000, 20 * MiB);
	A(pi, 1, 0x10000000, 4 * MiB);
	SA(pi, 2, 0x20000000, 20 * MiB);
	A(pi, 3, 0x20000000, 15 * MiB + 512);
	SF(pi, 4, 0x10000000, 20 * MiB);
	as_poolinfer_solve(pi);
	ok(pool(pi, 1, NULL) == 0, "... a request larger than the gap counted small proves nothing");
	as_poolinfer_free(pi);

	/* no_split: two units of one named pool passing each other over; its requests carry the flag */
	pi = fresh(0, 0);
	as_poolinfer_end_segment(pi, 0x10000000, 30 * MiB, 0, 1, 0);
	as_poolinfer_end_segment(pi, 0x20000000, 12 * MiB, 0, 1, 0);
	SA(pi, 0, 0x10000000, 30 * MiB);
	A(pi, 1, 0x10000000, 10 * MiB); /* the whole 30 MiB block under no_split */
	SA(pi, 2, 0x20000000, 12 * MiB);
	A(pi, 3, 0x20000000, 12 * MiB); /* it would have fitted the 20 MiB behind the first */
	as_poolinfer_solve(pi);
	uint32_t fl = 0;
	ok(pool(pi, 3, &fl) == 2 && (fl & AS_POOL_NOSPLIT), "no_split: a pool passing its own free gap over hands out blocks whole");
	as_poolinfer_free(pi);

	/* rule 5: a plain segment under expandable segments is a custom allocator's MemPool's */
	pi = fresh(1, 0);
	SA(pi, 0, 0x10000000, 20 * MiB);
	A(pi, 1, 0x10000000, 4 * MiB);
	F(pi, 2, 0x10000000);
	SF(pi, 3, 0x10000000, 20 * MiB);
	as_poolinfer_solve(pi);
	ok(pool(pi, 1, &fl) == 101 && (fl & AS_POOL_CUSTOM), "rule 5: a plain segment under expandable_segments:True is a custom allocator's pool");
	as_poolinfer_free(pi);

	/* rule 4: one empty_cache() releasing small, large, then small again: two pools' releases; and a
	 * default pool's large-then-small release is one pool's */
	for (int two = 0; two < 2; two++) {
		pi = fresh(0, 0);
		as_poolinfer_end_segment(pi, 0x70000000, 20 * MiB, 0, 1, 0); /* pool (0, 1), held */
		SA(pi, 0, 0x70000000, 20 * MiB);
		A(pi, 1, 0x70000000, 4 * MiB);
		SA(pi, 2, 0x10000000, 2 * MiB);
		A(pi, 3, 0x10000000, 4096); /* small */
		SA(pi, 4, 0x20000000, 20 * MiB);
		A(pi, 5, 0x20000000, 4 * MiB); /* large */
		SA(pi, 6, 0x30000000, 2 * MiB);
		A(pi, 7, 0x30000000, 4096); /* small */
		for (int i = 0; i < 3; i++)
			F(pi, 8 + i, (uint64_t)(i + 1) << 28);
		if (two) {
			SF(pi, 11, 0x10000000, 2 * MiB);
			SF(pi, 12, 0x20000000, 20 * MiB);
		} else {
			SF(pi, 11, 0x20000000, 20 * MiB);
			SF(pi, 12, 0x10000000, 2 * MiB);
		}
		SF(pi, 13, 0x30000000, 2 * MiB);
		as_poolinfer_entry(pi, PI_OTHER, 14, 0, 0, 0);
		as_poolinfer_solve(pi);
		as_poolinfer_get_stats(pi, &st);
		if (two)
			ok(pool(pi, 7, NULL) != pool(pi, 3, NULL) || pool(pi, 7, NULL) != pool(pi, 5, NULL),
				"rule 4: small, large, small in one release: the last is another pool's than the first two");
		else
			ok(st.by_behaviour == 0, "... large, small, small (the default pool's order): no pool told apart");
		as_poolinfer_free(pi);
	}

	/* the detector alone (auto, no private segment at the end): rule 2's evidence is counted; the
	 * segment kept is held at the history's end, as the end state (given after the entries, as the
	 * snapshot reader does) says */
	for (int inend = 1; inend >= 0; inend--) {
		pi = as_poolinfer_new_light();
		SA(pi, 0, 0x10000000, 20 * MiB);
		A(pi, 1, 0x10000000, 4 * MiB);
		F(pi, 2, 0x10000000);
		SA(pi, 3, 0x20000000, 20 * MiB);
		A(pi, 4, 0x20000000, 4 * MiB);
		F(pi, 5, 0x20000000);
		SF(pi, 6, 0x20000000, 20 * MiB);
		as_poolinfer_entry(pi, PI_OTHER, 7, 0, 0, 0);
		as_poolinfer_settings(pi, 0, 0, 0, 0);
		if (inend)
			as_poolinfer_end_segment(pi, 0x10000000, 20 * MiB, 0, 0, 0);
		uint64_t n = as_poolinfer_evidence(pi);
		as_poolinfer_get_stats(pi, &st);
		if (inend)
			is_u64(n * 10 + st.outside_end, 20, "the light detector counts the segment kept through empty_cache() while free and the one released beside it");
		else /* a made snapshot (copies of a history, its end state emptied): it shows nothing */
			is_u64(n * 10 + st.outside_end, 1, "... the kept segment absent from the end state: no evidence (nor the pair with it), 1 segment set aside");
		as_poolinfer_free(pi);
	}
	/* ... and a segment that the history frees is evidence whatever the end state: B kept through the
	 * empty_cache() while free, then released (the pool deleted) */
	pi = as_poolinfer_new_light();
	SA(pi, 0, 0x10000000, 20 * MiB);
	A(pi, 1, 0x10000000, 4 * MiB);
	F(pi, 2, 0x10000000);
	SA(pi, 3, 0x20000000, 20 * MiB);
	A(pi, 4, 0x20000000, 4 * MiB);
	F(pi, 5, 0x20000000);
	SF(pi, 6, 0x20000000, 20 * MiB);
	as_poolinfer_entry(pi, PI_OTHER, 7, 0, 0, 0);
	SF(pi, 8, 0x10000000, 20 * MiB);
	as_poolinfer_entry(pi, PI_OTHER, 9, 0, 0, 0);
	as_poolinfer_settings(pi, 0, 0, 0, 0);
	as_poolinfer_end_segment(pi, 0x50000000, 20 * MiB, 0, 0, 0); /* another one, never seen made */
	n_ev = as_poolinfer_evidence(pi);
	as_poolinfer_get_stats(pi, &st);
	is_u64(n_ev * 10 + st.outside_end, 20, "... released before the end: both counted, nothing set aside");
	as_poolinfer_free(pi);

	/* rule 3 after many blocks came and went (the live-block table grows twice; the segment's gaps,
	 * found once at the first new segment, are found again after its frees): S (2 MiB, 2,000 blocks of
	 * 1 KiB) has 1 KiB holes and a 47.5 KiB tail when T1 takes a new segment for 60 KiB (no pair),
	 * then a 64 KiB hole when T2 does: T2 passed S over (and T1); evidence: S, T1, T2 */
	pi = as_poolinfer_new_light();
	uint64_t ix = 0, sbase = 0x10000000;
	SA(pi, ix++, sbase, 2 * MiB);
	for (uint64_t k = 0; k < 2000; k++)
		A(pi, ix++, sbase + k * 1024, 1024);
	for (uint64_t k = 10; k <= 600; k += 10)
		F(pi, ix++, sbase + k * 1024);
	A(pi, ix++, sbase + 2000 * 1024, 512);
	SA(pi, ix++, 0x20000000, 2 * MiB); /* T1 */
	A(pi, ix++, 0x20000000, 60 * 1024);
	for (uint64_t k = 200; k < 264; k++)
		if (k % 10)
			F(pi, ix++, sbase + k * 1024);
	A(pi, ix++, 0x20000000 + 60 * 1024, 512);
	SA(pi, ix++, 0x30000000, 2 * MiB); /* T2 */
	A(pi, ix++, 0x30000000, 60 * 1024);
	as_poolinfer_settings(pi, 0, 0, 0, 0);
	as_poolinfer_end_segment(pi, sbase, 2 * MiB, 0, 0, 0); /* all three held at the end */
	as_poolinfer_end_segment(pi, 0x20000000, 2 * MiB, 0, 0, 0);
	as_poolinfer_end_segment(pi, 0x30000000, 2 * MiB, 0, 0, 0);
	is_u64(as_poolinfer_evidence(pi), 3, "rule 3 sees a gap that frees made after the segment's gaps were last looked at");
	as_poolinfer_free(pi);
	return done_testing();
}

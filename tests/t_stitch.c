/* t_stitch.c - the stitch policy (GMLake's virtual-memory stitching, src/policies/stitch.c) on hand-built
 * sequences: exact addresses, reserved bytes and device calls, derived from GMLake's rules (malloc,
 * get_free_block, get_fused_fragmented_blocks, update_block, release_cached_blocks and
 * garbage_collect_fused_blocks in GMLake/src/CUDACachingAllocator.cpp), the same sequence under
 * the pytorch policy for comparison, and random workloads with small limits under check(). */
#include "tap.h"
#include "polstat.h"
#include "util/common.h"
#include "device/device.h"
#include "policies/policy.h"
#include <stdlib.h>

#define MiB (1ULL << 20)
/* the simulated device's first virtual range is 0x302000000; stitch's create probes one granule */
#define VA0 0x302200000ULL

typedef struct tp {
	as_device *dev;
	as_policy *pol;
	as_counters ctr;
	uint64_t next_id;
} tp;

static int open_pol(tp *t, const char *name, const char *conf, uint64_t capacity)
{
	as_err err = { 0, "" };
	t->dev = as_sim_device_new(capacity, ADDR_MODEL);
	t->ctr.alloc_retries = 0;
	t->next_id = 1;
	if (as_policy_create(as_policy_find(name), &t->pol, conf, t->dev, &t->ctr, &err)) {
		printf("# %s\n", err.msg);
		as_device_destroy(t->dev);
		return -1;
	}
	return 0;
}

static int chk(tp *t)
{
	as_err err = { 0, "" };
	int rc = t->pol->ops->check(t->pol, &err);
	if (rc)
		printf("# check: %s\n", err.msg);
	return rc == 0;
}

static void close_pol(tp *t)
{
	ok(chk(t), "invariants hold at the end");
	t->pol->ops->destroy(t->pol);
	as_device_destroy(t->dev);
}

typedef struct blk {
	void *h;
	uint64_t size, addr;
} blk;

static blk al_on(tp *t, uint64_t n, uint64_t stream)
{
	blk b = { NULL, 0, 0 };
	as_request rq = { .id = t->next_id++, .size = n, .stream = stream, .thread = 0, .time_us = -1 };
	if (t->pol->ops->malloc(t->pol, &rq, &b.h, &b.size, &b.addr))
		b.h = NULL;
	return b;
}

static blk al(tp *t, uint64_t n)
{
	return al_on(t, n, 0);
}

static void fr(tp *t, blk b)
{
	t->pol->ops->free(t->pol, b.h);
}

static uint64_t st(tp *t, const char *key) { return policy_stat_u64(t->pol, key); }

/*
 * The fragmentation pattern: three 40 MiB segments, the first and the last freed, then 80 MiB.
 * PyTorch must cudaMalloc 80 MiB more; GMLake maps the 40 granules of the two free blocks into
 * one new range (largest first, the higher address first among equals: the third segment, then
 * the first) and allocates nothing.
 */
static void test_pattern(void)
{
	tp t;
	if (open_pol(&t, "stitch", "frag_limit:0", 0))
		return;
	blk a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	is_u64(a.addr, VA0, "stitch: a 40 MiB request maps a segment of 20 granules at the first range");
	is_u64(b.addr, VA0 + 40 * MiB, "stitch: the second segment follows");
	is_u64(c.addr, VA0 + 80 * MiB, "stitch: the third follows");
	fr(&t, a);
	fr(&t, c);
	uint64_t calls = t.dev->calls;
	blk d = al(&t, 80 * MiB);
	ok(d.h != NULL, "stitch: 80 MiB with two free 40 MiB blocks is served");
	is_u64(d.addr, VA0 + 120 * MiB, "stitch: from a new virtual range (the sBlock)");
	is_u64(d.size, 80 * MiB, "stitch: of exactly the rounded request");
	is_u64(t.dev->reserved, 120 * MiB, "stitch: reserved bytes stay at the three segments");
	is_u64(t.dev->peak_reserved, 120 * MiB, "stitch: and so does the peak");
	is_u64(t.dev->num_alloc, 3, "stitch: no physical memory is created for it");
	is_u64(t.dev->calls - calls, 1, "stitch: one device call (the remap of the 40 granules)");
	is_u64(st(&t, "stitches"), 1, "stitch: stats count one stitch");
	ok(chk(&t), "stitch: invariants after the stitch");

	fr(&t, d);
	is_u64(st(&t, "sblocks_cached"), 1, "stitch: the freed sBlock is cached");
	/* 60 MiB: no free pBlock holds it; the cached 80 MiB sBlock does (80 <= 10 x 60) with its
	 * first 30 granules: the third segment's 20, then 10 of the first's */
	blk e = al(&t, 60 * MiB);
	is_u64(e.addr, VA0 + 120 * MiB, "stitch: 60 MiB reuses the cached sBlock");
	is_u64(e.size, 60 * MiB, "stitch: holding 30 of its 40 granules");
	is_u64(st(&t, "sblock_reuses"), 1, "stitch: stats count the reuse");
	/* the first segment's last 20 MiB stayed free: a 20 MiB request takes them as a pBlock */
	blk f = al(&t, 20 * MiB);
	is_u64(f.addr, VA0 + 20 * MiB, "stitch: 20 MiB takes the first segment's free second half");
	is_u64(t.dev->num_alloc, 3, "stitch: still three segments");
	ok(chk(&t), "stitch: invariants after the reuse");

	fr(&t, e);
	/* the sBlock's granules 30..39 are f's now: it is cached but fragmented */
	is_u64(st(&t, "sblocks_cached"), 1, "stitch: the sBlock is cached again (fragmented)");
	calls = t.dev->calls;
	t.pol->ops->empty_cache(t.pol);
	/* the third segment is wholly free: released, and the sBlock that maps it dropped first */
	is_u64(t.dev->reserved, 80 * MiB, "stitch: empty_cache releases the wholly free third segment");
	is_u64(t.dev->num_free, 1, "stitch: one device release");
	is_u64(t.dev->calls - calls, 2, "stitch: two calls: the sBlock's unmap and the segment's unmap");
	is_u64(st(&t, "sblocks"), 0, "stitch: no sBlock is left");
	is_u64(st(&t, "total_fuse_size"), 80 * MiB, "stitch: GMLake's total_fuse_size still counts it (dropped with its segment, not collected)");
	fr(&t, f);
	fr(&t, b);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 0, "stitch: everything freed and emptied leaves nothing reserved");
	close_pol(&t);

	/* the same sequence under PyTorch's allocator (1.x-2.x rules, src/policies/pytorch.c) */
	if (open_pol(&t, "pytorch", "", 0))
		return;
	a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, c);
	d = al(&t, 80 * MiB);
	is_u64(t.dev->num_alloc, 4, "pytorch: the same 80 MiB needs a fourth cudaMalloc");
	is_u64(t.dev->peak_reserved, 200 * MiB, "pytorch: peak reserved 200 MiB where stitch holds 120 MiB");
	fr(&t, d);
	fr(&t, b);
	close_pol(&t);
}

/* GMLake's default fragLimit (512 MiB): below it no stitch, at it the last block taken is split. */
static void test_frag_limit(void)
{
	tp t;
	if (open_pol(&t, "stitch", "", 0))
		return;
	blk a = al(&t, 300 * MiB), b = al(&t, 300 * MiB), c = al(&t, 300 * MiB);
	fr(&t, a);
	fr(&t, c);
	blk d = al(&t, 400 * MiB);
	is_u64(d.addr, VA0 + 900 * MiB, "frag_limit: 400 MiB (< 512 MiB) maps a new segment");
	is_u64(t.dev->num_alloc, 4, "frag_limit: a fourth segment");
	fr(&t, d);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 300 * MiB, "frag_limit: empty_cache releases the three free segments");
	a = al(&t, 300 * MiB), c = al(&t, 300 * MiB);
	is_u64(a.addr, VA0 + 1300 * MiB, "frag_limit: two new 300 MiB segments (virtual ranges are not reused)");
	fr(&t, a);
	fr(&t, c);
	uint64_t nalloc = t.dev->num_alloc;
	d = al(&t, 512 * MiB);
	is_u64(d.addr, VA0 + 1900 * MiB, "frag_limit: 512 MiB is stitched");
	is_u64(t.dev->num_alloc, nalloc, "frag_limit: from existing granules");
	/* taken: c's 150 granules, then 106 of a's; a's last 44 granules (88 MiB) stay free */
	blk e = al(&t, 88 * MiB);
	is_u64(e.addr, VA0 + 1300 * MiB + 212 * MiB, "frag_limit: the split-off 88 MiB of the last block taken are a free pBlock");
	is_u64(t.dev->num_alloc, nalloc, "frag_limit: served without a new segment");
	fr(&t, e);
	fr(&t, d);
	fr(&t, b);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 0, "frag_limit: nothing reserved at the end");
	close_pol(&t);
}

/* reuse_limit and gc_limit. */
static void test_limits(void)
{
	tp t;
	if (open_pol(&t, "stitch", "frag_limit:0,reuse_limit:1.5", 0))
		return;
	blk a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, c);
	blk d = al(&t, 80 * MiB);
	fr(&t, d);
	/* 30 MiB: the free pBlocks (40 MiB) fit first, whatever the sBlock */
	blk e = al(&t, 30 * MiB);
	is_u64(e.addr, VA0, "reuse_limit: a free pBlock comes before a cached sBlock");
	fr(&t, e);
	/* 42 MiB: no pBlock fits; the 80 MiB sBlock is more than 2 x 42: stitched anew */
	blk f = al(&t, 42 * MiB);
	is_u64(st(&t, "sblock_reuses"), 0, "reuse_limit:1.5: the 80 MiB sBlock does not serve 42 MiB (80 > 63)");
	is_u64(st(&t, "stitches"), 2, "reuse_limit:1.5: a second stitch serves it");
	is_u64(f.addr, VA0 + 200 * MiB, "reuse_limit:1.5: from a second new range");
	fr(&t, f);
	close_pol(&t);

	if (open_pol(&t, "stitch", "frag_limit:0,gc_limit:100MiB", 0))
		return;
	a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, c);
	d = al(&t, 80 * MiB);
	fr(&t, d);
	blk g = al(&t, 30 * MiB); /* the lower 40 MiB pBlock, split */
	is_u64(g.addr, VA0, "gc_limit: 30 MiB takes the first segment's block");
	blk h = al(&t, 50 * MiB); /* 10 MiB left there + the third 40 MiB: stitched, 130 MiB of sBlocks */
	is_u64(st(&t, "stitches"), 2, "gc_limit: a second stitch");
	is_u64(st(&t, "sblocks_dropped_by_gc"), 1, "gc_limit:100MiB: 80 + 50 MiB of sBlocks drop the cached one");
	is_u64(st(&t, "sblock_bytes"), 50 * MiB, "gc_limit: only the active sBlock is left");
	fr(&t, g);
	fr(&t, h);
	fr(&t, b);
	close_pol(&t);
}

/* An sBlock in use whose unused tail maps a segment that empty_cache releases loses those granules
 * and is dropped when freed. */
static void test_tail_release(void)
{
	tp t;
	if (open_pol(&t, "stitch", "frag_limit:0", 0))
		return;
	blk x = al(&t, 30 * MiB), y1 = al(&t, 30 * MiB), y2 = al(&t, 20 * MiB), z = al(&t, 20 * MiB);
	fr(&t, x);
	fr(&t, y1);
	fr(&t, y2);
	blk d = al(&t, 80 * MiB); /* y1 (30, the higher of the two 30s), x (30), y2 (20) */
	is_u64(d.addr, VA0 + 100 * MiB, "tail: 80 MiB stitched from three blocks");
	fr(&t, d);
	blk e = al(&t, 60 * MiB); /* y1's and x's granules; y2's are the unused tail */
	is_u64(e.addr, VA0 + 100 * MiB, "tail: 60 MiB reuses the sBlock");
	uint64_t calls = t.dev->calls;
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 80 * MiB, "tail: empty_cache releases y2's wholly free segment");
	is_u64(t.dev->calls - calls, 2, "tail: one unmap of the 10 granules from the sBlock's range, one of the segment");
	ok(chk(&t), "tail: invariants with the sBlock's dropped granules");
	fr(&t, e);
	is_u64(st(&t, "sblocks"), 0, "tail: the sBlock is dropped when freed");
	fr(&t, z);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 0, "tail: nothing reserved at the end");
	close_pol(&t);
}

/* Rounding, the small pool, stitch:False, out of memory. */
static void test_basics(void)
{
	tp t;
	if (open_pol(&t, "stitch", "", 0))
		return;
	blk a = al(&t, 1000), b = al(&t, 1000);
	is_u64(a.size, 1024, "small: 1000 bytes round to 1024");
	is_u64(b.addr, a.addr + 1024, "small: the next block follows in the same 2 MiB buffer");
	is_u64(t.dev->num_alloc, 1, "small: one cudaMalloc of 2 MiB");
	is_u64(t.dev->reserved, 2 * MiB, "small: 2 MiB reserved");
	blk c = al(&t, MiB + 1);
	is_u64(c.size, 2 * MiB, "large: 1 MiB + 1 rounds to one granule");
	is_u64(t.dev->reserved, 22 * MiB, "large: under 10 MiB a 20 MiB segment is mapped");
	blk d = al(&t, 18 * MiB);
	is_u64(d.addr, c.addr + 2 * MiB, "large: the segment's rest serves 18 MiB");
	blk z = al(&t, 0);
	is_u64(z.size, 0, "zero bytes allocate nothing");
	blk huge = al(&t, (1ULL << 60) - 1);
	ok(huge.h == NULL && t.ctr.alloc_retries == 1, "2^60 - 1 bytes run out of memory cleanly (no handle array of that size)");
	fr(&t, z);
	fr(&t, a);
	fr(&t, b);
	fr(&t, c);
	fr(&t, d);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 0, "basics: all released");
	close_pol(&t);

	if (open_pol(&t, "stitch", "stitch:False", 0))
		return;
	a = al(&t, 40 * MiB);
	is_u64(t.dev->num_alloc, 1, "stitch:False: a large segment is one cudaMalloc");
	ok(a.addr != VA0, "stitch:False: not in a reserved virtual range (%#llx)", (unsigned long long)a.addr);
	fr(&t, a);
	close_pol(&t);

	/* capacity 100 MiB: two free 40 MiB blocks in separate segments, 60 MiB more cannot be mapped;
	 * with stitching only at level 2 the cache is released and the segment mapped on the retry */
	if (open_pol(&t, "stitch", "frag_limit:0,defrag_level:2", 100 * MiB))
		return;
	a = al(&t, 40 * MiB), b = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, b);
	c = al(&t, 60 * MiB);
	is_u64(t.ctr.alloc_retries, 1, "defrag_level:2: the cache is released and a segment tried again first");
	is_u64(t.dev->num_free, 2, "defrag_level:2: the two free segments are released");
	is_u64(t.dev->reserved, 60 * MiB, "defrag_level:2: then 60 MiB are mapped");
	blk e = al(&t, 60 * MiB);
	ok(e.h == NULL, "capacity: a second 60 MiB runs out of memory");
	fr(&t, c);
	close_pol(&t);

	as_err err = { 0, "" };
	as_policy *p;
	as_device *dev = as_sim_device_new(0, ADDR_MODEL);
	as_counters ctr = { 0 };
	ok(as_policy_create(as_policy_find("stitch"), &p, "granule:3MiB", dev, &ctr, &err) != 0 &&
		!strcmp(err.msg, "option granule: '3MiB' is not a multiple of 2 MiB up to 20 MiB"), "granule:3MiB is refused (%s)", err.msg);
	err.code = 0;
	ok(as_policy_create(as_policy_find("stitch"), &p, "reuse_limit:0.5", dev, &ctr, &err) != 0 &&
		!strcmp(err.msg, "option reuse_limit: '0.5' is not a number from 1 to 1e6"), "reuse_limit:0.5 is refused (%s)", err.msg);
	as_device_destroy(dev);
}

/* Free blocks and sBlocks serve their own stream only; defrag_level 1 maps a segment before stitching. */
static void test_streams_levels(void)
{
	tp t;
	if (open_pol(&t, "stitch", "frag_limit:0", 0))
		return;
	blk a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, c);
	blk d = al_on(&t, 80 * MiB, 1);
	is_u64(t.dev->num_alloc, 4, "streams: 80 MiB on stream 1 cannot stitch stream 0's free blocks: a new segment");
	is_u64(st(&t, "stitches"), 0, "streams: no stitch");
	blk e = al(&t, 80 * MiB);
	is_u64(st(&t, "stitches"), 1, "streams: 80 MiB on stream 0 stitches them");
	fr(&t, e);
	blk f = al_on(&t, 60 * MiB, 1);
	is_u64(st(&t, "sblock_reuses"), 0, "streams: stream 0's cached sBlock does not serve stream 1");
	is_u64(f.addr, d.addr + 160 * MiB, "streams: stream 1 maps a new segment (after its first and the sBlock's range)");
	fr(&t, d);
	fr(&t, f);
	fr(&t, b);
	close_pol(&t);

	if (open_pol(&t, "stitch", "frag_limit:0,defrag_level:1", 0))
		return;
	a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, c);
	d = al(&t, 80 * MiB);
	is_u64(t.dev->num_alloc, 4, "defrag_level:1: a new segment comes first where the device has room");
	is_u64(st(&t, "stitches"), 0, "defrag_level:1: no stitch");
	fr(&t, d);
	close_pol(&t);

	if (open_pol(&t, "stitch", "frag_limit:0,defrag_level:1", 120 * MiB))
		return;
	a = al(&t, 40 * MiB), b = al(&t, 40 * MiB), c = al(&t, 40 * MiB);
	fr(&t, a);
	fr(&t, c);
	d = al(&t, 80 * MiB);
	is_u64(st(&t, "stitches"), 1, "defrag_level:1 at 120 MiB: the segment does not fit, so it stitches");
	is_u64(t.dev->num_free + t.ctr.alloc_retries, 0, "defrag_level:1: before releasing anything");
	fr(&t, d);
	fr(&t, b);
	close_pol(&t);
}

/* Random workloads with every limit small: check() after each call. */
static void test_random(void)
{
	static const char *const confs[] = { "frag_limit:0", "frag_limit:0,gc_limit:64MiB", "frag_limit:4MiB,reuse_limit:1.5",
		"frag_limit:0,defrag_level:1", "frag_limit:0,granule:4MiB" };
	for (size_t k = 0; k < sizeof confs / sizeof *confs; k++) {
		tp t;
		if (open_pol(&t, "stitch", confs[k], 512 * MiB))
			continue;
		blk live[64] = { { 0 } };
		uint64_t seed = 12345 + k;
		int good = 1;
		for (int i = 0; i < 20000 && good; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			int slot = (int)((seed >> 33) % 64);
			if (live[slot].h) {
				fr(&t, live[slot]);
				live[slot].h = NULL;
			} else {
				uint64_t r = seed >> 40;
				uint64_t n = r % 4 == 0 ? 1 + r % MiB : 1 + (r * 7919) % (48 * MiB);
				live[slot] = al(&t, n);
			}
			if (i % 997 == 0)
				t.pol->ops->empty_cache(t.pol);
			good = chk(&t);
		}
		for (int s = 0; s < 64; s++)
			if (live[s].h)
				fr(&t, live[s]);
		t.pol->ops->empty_cache(t.pol);
		ok(good && t.dev->reserved == 0, "random (%s): 20000 calls under check(), everything returned at the end", confs[k]);
		ok(st(&t, "stitches") > 0, "random (%s): it stitched (%llu)", confs[k], (unsigned long long)st(&t, "stitches"));
		close_pol(&t);
	}
}

int main(void)
{
	test_pattern();
	test_frag_limit();
	test_limits();
	test_tail_release();
	test_basics();
	test_streams_levels();
	test_random();
	return done_testing();
}

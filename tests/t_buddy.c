/* t_buddy.c - the buddy policy (src/policies/buddy.c) on hand-built sequences: the classical rules
 * (Knuth, TAOCP vol. 1, 2.5: split to the smallest fitting order keeping the lower half, merge
 * with the buddy on free), arenas of one cudaMalloc, oversize requests, empty_cache, out of memory. */
#include "tap.h"
#include "util/common.h"
#include "device/device.h"
#include "policies/policy.h"
#include <stdlib.h>

#define MiB (1ULL << 20)

typedef struct tp {
	as_device *dev;
	as_policy *pol;
	as_counters ctr;
} tp;

typedef struct blk {
	void *h;
	uint64_t size, addr;
} blk;

static int open_pol(tp *t, const char *conf, uint64_t capacity)
{
	as_err err = { 0, "" };
	t->dev = as_sim_device_new(capacity, ADDR_MODEL);
	t->ctr.alloc_retries = 0;
	if (as_policy_create(as_policy_find("buddy"), &t->pol, conf, t->dev, &t->ctr, &err)) {
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

static blk al(tp *t, uint64_t n)
{
	blk b = { NULL, 0, 0 };
	as_request rq = { .id = 1, .size = n, .stream = 0, .thread = 0, .time_us = -1 };
	if (t->pol->ops->malloc(t->pol, &rq, &b.h, &b.size, &b.addr))
		b.h = NULL;
	return b;
}

static void fr(tp *t, blk b)
{
	t->pol->ops->free(t->pol, b.h);
	ok(chk(t), "invariants after a free");
}

static void close_pol(tp *t)
{
	ok(chk(t), "invariants hold at the end");
	t->pol->ops->destroy(t->pol);
	as_device_destroy(t->dev);
}

int main(void)
{
	tp t;
	/* arenas of 1 MiB x 2^4 = 16 MiB */
	if (open_pol(&t, "min_block:1MiB,max_order:4", 0))
		return 1;
	blk a = al(&t, MiB);
	uint64_t A = a.addr;
	is_u64(a.size, MiB, "1 MiB is order 0");
	is_u64(t.dev->reserved, 16 * MiB, "the first request allocates one 16 MiB arena");
	blk b = al(&t, 3 * MiB);
	is_u64(b.size, 4 * MiB, "3 MiB takes an order-2 block (4 MiB)");
	is_u64(b.addr, A + 4 * MiB, "the upper half split off at order 2 (A + 4 MiB)");
	blk c = al(&t, MiB + MiB / 2);
	is_u64(c.addr, A + 2 * MiB, "1.5 MiB takes the order-1 buddy (A + 2 MiB)");
	blk d = al(&t, 1);
	is_u64(d.addr, A + MiB, "1 byte takes the order-0 buddy (A + 1 MiB)");
	is_u64(d.size, MiB, "at the minimum block");
	blk e = al(&t, 8 * MiB);
	is_u64(e.addr, A + 8 * MiB, "8 MiB takes the upper half of the arena");
	blk f = al(&t, MiB);
	is_u64(t.dev->num_alloc, 2, "a full arena makes the next request allocate a second one");
	is_u64(t.dev->reserved, 32 * MiB, "32 MiB reserved");
	ok(f.addr < A || f.addr >= A + 16 * MiB, "the new block lies in the second arena");
	fr(&t, d);
	fr(&t, a);
	fr(&t, c);
	fr(&t, b);
	blk g = al(&t, 8 * MiB);
	is_u64(g.addr, f.addr + 8 * MiB, "8 MiB again: the lowest-address free order-3 block, in the second arena (placed below the first)");
	fr(&t, g);
	fr(&t, e);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 16 * MiB, "empty_cache releases the wholly free arena, keeps the used one");
	is_u64(t.dev->num_free, 1, "one cudaFree");
	blk h = al(&t, 20 * MiB);
	is_u64(h.size, 32 * MiB, "20 MiB (above the arena) is an order-5 block of 32 MiB");
	is_u64(t.dev->reserved, 48 * MiB, "in a device allocation of its own");
	fr(&t, h);
	is_u64(t.dev->reserved, 16 * MiB, "which goes back to the device when freed");
	fr(&t, f);
	t.pol->ops->empty_cache(t.pol);
	is_u64(t.dev->reserved, 0, "nothing reserved at the end");
	close_pol(&t);

	/* out of memory: capacity for two arenas */
	if (open_pol(&t, "min_block:1MiB,max_order:4", 32 * MiB))
		return 1;
	a = al(&t, 16 * MiB);
	b = al(&t, 16 * MiB);
	fr(&t, a);
	c = al(&t, 20 * MiB);
	ok(c.h == NULL, "32 MiB more than the capacity allows fail");
	is_u64(t.ctr.alloc_retries, 1, "after releasing the free arena and trying again");
	is_u64(t.dev->reserved, 16 * MiB, "the free arena is gone");
	c = al(&t, 16 * MiB);
	ok(c.h != NULL, "an arena fits again");
	fr(&t, b);
	fr(&t, c);
	close_pol(&t);

	as_err err = { 0, "" };
	as_policy *p;
	as_device *dev = as_sim_device_new(0, ADDR_MODEL);
	as_counters ctr = { 0 };
	ok(as_policy_create(as_policy_find("buddy"), &p, "min_block:1000", dev, &ctr, &err) != 0 &&
		!strcmp(err.msg, "option min_block: '1000' is not a power of two of at least 256 bytes"), "min_block:1000 is refused (%s)", err.msg);
	err.code = 0;
	ok(as_policy_create(as_policy_find("buddy"), &p, "max_order:31", dev, &ctr, &err) != 0 &&
		!strcmp(err.msg, "option max_order: '31' is not an order from 0 to 30"), "max_order:31 is refused (%s)", err.msg);
	err.code = 0;
	ok(as_policy_create(as_policy_find("buddy"), &p, "min_block:256T", dev, &ctr, &err) != 0 &&
		!strcmp(err.msg, "buddy: an arena of min_block x 2^max_order bytes must be at most 2^60 bytes"),
		"min_block:256T (an arena of 2^69 bytes) is refused (%s)", err.msg);
	as_device_destroy(dev);
	return done_testing();
}

/* t_devmap.c - the simulated address space in front of a driver (src/device/device_map.c): the
 * policy sees the simulated device's addresses, the driver gets every call at its own, translated
 * through the segment and reserved-range maps; a refusal by the driver leaves the simulation as it
 * was; an address the maps do not know reaches no driver. The driver here records its calls. */
#include "tap.h"
#include "util/common.h"
#include "device/device.h"
#include <stdlib.h>

#define MiB (1ULL << 20)
#define NCALLS 64

typedef struct call {
	char op;            /* a alloc, f free, r reserve, u unreserve, m map, n unmap */
	uint64_t addr, size;
} call;

typedef struct rec {
	call c[NCALLS];
	int n;
	uint64_t next;      /* the next address it hands out (upwards from a base of its own) */
	int refuse;         /* refuse the next alloc */
	int destroyed;
} rec;

static void note(rec *r, char op, uint64_t addr, uint64_t size)
{
	if (r->n < NCALLS)
		r->c[r->n++] = (call){ op, addr, size };
}

static int r_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	rec *r = d->priv;
	(void)stream;
	if (r->refuse) {
		r->refuse = 0;
		return 1;
	}
	*addr = r->next;
	r->next += (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
	note(r, 'a', *addr, size);
	return 0;
}

static void r_free(as_device *d, uint64_t addr, uint64_t size) { note(d->priv, 'f', addr, size); }

static int r_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	rec *r = d->priv;
	*addr = r->next;
	r->next += size;
	note(r, 'r', *addr, size);
	return 0;
}

static void r_unreserve(as_device *d, uint64_t addr, uint64_t size) { note(d->priv, 'u', addr, size); }
static int r_create(as_device *d, uint64_t size, as_phys *h) { (void)d; (void)size; *h = 7; return 0; }
static void r_release(as_device *d, as_phys h) { (void)d; (void)h; }

static int r_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	(void)h; (void)n;
	note(d->priv, 'm', addr, size);
	return 0;
}

static void r_unmap(as_device *d, uint64_t addr, uint64_t size) { note(d->priv, 'n', addr, size); }

static void r_destroy(as_device *d)
{
	((rec *)d->priv)->destroyed = 1;
	free(d);
}

static const as_device_ops rec_ops = {
	.name = "recording",
	.alloc = r_alloc, .free = r_free, .reserve = r_reserve, .unreserve = r_unreserve,
	.create = r_create, .release = r_release, .map = r_map, .unmap = r_unmap, .destroy = r_destroy,
};

static as_device *rec_new(rec *r)
{
	r->next = 0x10000000000ULL;
	return as_device_new(&rec_ops, r, 0, AS_H200_TOTAL_MEMORY, NULL);
}

int main(void)
{
	rec r = { 0 };
	as_device *sim = as_sim_device_new(0, ADDR_MODEL);
	as_device *d = as_mapped_device_new(rec_new(&r), 0, ADDR_MODEL);
	uint64_t s1, s2, m1, m2, x;

	/* cudaMalloc: the simulation's address to the policy, the driver's own to the driver */
	as_dev_alloc(sim, 20 * MiB, 0, &s1);
	as_dev_alloc(sim, 2 * MiB, 0, &s2);
	ok(!as_dev_alloc(d, 20 * MiB, 0, &m1) && !as_dev_alloc(d, 2 * MiB, 0, &m2), "two segments");
	is_u64(m1, s1, "the policy sees the simulated device's first address");
	is_u64(m2, s2, "... and its second");
	ok(r.n == 2 && r.c[0].op == 'a' && r.c[1].op == 'a' && r.c[0].addr != m1, "the driver made both at addresses of its own");
	ok(s1 > s2 && r.c[0].addr < r.c[1].addr, "in the other order (the model places top-down, this driver upwards)");
	is_u64(d->reserved, 22 * MiB, "reserved bytes are counted on the mapped device");
	as_dev_free(d, m1, 20 * MiB, 0);
	ok(r.n == 3 && r.c[2].op == 'f' && r.c[2].addr == r.c[0].addr, "cudaFree reaches the driver at its address for the segment");
	as_dev_free(sim, s1, 20 * MiB, 0);
	as_dev_alloc(sim, 20 * MiB, 0, &s1);
	ok(!as_dev_alloc(d, 20 * MiB, 0, &m1) && m1 == s1, "the freed range is the simulation's again");

	/* a refusal by the driver: nothing changes in the simulated address space */
	r.refuse = 1;
	int n0 = r.n;
	ok(as_dev_alloc(d, 40 * MiB, 0, &x) == 1 && d->num_failed == 1 && r.n == n0, "the driver refuses: the call fails, nothing is made");
	as_dev_alloc(sim, 40 * MiB, 0, &s1);
	ok(!as_dev_alloc(d, 40 * MiB, 0, &m1) && m1 == s1, "the next one gets the address the simulation gives it");

	/* an address the map does not know: no driver call */
	n0 = r.n;
	as_dev_free(d, 0x1234000, 2 * MiB, 0);
	is_int(r.n, n0, "cudaFree of an unknown address reaches no driver");

	/* reserved ranges: pages map at the driver's base plus the simulated offset */
	uint64_t va, sva;
	as_dev_reserve(sim, 64 * MiB, &sva);
	ok(!as_dev_reserve(d, 64 * MiB, &va) && va == sva, "a reserved range at the simulated base");
	call rv = r.c[r.n - 1];
	ok(rv.op == 'r' && rv.addr != va, "the driver reserved its own");
	as_phys h[2];
	ok(!as_dev_map(d, va + 4 * MiB, 2 * MiB, 2, h, 0), "two pages mapped 4 MiB into the range");
	ok(r.c[r.n - 1].op == 'm' && r.c[r.n - 1].addr == rv.addr + 4 * MiB && r.c[r.n - 1].size == 4 * MiB,
		"the driver maps them 4 MiB into its range");
	as_dev_unmap(d, va + 4 * MiB, 2 * MiB, 2, h, 0);
	ok(r.c[r.n - 1].op == 'n' && r.c[r.n - 1].addr == rv.addr + 4 * MiB, "and unmaps them there");
	ok(!as_dev_phys_map(d, va + 62 * MiB, 2 * MiB, h, 1) && r.c[r.n - 1].addr == rv.addr + 62 * MiB, "a remap at the range's end");
	n0 = r.n;
	ok(as_dev_map(d, va + 62 * MiB, 2 * MiB, 2, h, 0) == 1 && r.n == n0, "a map past the range's end fails, no driver call");
	ok(as_dev_phys_map(d, 0x5000000, 2 * MiB, h, 1) == 1 && r.n == n0, "a map outside every range fails, no driver call");
	as_dev_unreserve(d, va, 64 * MiB);
	ok(r.c[r.n - 1].op == 'u' && r.c[r.n - 1].addr == rv.addr, "the range is given back at the driver's base");
	n0 = r.n;
	ok(as_dev_map(d, va, 2 * MiB, 1, h, 0) == 1 && r.n == n0, "its pages no longer map");

	/* hints and placement reach the simulated address space */
	as_dev_hint(d, 0x7e0000000000ULL, 6 * MiB);
	as_device *d2 = as_mapped_device_new(rec_new(&(rec){ 0 }), 0, ADDR_AUTO);
	as_dev_hint(d2, 0x7e0000000000ULL, 6 * MiB);
	ok(!as_dev_alloc(d2, 6 * MiB, 0, &x) && x == 0x7e0000000000ULL, "a recorded segment address (auto): the policy gets it");
	as_device_destroy(d2);
	as_device *d3 = as_mapped_device_new(rec_new(&(rec){ 0 }), 0, ADDR_AUTO);
	as_dev_placement(d3, ADDR_ASCENDING);
	ok(!as_dev_alloc(d3, 40 * MiB, 0, &x) && x == 0x302000000ULL, "bfc's ascending placement applies to the simulated addresses");
	as_device_destroy(d3);
	ok(d->ops->pool.open(d, 0, 1) == 1, "a driver without a pool: no pool");

	/* the shuffled driver (device_sim.c): checks what it is asked */
	as_device *sh = as_sim_device_new(0, ADDR_SHUFFLED);
	uint64_t a1, a2;
	ok(!sh->ops->alloc(sh, 20 * MiB, 0, &a1) && !sh->ops->alloc(sh, 20 * MiB, 0, &a2) && a2 > a1, "shuffled driver: segments upwards");
	ok(!sh->ops->reserve(sh, 8 * MiB, &a1) && !sh->ops->reserve(sh, 8 * MiB, &a2) && a2 < a1, "... reserved ranges downwards");
	ok(sh->ops->map(sh, a2, 8 * MiB, h, 4) == 0, "... a map inside a range it reserved");
	ok(sh->ops->map(sh, a2 + 4 * MiB, 8 * MiB, h, 4) == 1, "... refuses one that runs past it");
	ok(sh->ops->map(sh, 0x2000, 2 * MiB, h, 1) == 1, "... and one outside");
	as_device_destroy(sh);

	as_device_destroy(sim);
	as_device_destroy(d);
	ok(r.destroyed, "destroying the mapped device destroys the driver (which returns what it holds)");
	return done_testing();
}

/*
 * device_sim.c - the simulated device: a capacity, an address space and call counts.
 *
 * Addresses matter because PyTorch breaks ties between equal-size free blocks by address.
 * The CUDA driver on the H200 placed cudaMalloc segments from the top of the address space
 * downwards; the model below does the same (highest free range first, 2 MiB granularity).
 * When the trace carries the recorded segment addresses, the device hands out exactly those
 * while its own calls agree with the recording (same sizes in the same order).
 */
#include "device.h"
#include "pool_sim.h"
#include <stdlib.h>
#include <string.h>
#include "gaptree.h"

#define VA_TOP   0x7f0000000000ULL
#define VA_FLOOR 0x100000000000ULL
#define VMM_BASE 0x000302000000ULL
#define GRAN     (2ULL << 20)

typedef struct hint {
	uint64_t addr, size;
} hint;

typedef struct sim {
	gaptree live;      /* the device's live ranges, with the model's free-gap search (gaptree.h) */
	int mode;
	int following;
	uint64_t served;
	hint *hints;
	size_t hhead, hlen, hcap;
	uint64_t vmm_next;
	as_simpool *pool;  /* the cuda-async policy's pool (pool_sim.c), once opened */
	as_phys handles;   /* physical handles created so far */
} sim;

/* Highest gap below VA_TOP that fits size (rounded to the granularity). Recorded segments may lie
 * anywhere, also across VA_TOP. Logarithmic in the live segments (it was a walk over all of them). */
static uint64_t model_place(sim *s, uint64_t size)
{
	return gt_place(&s->live, (size + GRAN - 1) / GRAN * GRAN);
}

static int sim_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	sim *s = d->priv;
	(void)stream;
	if (s->following && s->hlen) {
		hint h = s->hints[s->hhead];
		if (h.size == size && !gt_overlaps(&s->live, h.addr, size)) {
			s->hhead++;
			s->hlen--;
			s->served++;
			*addr = h.addr;
			gt_insert(&s->live, h.addr, size);
			return 0;
		}
		s->following = 0; /* the calls no longer agree with the recording */
	} else if (s->following && s->mode == ADDR_AUTO && s->served) {
		s->following = 0;
	}
	*addr = model_place(s, size);
	gt_insert(&s->live, *addr, size);
	return 0;
}

static void sim_free(as_device *d, uint64_t addr, uint64_t size)
{
	sim *s = d->priv;
	(void)size;
	gt_remove(&s->live, addr);
}

static int sim_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	sim *s = d->priv;
	*addr = s->vmm_next;
	s->vmm_next += (size + GRAN - 1) / GRAN * GRAN;
	return 0;
}

static void sim_unreserve(as_device *d, uint64_t addr, uint64_t size)
{
	(void)d; (void)addr; (void)size;
}

/* Physical memory: handles are numbers; the simulation keeps no pages. */
static int sim_create(as_device *d, uint64_t size, as_phys *h)
{
	sim *s = d->priv;
	(void)size;
	*h = ++s->handles;
	return 0;
}

static void sim_release(as_device *d, as_phys h)
{
	(void)d; (void)h;
}

static int sim_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	(void)d; (void)addr; (void)size; (void)h; (void)n;
	return 0;
}

static void sim_unmap(as_device *d, uint64_t addr, uint64_t size)
{
	(void)d; (void)addr; (void)size;
}

static int sim_pool_open(as_device *d, uint64_t threshold, int reuse)
{
	sim *s = d->priv;
	(void)threshold; (void)reuse; /* the model keeps freed memory until a trim; one stream */
	if (!s->pool)
		s->pool = as_simpool_new(d); /* its chunks are the device's physical memory */
	return 0;
}

static int sim_pool_alloc(as_device *d, uint64_t size, uint64_t *addr)
{
	sim *s = d->priv;
	return as_simpool_alloc(s->pool, size, d->capacity ? d->capacity : d->total_memory, addr);
}

static void sim_pool_free(as_device *d, uint64_t addr)
{
	as_simpool_release(((sim *)d->priv)->pool, addr);
}

static void sim_pool_trim(as_device *d, uint64_t keep)
{
	as_simpool_trim(((sim *)d->priv)->pool, keep);
}

static int sim_pool_check(as_device *d, char *why, size_t n)
{
	sim *s = d->priv;
	return s->pool ? as_simpool_check(s->pool, why, n) : 0;
}

static void sim_destroy(as_device *d)
{
	sim *s = d->priv;
	as_simpool_free(s->pool);
	gt_free(&s->live);
	free(s->hints);
	free(s);
	free(d);
}

static const as_device_ops sim_ops = {
	.name = "sim",
	.alloc = sim_alloc, .free = sim_free,
	.reserve = sim_reserve, .unreserve = sim_unreserve,
	.create = sim_create, .release = sim_release, .map = sim_map, .unmap = sim_unmap,
	.destroy = sim_destroy,
	.pool = {
		.open = sim_pool_open,
		.alloc = sim_pool_alloc,
		.free = sim_pool_free,
		.trim = sim_pool_trim,
		.reserved = NULL, /* the pool's chunks are created through as_dev_phys_create */
		.check = sim_pool_check,
	},
};

as_device *as_sim_device_new(uint64_t capacity, int addr_mode)
{
	as_device *d = xcalloc(1, sizeof(*d));
	sim *s = xcalloc(1, sizeof(*s));
	gt_init(&s->live, VA_TOP, GRAN);
	s->mode = addr_mode;
	s->following = addr_mode != ADDR_MODEL;
	s->vmm_next = VMM_BASE;
	d->ops = &sim_ops;
	d->capacity = capacity;
	d->total_memory = AS_H200_TOTAL_MEMORY;
	d->priv = s;
	return d;
}

void as_sim_device_hint(as_device *d, uint64_t addr, uint64_t size)
{
	sim *s = d->priv;
	if (d->ops != &sim_ops || !s->following)
		return;
	if (s->hhead + s->hlen == s->hcap) {
		if (s->hhead) {
			memmove(s->hints, s->hints + s->hhead, s->hlen * sizeof(hint));
			s->hhead = 0;
		} else {
			s->hcap = s->hcap ? s->hcap * 2 : 64;
			s->hints = xrealloc(s->hints, s->hcap * sizeof(hint));
		}
	}
	s->hints[s->hhead + s->hlen++] = (hint){ addr, size };
}

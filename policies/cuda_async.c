/*
 * cuda_async.c - the CUDA stream-ordered allocator (cudaMallocAsync / cudaFreeAsync).
 *
 * With --backend cuda the policy allocates from a memory pool of its own (cudaMemPoolCreate, with the
 * release threshold and reuse flags below) and the reserved bytes are the pool's
 * cudaMemPoolAttrReservedMemCurrent; empty_cache trims the pool to the threshold.
 * In simulation the driver's pool is not known in detail, so this is a model, documented in
 * doc/real-gpu.md and compared there with the real pool: one pool shared by all streams (the
 * default reuse flags let streams reuse each other's memory), growing in 2 MiB chunks, coalescing
 * best fit inside them, freed memory kept until empty_cache trims to the release threshold.
 * The model is the bestfit policy with those settings.
 */
#include "policy.h"
#include <stdlib.h>
#include <string.h>

typedef struct ca_conf {
	uint64_t release_threshold;
	int reuse;
} ca_conf;

typedef struct cuda_async {
	as_policy base;
	ca_conf c;
	as_device *dev;
	as_policy *model;   /* simulation: the bestfit model */
	uint64_t live;
} cuda_async;

extern const as_policy_ops as_policy_bestfit;

static const as_optdesc ca_opts[] = {
	{ "release_threshold", "size", "0", "bytes the pool keeps when trimmed (cudaMemPoolAttrReleaseThreshold)", as_opt_parse_size, offsetof(ca_conf, release_threshold) },
	{ "reuse", "True|False", "True", "the pool's reuse flags (follow event dependencies, opportunistic, internal dependencies)", as_opt_parse_bool, offsetof(ca_conf, reuse) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static int ca_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_cuda_async;
	cuda_async *p = xcalloc(1, sizeof(*p));
	p->c.reuse = 1;
	if (as_conf_parse(config, ca_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_cuda_async;
	p->dev = dev;
	if (dev->ops->pool_open) {
		if (dev->ops->pool_open(dev, p->c.release_threshold, p->c.reuse)) {
			free(p);
			return as_fail(err, AS_EXIT_UNAVAILABLE, "cannot create a CUDA memory pool");
		}
	} else if (as_policy_bestfit.create(&p->model, "per_stream:False,min_segment:2MiB,segment_round:2MiB,split_threshold:512,granule:512",
			dev, ctr, err)) {
		free(p);
		return -1;
	}
	*out = &p->base;
	return 0;
}

typedef struct ca_block {
	uint64_t addr, size;
	void *inner;
} ca_block;

static int ca_malloc(as_policy *pol, uint64_t n, uint64_t stream, void **h, uint64_t *bsize, uint64_t *addr)
{
	cuda_async *p = (cuda_async *)pol;
	if (p->model)
		return p->model->ops->malloc(p->model, n, stream, h, bsize, addr);
	ca_block *b = xmalloc(sizeof(*b));
	b->size = (n + 511) / 512 * 512;
	if (as_dev_pool_alloc(p->dev, n, &b->addr)) {
		free(b);
		return 1;
	}
	*h = b;
	*bsize = b->size;
	*addr = b->addr;
	p->live++;
	return 0;
}

static void ca_free_requested(as_policy *pol, void *h)
{
	cuda_async *p = (cuda_async *)pol;
	if (p->model)
		p->model->ops->free_requested(p->model, h);
}

static void ca_free(as_policy *pol, void *h)
{
	cuda_async *p = (cuda_async *)pol;
	if (p->model) {
		p->model->ops->free(p->model, h);
		return;
	}
	ca_block *b = h;
	as_dev_pool_free(p->dev, b->addr);
	p->live--;
	free(b);
}

static void ca_empty_cache(as_policy *pol)
{
	cuda_async *p = (cuda_async *)pol;
	if (p->model) {
		p->model->ops->empty_cache(p->model);
		return;
	}
	as_dev_pool_trim(p->dev, p->c.release_threshold);
}

static int ca_check(as_policy *pol, as_err *err)
{
	cuda_async *p = (cuda_async *)pol;
	return p->model ? p->model->ops->check(p->model, err) : 0;
}

static void ca_destroy(as_policy *pol)
{
	cuda_async *p = (cuda_async *)pol;
	if (p->model)
		p->model->ops->destroy(p->model);
	/* real mode: the device releases the pool and everything in it */
	free(p);
}

const as_policy_ops as_policy_cuda_async = {
	.name = "cuda-async",
	.summary = "the CUDA stream-ordered allocator: a real cudaMallocAsync pool with --backend cuda, a documented model in simulation",
	.opts = ca_opts,
	.create = ca_create,
	.malloc = ca_malloc,
	.free_requested = ca_free_requested,
	.free = ca_free,
	.empty_cache = ca_empty_cache,
	.check = ca_check,
	.destroy = ca_destroy,
};

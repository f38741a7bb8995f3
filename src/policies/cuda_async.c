/*
 * cuda_async.c - the CUDA stream-ordered allocator (cudaMallocAsync / cudaFreeAsync).
 *
 * With --backend cuda the policy allocates from a memory pool of its own (cudaMemPoolCreate, with the
 * release threshold and reuse flags below) and the reserved bytes are the pool's
 * cudaMemPoolAttrReservedMemCurrent; empty_cache trims the pool to the threshold.
 * In simulation the simulated device provides a model of the driver's pool (src/device/pool_sim.c,
 * derived from the real pool and compared with it in doc/real-gpu.md): one virtual range, 512-byte
 * blocks placed by best fit among blocks freed since the last synchronisation, then among the others
 * with memory under them, then the rest; physical memory held in 32 MiB chunks that a growing pool
 * takes from idle ones first, freed memory kept until empty_cache trims to the release threshold.
 * The policy is the same for both backends.
 */
#include "policy.h"
#include <sys/queue.h>
#include <stdlib.h>
#include <string.h>

typedef struct ca_conf {
	uint64_t release_threshold;
	int reuse;
} ca_conf;

typedef struct ca_block {
	uint64_t addr, size;
	LIST_ENTRY(ca_block) link;
} ca_block;

typedef struct cuda_async {
	as_policy base;
	ca_conf c;
	as_device *dev;
	LIST_HEAD(, ca_block) blocks; /* live blocks, released with the policy */
} cuda_async;

static const as_optdesc ca_opts[] = {
	{ "release_threshold", "size", "0", "bytes the pool keeps when trimmed (cudaMemPoolAttrReleaseThreshold)", as_opt_parse_size, offsetof(ca_conf, release_threshold) },
	{ "reuse", "True|False", "True", "the pool's reuse flags (follow event dependencies, opportunistic, internal dependencies)", as_opt_parse_bool, offsetof(ca_conf, reuse) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static int ca_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_cuda_async;
	cuda_async *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(ca_opts, &p->c, err) || as_conf_parse(config, ca_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_cuda_async;
	LIST_INIT(&p->blocks);
	p->dev = dev;
	(void)ctr;
	if (!dev->ops->pool.open || dev->ops->pool.open(dev, p->c.release_threshold, p->c.reuse)) {
		free(p);
		return as_fail(err, AS_EXIT_UNAVAILABLE, "cannot create a CUDA memory pool");
	}
	*out = &p->base;
	return 0;
}

static int ca_malloc(as_policy *pol, const as_request *rq, void **h, uint64_t *bsize, uint64_t *addr)
{
	uint64_t n = rq->size, stream = rq->stream;
	cuda_async *p = (cuda_async *)pol;
	(void)stream;
	ca_block *b = xmalloc(sizeof(*b));
	b->size = (n + 511) / 512 * 512;
	if (as_dev_pool_alloc(p->dev, n, &b->addr)) {
		free(b);
		return 1;
	}
	LIST_INSERT_HEAD(&p->blocks, b, link);
	*h = b;
	*bsize = b->size;
	*addr = b->addr;
	return 0;
}

static void ca_free_requested(as_policy *pol, void *h)
{
	(void)pol; (void)h; /* under --free-at completed (not its default): the block stays in use until the free */
}

static void ca_free(as_policy *pol, void *h)
{
	cuda_async *p = (cuda_async *)pol;
	ca_block *b = h;
	LIST_REMOVE(b, link);
	as_dev_pool_free(p->dev, b->addr, b->size);
	free(b);
}

static void ca_empty_cache(as_policy *pol)
{
	cuda_async *p = (cuda_async *)pol;
	as_dev_pool_trim(p->dev, p->c.release_threshold);
}

static int ca_check(as_policy *pol, as_err *err)
{
	cuda_async *p = (cuda_async *)pol;
	char why[200];
	if (p->dev->ops->pool.check && p->dev->ops->pool.check(p->dev, why, sizeof why))
		return as_fail(err, AS_EXIT_SOFTWARE, "cuda-async: %s", why);
	return 0;
}

static void ca_destroy(as_policy *pol)
{
	/* the device releases the pool and everything in it; the policy its records */
	cuda_async *p = (cuda_async *)pol;
	ca_block *b;
	while ((b = LIST_FIRST(&p->blocks))) {
		LIST_REMOVE(b, link);
		free(b);
	}
	free(p);
}

const as_policy_ops as_policy_cuda_async = {
	.name = "cuda-async",
	.summary = "the CUDA stream-ordered allocator: a real cudaMallocAsync pool with --backend cuda, a documented model in simulation",
	.opts = ca_opts,
	/* PyTorch's cudaMallocAsync backend frees at the request: its free() makes the allocation's stream
	 * wait for the recorded streams' events, then cudaFreeAsync (stream-ordered) */
	.flags = AS_CAP_FREE_AT_REQUEST,
	.create = ca_create,
	.malloc = ca_malloc,
	.free_requested = ca_free_requested,
	.free = ca_free,
	.empty_cache = ca_empty_cache,
	.check = ca_check,
	.destroy = ca_destroy,
};

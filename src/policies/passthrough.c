/* passthrough.c - no caching: every request is its own device allocation (the baseline). */
#include "policy.h"
#include <stdlib.h>
#include <sys/queue.h>

typedef struct pt_conf {
	uint64_t granule;
} pt_conf;

typedef struct pt_block {
	uint64_t addr, size, stream;
	LIST_ENTRY(pt_block) link; /* all live blocks, so destroy can release them */
} pt_block;

typedef struct passthrough {
	as_policy base;
	pt_conf conf;
	as_device *dev;
	uint64_t live_blocks;
	LIST_HEAD(, pt_block) live;
} passthrough;

static int parse_granule(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	if (as_opt_parse_size(conf, d, val, err))
		return -1;
	uint64_t g = ((pt_conf *)conf)->granule;
	if (!g || (g & (g - 1)))
		return as_fail(err, AS_EXIT_USAGE, "granule: must be a power of two, got '%s'", val);
	return 0;
}

static const as_optdesc pt_opts[] = {
	{ "granule", "size", "512", "requests are rounded up to a multiple of this (cudaMalloc's alignment)", parse_granule, offsetof(pt_conf, granule) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static int pt_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	passthrough *p = xcalloc(1, sizeof(*p));
	LIST_INIT(&p->live);
	extern const as_policy_ops as_policy_passthrough;
	(void)ctr;
	p->base.ops = &as_policy_passthrough;
	p->dev = dev;
	if (as_conf_defaults(pt_opts, &p->conf, err) || as_conf_parse(config, pt_opts, &p->conf, err)) {
		free(p);
		return -1;
	}
	*out = &p->base;
	return 0;
}

static int pt_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	uint64_t size = rq->size, stream = rq->stream;
	passthrough *p = (passthrough *)pol;
	uint64_t s = (size + p->conf.granule - 1) / p->conf.granule * p->conf.granule;
	pt_block *b = xmalloc(sizeof(*b));
	if (as_dev_alloc(p->dev, s, stream, &b->addr)) {
		free(b);
		return 1;
	}
	b->size = s;
	b->stream = stream;
	LIST_INSERT_HEAD(&p->live, b, link);
	p->live_blocks++;
	*handle = b;
	*bsize = s;
	*addr = b->addr;
	return 0;
}

static void pt_free(as_policy *pol, void *h)
{
	passthrough *p = (passthrough *)pol;
	pt_block *b = h;
	as_dev_free(p->dev, b->addr, b->size, b->stream);
	p->live_blocks--;
	LIST_REMOVE(b, link);
	free(b);
}

static void pt_empty_cache(as_policy *pol)
{
	(void)pol; /* nothing is cached */
}

static int pt_check(as_policy *pol, as_err *err)
{
	passthrough *p = (passthrough *)pol;
	if (p->live_blocks && !p->dev->reserved)
		return as_fail(err, AS_EXIT_SOFTWARE, "passthrough: live blocks but nothing reserved");
	return 0;
}

static int pt_query(as_policy *pol, int what, void *arg)
{
	if (what != AS_Q_ROUND)
		return AS_Q_UNKNOWN;
	uint64_t g = ((passthrough *)pol)->conf.granule, *n = &((as_q_round *)arg)->size;
	*n = (*n + g - 1) / g * g;
	((as_q_round *)arg)->granule = g;
	return 0;
}

static void pt_destroy(as_policy *pol)
{
	passthrough *p = (passthrough *)pol;
	pt_block *b, *n;
	LIST_FOREACH_SAFE(b, &p->live, link, n)
		free(b);
	free(p);
}

const as_policy_ops as_policy_passthrough = {
	.name = "passthrough",
	.summary = "no caching: every request is one device allocation and every free one device free (baseline)",
	.opts = pt_opts,
	.flags = AS_CAP_ROUND | AS_CAP_FREE_AT_REQUEST, /* PyTorch without caching: cudaFree in the deleter, record_stream ignored */
	.create = pt_create,
	.malloc = pt_malloc,
	.free = pt_free,
	.empty_cache = pt_empty_cache,
	.check = pt_check,
	.query = pt_query,
	.destroy = pt_destroy,
};

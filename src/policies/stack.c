/*
 * stack.c - policies stacked on upstream policies (RMM's resource adaptors, e.g. binning over a
 * pool over the device): "-p 'A>B>C'" is A taking its device memory from B, and B from C, which
 * alone talks to the device. -c gives each layer its settings, top first, separated by ';'
 * ("-c 'min_segment:20MiB;granule:2MiB'"); a layer without any takes its defaults.
 *
 * A downstream layer sees an upstream policy as its device: each segment it allocates is one
 * malloc of the upstream, each segment it frees one free. That device offers the segment calls
 * only (no virtual ranges, physical handles or pool), so expandable segments and cuda-async sit
 * only at the bottom of a stack. The summary's reserved bytes and device calls are the real
 * device's: what the whole stack obtained from the GPU.
 */
#include "policy.h"
#include "util/idmap.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define STACK_MAX 8

/* One stack the registry was asked for, kept for the process's life (the ops must outlive every
 * replay that uses them). */
typedef struct stack_def {
	as_policy_ops ops;
	char *name, *summary;
	size_t n;
	const as_policy_ops *layer[STACK_MAX];
	struct stack_def *next;
} stack_def;

static stack_def *defs;
static pthread_mutex_t defs_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- an upstream policy as a device ---- */

typedef struct updev {
	as_policy *up;
	idmap blocks;      /* address -> the upstream's handle */
	uint64_t next_id;
} updev;

static int up_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	updev *u = d->priv;
	as_request rq = { .id = ++u->next_id, .size = size, .stream = stream, .time_us = -1 };
	void *h;
	uint64_t bsize;
	if (u->up->ops->malloc(u->up, &rq, &h, &bsize, addr))
		return 1;
	idmap_put(&u->blocks, *addr, h);
	return 0;
}

static void up_free(as_device *d, uint64_t addr, uint64_t size)
{
	updev *u = d->priv;
	void *h = idmap_del(&u->blocks, addr);
	(void)size;
	if (h)
		u->up->ops->free(u->up, h);
}

static int up_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	(void)d; (void)size;
	*addr = 0;
	return 1; /* an upstream policy hands out segments only */
}

static void up_unreserve(as_device *d, uint64_t addr, uint64_t size)
{
	(void)d; (void)addr; (void)size;
}

static int up_create(as_device *d, uint64_t size, as_phys *h)
{
	(void)d; (void)size; (void)h;
	return 1;
}

static void up_release(as_device *d, as_phys h)
{
	(void)d; (void)h;
}

static int up_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	(void)d; (void)addr; (void)size; (void)h; (void)n;
	return 1;
}

static void up_unmap(as_device *d, uint64_t addr, uint64_t size)
{
	(void)d; (void)addr; (void)size;
}

/* The device goes with its stack: the upstream's destroy releases what is still allocated. */
static void up_destroy(as_device *d)
{
	updev *u = d->priv;
	idmap_free(&u->blocks);
	free(u);
	free(d);
}

static const as_device_ops up_ops = {
	.name = "upstream",
	.alloc = up_alloc, .free = up_free,
	.reserve = up_reserve, .unreserve = up_unreserve,
	.create = up_create, .release = up_release, .map = up_map, .unmap = up_unmap,
	.destroy = up_destroy,
	.pool = { 0 }, /* no stream-ordered pool */
};

static as_device *updev_new(as_policy *up, const as_device *real)
{
	updev *u = xcalloc(1, sizeof(*u));
	u->up = up;
	idmap_init(&u->blocks);
	/* real's total memory sizes what the downstream reserves virtually */
	return as_device_new(&up_ops, u, 0, 0, real);
}

/* ---- the stacked policy ---- */

typedef struct stack_pol {
	as_policy base;
	size_t n;
	as_policy *layer[STACK_MAX];  /* [0] is the top, the one the engine talks to */
	as_device *dev[STACK_MAX];    /* dev[i]: what layer i allocates from (dev[n-1]: the real one) */
	as_counters ctr[STACK_MAX];   /* the lower layers' own counters */
} stack_pol;

static void st_destroy(as_policy *pol)
{
	stack_pol *p = (stack_pol *)pol;
	for (size_t i = 0; i < p->n; i++) {
		if (p->layer[i])
			p->layer[i]->ops->destroy(p->layer[i]);
		if (i + 1 < p->n && p->dev[i])
			p->dev[i]->ops->destroy(p->dev[i]);
	}
	free(p);
}

int as_stack_create(const as_policy_ops *ops, as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err);
int as_stack_create(const as_policy_ops *ops, as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	const stack_def *s = (const stack_def *)ops;
	char *conf[STACK_MAX] = { 0 }, *copy = xstrdup(config ? config : ""), *c = copy;
	size_t nconf = 0;
	for (;;) {
		char *semi = strchr(c, ';');
		if (nconf == s->n) {
			free(copy);
			return as_fail(err, AS_EXIT_USAGE, "-c: more settings than the %zu layers of '%s' (one ';'-separated part per layer, top first)",
				s->n, s->name);
		}
		conf[nconf++] = c;
		if (!semi)
			break;
		*semi = 0;
		c = semi + 1;
	}
	stack_pol *p = xcalloc(1, sizeof(*p));
	p->base.ops = ops;
	p->n = s->n;
	p->dev[s->n - 1] = dev;
	for (size_t k = s->n; k-- > 0;) {
		if (k + 1 < s->n)
			p->dev[k] = updev_new(p->layer[k + 1], dev);
		if (s->layer[k]->create(&p->layer[k], k < nconf ? conf[k] : "", p->dev[k], k ? &p->ctr[k] : ctr, err)) {
			p->layer[k] = NULL;
			st_destroy(&p->base);
			free(copy);
			return -1;
		}
	}
	free(copy);
	*out = &p->base;
	return 0;
}

static int st_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	(void)out; (void)config; (void)dev; (void)ctr;
	return as_fail(err, AS_EXIT_SOFTWARE, "internal: a stack is created through as_policy_create");
}

static int st_malloc(as_policy *pol, const as_request *rq, void **h, uint64_t *bsize, uint64_t *addr)
{
	as_policy *top = ((stack_pol *)pol)->layer[0];
	return top->ops->malloc(top, rq, h, bsize, addr);
}

static void st_free_requested(as_policy *pol, void *h)
{
	as_policy *top = ((stack_pol *)pol)->layer[0];
	if (top->ops->free_requested)
		top->ops->free_requested(top, h);
}

static void st_free(as_policy *pol, void *h)
{
	as_policy *top = ((stack_pol *)pol)->layer[0];
	top->ops->free(top, h);
}

/* A free that names its stream reaches the top layer so (the layers below see the top's frees of
 * its segments, whose stream the device's free does not carry). */
static void st_free_from(as_policy *pol, void *h, const as_request *rq)
{
	as_policy *top = ((stack_pol *)pol)->layer[0];
	if (top->ops->free_from)
		top->ops->free_from(top, h, rq);
	else
		top->ops->free(top, h);
}

/* The program's pools are the top layer's (the layers below serve its device calls). */
static void st_pool_release(as_policy *pol, uint32_t pool, int empty)
{
	as_policy *top = ((stack_pol *)pol)->layer[0];
	if (top->ops->pool_release)
		top->ops->pool_release(top, pool, empty);
}

/* Every layer empties its cache, top first, so what the top gives back can reach the device. */
static void st_empty_cache(as_policy *pol)
{
	stack_pol *p = (stack_pol *)pol;
	for (size_t i = 0; i < p->n; i++)
		p->layer[i]->ops->empty_cache(p->layer[i]);
}

static int st_check(as_policy *pol, as_err *err)
{
	stack_pol *p = (stack_pol *)pol;
	for (size_t i = 0; i < p->n; i++)
		if (p->layer[i]->ops->check(p->layer[i], err))
			return -1;
	for (size_t i = 0; i + 1 < p->n; i++) {
		updev *u = p->dev[i]->priv;
		if ((uint64_t)u->blocks.count != p->dev[i]->num_alloc - p->dev[i]->num_free)
			return as_fail(err, AS_EXIT_SOFTWARE, "stack: layer %zu holds %zu upstream blocks, its device counts %" PRIu64,
				i, u->blocks.count, p->dev[i]->num_alloc - p->dev[i]->num_free);
	}
	return 0;
}

/* The plan goes to every layer that plans; every other query to the top, but AS_Q_SAME_RUN, which
 * the top layer cannot answer for the layers below (another stack's settings are not its own). */
static int st_query(as_policy *pol, int what, void *arg)
{
	stack_pol *p = (stack_pol *)pol;
	if (what == AS_Q_SAME_RUN)
		return AS_Q_UNKNOWN;
	if (what != AS_Q_PLAN)
		return as_policy_query(p->layer[0], what, arg);
	int rc = AS_Q_UNKNOWN;
	for (size_t i = 0; i < p->n; i++)
		if ((p->layer[i]->ops->flags & AS_CAP_PLAN) && as_policy_query(p->layer[i], what, arg) == 0)
			rc = 0;
	return rc;
}

/* "A>B>...": the stack's ops, made once per name, each layer found by find (the registry's lookup of
 * one name, passed in: this file does not call the registry that calls it); NULL if a layer is
 * unknown or there are too many. */
const as_policy_ops *as_stack_find(const char *name, const as_policy_ops *(*find)(const char *name));
const as_policy_ops *as_stack_find(const char *name, const as_policy_ops *(*find)(const char *name))
{
	pthread_mutex_lock(&defs_lock);
	stack_def *s;
	for (s = defs; s && strcmp(s->name, name); s = s->next)
		;
	if (s) {
		pthread_mutex_unlock(&defs_lock);
		return &s->ops;
	}
	s = xcalloc(1, sizeof(*s));
	char *copy = xstrdup(name), *save = NULL;
	int bad = 0;
	for (char *it = strtok_r(copy, ">", &save); it && !bad; it = strtok_r(NULL, ">", &save)) {
		const as_policy_ops *o = find(it);
		if (!o || s->n == STACK_MAX)
			bad = 1;
		else
			s->layer[s->n++] = o;
	}
	free(copy);
	if (bad || s->n < 2) {
		free(s);
		pthread_mutex_unlock(&defs_lock);
		return NULL;
	}
	s->name = xstrdup(name);
	size_t sl = strlen(name) + 64;
	s->summary = xmalloc(sl);
	snprintf(s->summary, sl, "%s, taking its device memory from the layers below", s->layer[0]->name);
	unsigned plan = 0;
	for (size_t i = 0; i < s->n; i++)
		plan |= s->layer[i]->flags & AS_CAP_PLAN;
	s->ops = (as_policy_ops){
		.name = s->name, .summary = s->summary, .opts = s->layer[0]->opts,
		.flags = (s->layer[0]->flags & ~AS_CAP_PLAN) | plan,
		.create = st_create, .malloc = st_malloc, .free_requested = st_free_requested, .free = st_free, .free_from = st_free_from,
		.empty_cache = st_empty_cache, .pool_release = st_pool_release, .check = st_check, .query = st_query, .destroy = st_destroy,
	};
	s->next = defs;
	defs = s;
	pthread_mutex_unlock(&defs_lock);
	return &s->ops;
}

/* Whether ops is a stack made by as_stack_find. */
int as_stack_is(const as_policy_ops *ops);
int as_stack_is(const as_policy_ops *ops)
{
	return ops->create == st_create;
}

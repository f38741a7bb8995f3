/* registry.c - the one list of policies. Adding a policy is one file plus one line here. */
#include "policy.h"
#include "readers/trace.h"
#include <stdio.h>
#include <string.h>

extern const as_policy_ops as_policy_passthrough;
extern const as_policy_ops as_policy_bestfit;
extern const as_policy_ops as_policy_pytorch;
extern const as_policy_ops as_policy_cuda_async;
extern const as_policy_ops as_policy_cupy;
extern const as_policy_ops as_policy_bfc;
extern const as_policy_ops as_policy_rmm_pool, as_policy_rmm_arena, as_policy_rmm_binning;
extern const as_policy_ops as_policy_optimal;
extern const as_policy_ops as_policy_buddy;
extern const as_policy_ops as_policy_stitch;
extern const as_policy_ops as_policy_pytorch_pinned;

const as_policy_ops *const as_policies[] = {
	&as_policy_pytorch,
	&as_policy_bestfit,
	&as_policy_passthrough,
	&as_policy_cuda_async,
	&as_policy_cupy,
	&as_policy_bfc,
	&as_policy_rmm_pool, &as_policy_rmm_arena, &as_policy_rmm_binning,
	&as_policy_optimal,
	&as_policy_buddy,
	&as_policy_stitch,
	&as_policy_pytorch_pinned,
	NULL,
};

/* options.c names the policy that takes a key another was given: it gets the table from here. */
__attribute__((constructor)) static void hand_over_table(void)
{
	as_conf_policies(as_policies);
}

const as_policy_ops *as_stack_find(const char *name, const as_policy_ops *(*find)(const char *name));
int as_stack_is(const as_policy_ops *ops);
int as_stack_create(const as_policy_ops *ops, as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err);

/* A registered policy by name, or a stack of them ("A>B", stack.c). */
static const as_policy_ops *find_one(const char *name)
{
	for (size_t i = 0; as_policies[i]; i++)
		if (!strcmp(as_policies[i]->name, name))
			return as_policies[i];
	return NULL;
}

const as_policy_ops *as_policy_find(const char *name)
{
	return strchr(name, '>') ? as_stack_find(name, find_one) : find_one(name);
}

void as_policy_unknown(const char *name, char *msg, size_t len)
{
	const char *names[16];
	size_t n = 0;
	for (size_t i = 0; as_policies[i] && n < 16; i++)
		names[n++] = as_policies[i]->name;
	const char *near = as_closest(name, names, n);
	if (near)
		snprintf(msg, len, "unknown policy '%s': did you mean '%s'? (see 'allocsim policies')", name, near);
	else
		snprintf(msg, len, "unknown policy '%s' (see 'allocsim policies')", name);
}

const char *as_cap_name(unsigned bit)
{
	static const char *const names[] = { "stats", "segments", "free_stats", "waste", "summary", "reconcile", "plan", "no_inferred_empty", "round", "free_at_request" };
	return bit < sizeof names / sizeof *names ? names[bit] : NULL;
}

int as_policy_create(const as_policy_ops *ops, as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	if (as_stack_is(ops))
		return as_stack_create(ops, out, config, dev, ctr, err);
	return ops->create(out, config, dev, ctr, err);
}

unsigned as_policy_prepare(const as_policy_ops *ops, const as_meta *m, uint64_t capacity, char **config)
{
	return ops->prepare ? ops->prepare(config, m, capacity) : 0;
}

int as_policy_recorded(const as_policy_ops *ops, const char *recorded, const char *config)
{
	if (!recorded)
		return 0;
	return ops->same_settings ? ops->same_settings(recorded, config) : !strcmp(recorded, config);
}

/* registry.c - the one list of policies. Adding a policy is one file plus one line here. */
#include "policy.h"
#include <string.h>

extern const as_policy_ops as_policy_passthrough;
extern const as_policy_ops as_policy_bestfit;
extern const as_policy_ops as_policy_pytorch;
extern const as_policy_ops as_policy_cuda_async;

const as_policy_ops *const as_policies[] = {
	&as_policy_pytorch,
	&as_policy_bestfit,
	&as_policy_passthrough,
	&as_policy_cuda_async,
	NULL,
};

const as_policy_ops *as_policy_find(const char *name)
{
	for (size_t i = 0; as_policies[i]; i++)
		if (!strcmp(as_policies[i]->name, name))
			return as_policies[i];
	return NULL;
}

const char *as_cap_name(unsigned bit)
{
	static const char *const names[] = { "stats", "segments", "free_stats", "waste", "summary", "reconcile", "plan" };
	return bit < sizeof names / sizeof *names ? names[bit] : NULL;
}

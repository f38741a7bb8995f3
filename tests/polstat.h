/* polstat.h - a policy's statistic by name (AS_Q_STATS), for the C unit tests. */
#ifndef ALLOCSIM_POLSTAT_H
#define ALLOCSIM_POLSTAT_H
#include <stdint.h>
#include <string.h>
#include "policies/policy.h"

struct polstat_q {
	const char *key;
	int64_t v;
	int found;
};

static void polstat_cb(void *ctx, const char *key, int64_t value)
{
	struct polstat_q *q = ctx;
	if (!strcmp(key, q->key))
		q->v = value, q->found = 1;
}

/* The statistic KEY of POL: 1 and *v, or 0 when the policy keeps no such statistic. */
static inline int policy_stat(as_policy *pol, const char *key, int64_t *v)
{
	struct polstat_q q = { key, 0, 0 };
	as_q_stats qs = { polstat_cb, &q };
	if (as_policy_query(pol, AS_Q_STATS, &qs) || !q.found)
		return 0;
	*v = q.v;
	return 1;
}

/* ... as unsigned, UINT64_MAX when there is none */
static inline uint64_t policy_stat_u64(as_policy *pol, const char *key)
{
	int64_t v;
	return policy_stat(pol, key, &v) ? (uint64_t)v : UINT64_MAX;
}
#endif

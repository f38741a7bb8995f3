/* batch.c - commands over many inputs: --keep-going's error lines and exit status (batch.h). */
#include "cli/batch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_name_input(as_err *err, const char *path)
{
	if (!err->code || err->code == AS_EXIT_INTERRUPTED || !path || strstr(err->msg, path))
		return;
	char tmp[sizeof err->msg];
	size_t pl = strlen(path);
	if (pl > sizeof tmp / 2)
		pl = sizeof tmp / 2;
	memcpy(tmp, path, pl);
	memcpy(tmp + pl, ": ", 2);
	size_t ml = strlen(err->msg);
	if (pl + 2 + ml >= sizeof tmp)
		ml = sizeof tmp - pl - 3;
	memcpy(tmp + pl + 2, err->msg, ml);
	tmp[pl + 2 + ml] = 0;
	memcpy(err->msg, tmp, sizeof tmp);
}

void cli_batch_error(size_t k, size_t n, const char *path, const char *what, const as_err *err)
{
	as_err e = *err;
	cli_name_input(&e, path);
	fprintf(stderr, "%s: error: input %zu of %zu%s%s: %s\n", as_progname, k + 1, n, what ? ", " : "", what ? what : "",
		e.msg);
}

int cli_batch_status(size_t failed, size_t rows, const as_err *first)
{
	if (!failed)
		return 0;
	if (!rows)
		return first && first->code ? first->code : AS_EXIT_SOFTWARE;
	return AS_EXIT_PARTIAL;
}

uint64_t cli_run_cost(uint64_t events, const as_policy_ops *ops)
{
	return events * (ops->flags & AS_CAP_PLAN ? 16 : 1);
}

typedef struct { uint64_t cost; size_t i; } costidx;

static int cmp_cost(const void *a, const void *b)
{
	const costidx *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost < y->cost ? 1 : -1;
	return x->i < y->i ? -1 : x->i > y->i;
}

void cli_cost_order(const uint64_t *cost, size_t n, size_t *idx)
{
	costidx *c = xmalloc((n ? n : 1) * sizeof(*c));
	for (size_t i = 0; i < n; i++)
		c[i] = (costidx){ cost[i], i };
	qsort(c, n, sizeof(*c), cmp_cost);
	for (size_t i = 0; i < n; i++)
		idx[i] = c[i].i;
	free(c);
}

/* work.c - progress reports of long computations (work.h). */
#include "util/work.h"
#include <stddef.h>

static as_work_fn hook;

void as_work_hook(as_work_fn fn)
{
	hook = fn;
}

void as_work_report(const char *what, uint64_t done, uint64_t total)
{
	if (hook)
		hook(what, done, total);
}

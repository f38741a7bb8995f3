/* strtab.c - interned strings (see strtab.h). */
#include "util/strtab.h"
#include "util/common.h"
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void place(uint32_t *index, size_t icap, const char *s, uint32_t id)
{
	size_t j = hash(s) & (icap - 1);
	while (index[j])
		j = (j + 1) & (icap - 1);
	index[j] = id;
}

uint32_t as_strtab_id(as_strtab *t, const char *s, size_t max_bytes)
{
	if (t->icap) {
		for (size_t j = hash(s) & (t->icap - 1); t->index[j]; j = (j + 1) & (t->icap - 1))
			if (!strcmp(t->strs[t->index[j] - 1], s))
				return t->index[j];
	}
	size_t len = strlen(s) + 1;
	if (max_bytes && t->bytes + len > max_bytes)
		return 0;
	if ((t->n + 1) * 2 > t->icap) {
		size_t nc = t->icap ? t->icap * 2 : 256;
		uint32_t *ni = xcalloc(nc, sizeof(*ni));
		for (size_t i = 0; i < t->n; i++)
			place(ni, nc, t->strs[i], (uint32_t)(i + 1));
		free(t->index);
		t->index = ni;
		t->icap = nc;
	}
	AS_GROW(t->strs, t->n, t->cap, 64);
	t->strs[t->n++] = xstrdup(s);
	t->bytes += len;
	place(t->index, t->icap, s, (uint32_t)t->n);
	return (uint32_t)t->n;
}

void as_strtab_free(as_strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

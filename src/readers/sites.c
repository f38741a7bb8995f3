/* sites.c - allocation sites from recorded stacks (see sites.h). */
#include "readers/sites.h"
#include "util/common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void as_sites_begin(as_sites *t)
{
	t->nframes = 0;
	t->culprit = SIZE_MAX;
	t->first_py = SIZE_MAX;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

void as_sites_frame(as_sites *t, const char *file, uint64_t line, const char *name)
{
	if (!file || !ends_with(file, ".py"))
		return;
	if (t->culprit != SIZE_MAX && t->nframes >= t->culprit + AS_SITE_FRAMES)
		return; /* enough frames outward of the culprit */
	if (t->nframes == sizeof t->file / sizeof t->file[0]) {
		if (t->culprit != SIZE_MAX)
			return;
		/* deep inside torch: keep the innermost Python frame and the most recent ones */
		memmove(&t->file[1], &t->file[2], (t->nframes - 2) * sizeof(t->file[0]));
		memmove(&t->line[1], &t->line[2], (t->nframes - 2) * sizeof(t->line[0]));
		memmove(&t->name[1], &t->name[2], (t->nframes - 2) * sizeof(t->name[0]));
		t->nframes--;
	}
	size_t i = t->nframes++;
	t->file[i] = file;
	t->line[i] = line;
	t->name[i] = name ? name : "?";
	if (t->first_py == SIZE_MAX)
		t->first_py = i;
	if (t->culprit == SIZE_MAX && !strstr(file, "/torch/") && strncmp(file, "torch/", 6))
		t->culprit = i;
}

/* Interns s (taken over) in the table; NULL when the table is full. */
static const char *intern(as_sites *t, char *s)
{
	uint32_t id = as_strtab_id(&t->tab, s, AS_SITES_MAX);
	free(s);
	return id ? as_strtab_str(&t->tab, id) : NULL;
}

const char *as_sites_end(as_sites *t)
{
	size_t from = t->culprit != SIZE_MAX ? t->culprit : t->first_py;
	if (from == SIZE_MAX)
		return NULL;
	size_t to = from + AS_SITE_FRAMES < t->nframes ? from + AS_SITE_FRAMES : t->nframes;
	/* when the table is nearly full, new stacks keep only their culprit */
	if (t->tab.bytes > AS_SITES_MAX / 2)
		to = from + 1;
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	for (size_t i = from; i < to; i++)
		fprintf(f, "%s%s:%llu %s", i > from ? " < " : "", t->file[i], (unsigned long long)t->line[i], t->name[i]);
	fclose(f);
	return intern(t, s);
}

void as_sites_free(as_sites *t)
{
	as_strtab_free(&t->tab);
	memset(t, 0, sizeof(*t));
}

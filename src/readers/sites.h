/* sites.h - allocation sites from recorded stacks: a reader adds an allocation's frames innermost
 * first and gets back one interned string, "file:line function" frames joined by " < ", that starts
 * with the culprit: the innermost Python frame outside torch (the innermost Python frame when every
 * one is in torch). At most AS_SITE_FRAMES frames are kept; the table holds at most AS_SITES_MAX
 * bytes (then further new stacks get the culprit frame alone, then NULL). */
#ifndef ALLOCSIM_SITES_H
#define ALLOCSIM_SITES_H
#include <stddef.h>
#include <stdint.h>
#include "util/strtab.h"

#define AS_SITE_FRAMES 4
#define AS_SITES_MAX ((size_t)64 << 20)

typedef struct as_sites {
	as_strtab tab;          /* the sites, interned */
	/* the stack being added */
	const char *file[AS_SITE_FRAMES * 4];
	uint64_t line[AS_SITE_FRAMES * 4];
	const char *name[AS_SITE_FRAMES * 4];
	size_t nframes;
	size_t culprit;         /* index of the culprit frame; SIZE_MAX = none yet */
	size_t first_py;
} as_sites;

void as_sites_begin(as_sites *t);
/* One frame; the strings must live until as_sites_end. Frames other than Python's (C++, "??")
 * are skipped. */
void as_sites_frame(as_sites *t, const char *file, uint64_t line, const char *name);
/* The interned site of the frames added since as_sites_begin; NULL if none was a Python frame. */
const char *as_sites_end(as_sites *t);
void as_sites_free(as_sites *t);
#endif

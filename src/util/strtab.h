/* strtab.h - a table of interned strings, numbered from 1 in the order they were first added
 * (allocation sites: the snapshot reader's, blame's). Open addressing over the numbers. */
#ifndef ALLOCSIM_STRTAB_H
#define ALLOCSIM_STRTAB_H
#include <stddef.h>
#include <stdint.h>

typedef struct as_strtab {
	char **strs;      /* strs[id - 1] */
	size_t n, cap;
	uint32_t *index;  /* ids by hash; 0 = empty */
	size_t icap;
	size_t bytes;     /* held by the strings */
} as_strtab;

/* The number of s (kept as a copy), 1 or more; 0 when a new string would take the table past
 * max_bytes (0: no limit). */
uint32_t as_strtab_id(as_strtab *t, const char *s, size_t max_bytes);
static inline const char *as_strtab_str(const as_strtab *t, uint32_t id) { return t->strs[id - 1]; }
void as_strtab_free(as_strtab *t);
#endif

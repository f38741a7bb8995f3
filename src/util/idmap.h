/* idmap.h - open-addressing hash map from uint64 keys to pointers.
 * Hand-written because no Debian C library offers an integer-keyed map with deletion that is
 * this small and fast; the replay's hot path does one lookup per event. */
#ifndef ALLOCSIM_IDMAP_H
#define ALLOCSIM_IDMAP_H
#include <stdint.h>
#include <stddef.h>

typedef struct idmap {
	uint64_t *keys;
	void **vals;   /* NULL = empty slot, IDMAP_TOMB = deleted */
	size_t cap, count, used;
} idmap;

void idmap_init(idmap *m);
void idmap_free(idmap *m);
void *idmap_get(const idmap *m, uint64_t key);
void idmap_put(idmap *m, uint64_t key, void *val); /* val must not be NULL; replaces */
void *idmap_del(idmap *m, uint64_t key);          /* returns old value or NULL */
/* Iteration: for (size_t i = 0; i < m->cap; i++) if (idmap_live(m, i)) ... */
int idmap_live(const idmap *m, size_t i);
#endif

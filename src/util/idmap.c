/* idmap.c - linear-probing hash map with tombstones (see idmap.h for why it is hand-written). */
#include "util/idmap.h"
#include "util/common.h"
#include <string.h>
#include <stdlib.h>

static char tomb;
#define IDMAP_TOMB ((void *)&tomb)

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

void idmap_init(idmap *m)
{
	memset(m, 0, sizeof(*m));
}

void idmap_free(idmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

int idmap_live(const idmap *m, size_t i)
{
	return m->vals[i] && m->vals[i] != IDMAP_TOMB;
}

static void grow(idmap *m)
{
	size_t oc = m->cap;
	uint64_t *ok = m->keys;
	void **ov = m->vals;
	/* Rehash at the same size when tombstones fill the table (ids are never reused, so a long
	 * replay deletes as many keys as it inserts); double only when the live keys need it. */
	size_t nc = oc ? oc : 64;
	while (m->count * 2 >= nc)
		nc *= 2;
	m->keys = xcalloc(nc, sizeof(*m->keys));
	m->vals = xcalloc(nc, sizeof(*m->vals));
	m->cap = nc;
	m->count = m->used = 0;
	for (size_t i = 0; i < oc; i++)
		if (ov[i] && ov[i] != IDMAP_TOMB)
			idmap_put(m, ok[i], ov[i]);
	free(ok);
	free(ov);
}

void *idmap_get(const idmap *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1;
	for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
		if (!m->vals[i])
			return NULL;
		if (m->vals[i] != IDMAP_TOMB && m->keys[i] == key)
			return m->vals[i];
	}
}

void idmap_put(idmap *m, uint64_t key, void *val)
{
	if ((m->used + 1) * 4 >= m->cap * 3)
		grow(m);
	size_t mask = m->cap - 1, tombi = SIZE_MAX;
	for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
		if (!m->vals[i]) {
			if (tombi != SIZE_MAX)
				i = tombi;
			else
				m->used++;
			m->keys[i] = key;
			m->vals[i] = val;
			m->count++;
			return;
		}
		if (m->vals[i] == IDMAP_TOMB) {
			if (tombi == SIZE_MAX)
				tombi = i;
		} else if (m->keys[i] == key) {
			m->vals[i] = val;
			return;
		}
	}
}

void *idmap_del(idmap *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1;
	for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
		if (!m->vals[i])
			return NULL;
		if (m->vals[i] != IDMAP_TOMB && m->keys[i] == key) {
			void *v = m->vals[i];
			m->vals[i] = IDMAP_TOMB;
			m->count--;
			return v;
		}
	}
}

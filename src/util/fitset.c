/* fitset.c - the free-block index of fitset.h: per stream, size classes over small red-black trees
 * (the code: fitset_inline.h). */
#include "util/fitset_inline.h"

/* The largest member of the last class at or before c that holds one. */
static as_fitnode *last_upto(as_fitstream *st, uint32_t c)
{
	uint32_t w = c >> 6;
	uint64_t m = word_bits(st, w) & (~0ULL >> (63 - (c & 63)));
	if (!m) {
		uint64_t t = w ? st->top & (~0ULL >> (64 - w)) : 0;
		if (!t)
			return NULL;
		w = 63u - (uint32_t)__builtin_clzll(t);
		m = st->chunk[w]->bits;
	}
	return st->chunk[w]->hi[63 - __builtin_clzll(m)];
}

void as_fitset_init(as_fitset *s)
{
	RB_INIT(&s->streams);
	s->last = NULL;
	s->spare_streams = NULL;
	s->spare_chunks = NULL;
	s->count = 0;
	s->largest = 0;
	s->largest_ok = 1;
}

void as_fitset_destroy(as_fitset *s)
{
	as_fitstream *st, *next;
	RB_FOREACH_SAFE(st, as_fitstreams, &s->streams, next)
		stream_drop(s, st);
	for (st = s->spare_streams; st; st = next) {
		next = st->spare;
		free(st);
	}
	for (as_fitchunk *c = s->spare_chunks, *cn; c; c = cn) {
		cn = c->spare;
		free(c);
	}
	as_fitset_init(s);
}

as_fitnode *as_fitset_find(as_fitset *s, uint64_t stream, uint64_t size, uint64_t ptr)
{
	as_fitstream *st = stream_find(s, stream);
	if (!st)
		return NULL;
	uint32_t c = as_fit_class(size);
	if (!(word_bits(st, c >> 6) & (1ULL << (c & 63))))
		return NULL;
	as_fitnode *n = RB_ROOT(tree_of(st, c));
	while (n && (n->size != size || n->ptr != ptr))
		n = key_less(size, ptr, n) ? RB_LEFT(n, rb) : RB_RIGHT(n, rb);
	return n;
}

as_fitnode *as_fitset_next(as_fitset *s, as_fitnode *n)
{
	(void)s; /* (used only by RB_NEXT, which ignores its head) */
	as_fitnode *r = RB_NEXT(as_fittree, NULL, n);
	if (r)
		return r;
	as_fitstream *st = n->st;
	if ((r = first_from(st, n->cls + 1)))
		return r;
	for (st = RB_NEXT(as_fitstreams, &s->streams, st); st; st = RB_NEXT(as_fitstreams, &s->streams, st))
		if ((r = first_from(st, 0)))
			return r;
	return NULL;
}

as_fitnode *as_fitset_prev(as_fitset *s, as_fitnode *n)
{
	(void)s; /* (used only by RB_PREV, which ignores its head) */
	as_fitnode *r = RB_PREV(as_fittree, NULL, n);
	if (r)
		return r;
	as_fitstream *st = n->st;
	uint32_t c = n->cls;
	if (c && (r = last_upto(st, c - 1)))
		return r;
	for (st = RB_PREV(as_fitstreams, &s->streams, st); st; st = RB_PREV(as_fitstreams, &s->streams, st))
		if ((r = last_upto(st, FIT_LAST_CLASS)))
			return r;
	return NULL;
}

as_fitnode *as_fitset_min(as_fitset *s)
{
	as_fitnode *r;
	for (as_fitstream *st = RB_MIN(as_fitstreams, &s->streams); st; st = RB_NEXT(as_fitstreams, &s->streams, st))
		if ((r = first_from(st, 0)))
			return r;
	return NULL;
}

as_fitnode *as_fitset_max(as_fitset *s)
{
	as_fitnode *r;
	for (as_fitstream *st = RB_MAX(as_fitstreams, &s->streams); st; st = RB_PREV(as_fitstreams, &s->streams, st))
		if ((r = last_upto(st, FIT_LAST_CLASS)))
			return r;
	return NULL;
}

uint64_t as_fitset_largest(as_fitset *s)
{
	if (!s->largest_ok) {
		uint64_t m = 0;
		as_fitstream *st;
		RB_FOREACH(st, as_fitstreams, &s->streams) {
			as_fitnode *r = last_upto(st, FIT_LAST_CLASS);
			if (r && r->size > m)
				m = r->size;
		}
		s->largest = m;
		s->largest_ok = 1;
	}
	return s->largest;
}

void as_fitset_insert(as_fitset *s, as_fitnode *n, uint64_t stream, uint64_t size, uint64_t ptr)
{
	fit_insert(s, n, stream, size, ptr);
}

void as_fitset_remove(as_fitset *s, as_fitnode *n)
{
	fit_remove(s, n);
}

void as_fitset_rekey(as_fitset *s, as_fitnode *n, uint64_t size, uint64_t ptr)
{
	fit_rekey(s, n, size, ptr);
}

as_fitnode *as_fitset_nfind(as_fitset *s, uint64_t stream, uint64_t size)
{
	return fit_nfind(s, stream, size);
}

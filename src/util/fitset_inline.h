/* fitset_inline.h - the free-block index's code (fitset.h), for fitset.c and for a caller whose hot
 * path wants the index's common operations inline (pytorch.c: a call and its spills cost about as
 * much as a small class's work): fit_insert, fit_remove, fit_rekey and fit_nfind, the same as
 * as_fitset_insert, as_fitset_remove, as_fitset_rekey and as_fitset_nfind, always inline; the rest
 * static. Both copies work on the same sets. */
#ifndef ALLOCSIM_FITSET_INLINE_H
#define ALLOCSIM_FITSET_INLINE_H
#include "util/fitset.h"
#include "util/common.h"
#include <stdlib.h>

#define AS_FIT_STATIC static __attribute__((unused)) /* (a caller of the inline operations uses some) */

#define FIT_LAST_CLASS (AS_FIT_WORDS * 64u - 1u)

AS_FIT_STATIC int fit_cmp(const as_fitnode *a, const as_fitnode *b)
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

AS_FIT_STATIC int stream_cmp(const as_fitstream *a, const as_fitstream *b)
{
	return a->stream < b->stream ? -1 : a->stream > b->stream;
}

RB_GENERATE_STATIC(as_fittree, as_fitnode, rb, fit_cmp);
RB_GENERATE_STATIC(as_fitstreams, as_fitstream, rb, stream_cmp);

/* (size, ptr) < n's key */
static inline int key_less(uint64_t size, uint64_t ptr, const as_fitnode *n)
{
	return (size < n->size) | ((size == n->size) & (ptr < n->ptr));
}

static inline struct as_fittree *tree_of(as_fitstream *st, uint32_t c)
{
	return &st->chunk[c >> 6]->t[c & 63];
}

/* The classes of word w that hold a block. */
static inline uint64_t word_bits(const as_fitstream *st, uint32_t w)
{
	return st->top >> w & 1 ? st->chunk[w]->bits : 0;
}

/* ---- streams: a stream's part stays while it holds a block, and while it is the one found last
 * (so that a pool that empties and fills again on one stream does not drop and rebuild it); at
 * most that one stream is empty. */

AS_FIT_STATIC void stream_drop(as_fitset *s, as_fitstream *st)
{
	RB_REMOVE(as_fitstreams, &s->streams, st);
	for (unsigned w = 0; w < AS_FIT_WORDS; w++)
		if (st->chunk[w]) {
			st->chunk[w]->spare = s->spare_chunks;
			s->spare_chunks = st->chunk[w];
			st->chunk[w] = NULL;
		}
	st->spare = s->spare_streams;
	s->spare_streams = st;
}

AS_FIT_STATIC void set_last(as_fitset *s, as_fitstream *st)
{
	as_fitstream *old = s->last;
	if (old && old != st && !old->count)
		stream_drop(s, old);
	s->last = st;
}

AS_FIT_STATIC as_fitstream *stream_find(as_fitset *s, uint64_t stream)
{
	as_fitstream *st = s->last;
	if (st && st->stream == stream)
		return st;
	for (st = RB_ROOT(&s->streams); st; st = stream < st->stream ? RB_LEFT(st, rb) : RB_RIGHT(st, rb))
		if (st->stream == stream) {
			set_last(s, st);
			return st;
		}
	return NULL;
}

/* The first stream after stream. */
AS_FIT_STATIC as_fitstream *stream_after(as_fitset *s, uint64_t stream)
{
	as_fitstream *st = RB_ROOT(&s->streams), *res = NULL;
	while (st) {
		int after = stream < st->stream;
		res = after ? st : res;
		st = after ? RB_LEFT(st, rb) : RB_RIGHT(st, rb);
	}
	return res;
}

AS_FIT_STATIC as_fitstream *stream_new(as_fitset *s, uint64_t stream)
{
	as_fitstream *st = s->spare_streams;
	if (st)
		s->spare_streams = st->spare; /* top and count 0, no chunks: as it was dropped */
	else
		st = xcalloc(1, sizeof(*st));
	st->stream = stream;
	RB_INSERT(as_fitstreams, &s->streams, st);
	set_last(s, st);
	return st;
}

/* ---- classes ------------------------------------------------------------------------------ */

/* The smallest member of the first class at or after c that holds one. */
AS_FIT_STATIC as_fitnode *first_from(as_fitstream *st, uint32_t c)
{
	uint32_t w = c >> 6;
	if (w >= AS_FIT_WORDS)
		return NULL;
	uint64_t m = word_bits(st, w) & (~0ULL << (c & 63));
	if (!m) {
		uint64_t t = w + 1 < AS_FIT_WORDS ? st->top & (~0ULL << (w + 1)) : 0;
		if (!t)
			return NULL;
		w = (uint32_t)__builtin_ctzll(t);
		m = st->chunk[w]->bits;
	}
	return st->chunk[w]->lo[__builtin_ctzll(m)]; /* the class's smallest (it holds one: its bit is set) */
}


/* ---- the set -------------------------------------------------------------------------------- */



/* RB_INSERT into class b of chunk ch, which holds a member: a new first or last member is linked
 * below the old one at once (where the descent would end: most inserts), any other after a two-way
 * descent (one combined comparison per level: keys are unique); balanced by the generated insert
 * colouring (rotations keep the order, so the first and last stay). */
AS_FIT_STATIC void class_insert(as_fitchunk *ch, uint32_t b, as_fitnode *n)
{
	struct as_fittree *t = &ch->t[b];
	as_fitnode *lo = ch->lo[b], *hi = ch->hi[b];
	if (key_less(n->size, n->ptr, lo)) {
		RB_SET(n, lo, rb);
		RB_LEFT(lo, rb) = n;
		ch->lo[b] = n;
	} else if (!key_less(n->size, n->ptr, hi)) {
		RB_SET(n, hi, rb);
		RB_RIGHT(hi, rb) = n;
		ch->hi[b] = n;
	} else {
		as_fitnode *parent = NULL, *tmp = RB_ROOT(t);
		int less = 0;
		while (tmp) {
			parent = tmp;
			less = key_less(n->size, n->ptr, tmp);
			tmp = less ? RB_LEFT(tmp, rb) : RB_RIGHT(tmp, rb);
		}
		RB_SET(n, parent, rb);
		if (less)
			RB_LEFT(parent, rb) = n;
		else
			RB_RIGHT(parent, rb) = n;
	}
	as_fittree_RB_INSERT_COLOR(t, n);
}

/* RB_REMOVE from class b of chunk ch, which keeps a member: its first or last passes to n's neighbour. */
AS_FIT_STATIC void class_remove(as_fitchunk *ch, uint32_t b, as_fitnode *n)
{
	if (n == ch->lo[b])
		ch->lo[b] = RB_NEXT(as_fittree, NULL, n);
	if (n == ch->hi[b])
		ch->hi[b] = RB_PREV(as_fittree, NULL, n);
	RB_REMOVE(as_fittree, &ch->t[b], n);
}

/* Puts n (its size already set) into its class's tree of stream st, taking a chunk of 64 classes
 * from the spares or the heap where the class's word has none. */
static inline void class_link(as_fitset *s, as_fitstream *st, as_fitnode *n, uint32_t c)
{
	uint32_t w = c >> 6;
	as_fitchunk *ch = st->chunk[w];
	if (!ch) {
		ch = s->spare_chunks;
		if (ch) {
			s->spare_chunks = ch->spare;
			RB_INIT(&ch->t[0]); /* the others stayed empty, bits stayed 0 */
		} else {
			ch = xcalloc(1, sizeof(*ch));
		}
		st->chunk[w] = ch;
	}
	st->top |= 1ULL << w;
	n->cls = c;
	uint64_t bit = 1ULL << (c & 63);
	if (!(ch->bits & bit)) {
		/* an empty class (most are: 64 a power of two): n is its tree, black, as an insert leaves it */
		ch->bits |= bit;
		RB_SET(n, NULL, rb);
		RB_COLOR(n, rb) = RB_BLACK;
		RB_ROOT(&ch->t[c & 63]) = n;
		ch->lo[c & 63] = ch->hi[c & 63] = n;
		return;
	}
	class_insert(ch, c & 63, n);
}

/* Takes n out of its class's tree of stream st, clearing the class's bit (and its word's) when the
 * tree is left empty. */
static inline void class_unlink(as_fitstream *st, as_fitnode *n)
{
	uint32_t c = n->cls;
	uint32_t w = c >> 6;
	as_fitchunk *ch = st->chunk[w];
	struct as_fittree *t = &ch->t[c & 63];
	if (RB_ROOT(t) == n && !RB_LEFT(n, rb) && !RB_RIGHT(n, rb))
		RB_ROOT(t) = NULL; /* alone in its class */
	else
		class_remove(ch, c & 63, n);
	if (!RB_ROOT(t)) {
		ch->bits &= ~(1ULL << (c & 63));
		if (!ch->bits)
			st->top &= ~(1ULL << w);
	}
}

static inline __attribute__((always_inline)) void fit_insert(as_fitset *s, as_fitnode *n, uint64_t stream, uint64_t size, uint64_t ptr)
{
	as_fitstream *st = stream_find(s, stream);
	if (!st)
		st = stream_new(s, stream);
	n->size = size;
	n->ptr = ptr;
	n->st = st;
	class_link(s, st, n, as_fit_class(size));
	st->count++;
	s->count++;
	if (s->largest_ok && size > s->largest)
		s->largest = size;
}

static inline __attribute__((always_inline)) void fit_remove(as_fitset *s, as_fitnode *n)
{
	as_fitstream *st = n->st;
	class_unlink(st, n);
	if (n->size == s->largest)
		s->largest_ok = 0; /* perhaps another of that size stays: the next question looks */
	if (!--s->count) {
		s->largest = 0;
		s->largest_ok = 1;
	}
	if (!--st->count)
		set_last(s, st);
	n->st = NULL;
}

/* A rekey within the member's class (about 4% of them): it keeps its place when its neighbours
 * allow, else it moves within the tree. */
AS_FIT_STATIC __attribute__((noinline)) void rekey_in_class(as_fitnode *n, uint64_t size, uint64_t ptr)
{
	as_fitchunk *ch = n->st->chunk[n->cls >> 6];
	uint32_t b = n->cls & 63;
	struct as_fittree *t = &ch->t[b];
	if (RB_ROOT(t) == n && !RB_LEFT(n, rb) && !RB_RIGHT(n, rb)) {
		n->size = size; /* alone in its class: in order whatever the key */
		n->ptr = ptr;
		return;
	}
	as_fitnode *pv = RB_PREV(as_fittree, NULL, n), *nx = RB_NEXT(as_fittree, NULL, n);
	n->size = size;
	n->ptr = ptr;
	if ((!pv || !key_less(size, ptr, pv)) && (!nx || key_less(size, ptr, nx)))
		return; /* its place in the order is unchanged */
	class_remove(ch, b, n); /* (another member stays: n was not alone) */
	class_insert(ch, b, n);
}

static inline __attribute__((always_inline)) void fit_rekey(as_fitset *s, as_fitnode *n, uint64_t size, uint64_t ptr)
{
	/* The same set as as_fitset_remove then as_fitset_insert on the same stream, without what does
	 * not change there: the stream's lookup, its count and the set's, the stream found last (a
	 * member stays, so its stream stays). The largest member's size as the two would leave it. */
	uint32_t c1 = as_fit_class(size);
	if (n->size == s->largest && size < n->size)
		s->largest_ok = 0;
	else if (size > s->largest && s->largest_ok)
		s->largest = size;
	if (n->cls == c1) {
		rekey_in_class(n, size, ptr);
		return;
	}
	as_fitstream *st = n->st;
	class_unlink(st, n);
	n->size = size;
	n->ptr = ptr;
	class_link(s, st, n, c1);
}

/* nfind past the stream asked for (or without it): the first member of the streams after it. */
AS_FIT_STATIC as_fitnode *nfind_after(as_fitset *s, uint64_t stream)
{
	as_fitnode *r;
	for (as_fitstream *st = stream_after(s, stream); st; st = RB_NEXT(as_fitstreams, &s->streams, st))
		if ((r = first_from(st, 0)))
			return r;
	return NULL;
}

static inline __attribute__((always_inline)) as_fitnode *fit_nfind(as_fitset *s, uint64_t stream, uint64_t size)
{
	as_fitstream *st = stream_find(s, stream);
	if (!st)
		return nfind_after(s, stream);
	/* first_from(c) with the class's own tree searched first, inline: most requests find a block
	 * of their stream in their class's word or the next word that holds one */
	uint32_t c = as_fit_class(size), w = c >> 6, b = c & 63;
	uint64_t top = st->top;
	if (top >> w & 1) {
		as_fitchunk *ch = st->chunk[w];
		uint64_t bits = ch->bits;
		/* the class's first member at or after (size, 0): none past its last, its first when that
		 * one is, else the descent */
		if ((bits >> b & 1) && size <= ch->hi[b]->size) {
			as_fitnode *r = ch->lo[b];
			if (size <= r->size)
				return r;
			for (as_fitnode *tmp = RB_ROOT(&ch->t[b]); tmp;) { /* (size, 0) <= tmp */
				int le = size <= tmp->size;
				r = le ? tmp : r;
				tmp = le ? RB_LEFT(tmp, rb) : RB_RIGHT(tmp, rb);
			}
			return r;
		}
		uint64_t m = b == 63 ? 0 : bits & (~0ULL << (b + 1));
		if (m)
			return ch->lo[__builtin_ctzll(m)];
	}
	uint64_t t = w + 1 < AS_FIT_WORDS ? top & (~0ULL << (w + 1)) : 0;
	if (t) {
		as_fitchunk *ch = st->chunk[__builtin_ctzll(t)];
		return ch->lo[__builtin_ctzll(ch->bits)];
	}
	return nfind_after(s, stream);
}

#endif

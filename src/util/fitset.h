/* fitset.h - an ordered set of free blocks keyed (stream, size, address), built for best fit.
 *
 * A caching allocator's free-block index (PyTorch's BlockPool::blocks, a std::set ordered by
 * stream, size and address) answers "the first block at or after (stream, size, 0)" on every
 * request and takes an insert and a removal on most frees and splits. One red-black tree over all
 * free blocks costs a cache miss and a mispredicted branch per level. Here each stream's blocks
 * are split into size classes (as TLSF does: 64 classes per power of two, monotone in size), each
 * class a small red-black tree ordered by (size, address) with its first and last member at hand,
 * and a two-level bitmap of the classes that hold a block. A search descends one small tree and, when its class has nothing large
 * enough, takes the smallest block of the next class that the bitmap names. The order and every
 * answer are those of the single tree (the same first block, the same neighbours, the same walk);
 * only the cost differs. No library offers this (libbsd's trees are the ordered sets used inside).
 *
 * Intrusive: a block embeds an as_fitnode and is found back with container_of-style arithmetic.
 * The node holds its key (size, ptr) as inserted: change a member's key only through
 * as_fitset_rekey. Memory: a stream with free blocks costs about 600 bytes, a power of two of
 * sizes with free blocks 520 bytes; both are recycled when they empty, nothing is allocated while the
 * set's shape repeats. */
#ifndef ALLOCSIM_FITSET_H
#define ALLOCSIM_FITSET_H
#include <stddef.h>
#include <stdint.h>
#include "util/tree.h"

#define AS_FIT_SLB 6                              /* 2^6 classes per power of two */
#define AS_FIT_WORDS 64                           /* 64 x 64 bits >= the classes of 64-bit sizes */

typedef struct as_fitstream as_fitstream;

typedef struct as_fitnode {
	RB_ENTRY(as_fitnode) rb;
	uint64_t size, ptr;
	as_fitstream *st;                         /* the stream's part of the set (while a member) */
	uint32_t cls;                             /* its class, as_fit_class(size) (while a member) */
} as_fitnode;

RB_HEAD(as_fittree, as_fitnode);
RB_HEAD(as_fitstreams, as_fitstream);

typedef struct as_fitchunk {
	uint64_t bits;                            /* bit c % 64: class c holds a block */
	union {
		struct {
			struct as_fittree t[64];  /* one power of two's classes */
			as_fitnode *lo[64], *hi[64]; /* each class's first and last member (while its bit is set) */
		};
		struct as_fitchunk *spare;        /* in the set's list of spares (all t[] empty) */
	};
} as_fitchunk;

struct as_fitstream {
	uint64_t stream;
	uint64_t top;                             /* bit w: chunk[w] holds a block */
	as_fitchunk *chunk[AS_FIT_WORDS];         /* classes 64 w .. 64 w + 63 (kept while bit w is set
						     or the stream is the one found last) */
	RB_ENTRY(as_fitstream) rb;
	size_t count;
	as_fitstream *spare;                      /* in the set's list of spares */
};

typedef struct as_fitset {
	struct as_fitstreams streams;             /* the streams that hold a block, by stream */
	as_fitstream *last;                       /* the stream found last (most requests repeat it) */
	as_fitstream *spare_streams;
	as_fitchunk *spare_chunks;
	size_t count;
	uint64_t largest;                         /* the largest member's size, while largest_ok */
	int largest_ok;
} as_fitset;

void as_fitset_init(as_fitset *s);
void as_fitset_destroy(as_fitset *s);
void as_fitset_insert(as_fitset *s, as_fitnode *n, uint64_t stream, uint64_t size, uint64_t ptr);
void as_fitset_remove(as_fitset *s, as_fitnode *n);
/* A member's new key: it keeps its place when the order allows, else it is taken out and put back
 * (the same set either way). */
void as_fitset_rekey(as_fitset *s, as_fitnode *n, uint64_t size, uint64_t ptr);
/* The first member at or after (stream, size, 0), of any stream after it too (as a tree's nfind). */
as_fitnode *as_fitset_nfind(as_fitset *s, uint64_t stream, uint64_t size);
/* The member with exactly this key, or NULL. */
as_fitnode *as_fitset_find(as_fitset *s, uint64_t stream, uint64_t size, uint64_t ptr);
as_fitnode *as_fitset_next(as_fitset *s, as_fitnode *n);
as_fitnode *as_fitset_prev(as_fitset *s, as_fitnode *n);
as_fitnode *as_fitset_min(as_fitset *s);
as_fitnode *as_fitset_max(as_fitset *s);
/* The largest member's size (0 when empty): kept as members come and recomputed (one look per
 * stream) only after the largest left, so that a pool spread over many streams costs no walk of
 * every stream at each question. */
uint64_t as_fitset_largest(as_fitset *s);
static inline uint64_t as_fitnode_stream(const as_fitnode *n)
{
	return n->st->stream;
}
/* A key's class: monotone in size. */
static inline uint32_t as_fit_class(uint64_t size)
{
	if (size < (1ULL << AS_FIT_SLB))
		return (uint32_t)size;
	uint32_t fl = 63u - (uint32_t)__builtin_clzll(size);
	return ((fl - AS_FIT_SLB + 1u) << AS_FIT_SLB) | (uint32_t)((size >> (fl - AS_FIT_SLB)) & ((1u << AS_FIT_SLB) - 1u));
}
#endif

/* gaptree.h - the simulated device's live address ranges, ordered by address, with the free gap above
 * each range kept in the tree so that "the highest gap of at least N bytes" takes logarithmic time.
 *
 * Hand-written: the query needs a search tree augmented with its subtrees' largest gap, which
 * libbsd's <sys/tree.h> does not maintain (its RB_AUGMENT hook is not called along insert paths).
 * A treap keeps the code short; its priorities come from a fixed-seed generator, and they only
 * shape the tree, never the answers. */
#ifndef ALLOCSIM_GAPTREE_H
#define ALLOCSIM_GAPTREE_H
#include <stdint.h>
#include <stddef.h>

typedef struct gt_node gt_node;
typedef struct gaptree {
	gt_node *root;
	uint64_t top;    /* the address space ends here: no gap reaches above it */
	uint64_t gran;   /* gaps are measured between ranges rounded out to this granularity */
	uint64_t seed;
	size_t n;
} gaptree;

void gt_init(gaptree *t, uint64_t top, uint64_t gran);
void gt_free(gaptree *t);
/* Adds [addr, addr+size); 0, or -1 (nothing done) when a range already starts at addr. */
int gt_insert(gaptree *t, uint64_t addr, uint64_t size);
/* Removes the range starting at addr (nothing if none). */
void gt_remove(gaptree *t, uint64_t addr);
/* Whether [addr, addr+size) overlaps a live range. */
int gt_overlaps(const gaptree *t, uint64_t addr, uint64_t size);
/* The address of the highest granule-aligned place for `need` bytes (a multiple of gran) below
 * top, walking down from the top: the same answer as scanning the ranges from the highest. */
uint64_t gt_place(const gaptree *t, uint64_t need);
#endif

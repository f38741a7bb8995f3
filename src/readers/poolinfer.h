/* poolinfer.h - the memory pool of each request of a PyTorch 2.11 snapshot, inferred from its segments.
 *
 * PyTorch 2.11 records no pool per trace entry; a snapshot's end state names the pool of each segment
 * still held ('segment_pool_id'), and the trace has every segment's address and lifetime. A request's
 * pool is the pool of the segment that served it; a segment freed before the snapshot is placed by
 * what the allocator did around it (doc/pytorch-policy.md, "Private pools without annotation"). The
 * snapshot reader feeds a first pass's entries here, then asks each entry's pool in the second. */
#ifndef ALLOCSIM_POOLINFER_H
#define ALLOCSIM_POOLINFER_H
#include <stdint.h>
#include <stddef.h>

/* The entry kinds (the same order as the snapshot reader's actions). */
enum { PI_ALLOC, PI_FREE_REQ, PI_FREE_DONE, PI_SEG_ALLOC, PI_SEG_FREE, PI_SEG_MAP, PI_SEG_UNMAP, PI_OOM, PI_OTHER };

/* The pool id given to a private pool seen only by its behaviour (none of its segments is in the
 * end state): (PI_INFERRED_A, k), k = 1, 2, ... */
#define PI_INFERRED_A UINT64_MAX

typedef struct as_poolinfer as_poolinfer;

typedef struct as_poolinfer_stats {
	uint64_t units;           /* segments (expandable: reserved ranges) in the trace */
	uint64_t private_units;   /* ... placed in private pools */
	uint64_t by_end_state;    /* ... placed by the end state's segment_pool_id */
	uint64_t by_behaviour;    /* ... by what the allocator did (kept through empty_cache while free, passed over) */
	uint64_t by_neighbours;   /* ... by the requests made around them on their stream alone */
	uint64_t requests;        /* allocation requests */
	uint64_t unplaced;        /* ... in segments made before the history began (it was cut short) that the end
	                           * state does not hold: placed by the requests around them alone, or none */
	uint32_t pools;           /* private pools */
	uint32_t inferred_pools;  /* ... of which none of the segments is in the end state */
	uint32_t nosplit_pools, custom_pools;
	uint64_t outside_end;     /* as_poolinfer_evidence: segments held at the history's end that the end state
	                           * does not hold (a made snapshot): no evidence either way, not counted */
} as_poolinfer_stats;

as_poolinfer *as_poolinfer_new(void);
/* One that keeps no request (memory follows the live blocks), for as_poolinfer_evidence alone. */
as_poolinfer *as_poolinfer_new_light(void);
/* After the last entry, the settings and the end state's segments: how many segments show that a
 * private pool was used (kept through a full release while free, a plain segment under expandable
 * segments, two told apart by rules 3 and 4) - 0 when the trace shows none. A segment held at the
 * history's end that the end state does not hold counts for nothing (nor a pair with it): see
 * as_poolinfer_get_stats' outside_end. */
uint64_t as_poolinfer_evidence(as_poolinfer *pi);
void as_poolinfer_free(as_poolinfer *pi);
/* The recording's allocator settings (max_split 0: none; roundup: any roundup_power2_divisions set). */
void as_poolinfer_settings(as_poolinfer *pi, int expandable, uint64_t max_split, int gc, int roundup);
/* One segment of the end state, with its pool id (0, 0: the default pool); EXP: an expandable one. */
void as_poolinfer_end_segment(as_poolinfer *pi, uint64_t addr, uint64_t size, uint64_t pa, uint64_t pb, int exp);
/* Every trace entry of the device, in order (PI_OTHER for those not replayed: they separate release runs). */
void as_poolinfer_entry(as_poolinfer *pi, int action, uint64_t index, uint64_t addr, uint64_t size, uint64_t stream);
/* After the last entry: decides every segment's pool. */
void as_poolinfer_solve(as_poolinfer *pi);
/* The pool of entry INDEX (an alloc, oom, segment_alloc or segment_map): 0 for the default pool, else 1
 * with *a, *b its id and *flags its AS_POOL_CUSTOM / AS_POOL_NOSPLIT. Cheapest with increasing indices. */
int as_poolinfer_pool(as_poolinfer *pi, uint64_t index, uint64_t *a, uint64_t *b, uint32_t *flags);
void as_poolinfer_get_stats(const as_poolinfer *pi, as_poolinfer_stats *s);
#endif

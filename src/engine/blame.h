/* blame.h - who fenced the memory: at the recording's peak of reserved bytes (and at its first
 * out-of-memory), the reserved bytes that were not allocated, attributed to the live allocations
 * that kept their segments from being released, by allocation site (doc/advise.md, "Who fenced
 * the memory").
 *
 * It reads what the recording did, not a replay: the segments and blocks at their recorded
 * addresses (PyTorch snapshots carry them). Feed every event of the trace to as_blame_event in
 * order (it copies what it keeps), then as_blame_finish. */
#ifndef ALLOCSIM_BLAME_H
#define ALLOCSIM_BLAME_H
#include "readers/trace.h"
#include "util/idmap.h"
#include "util/tree.h"
#include "util/strtab.h"

/* One allocation site: the culprit frame of the event's site string ("file:line function"). */
typedef struct as_blame_site {
	const char *name;
	uint64_t fenced;     /* reserved, unallocated bytes attributed to the site's live blocks */
	uint64_t blocks;     /* its live blocks in segments with free bytes */
	uint64_t segments;   /* segments where it holds such a block */
	uint64_t live;       /* bytes of its live blocks */
	uint64_t nlive;
	uint64_t stamp;      /* internal: the last segment counted */
} as_blame_site;

typedef struct as_blame_block {
	uint64_t addr, size, index; /* index: the trace entry of its allocation */
	uint32_t site;               /* its whole site string (interned) + 1; 0 = no site */
	uint32_t culprit;            /* the site's first frame (interned) + 1: what the report groups by */
	RB_ENTRY(as_blame_block) rb;
} as_blame_block;
RB_HEAD(as_blame_blocks, as_blame_block);

/* The state at one moment (the peak or the OOM). */
typedef struct as_blame_moment {
	int valid;
	uint64_t index;        /* the trace entry at that moment */
	uint64_t reserved, allocated;
	uint64_t fenced;       /* free bytes in segments that hold live blocks */
	uint64_t cached;       /* free bytes in segments that hold none (empty_cache would release them) */
	uint64_t nsegments, nfenced_segments;
	uint64_t largest_free; /* the largest free range of one segment (live blocks at their recorded addresses) */
	uint64_t request;      /* the OOM: the request that failed (bytes) */
	as_blame_site *sites;  /* per site (nsites), sorted by fenced bytes at as_blame_finish */
	size_t nsites;
	as_blame_block *largest; /* the largest live blocks, largest first */
	size_t nlargest;
} as_blame_moment;

typedef struct as_blame_range {
	uint64_t addr, size;
	int mapped;          /* a mapped range of an expandable segment (adjacent ones are one segment) */
} as_blame_range;

typedef struct as_blame {
	idmap live;                   /* id -> as_blame_block */
	struct as_blame_blocks byaddr;
	as_blame_range *ranges;       /* reserved ranges in address order */
	size_t nranges, capranges;
	uint64_t reserved, allocated, peak;
	as_strtab names;              /* the site strings: whole stacks and culprit frames */
	uint64_t events, with_site, without_addr;
	size_t keep_largest;
	as_blame_moment peak_m, oom_m;
	int peak_pending;             /* a new peak, taken at the next event */
	uint64_t peak_index;
	int oom_seen;
} as_blame;

void as_blame_init(as_blame *b, size_t keep_largest);
void as_blame_event(as_blame *b, const as_event *ev);
/* An as_evbuf_load observer. */
void as_blame_observe(void *ctx, const as_event *ev);
/* Sorts the moments' sites (fenced bytes, then live bytes, then name). */
void as_blame_finish(as_blame *b);
void as_blame_free(as_blame *b);
/* The culprit: the first frame of a site string ("file:line function < ..."), into buf. */
const char *as_blame_culprit(const char *site, char *buf, size_t len);
#endif

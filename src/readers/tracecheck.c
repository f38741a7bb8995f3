/*
 * tracecheck.c - rules on what a trace records beyond ids (doc/trace-format.md, "Checks"):
 *   - times never go backwards (except in RMM logs, whose logger can write the lines of two
 *     threads out of order); every bundled PyTorch snapshot keeps this;
 *   - a recorded allocation [addr, addr+size) fits the 64-bit address space and overlaps no live
 *     recorded allocation (an allocator never hands out one byte twice);
 *   - segment events have sizes 1 .. 2^60-1 and fit the address space; a segment_alloc overlaps no
 *     live segment; a segment_free of a known segment names its size.
 * Memory follows the live allocations and segments that carry addresses; nodes are recycled, so a
 * replay allocates nothing per event once the high-water mark of live allocations is reached. A
 * live allocation's span is found by its slot (as_reader_next numbers live allocations densely):
 * an array as long as the most allocations live at once, not a hash of ids.
 */
#include "readers/tracecheck.h"
#include "util/tree.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
	uint64_t addr, size, id;
	RB_ENTRY(span) rb;
	struct span *next_free;
} span;

static int span_cmp(const span *a, const span *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_HEAD(span_tree, span);
RB_GENERATE_STATIC(span_tree, span, rb, span_cmp);

typedef struct slab {
	struct slab *next;
	span v[256];
} slab;

struct as_tracecheck {
	int time_unordered;
	int64_t last_time;
	struct span_tree allocs, segs;
	span **by_slot;     /* live allocation slot -> its span (NULL: no address) */
	size_t nslots;
	span *free_spans;
	slab *slabs;
};

as_tracecheck *as_tracecheck_new(int time_unordered)
{
	as_tracecheck *c = xcalloc(1, sizeof(*c));
	c->time_unordered = time_unordered;
	c->last_time = -1;
	RB_INIT(&c->allocs);
	RB_INIT(&c->segs);
	return c;
}

void as_tracecheck_free(as_tracecheck *c)
{
	if (!c)
		return;
	for (slab *s = c->slabs, *n; s; s = n) {
		n = s->next;
		free(s);
	}
	free(c->by_slot);
	free(c);
}

static span *span_new(as_tracecheck *c, uint64_t addr, uint64_t size, uint64_t id)
{
	if (!c->free_spans) {
		slab *s = xmalloc(sizeof(*s));
		s->next = c->slabs;
		c->slabs = s;
		for (size_t i = 0; i < 256; i++) {
			s->v[i].next_free = c->free_spans;
			c->free_spans = &s->v[i];
		}
	}
	span *p = c->free_spans;
	c->free_spans = p->next_free;
	p->addr = addr;
	p->size = size;
	p->id = id;
	return p;
}

static void span_put(as_tracecheck *c, span *p)
{
	p->next_free = c->free_spans;
	c->free_spans = p;
}

/* The live span that overlaps [addr, addr+size), or NULL. */
static span *overlap(struct span_tree *t, uint64_t addr, uint64_t size)
{
	span key = { .addr = addr };
	span *s = RB_NFIND(span_tree, t, &key);
	if (s && s->addr - addr < size)
		return s;
	s = s ? RB_PREV(span_tree, t, s) : RB_MAX(span_tree, t);
	return s && addr - s->addr < s->size ? s : NULL;
}

int as_tracecheck_event(as_tracecheck *c, const as_event *ev, char *why, size_t n)
{
	if (ev->time_us >= 0) {
		if (ev->time_us < c->last_time && !c->time_unordered) {
			snprintf(why, n, "time goes backwards: %" PRId64 " us after %" PRId64 " us", ev->time_us, c->last_time);
			return -1;
		}
		c->last_time = ev->time_us;
	}
	span *s;
	switch (ev->type) {
	case EV_ALLOC:
		if (!ev->addr || (ev->flags & EVF_OOM)) /* no address (an oom entry's 'addr' is free memory) */
			return 0;
		if (ev->size - 1 > UINT64_MAX - ev->addr) {
			snprintf(why, n, "allocation %" PRIu64 " at 0x%" PRIx64 " of %" PRIu64 " bytes runs past the 64-bit address space",
				ev->id, ev->addr, ev->size);
			return -1;
		}
		/* inserted first (one descent), then its neighbours checked: the live span that overlaps
		 * is the same overlap() would find (the one at or after addr first, then the one before) */
		s = span_new(c, ev->addr, ev->size, ev->id);
		span *o = RB_INSERT(span_tree, &c->allocs, s), *nb;
		if (!o) {
			if ((nb = RB_NEXT(span_tree, &c->allocs, s)) && nb->addr - ev->addr < ev->size)
				o = nb;
			else if ((nb = RB_PREV(span_tree, &c->allocs, s)) && ev->addr - nb->addr < nb->size)
				o = nb;
			if (o)
				RB_REMOVE(span_tree, &c->allocs, s);
		}
		if (o) {
			span_put(c, s);
			snprintf(why, n, "allocation %" PRIu64 " at 0x%" PRIx64 " (%" PRIu64 " bytes) overlaps live allocation %" PRIu64
				" at 0x%" PRIx64 " (%" PRIu64 " bytes)", ev->id, ev->addr, ev->size, o->id, o->addr, o->size);
			return -1;
		}
		if (ev->slot >= c->nslots) {
			size_t cap = c->nslots ? c->nslots : 256;
			while (cap <= ev->slot)
				cap *= 2;
			c->by_slot = xrealloc(c->by_slot, cap * sizeof(span *));
			memset(c->by_slot + c->nslots, 0, (cap - c->nslots) * sizeof(span *));
			c->nslots = cap;
		}
		c->by_slot[ev->slot] = s;
		return 0;
	case EV_FREE:
		if (ev->slot < c->nslots && (s = c->by_slot[ev->slot])) {
			c->by_slot[ev->slot] = NULL;
			RB_REMOVE(span_tree, &c->allocs, s);
			span_put(c, s);
		}
		return 0;
	case EV_SEG_ALLOC: case EV_SEG_FREE: case EV_SEG_MAP: case EV_SEG_UNMAP:
		if (ev->size == 0 || ev->size >= AS_MAX_REQUEST) {
			snprintf(why, n, "%s of %" PRIu64 " bytes (must be 1 .. 2^60-1)", as_ev_names[ev->type], ev->size);
			return -1;
		}
		if (ev->size - 1 > UINT64_MAX - ev->addr) {
			snprintf(why, n, "%s at 0x%" PRIx64 " of %" PRIu64 " bytes runs past the 64-bit address space",
				as_ev_names[ev->type], ev->addr, ev->size);
			return -1;
		}
		if (ev->type == EV_SEG_ALLOC) {
			if ((s = overlap(&c->segs, ev->addr, ev->size))) {
				snprintf(why, n, "segment_alloc at 0x%" PRIx64 " (%" PRIu64 " bytes) overlaps the live segment at 0x%" PRIx64
					" (%" PRIu64 " bytes)", ev->addr, ev->size, s->addr, s->size);
				return -1;
			}
			RB_INSERT(span_tree, &c->segs, span_new(c, ev->addr, ev->size, 0));
		} else if (ev->type == EV_SEG_FREE) {
			span key = { .addr = ev->addr };
			if ((s = RB_FIND(span_tree, &c->segs, &key))) { /* unknown: allocated before a truncated history */
				if (s->size != ev->size) {
					snprintf(why, n, "segment_free of %" PRIu64 " bytes at 0x%" PRIx64 ", but the segment there has %" PRIu64 " bytes",
						ev->size, ev->addr, s->size);
					return -1;
				}
				RB_REMOVE(span_tree, &c->segs, s);
				span_put(c, s);
			}
		}
		return 0;
	default:
		return 0;
	}
}

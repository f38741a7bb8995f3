/* blame.c - who fenced the memory (see blame.h).
 *
 * Attribution: a segment that holds live blocks cannot be released (cudaFree of a segment needs all
 * of it free), and its free bytes cannot serve a request larger than its largest free block. Each of
 * its k live blocks alone would keep it, so its free bytes are shared equally among them (the
 * Shapley value of "the segment is released only when every block is gone"); the remainder of the
 * division goes to the lowest addresses, so the shares add up to the free bytes exactly. A mapped
 * range of an expandable segment is a segment here (its pages are unmapped as a range). */
#include "engine/blame.h"
#include "engine/engine_impl.h"
#include <stdlib.h>
#include <string.h>

static int block_cmp(const as_blame_block *a, const as_blame_block *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_GENERATE_STATIC(as_blame_blocks, as_blame_block, rb, block_cmp)

void as_blame_init(as_blame *b, size_t keep_largest)
{
	memset(b, 0, sizeof(*b));
	idmap_init(&b->live);
	RB_INIT(&b->byaddr);
	b->keep_largest = keep_largest;
}

/* The site's number (0 for none). */
static uint32_t intern(as_blame *b, const char *s)
{
	return s && *s ? as_strtab_id(&b->names, s, 0) : 0;
}

/* The first range that ends after addr. */
static size_t range_at(const as_blame *b, uint64_t addr)
{
	size_t lo = 0, hi = b->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (b->ranges[mid].addr + b->ranges[mid].size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void range_insert(as_blame *b, size_t at, uint64_t addr, uint64_t size, int mapped)
{
	AS_GROW(b->ranges, b->nranges, b->capranges, 64);
	memmove(&b->ranges[at + 1], &b->ranges[at], (b->nranges - at) * sizeof(*b->ranges));
	b->ranges[at] = (as_blame_range){ addr, size, mapped };
	b->nranges++;
}

static void range_remove(as_blame *b, size_t at)
{
	memmove(&b->ranges[at], &b->ranges[at + 1], (b->nranges - at - 1) * sizeof(*b->ranges));
	b->nranges--;
}

static void add_range(as_blame *b, uint64_t addr, uint64_t size, int mapped)
{
	size_t at = range_at(b, addr);
	if (at < b->nranges && b->ranges[at].addr < addr + size)
		return; /* overlaps what is reserved: the reader's checks refuse such traces; ignore */
	b->reserved += size;
	if (mapped && at > 0 && b->ranges[at - 1].mapped && b->ranges[at - 1].addr + b->ranges[at - 1].size == addr) {
		b->ranges[at - 1].size += size;
		if (at < b->nranges && b->ranges[at].mapped && b->ranges[at].addr == addr + size) {
			b->ranges[at - 1].size += b->ranges[at].size;
			range_remove(b, at);
		}
		return;
	}
	if (mapped && at < b->nranges && b->ranges[at].mapped && b->ranges[at].addr == addr + size) {
		b->ranges[at].addr = addr;
		b->ranges[at].size += size;
		return;
	}
	range_insert(b, at, addr, size, mapped);
}

static void remove_range(as_blame *b, uint64_t addr, uint64_t size)
{
	size_t at = range_at(b, addr);
	if (at >= b->nranges || b->ranges[at].addr > addr)
		return; /* reserved before the history began */
	as_blame_range r = b->ranges[at];
	uint64_t end = addr + size, rend = r.addr + r.size;
	if (end > rend)
		end = rend;
	b->reserved -= end - addr;
	range_remove(b, at);
	if (r.addr < addr)
		range_insert(b, at++, r.addr, addr - r.addr, r.mapped);
	if (end < rend)
		range_insert(b, at, end, rend - end, r.mapped);
}

/* The state now, into m (the peak or the OOM). */
static void take(as_blame *b, as_blame_moment *m, uint64_t index)
{
	m->valid = 1;
	m->index = index;
	m->reserved = b->reserved;
	m->allocated = b->allocated;
	m->fenced = m->cached = 0;
	m->nsegments = b->nranges;
	m->nfenced_segments = 0;
	m->largest_free = 0;
	m->sites = xrealloc(m->sites, (b->names.n + 1) * sizeof(*m->sites));
	memset(m->sites, 0, (b->names.n + 1) * sizeof(*m->sites));
	m->nsites = b->names.n + 1; /* [0] = blocks without a site */
	as_blame_block *blk = RB_MIN(as_blame_blocks, &b->byaddr);
	for (size_t i = 0; i < b->nranges; i++) {
		const as_blame_range *r = &b->ranges[i];
		uint64_t end = r->addr + r->size;
		while (blk && blk->addr < r->addr)
			blk = RB_NEXT(as_blame_blocks, &b->byaddr, blk); /* in no known segment */
		as_blame_block *first = blk;
		uint64_t used = 0, k = 0, at = r->addr;
		for (as_blame_block *x = first; x && x->addr < end; x = RB_NEXT(as_blame_blocks, &b->byaddr, x)) {
			used += x->size < end - x->addr ? x->size : end - x->addr;
			k++;
			if (x->addr > at && x->addr - at > m->largest_free)
				m->largest_free = x->addr - at;
			if (x->addr + x->size > at)
				at = x->addr + x->size;
		}
		if (end > at && end - at > m->largest_free)
			m->largest_free = end - at;
		uint64_t freeb = r->size > used ? r->size - used : 0;
		if (!k) {
			m->cached += freeb;
			continue;
		}
		if (freeb)
			m->nfenced_segments++;
		m->fenced += freeb;
		uint64_t share = freeb / k, extra = freeb % k;
		for (; blk && blk->addr < end; blk = RB_NEXT(as_blame_blocks, &b->byaddr, blk)) {
			as_blame_site *s = &m->sites[blk->culprit];
			s->live += blk->size;
			s->nlive++;
			if (!freeb)
				continue;
			s->fenced += share + (extra ? 1 : 0);
			if (extra)
				extra--;
			s->blocks++;
			if (s->stamp != i + 1) { /* each site once per segment */
				s->stamp = i + 1;
				s->segments++;
			}
		}
	}
	/* the largest live blocks */
	m->nlargest = 0;
	if (b->keep_largest) {
		m->largest = xrealloc(m->largest, b->keep_largest * sizeof(*m->largest));
		for (as_blame_block *x = RB_MIN(as_blame_blocks, &b->byaddr); x; x = RB_NEXT(as_blame_blocks, &b->byaddr, x)) {
			size_t n = m->nlargest;
			if (n == b->keep_largest && x->size <= m->largest[n - 1].size)
				continue;
			if (n < b->keep_largest)
				m->nlargest++;
			size_t j = m->nlargest - 1;
			while (j > 0 && m->largest[j - 1].size < x->size) {
				m->largest[j] = m->largest[j - 1];
				j--;
			}
			m->largest[j] = *x;
		}
	}
}

void as_blame_event(as_blame *b, const as_event *ev)
{
	b->events++;
	/* A new peak is taken once the allocation that needed the new segment holds its block (PyTorch
	 * records segment_alloc, then the alloc): at the next event, after it if it is that alloc. */
	int alloc = ev->type == EV_ALLOC && !(ev->flags & EVF_OOM) && ev->addr;
	if (b->peak_pending && !alloc) {
		take(b, &b->peak_m, b->peak_index);
		b->peak_pending = 0;
	}
	switch (ev->type) {
	case EV_ALLOC: {
		if (ev->flags & EVF_OOM) {
			if (!b->oom_seen) {
				take(b, &b->oom_m, ev->index);
				b->oom_m.request = ev->size;
			}
			b->oom_seen = 1;
			break;
		}
		if (!ev->addr) {
			b->without_addr++;
			break;
		}
		as_blame_block *x = xcalloc(1, sizeof(*x));
		x->addr = ev->addr;
		x->size = ev->size;
		x->index = ev->index;
		x->site = intern(b, ev->site);
		if (x->site) {
			char buf[512];
			x->culprit = intern(b, as_blame_culprit(ev->site, buf, sizeof buf));
			b->with_site++;
		}
		if (RB_INSERT(as_blame_blocks, &b->byaddr, x)) { /* an address still live: refused by the readers */
			free(x);
			break;
		}
		idmap_put(&b->live, ev->id, x);
		b->allocated += x->size;
		if (b->peak_pending) {
			take(b, &b->peak_m, ev->index);
			b->peak_pending = 0;
		}
		break;
	}
	case EV_FREE: {
		as_blame_block *x = idmap_del(&b->live, ev->id);
		if (x) {
			RB_REMOVE(as_blame_blocks, &b->byaddr, x);
			b->allocated -= x->size;
			free(x);
		}
		break;
	}
	case EV_SEG_ALLOC:
	case EV_SEG_MAP:
		add_range(b, ev->addr, ev->size, ev->type == EV_SEG_MAP);
		if (b->reserved > b->peak) {
			b->peak = b->reserved;
			b->peak_pending = 1;
			b->peak_index = ev->index;
		}
		break;
	case EV_SEG_FREE:
	case EV_SEG_UNMAP:
		remove_range(b, ev->addr, ev->size);
		break;
	default:
		break;
	}
}

void as_blame_observe(void *ctx, const as_event *ev)
{
	if (!ev) { /* the trace is read again (as_ev_observer) */
		as_blame *b = ctx;
		size_t keep = b->keep_largest;
		as_blame_free(b);
		as_blame_init(b, keep);
		return;
	}
	as_blame_event(ctx, ev);
}

static int site_cmp(const void *pa, const void *pb)
{
	const as_blame_site *a = pa, *b = pb;
	if (a->fenced != b->fenced)
		return a->fenced > b->fenced ? -1 : 1;
	if (a->live != b->live)
		return a->live > b->live ? -1 : 1;
	return strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

void as_blame_finish(as_blame *b)
{
	if (b->peak_pending) {
		take(b, &b->peak_m, b->peak_index);
		b->peak_pending = 0;
	}
	as_blame_moment *ms[] = { &b->peak_m, &b->oom_m };
	for (int k = 0; k < 2; k++) {
		as_blame_moment *m = ms[k];
		if (!m->valid)
			continue;
		for (size_t i = 0; i < m->nsites; i++)
			m->sites[i].name = i ? as_strtab_str(&b->names, (uint32_t)i) : NULL;
		/* drop the sites with nothing live at that moment, then sort */
		size_t n = 0;
		for (size_t i = 0; i < m->nsites; i++)
			if (m->sites[i].nlive)
				m->sites[n++] = m->sites[i];
		m->nsites = n;
		qsort(m->sites, m->nsites, sizeof(*m->sites), site_cmp);
	}
}

const char *as_blame_culprit(const char *site, char *buf, size_t len)
{
	if (!site)
		return "(no stack)";
	const char *sep = strstr(site, " < ");
	size_t n = sep ? (size_t)(sep - site) : strlen(site);
	if (n >= len)
		n = len - 1;
	memcpy(buf, site, n);
	buf[n] = 0;
	return buf;
}

void as_blame_free(as_blame *b)
{
	for (size_t i = 0; i < b->live.cap; i++)
		if (idmap_live(&b->live, i))
			free(b->live.vals[i]);
	idmap_free(&b->live);
	as_strtab_free(&b->names);
	free(b->ranges);
	free(b->peak_m.sites);
	free(b->peak_m.largest);
	free(b->oom_m.sites);
	free(b->oom_m.largest);
	memset(b, 0, sizeof(*b));
}

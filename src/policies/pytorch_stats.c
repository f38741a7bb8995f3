/* pytorch_stats.c - memory_stats() keys and the memory_summary() table, from one stat list. */
#include "pytorch.h"
#include <stdlib.h>
#include <string.h>

typedef struct kv {
	char key[64];
	int64_t val;
} kv;

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const kv *)a)->key, ((const kv *)b)->key);
}

static const char *const type_names[PT_NTYPES] = { "all", "small_pool", "large_pool" };

static void add(kv *v, size_t *n, const char *key, int64_t val)
{
	snprintf(v[*n].key, sizeof v[*n].key, "%s", key);
	v[*n].val = val;
	(*n)++;
}

static void add_stat(kv *v, size_t *n, const char *prefix, const pt_stat *s)
{
	char k[64];
	snprintf(k, sizeof k, "%s.allocated", prefix); add(v, n, k, s->allocated);
	snprintf(k, sizeof k, "%s.current", prefix); add(v, n, k, s->current);
	snprintf(k, sizeof k, "%s.freed", prefix); add(v, n, k, s->freed);
	snprintf(k, sizeof k, "%s.peak", prefix); add(v, n, k, s->peak);
}

void pt_stats_emit(const pt_stats *s, as_stat_cb cb, void *ctx)
{
	pt_stats_emit_pools(s, NULL, NULL, 0, cb, ctx);
}

void pt_stats_emit_pools(const pt_stats *s, const pt_stat *const *res, const uint32_t *ids, size_t npools, as_stat_cb cb, void *ctx)
{
	kv *v = xmalloc((256 + npools * 4 * PT_NTYPES) * sizeof(kv));
	size_t n = 0;
	char p[64];
	for (size_t k = 0; k < npools; k++)
		for (int t = 0; t < PT_NTYPES; t++) {
			snprintf(p, sizeof p, "reserved_bytes_by_private_pools.%u.%s", ids[k], type_names[t]);
			add_stat(v, &n, p, &res[k][t]);
		}
#define X(name) \
	for (int t = 0; t < PT_NTYPES; t++) { \
		snprintf(p, sizeof p, "%s.%s", #name, type_names[t]); \
		add_stat(v, &n, p, &s->name[t]); \
	}
	PT_STAT_ARRAYS(X)
#undef X
#define X(name) add_stat(v, &n, #name, &s->name);
	PT_STAT_SINGLES(X)
#undef X
#define X(name) add(v, &n, #name, s->name);
	PT_STAT_SCALARS(X)
#undef X
	add(v, &n, "max_split_size", s->max_split_size);
	if (s->emit_rejections)
		add(v, &n, "num_oom_rejections", s->num_oom_rejections);
	qsort(v, n, sizeof v[0], kv_cmp);
	for (size_t i = 0; i < n; i++)
		cb(ctx, v[i].key, v[i].val);
	free(v);
}

/* _format_size / _format_count of torch/cuda/memory.py */
static void fmt_size(char *out, size_t len, int64_t sz, double pref)
{
	static const char *const pfx[] = { "B  ", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;
	for (int k = 1; k < 6; k++) {
		if (pref < 768 * 1024)
			break;
		i = k;
		sz /= 1024;
		pref /= 1024;
	}
	snprintf(out, len, "%6lld %s", (long long)sz, pfx[i]);
}

static void fmt_count(char *out, size_t len, int64_t c, double pref)
{
	static const char *const pfx[] = { " ", "K", "M" };
	int i = 0;
	for (int k = 1; k < 3; k++) {
		if (pref < 750 * 1000)
			break;
		i = k;
		c /= 1000;
		pref /= 1000;
	}
	snprintf(out, len, "%7lld %s ", (long long)c, pfx[i]);
}

static void rule(FILE *f, char c)
{
	fputc('|', f);
	for (int i = 0; i < 75; i++)
		fputc(c, f);
	fputs("|\n", f);
}

static void row(FILE *f, const char *name, const pt_stat *s, const pt_stat *pref, int bytes)
{
	char c[4][32];
	const int64_t vals[4] = { s->current, s->peak, s->allocated, s->freed };
	const int64_t pv[4] = { pref->current, pref->peak, pref->allocated, pref->freed };
	for (int i = 0; i < 4; i++) {
		if (bytes)
			fmt_size(c[i], sizeof c[i], vals[i], (double)pv[i]);
		else
			fmt_count(c[i], sizeof c[i], vals[i], (double)pv[i]);
	}
	fprintf(f, "| %-21s | %s | %s | %s | %s |\n", name, c[0], c[1], c[2], c[3]);
}

void pt_memory_summary(const pt_stats *s, int device, FILE *f)
{
	static const struct {
		size_t off;
		const char *name;
		int bytes;
	} m[] = {
		{ offsetof(pt_stats, allocated_bytes), "Allocated memory", 1 },
		{ offsetof(pt_stats, active_bytes), "Active memory", 1 },
		{ offsetof(pt_stats, requested_bytes), "Requested memory", 1 },
		{ offsetof(pt_stats, reserved_bytes), "GPU reserved memory", 1 },
		{ offsetof(pt_stats, inactive_split_bytes), "Non-releasable memory", 1 },
		{ offsetof(pt_stats, allocation), "Allocations", 0 },
		{ offsetof(pt_stats, active), "Active allocs", 0 },
		{ offsetof(pt_stats, segment), "GPU reserved segments", 0 },
		{ offsetof(pt_stats, inactive_split), "Non-releasable allocs", 0 },
	};
	rule(f, '=');
	fprintf(f, "| %16s PyTorch CUDA memory summary, device ID %-17d |\n", "", device);
	rule(f, '-');
	fprintf(f, "|  %9s CUDA OOMs: %-12lld | %6s cudaMalloc retries: %-8lld  |\n", "", (long long)s->num_ooms, "",
		(long long)s->num_alloc_retries);
	rule(f, '=');
	fputs("|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n", f);
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
		const pt_stat *a = (const pt_stat *)((const char *)s + m[i].off);
		rule(f, '-');
		row(f, m[i].name, &a[PT_ALL], &a[PT_ALL], m[i].bytes);
		row(f, "      from large pool", &a[PT_LARGE], &a[PT_ALL], m[i].bytes);
		row(f, "      from small pool", &a[PT_SMALL], &a[PT_ALL], m[i].bytes);
	}
	rule(f, '-');
	row(f, "Oversize allocations", &s->oversize_allocations, &s->oversize_allocations, 0);
	rule(f, '-');
	row(f, "Oversize GPU segments", &s->oversize_segments, &s->oversize_segments, 0);
	rule(f, '=');
}

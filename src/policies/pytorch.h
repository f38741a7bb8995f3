/* pytorch.h - shared parts of the PyTorch 2.11 native CUDA caching allocator policy. */
#ifndef ALLOCSIM_PYTORCH_H
#define ALLOCSIM_PYTORCH_H
#include "policy.h"
#include <stdio.h>

#define PT_MIN_BLOCK   512ULL
#define PT_SMALL_SIZE  (1ULL << 20)
#define PT_SMALL_BUF   (2ULL << 20)
#define PT_MIN_LARGE   (10ULL << 20)
#define PT_ROUND_LARGE (2ULL << 20)
#define PT_NO_LIMIT    UINT64_MAX

typedef struct pt_conf {
	uint64_t max_split_size;          /* PT_NO_LIMIT = unlimited */
	uint64_t max_non_split_rounding;  /* oversize tolerance, default large_segment_size */
	uint64_t large_segment_size;      /* 20 MiB (kLargeBuffer) */
	double gc_threshold;              /* 0 = off */
	int expandable;
	uint32_t divisions[16];           /* roundup_power2_divisions table */
	double fraction;                  /* per_process_memory_fraction key, 1.0 = none */
	int throw_on_oom;                 /* throw_on_cudamalloc_oom key (2.12+): alloc_block's preemptive rejection */
	int version;                      /* allocsim's version:2.N key: N, the release's rules (default 14) */
	int version_given;                /* -c named version (the stats of newer releases are printed only then) */
	int dummy_bool;                   /* options accepted for compatibility, no effect on decisions */
	uint64_t dummy_u64;
} pt_conf;

extern const as_optdesc pt_opts[];
int pt_conf_parse(pt_conf *c, const char *s, as_err *err);
#define PT_VERSION_NEWEST 11              /* 2.11, the release checked against real runs (its behaviour is replayed) */
#define PT_VERSION_MAX 14                 /* version:2.N goes up to 2.14, whose keys are read (default) */
uint64_t pt_round_size(const pt_conf *c, uint64_t n);
/* get_allocation_size: a new segment's size for a request rounded to s (inline: every malloc asks). */
static inline uint64_t pt_allocation_size(const pt_conf *c, uint64_t s)
{
	if (s <= PT_SMALL_SIZE)
		return PT_SMALL_BUF;
	if (s < PT_MIN_LARGE)
		return c->large_segment_size;
	return (s + PT_ROUND_LARGE - 1) / PT_ROUND_LARGE * PT_ROUND_LARGE;
}

/* Statistics with PyTorch's names (memory_stats); one list for arrays and one for single stats. */
#define PT_STAT_ARRAYS(X) \
	X(active) X(active_bytes) X(allocated_bytes) X(allocation) X(inactive_split) \
	X(inactive_split_bytes) X(requested_bytes) X(reserved_bytes) X(segment)
#define PT_STAT_SINGLES(X) X(oversize_allocations) X(oversize_segments)
#define PT_STAT_SCALARS(X) \
	X(num_alloc_retries) X(num_device_alloc) X(num_device_free) X(num_ooms) X(num_sync_all_streams)

typedef struct pt_stat {
	int64_t current, peak, allocated, freed;
} pt_stat;

enum { PT_ALL, PT_SMALL, PT_LARGE, PT_NTYPES };

typedef struct pt_stats {
#define X(n) pt_stat n[PT_NTYPES];
	PT_STAT_ARRAYS(X)
#undef X
#define X(n) pt_stat n;
	PT_STAT_SINGLES(X)
#undef X
#define X(n) int64_t n;
	PT_STAT_SCALARS(X)
#undef X
	int64_t max_split_size;
	int64_t num_oom_rejections;      /* 2.12+: requests alloc_block rejected under throw_on_cudamalloc_oom
	                                  * (emitted only with that key on: outputs of other runs unchanged) */
	int emit_rejections;
} pt_stats;

static inline void pt_inc(pt_stat *s, int64_t v)
{
	s->current += v;
	if (s->current > s->peak)
		s->peak = s->current;
	s->allocated += v;
}
static inline void pt_dec(pt_stat *s, int64_t v)
{
	s->current -= v;
	s->freed += v;
}
/* Update "all" and the pool's type together, as for_each_selected_stat_type does. */
static inline void pt_inc2(pt_stat *a, int small, int64_t v)
{
	pt_inc(&a[PT_ALL], v);
	pt_inc(&a[small ? PT_SMALL : PT_LARGE], v);
}
static inline void pt_dec2(pt_stat *a, int small, int64_t v)
{
	pt_dec(&a[PT_ALL], v);
	pt_dec(&a[small ? PT_SMALL : PT_LARGE], v);
}

void pt_stats_emit(const pt_stats *s, as_stat_cb cb, void *ctx);
/* ... with reserved_bytes_by_private_pools.ID.{all,large_pool,small_pool}.{...} of n private pools
 * (res[k]: PT_NTYPES stats; ids[k]: allocsim's pool number), sorted in with the rest as memory_stats() */
void pt_stats_emit_pools(const pt_stats *s, const pt_stat *const *res, const uint32_t *ids, size_t n, as_stat_cb cb, void *ctx);
/* torch.cuda.memory_summary() layout. */
void pt_memory_summary(const pt_stats *s, int device, FILE *out);
/* pytorch_settings.c: the prepare and same_settings entries (policy.h); the warnings of both pytorch
 * policies (pytorch-pinned's prepare). */
struct as_meta;
unsigned as_pytorch_prepare(char **conf, const struct as_meta *m, uint64_t capacity);
unsigned as_pytorch_warnings(const char *config, uint64_t capacity);
int as_pytorch_same_settings(const char *recorded, const char *config);
#endif

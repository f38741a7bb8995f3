/* gen.h - synthetic workloads (allocsim gen): the models' shared part.
 *
 * A model draws shapes (layers, sequence lengths, requests) with GSL's random variates from one
 * seeded generator and turns them into trace events through a gen_ctx, which numbers the
 * allocations, keeps frees that are due later in a heap, and refuses to grow past --max-events
 * (the events are held in memory as 56-byte records until the whole trace is drawn, so that
 * nothing is written unless the model finishes). doc/generator.md describes every model. */
#ifndef ALLOCSIM_GEN_H
#define ALLOCSIM_GEN_H
#include "util/common.h"
#include "readers/evbuf.h"
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>

#define GEN_DEFAULT_MAX_EVENTS 4000000ull
#define GEN_HARD_MAX_EVENTS 50000000ull /* 2.8 GB of records at most */

/* A distribution named on the command line: "lognormal:MEDIAN,SIGMA", "pareto:XM,ALPHA",
 * "weibull:SCALE,SHAPE", "gamma:SHAPE,SCALE", "exp:MEAN", "uniform:LO,HI", "const:V",
 * "table:V:W,V:W,..." (values with weights). Numbers take the size units (K, KiB: 1024; KB: 1000). */
typedef enum { GD_CONST, GD_LOGNORMAL, GD_PARETO, GD_WEIBULL, GD_GAMMA, GD_EXP, GD_UNIFORM, GD_TABLE } gen_dist_kind;
typedef struct gen_dist {
	gen_dist_kind kind;
	double a, b;
	size_t n;             /* table */
	double *v, *w;
	gsl_ran_discrete_t *pick;
} gen_dist;
#define GEN_TABLE_MAX 100000
int gen_dist_parse(gen_dist *d, const char *s, char *msg, size_t msglen);
double gen_dist_draw(const gen_dist *d, const gsl_rng *r);
void gen_dist_free(gen_dist *d);

typedef struct gen_pending { double when; uint64_t seq, id; } gen_pending;

typedef struct gen_ctx {
	gsl_rng *rng;
	as_evbuf buf;          /* keep_ids: the events with their own ids */
	uint64_t max_events;
	int over;              /* a model asked for more events than max_events */
	uint64_t next_id;      /* ids 1, 2, ... in allocation order */
	uint32_t *slot_of;     /* by id */
	size_t cap_ids;
	uint8_t *live;         /* by id */
	uint32_t *free_slots;  /* slots of freed allocations, for reuse */
	size_t nfree, cap_free;
	uint32_t nslots;
	gen_pending *heap;     /* frees due later, by (when, seq) */
	size_t nheap, cap_heap;
	uint64_t seq;
	uint64_t live_bytes, peak_live;
	uint64_t *size_of;     /* by id */
} gen_ctx;

void gen_ctx_init(gen_ctx *g, uint64_t seed, uint64_t max_events);
void gen_ctx_free(gen_ctx *g);
/* An allocation of size bytes (1 .. 2^60-1, clamped) on stream; returns its id, 0 past the cap. */
uint64_t gen_alloc(gen_ctx *g, uint64_t size, uint64_t stream);
void gen_free(gen_ctx *g, uint64_t id);
/* The free of id, due at 'when' (any clock the model keeps); gen_advance makes it. */
void gen_free_at(gen_ctx *g, uint64_t id, double when);
/* Makes every pending free due at or before now, in order of time (then of scheduling). */
void gen_advance(gen_ctx *g, double now);
void gen_flush(gen_ctx *g);      /* every pending free */
void gen_phase(gen_ctx *g, const char *label);
/* A size rounded up to a multiple of q (q a power of two), at least q. */
static inline uint64_t gen_round(uint64_t n, uint64_t q) { return n <= q ? q : (n + q - 1) / q * q; }

/* Options: each model lists its own; the common ones are in cmd_gen.c. Every option takes one
 * value, on the command line as --name VALUE or --name=VALUE, in a parameter file as a line
 * "name VALUE". */
typedef enum { GO_U64, GO_SIZE, GO_DBL, GO_DIST, GO_ENUM, GO_CALL } gen_opt_kind;
typedef struct gen_opt {
	const char *name;
	gen_opt_kind kind;
	void *dst;             /* uint64_t, double, gen_dist, int (enum index) */
	double lo, hi;         /* allowed range (numbers) */
	const char *choices;   /* GO_ENUM: "a|b|c" */
	int (*call)(void *model, const char *val, char *msg, size_t msglen); /* GO_CALL */
	const char *help;
} gen_opt;

/* Copies a model's option table (a local array ending in { 0 }) into the array in its state; a table
 * longer than that array does not compile. */
#define GEN_OPTS_COPY(dst, src) do { \
	_Static_assert(sizeof(dst) >= sizeof(src), "the option table is longer than the model's array"); \
	for (size_t i_ = 0; i_ < sizeof(src) / sizeof((src)[0]); i_++) \
		(dst)[i_] = (src)[i_]; \
} while (0)

/* Applies one option's value; 0, or -1 with msg. */
int gen_opt_set(const gen_opt *o, void *model, const char *val, char *msg, size_t msglen);

/* The fragmenter prefix (every model): before the workload, total bytes in pieces of piece bytes,
 * every keep-th piece kept live until the end, the rest freed (holes the workload must fit). */
typedef struct gen_frag { uint64_t total, piece, keep; uint64_t *kept; size_t nkept; } gen_frag;
void gen_fragment_begin(gen_ctx *g, gen_frag *f);
void gen_fragment_end(gen_ctx *g, gen_frag *f);

/* The models. Each: options (NULL-terminated), a constructor of its state with the defaults, the
 * check of option combinations (0 or -1 with msg) and the drawing. */
typedef struct gen_model {
	const char *name, *what;
	void *(*make)(void);
	const gen_opt *(*opts)(void *m);
	int (*check)(void *m, char *msg, size_t msglen);
	void (*run)(void *m, gen_ctx *g);
	void (*destroy)(void *m);
} gen_model;
extern const gen_model gen_model_train, gen_model_serve, gen_model_iid, gen_model_phase;
const gen_model *gen_model_find(const char *name);

/* gen --fit: reads a trace and prints the phase model's parameter file (gen_fit.c). */
typedef struct gen_fit_opts { uint64_t bins; int bins_auto, iid; const char *trace; } gen_fit_opts; /* bins_auto: --bins not given; iid: --model iid */
int gen_fit(const gen_fit_opts *o, FILE *out, as_err *err);
#endif

/* latency.h - latency of allocator operations: streaming quantiles (GSL's P^2 estimator) and a
 * piecewise-linear model of device-call latency fitted by 'allocsim calibrate'. */
#ifndef ALLOCSIM_LATENCY_H
#define ALLOCSIM_LATENCY_H
#include "util/common.h"
#include <stdio.h>
#include <gsl/gsl_rstat.h>

/* p50, p99 and max of a stream of nanosecond samples, in constant memory. */
typedef struct as_quant {
	gsl_rstat_quantile_workspace *p50, *p99;
	double max;
	uint64_t n;
} as_quant;
void as_quant_init(as_quant *q);
/* Adds a sample (as_quant_add: inline, a zero before the first nonzero sample is only counted). */
void as_quant_add_slow(as_quant *q, double ns);
static inline void as_quant_add(as_quant *q, double ns)
{
	if (!q->p50 && ns == 0.0)
		q->n++;
	else
		as_quant_add_slow(q, ns);
}
double as_quant_p50(const as_quant *q);
double as_quant_p99(const as_quant *q);
void as_quant_free(as_quant *q);

/* Device operations the model covers. */
/* pool_malloc: a cudaMallocAsync served from memory the pool holds (it may remap it); pool_grow: one
 * that made the pool's reserved memory grow; pool_free: cudaFreeAsync; pool_init: a process's first
 * cudaMallocAsync, which sets the stream-ordered allocator up. */
enum { LAT_MALLOC, LAT_FREE, LAT_MAP, LAT_UNMAP, LAT_POOL_MALLOC, LAT_POOL_GROW, LAT_POOL_FREE, LAT_POOL_INIT, LAT_NOPS };
extern const char *const as_lat_op_names[LAT_NOPS];
/* The LAT_* operation of a name, or -1. */
int as_lat_op_find(const char *name);
/* The columns of a --device-log (written by device.c, read by as_devlog_read). */
#define AS_DEVLOG_HEADER "call,event,gap,op,model_op,bytes,address,result,us,reserved_bytes"

typedef struct as_lat_band {
	int op;
	uint64_t lo, hi;        /* size range [lo, hi) in bytes */
	double a_us, b_us_per_mib;
} as_lat_band;

/* A device call's cost also depends on how long the process did other work since the previous
 * device call (its caches and the driver's go cold): rows 'idle:OP,gap_lo,gap_hi,factor,min_bytes'
 * multiply OP's cost when the call comes gap trace events after the previous device call (gap 0:
 * the process's first device call) and asks for min_bytes or more (0: any size); of the rows that
 * match, the one with the largest min_bytes. Absent: factor 1. */
typedef struct as_lat_model {
	as_lat_band *bands;
	size_t n;
	as_lat_band *idle;      /* lo/hi: gap in events, a_us: the factor, b_us_per_mib: min_bytes */
	size_t nidle;
	char source[256];
} as_lat_model;

/* Reads a model CSV (op,size_lo,size_hi,a_us,b_us_per_mib); errors name the file and line. */
int as_lat_model_load(as_lat_model *m, const char *path, as_err *err);
/* The same from an open stream (closed here); path names it in errors. */
int as_lat_model_read(as_lat_model *m, FILE *f, const char *path, as_err *err);
void as_lat_model_free(as_lat_model *m);
/* Modelled microseconds of one device call of `size` bytes (0 if the op is not modelled). */
double as_lat_model_us(const as_lat_model *m, int op, uint64_t size);
/* The idle factor of OP for a call of `size` bytes `gap` events after the previous device call (1 if
 * none). */
double as_lat_model_factor(const as_lat_model *m, int op, uint64_t gap, uint64_t size);
/* The device calls of --device-log files (calibrate --from-log). */
typedef struct as_devcall {
	int op;                 /* LAT_* */
	uint64_t bytes, gap;
	double us;
} as_devcall;
typedef struct as_devcalls {
	as_devcall *v;
	size_t n, cap;
} as_devcalls;
/* Appends the calls of one log (rows without a model operation, such as pool trims, are skipped);
 * errors name the file and line, exit status 65 (66 if it cannot be opened). _read closes f. */
int as_devlog_load(as_devcalls *cs, const char *path, as_err *err);
int as_devlog_read(as_devcalls *cs, FILE *f, const char *path, as_err *err);
#endif

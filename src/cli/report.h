/* report.h - the helpers every command shares (report.c): option errors, error reports, the
 * version, Ctrl-C, and a replay's settings, capacity and warnings. */
#ifndef ALLOCSIM_REPORT_H
#define ALLOCSIM_REPORT_H
#include "util/common.h"
#include "readers/trace.h"
#include "device/latency.h"
#include <getopt.h>

/* Every command's getopt_long goes through cli_getopt_long (report.c): an unknown, ambiguous or
 * argument-less option is reported as "allocsim: error: CMD: unknown option '--capacty': did you
 * mean '--capacity'?", from the command's own option table, instead of getopt's bare message. */
int cli_getopt_long(int argc, char *const argv[], const char *shortopts, const struct option *longopts, int *longind);
/* Ctrl-C and SIGTERM set cli_interrupted (the replay ends cleanly, nothing is written). */
void cli_catch_signals(void);
/* The latency model: explicit path, 'none', or the bundled H200 calibration. */
int cli_load_model(const char *path, as_lat_model *m, int *have, as_err *err);

/* Prints "allocsim: error: MSG" and returns the error's exit status. */
int cli_report(const as_err *err);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_version(void);
/* A recording with out-of-memory entries ran under a memory limit: without one the replay differs. */
void cli_warn_recorded_ooms(const char *path, uint64_t ooms, const as_meta *m);
/* A snapshot whose entries name no pool where the reader could not place every request. */
void cli_warn_unnamed_pools(const char *path, const as_meta *m);
/* --fraction F [--device-total SIZE]: the capacity F x the device total (the trace's, or SIZE). */
int cli_fraction_capacity(const char *path, const as_meta *m, double fraction, uint64_t dev_total, uint64_t *capacity,
	int *capacity_set, as_err *err);
/* --fraction's argument: a number in (0, 1]; nonzero if not. */
int cli_parse_fraction(const char *s, double *f);
/* The garbage_collection_threshold warning, if warn (as_policy_prepare's bits) has AS_WARN_GC_NO_CAPACITY */
void cli_warn_gc(unsigned warn);
/* Resolves -c: "recorded" takes the trace's own settings from its complete metadata m (path
 * names the trace in the error when it records none). */
int cli_resolve_config(const char *path, const as_meta *m, const char *config, char **out, as_err *err);
#endif

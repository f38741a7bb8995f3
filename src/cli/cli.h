/* cli.h - subcommands. Each returns an exit status. */
#ifndef ALLOCSIM_CLI_H
#define ALLOCSIM_CLI_H
#include "util/common.h"
#include "readers/trace.h"
#include "device/latency.h"
#include <signal.h>
#include <getopt.h>
/* Every command's getopt_long goes through cli_getopt_long (main.c): an unknown, ambiguous or
 * argument-less option is reported as "allocsim: error: CMD: unknown option '--capacty': did you
 * mean '--capacity'?", from the command's own option table, instead of getopt's bare message. */
int cli_getopt_long(int argc, char *const argv[], const char *shortopts, const struct option *longopts, int *longind);
#define getopt_long cli_getopt_long
/* --free-at's getopt code in replay, sweep and compare (no short option) */
#define OPT_FREE_AT 0x200

int cmd_replay(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_policies(int argc, char **argv);
int cmd_columns(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_advise(int argc, char **argv);
int cmd_blame(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_transfer(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_predict(int argc, char **argv);
/* The memory of a GPU of advise's --gpu table (cmd_advise.c); 0 if the name is not there. */
uint64_t cli_gpu_bytes(const char *name);
/* transfer with a host trace: pinned vs pageable, modelled from a transfer table (transfer_model.c). */
int cli_transfer_weigh(const char *table, const char *trace, const char *conf, int d2h, const char *out);

struct as_blame_moment;
/* blame's table of sites at one moment (cmd_blame.c), top rows, indented. */
void cli_blame_sites(FILE *f, const struct as_blame_moment *m, size_t top, int indent);
/* The sites by the bytes their live blocks hold (the code that held the memory), top first. */
void cli_blame_held(FILE *f, const struct as_blame_moment *m, size_t top, int indent);

void cli_catch_signals(void);
int cli_load_model(const char *path, as_lat_model *m, int *have, as_err *err);

/* Prints "allocsim: error: MSG" and returns the error's exit status. */
int cli_report(const as_err *err);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_version(void);
/* Resolves -c: "recorded" takes the trace's own settings from its complete metadata m (path
 * names the trace in the error when it records none). */
void cli_warn_recorded_ooms(const char *path, uint64_t ooms, const as_meta *m);
void cli_warn_unnamed_pools(const char *path, const as_meta *m);
int cli_fraction_capacity(const char *path, const as_meta *m, double fraction, uint64_t dev_total, uint64_t *capacity,
	int *capacity_set, as_err *err);
int cli_parse_fraction(const char *s, double *f);
/* The garbage_collection_threshold warning, if warn (as_policy_prepare's bits) has AS_WARN_GC_NO_CAPACITY */
void cli_warn_gc(unsigned warn);
int cli_resolve_config(const char *path, const as_meta *m, const char *config, char **out, as_err *err);
#endif

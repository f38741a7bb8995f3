/* cli.h - subcommands. Each returns an exit status. */
#ifndef ALLOCSIM_CLI_H
#define ALLOCSIM_CLI_H
#include "util/common.h"
#include "readers/trace.h"
#include "device/latency.h"
#include <signal.h>
#include <getopt.h>
#include "cli/report.h"
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

#endif

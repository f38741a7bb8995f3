/* shard.h - sweep --shard: which shard this process is (K/N, or a scheduler's job-array variables),
 * which runs of the grid it owns (balanced by estimated cost), and the provenance file beside each
 * shard's CSV that `allocsim merge` checks (doc/sweeps.md, "Beyond one machine"). */
#ifndef ALLOCSIM_SHARD_H
#define ALLOCSIM_SHARD_H
#include "util/common.h"
#include "readers/evbuf.h"
#include <stdio.h>

#define AS_SHARD_EXT ".shard"   /* the provenance file: OUT.csv -> OUT.csv.shard */
#define AS_SHARD_MAGIC "allocsim-shard 1"
#define AS_SHARD_TOLERANCE 1.15 /* contiguous ranges unless a slowest shard above this x the mean
                                 * is beaten by greedy placement */

/* "K/N" (1 <= K <= N), "auto" (K and N from a job array's variables) or "auto/N" (N given: PBS,
 * which exports no count, or checked against the scheduler's). *k is 1-based. 0, or -1 with msg. */
int as_shard_parse(const char *arg, uint64_t *k, uint64_t *n, char *msg, size_t len);
/* The same for "auto": reads Slurm, PBS, SGE and LSF variables from getenv(); sched receives the
 * scheduler's name. n_given 0: the scheduler's count. */
int as_shard_from_env(uint64_t n_given, uint64_t *k, uint64_t *n, const char **sched, char *msg, size_t len);

/* A trace's cost per run, estimated without decoding it: a binary trace's record count, otherwise
 * its (uncompressed, from gzip's trailer) size over the bytes an event takes in its format. At least 1. */
uint64_t as_trace_cost(const char *path);

/* The plan: owner[i] (0-based shard) of each of njobs = ntr * per_trace runs, run i of trace
 * i / per_trace costing cost[i / per_trace]. Contiguous ranges of the grid, the largest as small as
 * it can be (so that a shard decodes few traces); when that leaves the slowest shard above
 * AS_SHARD_TOLERANCE x the mean, the longest-first greedy placement if it does better. Deterministic.
 * load[0..n) receives each shard's cost. Returns owner (malloc'd). */
uint32_t *as_shard_plan(const uint64_t *cost, size_t ntr, size_t per_trace, uint64_t n, uint64_t *load);

/* What a shard's provenance file says. */
typedef struct as_shard_prov {
	char *build;     /* version and a checksum of the executable */
	char *args;      /* the command line, without the options that do not change rows */
	uint32_t grid;   /* checksum of the header and every run's identity */
	uint64_t k, n;   /* this shard, 1-based, of n */
	uint64_t jobs;   /* runs in the whole grid */
	uint64_t owned;  /* this shard's runs */
	uint64_t done;   /* of those, with a row in the file */
	uint64_t cost, total, slowest; /* estimated cost: this shard's, all shards', the largest shard's */
	uint64_t bytes;  /* the CSV file's size and CRC-32 */
	uint32_t crc;
} as_shard_prov;

/* The executable's identity: "allocsim VERSION exe-crc32=XXXXXXXX" (malloc'd). */
char *as_shard_build(void);
/* argv[1..argc) without -o/--output, -j/--jobs, --shard and --resume, shell-quoted (malloc'd). */
char *as_shard_args(int argc, char **argv);
/* Writes CSV.shard for the committed file csv (its size and CRC are read from it), atomically. */
int as_shard_note(const char *csv, as_shard_prov *p, as_err *err);
/* Reads CSV.shard; 0, or -1 with err (missing: exit 66; malformed: 65). */
int as_shard_read(const char *csv, as_shard_prov *p, as_err *err);
/* The size and CRC-32 of a file. */
int as_shard_checksum(const char *path, uint64_t *bytes, uint32_t *crc, as_err *err);
void as_shard_prov_free(as_shard_prov *p);
#endif

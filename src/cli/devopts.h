/* devopts.h - the device options, defined once: --device, --capacity, --fraction, --device-total,
 * --gpu and --backend. A command lists the ones it takes in its getopt_long table as CLI_DEVOPT(ID)
 * entries (in the place it wants them: the table's order is the order of its "ambiguous" message)
 * and hands every code getopt returns to cli_devopt first, which parses, range-checks and reports
 * with the same words in every command. What an option means beyond its value (--capacity against
 * --oom-message, --fraction x which total, --gpu's table) stays with the command. */
#ifndef ALLOCSIM_CLI_DEVOPTS_H
#define ALLOCSIM_CLI_DEVOPTS_H
#include "util/common.h"
#include "readers/trace.h"
#include <getopt.h>

/* getopt codes: above every short option and OPT_FREE_AT (cli.h) */
enum cli_devopt_id {
	CLI_OPT_DEVICE = 0x300, /* --device N: a device of a multi-GPU snapshot (reader), the GPU ordinal (--backend cuda) */
	CLI_OPT_CAPACITY,       /* --capacity SIZE: at least 1 byte */
	CLI_OPT_FRACTION,       /* --fraction F: a number in (0, 1] */
	CLI_OPT_DEVICE_TOTAL,   /* --device-total SIZE: at least 1 byte */
	CLI_OPT_GPU,            /* --gpu NAME: kept as given */
	CLI_OPT_BACKEND,        /* --backend sim|cuda|shuffled */
};
#define CLI_DEVOPT(ID) CLI_DEVOPT_##ID
#define CLI_DEVOPT_DEVICE { "device", required_argument, 0, CLI_OPT_DEVICE }
#define CLI_DEVOPT_CAPACITY { "capacity", required_argument, 0, CLI_OPT_CAPACITY }
#define CLI_DEVOPT_FRACTION { "fraction", required_argument, 0, CLI_OPT_FRACTION }
#define CLI_DEVOPT_DEVICE_TOTAL { "device-total", required_argument, 0, CLI_OPT_DEVICE_TOTAL }
#define CLI_DEVOPT_GPU { "gpu", required_argument, 0, CLI_OPT_GPU }
#define CLI_DEVOPT_BACKEND { "backend", required_argument, 0, CLI_OPT_BACKEND }

enum { CLI_BACKEND_SIM, CLI_BACKEND_CUDA, CLI_BACKEND_SHUFFLED };

/* What the device options said. Zero-initialised, with ro (and device_max) set by the command. */
typedef struct cli_dev {
	as_reader_opts *ro;     /* --device goes to the reader (has_device, device) */
	unsigned device_max;    /* --device's largest number; 0: 4095 (the readers' limit) */
	int device_host_named;  /* --device's message names host (which every command takes: trace.h) */
	uint64_t capacity;      /* --capacity */
	int capacity_set;
	const char *capacity_arg; /* as given */
	char capacity_note[256];  /* how a rounded size was read ("" if exact) */
	double fraction;        /* --fraction; 0: none */
	uint64_t total;         /* --device-total; 0: none */
	const char *gpu;        /* --gpu; NULL: none */
	int backend;            /* --backend: CLI_BACKEND_* */
} cli_dev;

/* c: getopt_long's code, arg: optarg. -1: c is not a device option; 0: parsed into d; otherwise a
 * usage error was reported for cmd ("allocsim: error: CMD: --capacity: ...") and this is its exit
 * status. */
int cli_devopt(const char *cmd, cli_dev *d, int c, const char *arg);
#endif

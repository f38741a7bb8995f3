/* fuzz_common.h - shared driver for the libFuzzer targets (built by 'make fuzz').
 * Each reader target feeds the input, behind its format's magic, through the generic reader
 * and replays the events with the pytorch policy, checking its invariants at the end. */
#ifndef ALLOCSIM_FUZZ_COMMON_H
#define ALLOCSIM_FUZZ_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/engine.h"
#include "../src/reconcile.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void fuzz_reader(const char *magic, const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", 0);
	if (fd < 0)
		abort();
	size_t ml = strlen(magic);
	if (write(fd, magic, ml) != (ssize_t)ml || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	lseek(fd, 0, SEEK_SET);
	as_err err = { 0, "" };
	as_reader *r;
	as_reader_opts ro = { .want_segments = 1 };
	if (as_reader_open_fd(&r, fd, "fuzz-input", &ro, &err))
		return;
	as_device *dev = as_sim_device_new(size & 1 ? (64ULL << 20) : 0, ADDR_AUTO);
	as_engine e;
	if (as_engine_init(&e, as_policy_find("pytorch"), size & 2 ? "expandable_segments:True" : "", dev, &err) == 0) {
		as_reconcile_attach(&e, 1, NULL, NULL);
		as_event ev;
		int n = 0;
		while (as_reader_next(r, &ev, &err) > 0 && n++ < 100000)
			if (as_engine_step(&e, &ev, &err))
				abort(); /* the engine must accept whatever the readers let through */
		as_engine_finish(&e);
		if (e.pol->ops->check(e.pol, &err)) {
			fprintf(stderr, "invariant: %s\n", err.msg);
			abort();
		}
		as_engine_free(&e);
	}
	as_device_destroy(dev);
	as_reader_close(r);
}
#endif

/* fuzz_binfmt.c - the binary event format: streamed through the generic reader, and mapped whole
 * (as replay, sweep and fit read it), each followed by a pytorch replay that must keep its invariants. */
#include "fuzz_common.h"
#include "readers/binfmt.h"
#include <stdio.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int has_magic = size >= AS_BIN_MAGIC_LEN && !memcmp(data, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN);
	fuzz_reader(has_magic ? "" : AS_BIN_MAGIC, data, size);
	char path[] = "/tmp/fuzz-binfmt-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		abort();
	if ((!has_magic && write(fd, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN) != AS_BIN_MAGIC_LEN) ||
	    (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
	as_evbuf b;
	as_err err = { 0, "" };
	int m = as_binfmt_map(&b, path, &err);
	unlink(path);
	if (m == 1)
		abort(); /* it has the magic: it is ours to accept or reject */
	if (m < 0) {
		if (err.code != AS_EXIT_DATAERR || !err.msg[0])
			abort(); /* bad data is exit 65 with a message */
		return 0;
	}
	as_device *dev = as_sim_device_new(size & 1 ? (64ULL << 20) : 0, ADDR_AUTO);
	as_engine e;
	if (as_engine_init(&e, as_policy_find("pytorch"), "", dev, &err) == 0) {
		as_reconcile_attach(&e, 1);
		as_event ev;
		for (size_t i = 0; i < b.n && i < 100000; i++) {
			as_evbuf_event(&b, i, &ev);
			if (as_engine_step(&e, &ev, &err))
				abort(); /* the engine must accept whatever validation lets through */
		}
		as_engine_finish(&e);
		if (e.pol->ops->check(e.pol, &err)) {
			fprintf(stderr, "invariant: %s\n", err.msg);
			abort();
		}
		as_engine_free(&e);
	}
	as_device_destroy(dev);
	as_evbuf_free(&b);
	return 0;
}

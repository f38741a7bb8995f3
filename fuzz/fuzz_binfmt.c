/* fuzz_binfmt.c - the binary event format: streamed through the generic reader, mapped whole (as
 * sweep and fit read it) and read in chunks (as replay reads it). The mapped events go through a
 * pytorch replay that must keep its invariants; the chunked reader must accept exactly what the
 * mapping accepts, with the same events, and reject the rest with the same message. */
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
	as_err err = { 0, "" }, cerr = { 0, "" };
	int m = as_binfmt_map(&b, path, &err);
	as_binstream bs;
	int c = as_binfmt_stream_open(&bs, path, &cerr);
	unlink(path);
	if (c == 1)
		abort();
	if (c == 0) {
		as_event ev, want;
		size_t i = 0;
		int rc;
		while ((rc = as_binstream_next(&bs, &ev, &cerr)) > 0) {
			if (m != 0)
				continue; /* a rejected file: the records before the bad one are read, then the same error */
			if (i >= b.n)
				abort(); /* more events than the mapping */
			as_evbuf_event(&b, i++, &want);
			if (ev.type != want.type || ev.flags != want.flags || ev.slot != want.slot || ev.pool != want.pool ||
			    ev.id != want.id || ev.size != want.size || ev.stream != want.stream || ev.addr != want.addr ||
			    ev.time_us != want.time_us || ev.pos != want.pos || ev.thread != want.thread ||
			    (ev.label == NULL) != (want.label == NULL) || (ev.label && strcmp(ev.label, want.label)))
				abort(); /* not the mapping's event */
		}
		if (rc == 0 && (m != 0 || i != b.n))
			abort(); /* ended where the mapping did not */
		as_binstream_close(&bs);
		c = rc;
	}
	if ((m < 0) != (c < 0) || (m < 0 && (cerr.code != err.code || strcmp(cerr.msg, err.msg))))
		abort(); /* accepted by one only, or another message */
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

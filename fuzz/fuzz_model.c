/* fuzz_model.c - latency model files and device logs (calibrate --from-log): the input is read as
 * both; a model that loads must give finite non-negative costs, a log that loads valid calls. */
#include "fuzz_common.h"
#include <math.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	as_err err = { 0, "" };
	as_lat_model m;
	FILE *f = fmemopen((void *)data, size, "r");
	if (f && as_lat_model_read(&m, f, "fuzz", &err) == 0) {
		static const uint64_t sizes[] = { 0, 1, 512, 1 << 20, 3ULL << 30, UINT64_MAX };
		for (int op = 0; op < LAT_NOPS; op++)
			for (int i = 0; i < 6; i++) {
				double us = as_lat_model_us(&m, op, sizes[i]) * as_lat_model_factor(&m, op, sizes[i], sizes[i]);
				if (!(us >= 0) || !isfinite(us))
					abort();
			}
		as_lat_model_free(&m);
	} else if (f && (err.code != AS_EXIT_DATAERR || !err.msg[0])) {
		abort(); /* a bad model is bad data, with a message */
	}
	as_devcalls cs = { 0 };
	err = (as_err){ 0, "" };
	f = fmemopen((void *)data, size, "r");
	if (f && as_devlog_read(&cs, f, "fuzz", &err) == 0) {
		for (size_t i = 0; i < cs.n; i++)
			if (cs.v[i].op < 0 || cs.v[i].op >= LAT_NOPS || !(cs.v[i].us >= 0))
				abort();
	} else if (f && (err.code != AS_EXIT_DATAERR && err.code != AS_EXIT_IOERR)) {
		abort();
	}
	free(cs.v);
	return 0;
}

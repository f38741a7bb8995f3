/* fuzz_pickle.c - PyTorch snapshot (pickle) reader + pytorch policy. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the seeds are whole snapshots; inputs without the protocol header get one */
	fuzz_reader(size >= 2 && data[0] == 0x80 ? "" : "\x80\x04", data, size);
	return 0;
}

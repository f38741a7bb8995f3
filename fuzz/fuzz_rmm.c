/* fuzz_rmm.c - RMM log reader + pytorch policy. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_reader(size >= 6 && !memcmp(data, "Thread", 6) ? "" : "Thread,Time,Action,Pointer,Size,Stream\n", data, size);
	return 0;
}

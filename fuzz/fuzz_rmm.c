/* fuzz_rmm.c - RMM log reader (or a generated RMM log) + every policy. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_text_target("Thread,Time,Action,Pointer,Size,Stream\n", 6, 1, data, size);
	return 0;
}

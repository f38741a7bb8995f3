/* fuzz_native.c - native trace reader + pytorch policy. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_reader(size >= 15 && !memcmp(data, "#allocsim-trace", 15) ? "" : "#allocsim-trace 1\n", data, size);
	return 0;
}

/* fuzz_native.c - native trace reader (or a generated native trace) + every policy. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_text_target("#allocsim-trace 1\n", 15, 0, data, size);
	return 0;
}

/* fuzz_host.c - pinned host log reader (op,id,size,ptr) + every policy. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char magic[] = "op,id,size,ptr\n";
	fuzz_reader(size >= 14 && !memcmp(data, magic, 14) ? "" : magic, data, size);
	return 0;
}

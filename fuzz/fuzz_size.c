/* fuzz_size.c - the size parser: never crashes, and accepted sizes are exact. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), m[256];
	memcpy(s, data, size);
	s[size] = 0;
	uint64_t v;
	if (as_parse_size(s, &v, m, sizeof m) == 0) {
		/* a plain decimal integer must parse to itself */
		char *end;
		unsigned long long d = strtoull(s, &end, 10);
		if (*s >= '0' && *s <= '9' && !*end && d != v)
			abort();
	} else if (!m[0]) {
		abort();
	}
	free(s);
	return 0;
}

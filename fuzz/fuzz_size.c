/* fuzz_size.c - the size and number parsers: never crash, and what they accept is exact (decimal,
 * leading zeros included; 0x hex only through as_parse_num). */
#include "fuzz_common.h"
#include "util/oommsg.h"
#include <errno.h>
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
	/* numbers: accepted iff all decimal digits (or 0x + hex digits) and no overflow, value exact */
	size_t len = strlen(s); /* the parsers see a C string: up to the first NUL */
	int dec = *s && strspn(s, "0123456789") == len, hex = len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
		strspn(s + 2, "0123456789abcdefABCDEF") == len - 2;
	char *end;
	errno = 0;
	unsigned long long d = dec ? strtoull(s, &end, 10) : hex ? strtoull(s + 2, &end, 16) : 0;
	int fits = (dec || hex) && errno != ERANGE;
	if ((as_parse_u64(s, &v) == 0) != (dec && fits) || (dec && fits && v != d))
		abort();
	if ((as_parse_num(s, &v) == 0) != ((dec || hex) && fits) || (fits && v != d))
		abort();
	if (as_parse_capacity(s, &v, m, sizeof m) == 0 && !v)
		abort();
	/* PyTorch's OOM message (--oom-message): never crashes; accepted only with its sizes, and the
	 * capacity is the 'allowed' limit when the message has one */
	as_oom_msg om;
	char why[300] = "";
	if (as_oom_msg_parse(s, &om, why, sizeof why) == 0) {
		if (!om.request.known || !om.total.known || !om.free.known || (om.allowed.known && om.capacity != om.allowed.bytes))
			abort();
	} else if (!why[0]) {
		abort();
	}
	free(s);
	return 0;
}

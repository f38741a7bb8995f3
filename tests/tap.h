/* tap.h - a minimal TAP producer for C unit tests (Automake's tap-driver reads it). */
#ifndef ALLOCSIM_TAP_H
#define ALLOCSIM_TAP_H
#include <stdio.h>
#include <string.h>
#include <inttypes.h>
static int tap_n, tap_fail;
#define ok(cond, ...) do { tap_n++; if (cond) printf("ok %d - ", tap_n); else { tap_fail++; printf("not ok %d - ", tap_n); } \
	printf(__VA_ARGS__); printf("\n"); } while (0)
#define is_u64(a, b, ...) do { uint64_t _a = (a), _b = (b); ok(_a == _b, __VA_ARGS__); \
	if (_a != _b) printf("#   got %" PRIu64 ", expected %" PRIu64 "\n", _a, _b); } while (0)
#define is_int(a, b, ...) do { long long _a = (a), _b = (b); ok(_a == _b, __VA_ARGS__); \
	if (_a != _b) printf("#   got %lld, expected %lld\n", _a, _b); } while (0)
#define done_testing() (printf("1..%d\n", tap_n), tap_fail ? 1 : 0)
#endif

/* fuzz_config.c - -c option strings for every policy, then a few allocations with the result. */
#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = 0;
	for (size_t i = 0; as_policies[i]; i++) {
		as_err err = { 0, "" };
		as_device *dev = as_sim_device_new(1ULL << 30, ADDR_MODEL);
		as_engine e;
		if (as_engine_init(&e, as_policies[i], s, dev, &err) == 0) {
			static const uint64_t sizes[] = { 1, 513, 1 << 20, (1 << 20) + 1, 15 << 20, 300 << 20, (1ULL << 60) - 1, 1ULL << 40 };
			as_event evs[24];
			for (uint64_t k = 0; k < 24; k++)
				evs[k] = (as_event){ .type = k % 3 == 2 ? EV_FREE : EV_ALLOC, .id = k % 3 == 2 ? k - 2 : k, .slot = (uint32_t)(k % 3 == 2 ? k - 2 : k), .size = sizes[k % 8], .time_us = -1 };
			as_lifetimes plan; /* an offline policy's first pass */
			as_lifetimes_init(&plan);
			if (as_plan_from_array(&e, &plan, evs, 24, &err))
				abort();
			for (size_t k = 0; k < 24; k++)
				if (as_engine_step(&e, &evs[k], &err))
					abort();
			if (e.pol->ops->check(e.pol, &err))
				abort();
			as_engine_free(&e);
			as_lifetimes_free(&plan);
		} else if (err.code != AS_EXIT_USAGE || !err.msg[0]) {
			abort(); /* a bad setting is a usage error with a message */
		}
		as_device_destroy(dev);
	}
	free(s);
	return 0;
}

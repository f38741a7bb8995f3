/* device_nocuda.c - stand-ins when allocsim is built without the CUDA Toolkit. */
#include "device/device.h"

as_device *as_cuda_device_new(int ordinal, uint64_t capacity, as_err *err)
{
	(void)ordinal; (void)capacity;
	as_fail(err, AS_EXIT_UNAVAILABLE, "this allocsim was built without CUDA (configure --with-cuda)");
	return NULL;
}

int as_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
	*free_bytes = *total_bytes = 0;
	return -1;
}

int as_cuda_measure(int family, uint64_t size, int n, as_cal_result *res, as_err *err)
{
	(void)family; (void)size; (void)n; (void)res;
	return as_fail(err, AS_EXIT_UNAVAILABLE, "this allocsim was built without CUDA (configure --with-cuda)");
}

int as_cuda_transfer(FILE *out, int n, as_err *err)
{
	(void)out; (void)n;
	return as_fail(err, AS_EXIT_UNAVAILABLE, "this allocsim was built without CUDA (configure --with-cuda)");
}

/* pool_sim.h - a model of the CUDA stream-ordered allocator's memory pool (cudaMallocAsync), for the
 * simulated device.
 * doc/real-gpu.md explains the model and how it was derived from the real pool on an H200. */
#ifndef ALLOCSIM_POOL_SIM_H
#define ALLOCSIM_POOL_SIM_H
#include <stddef.h>
#include <stdint.h>

#define AS_POOL_CHUNK (32ULL << 20) /* the real pool maps physical memory in 32 MiB chunks */
#define AS_POOL_ALIGN 512ULL        /* and rounds requests up to 512 bytes */

typedef struct as_simpool as_simpool;
struct as_device;
/* The pool's physical memory comes from dev's physical handles (as_dev_phys_create: the device
 * counts it as reserved where it is created); dev NULL: the pool only counts its chunks (unit tests). */
as_simpool *as_simpool_new(struct as_device *dev);
void as_simpool_free(as_simpool *p);
/* 0 ok, 1 out of memory (the pool would hold more than limit bytes, 0 = no limit, or the block would
 * end past 2^63). The cost of every call grows with the logarithm of the live blocks, free blocks
 * and runs of chunks, never with the bytes asked for. */
int as_simpool_alloc(as_simpool *p, uint64_t size, uint64_t limit, uint64_t *addr);
void as_simpool_release(as_simpool *p, uint64_t addr);
void as_simpool_trim(as_simpool *p, uint64_t keep);
uint64_t as_simpool_reserved(const as_simpool *p);
/* Invariants (holes, live blocks and the top tile the range; chunk counts): 0, or -1 and why. */
int as_simpool_check(const as_simpool *p, char *why, size_t n);
#endif

/* oommsg.h - PyTorch's CUDA out-of-memory message, read back into numbers.
 *
 * The message of c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.1 .. 2.11):
 *   CUDA out of memory. Tried to allocate 1.48 GiB. GPU 0 has a total capacity of 139.80 GiB of
 *   which 112.40 GiB is free. [Process N has X memory in use. | Including non-PyTorch memory, this
 *   process has X memory in use. ]... [17.30 GiB allowed; ]Of the allocated memory 14.25 GiB is
 *   allocated by PyTorch, [with X allocated in private pools (e.g., CUDA Graphs), ]and 2.49 GiB is
 *   reserved by PyTorch but unallocated. ...
 * Its sizes are format_size's: "N bytes", or two decimals of KiB, MiB or GiB, so each is known to
 * within half a unit of the last decimal. */
#ifndef ALLOCSIM_OOMMSG_H
#define ALLOCSIM_OOMMSG_H
#include <stdint.h>
#include <stddef.h>

typedef struct as_oom_size {
	int known;
	uint64_t bytes;   /* the printed value in bytes (rounded down) */
	uint64_t ulp;     /* half a unit of its last decimal: the value is bytes +- ulp (0 for "N bytes") */
} as_oom_size;

typedef struct as_oom_msg {
	int gpu;
	as_oom_size request;     /* Tried to allocate */
	as_oom_size total;       /* total capacity */
	as_oom_size free;        /* of which ... is free */
	as_oom_size process;     /* this process has ... memory in use (with non-PyTorch memory) */
	as_oom_size allowed;     /* set_per_process_memory_fraction's limit, when set */
	as_oom_size allocated;   /* is allocated by PyTorch */
	as_oom_size private_pools;
	as_oom_size unallocated; /* reserved by PyTorch but unallocated */
	/* The memory PyTorch could reserve: the allowed limit if set, else what it held (allocated +
	 * unallocated) plus what was free; and that figure's uncertainty. */
	uint64_t capacity, capacity_ulp;
	int capacity_from_allowed;
} as_oom_msg;

/* Reads the message (the text may hold more around it: a traceback, "torch.OutOfMemoryError: ");
 * 0, or -1 with why naming what is missing. */
int as_oom_msg_parse(const char *text, as_oom_msg *m, char *why, size_t whylen);
/* The text of ARG: ARG itself, or the contents of FILE for "@FILE" (at most 1 MiB); malloc'd, or
 * NULL with why. */
char *as_oom_msg_arg(const char *arg, char *why, size_t whylen);
#endif

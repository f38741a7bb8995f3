/* heap.c - the main heap on transparent huge pages.
 *
 * A replay of a small snapshot spends more time in page faults than in the simulation: a replay of
 * gpt2_train_varlen__default (17,923 events) takes about 770 faults, and on the 2-core VM this
 * project runs on a 4 KiB fault costs about 9.6 us against 0.17 ms for a whole 2 MiB page
 * (scripts/bench.sh's machine, measured with a loop of first touches). glibc can put its heap on
 * huge pages only through an environment variable (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), read
 * before main; so this asks for the same by hand: a heap grown 32 MiB at a time (M_TOP_PAD, and
 * blocks up to that size from the heap, not from their own mappings) and madvise(MADV_HUGEPAGE)
 * over the first extension. What outgrows it is on small pages again, as before (the kernel makes
 * a later brk extension a mapping of its own, without the advice). Where the kernel has no
 * transparent huge pages, or they are off, madvise fails and nothing changes but the top pad.
 * Nothing here changes what is computed.
 */
#define _DEFAULT_SOURCE
#include "util/heap.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define HEAP_PAD (32u << 20)
#define HUGE (2u << 20)
/* The heap's first SMALL bytes of blocks stay on small pages: a process that allocates less (stdio's
 * buffers, the options, a policy's first tables: start-up, an empty or tiny trace) touches a few 4 KiB
 * pages instead of faulting in (and zeroing) a whole 2 MiB page. Measured on the 2-core VM with
 * `perf stat -r 200` of a replay of an empty binary trace: 0.96 -> 0.68 ms of CPU, the huge page's
 * fault being 0.28 ms of it; one that allocates more pays at most SMALL / 4 KiB = 32 small faults
 * more before its blocks reach the huge pages. */
#define SMALL (128u << 10)

void as_heap_init(void)
{
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
	if (getenv("ALLOCSIM_SMALL_PAGES")) /* for A/B measurements (scripts/bench.sh) */
		return;
	/* Worker threads keep glibc's arenas of their own, on small pages. One heap for all
	 * (M_ARENA_MAX 1) saved a third of a -j 2 sweep's decode on the VM (3,500 -> 136 page faults),
	 * but its lock made a 16-thread sweep 2.3x slower on the GPU machine's 16 cores (and -j 4 10-15%
	 * slower): measured 2026-12-03, not kept. */
	/* Begin the heap with glibc's usual top pad if nothing has yet (a build without the CUDA
	 * runtime allocates nothing before main): the probe below must extend a heap that exists, not
	 * create it. Freed at once; the heap stays. (Volatile: the compiler drops a malloc freed
	 * unused.) */
	void *volatile first = malloc(1);
	free(first);
	if (!mallopt(M_TOP_PAD, HEAP_PAD) || !mallopt(M_MMAP_THRESHOLD, HEAP_PAD) || !mallopt(M_TRIM_THRESHOLD, 2 * HEAP_PAD))
		return;
	/* The heap's next extension: the loader and libc's start-up may have begun the heap already, so
	 * it is forced with a request larger than the rest of the top chunk; the request is carved from
	 * that top chunk, at its start. Another malloc (a sanitizer's, valgrind's) leaves the program
	 * break alone or puts the block elsewhere: then nothing more is done. */
	uintptr_t b0 = (uintptr_t)sbrk(0);
	char *probe = malloc(HUGE);
	uintptr_t b1 = (uintptr_t)sbrk(0), at = (uintptr_t)probe;
	if (!probe || b0 == (uintptr_t)-1 || b1 == (uintptr_t)-1 || b1 <= b0 || at >= b0 || at + HUGE > b1) {
		free(probe);
		return;
	}
	uintptr_t lo = (at + 64 + SMALL + HUGE - 1) & ~(uintptr_t)(HUGE - 1), hi = b1 & ~(uintptr_t)(HUGE - 1);
	free(probe); /* back into the top chunk, which starts at its header again (below b0) */
	if (hi < lo + 2 * HUGE)
		return;
	/* The heap below lo - SMALL stays on small pages: a block never freed fills it (address space
	 * only, a page or two of it ever touched), so that the top chunk begins 16 bytes below
	 * lo - SMALL, the first SMALL bytes of blocks from then on lie on small pages and every block
	 * after them on the huge pages. Its chunk is lo - SMALL - at bytes
	 * (glibc rounds a request up to 16 bytes with 8 of overhead). */
	static void *filler;
	filler = malloc(lo - SMALL - at - 8);
	if (filler != probe)
		return; /* not where it was computed to be: leave the pages as they are */
	/* Above lo the heap holds nothing now, but sysmalloc wrote the top chunk's header past the probe
	 * before the free: that page, already there, would keep its 2 MiB range on small pages; the
	 * range is emptied (nothing in it is in use) before the advice. */
	if (madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
}

/* pluggable_alloc.c - a custom allocator for torch.cuda.MemPool(allocator=...) (CUDAPluggableAllocator),
 * used by scripts/capture-beyond.py to record a MemPool whose segments come from its own allocator.
 * It forwards to cudaMalloc/cudaFree of the CUDA runtime that torch already loaded (looked up with
 * dlopen, so it builds with a plain C compiler and no CUDA headers) and counts its calls.
 *
 * build: cc -shared -fPIC -O2 -o pluggable_alloc.so pluggable_alloc.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);
static malloc_fn cuda_malloc;
static free_fn cuda_free;
static long n_alloc, n_free;

static int resolve(void)
{
	static const char *const names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL };
	if (cuda_malloc)
		return 0;
	for (int i = 0; names[i]; i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
		if (!h)
			h = dlopen(names[i], RTLD_NOW);
		if (h) {
			cuda_malloc = (malloc_fn)dlsym(h, "cudaMalloc");
			cuda_free = (free_fn)dlsym(h, "cudaFree");
			if (cuda_malloc && cuda_free)
				return 0;
		}
	}
	fprintf(stderr, "pluggable_alloc: no CUDA runtime found\n");
	return -1;
}

void *pa_alloc(ssize_t size, int device, void *stream)
{
	void *p = NULL;
	(void)device, (void)stream;
	if (resolve() || cuda_malloc(&p, (size_t)size))
		return NULL;
	n_alloc++;
	return p;
}

void pa_free(void *ptr, ssize_t size, int device, void *stream)
{
	(void)size, (void)device, (void)stream;
	if (!resolve() && !cuda_free(ptr))
		n_free++;
}

long pa_count_alloc(void) { return n_alloc; }
long pa_count_free(void) { return n_free; }

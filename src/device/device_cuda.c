/*
 * device_cuda.c - the real device: segments from cudaMalloc/cudaFree, expandable segments from the
 * CUDA virtual-memory API (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease) in pages of the device's allocation granularity.
 *
 * The only file that includes CUDA headers. The runtime is linked statically and the driver's VMM
 * functions are looked up at run time (cudaGetDriverEntryPointByVersion), so the program starts on
 * machines without a driver and reports there that no GPU is usable (exit status 69).
 * Everything obtained is recorded and returned by destroy, also after errors and signals.
 */
#include "device/device.h"
#include "util/idmap.h"
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*pf_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pf_addrfree)(CUdeviceptr, size_t);
typedef CUresult (*pf_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*pf_release)(CUmemGenericAllocationHandle);
typedef CUresult (*pf_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*pf_unmap)(CUdeviceptr, size_t);
typedef CUresult (*pf_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*pf_gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

typedef struct cudadev {
	int ordinal;
	size_t gran;
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	idmap segs;    /* cudaMalloc'd address -> size */
	idmap pages;   /* calibrate: mapped page address -> handle + 1 */
	idmap phys;    /* replay: physical handles created (as_phys -> cuphys) */
	idmap mapped;  /* replay: mapped granule address -> 1 */
	idmap vas;     /* reserved range base -> size */
	pf_reserve reserve;
	pf_addrfree addrfree;
	pf_create create;
	pf_release release;
	pf_map map;
	pf_unmap unmap;
	pf_access setaccess;
	pf_gran granularity;
	int vmm;       /* the VMM entry points were found */
	cudaMemPool_t pool; /* the cuda-async policy's own pool, or NULL */
	idmap pool_live;    /* pool allocations not yet freed */
} cudadev;

static int cu_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr)
{
	cudadev *c = d->priv;
	void *p = NULL;
	(void)stream;
	cudaError_t e = cudaMalloc(&p, size);
	if (e != cudaSuccess) {
		cudaGetLastError(); /* clear the sticky-free error */
		return 1;
	}
	*addr = (uint64_t)(uintptr_t)p;
	idmap_put(&c->segs, *addr, (void *)(uintptr_t)size);
	return 0;
}

static void cu_free(as_device *d, uint64_t addr, uint64_t size)
{
	cudadev *c = d->priv;
	(void)size;
	if (idmap_del(&c->segs, addr))
		cudaFree((void *)(uintptr_t)addr);
}

static int cu_reserve(as_device *d, uint64_t size, uint64_t *addr)
{
	cudadev *c = d->priv;
	CUdeviceptr p;
	if (!c->vmm)
		return 1;
	size = (size + c->gran - 1) / c->gran * c->gran;
	if (c->reserve(&p, size, 0, 0, 0) != CUDA_SUCCESS)
		return 1;
	*addr = (uint64_t)p;
	idmap_put(&c->vas, *addr, (void *)(uintptr_t)size);
	return 0;
}

static void cu_unreserve(as_device *d, uint64_t addr, uint64_t size)
{
	cudadev *c = d->priv;
	void *sz = idmap_del(&c->vas, addr);
	(void)size;
	if (sz)
		c->addrfree((CUdeviceptr)addr, (size_t)(uintptr_t)sz);
}

static void cal_add(as_cal_result *res, int k, double us)
{
	res->us[k] += us;
	res->calls[k]++;
}

/* calibrate times each VMM primitive: the time since *t goes to result k (nothing when res is NULL,
 * as in a replay). */
static void lap(as_cal_result *res, int k, double *t)
{
	if (!res)
		return;
	double now = as_dev_now_us();
	cal_add(res, k, now - *t);
	*t = now;
}

static void unmap_pages(cudadev *c, uint64_t addr, uint64_t size, as_cal_result *res)
{
	double t = res ? as_dev_now_us() : 0;
	for (uint64_t a = addr; a < addr + size; a += c->gran) {
		void *h = idmap_del(&c->pages, a);
		if (!h)
			continue;
		c->unmap((CUdeviceptr)a, c->gran);
		lap(res, CAL_VMM_UNMAP, &t);
		c->release((CUmemGenericAllocationHandle)((uintptr_t)h - 1));
		lap(res, CAL_VMM_RELEASE, &t);
	}
}

/* One physical allocation per granule, mapped, then access for the whole range. */
static int map_range(cudadev *c, uint64_t addr, uint64_t size, as_cal_result *res)
{
	double t = res ? as_dev_now_us() : 0;
	for (uint64_t a = addr; a < addr + size; a += c->gran) {
		CUmemGenericAllocationHandle h;
		if (c->create(&h, c->gran, &c->prop, 0) != CUDA_SUCCESS) {
			unmap_pages(c, addr, a - addr, NULL); /* the pages created by this call */
			return 1;
		}
		lap(res, CAL_VMM_CREATE, &t);
		if (c->map((CUdeviceptr)a, c->gran, 0, h, 0) != CUDA_SUCCESS) {
			c->release(h);
			unmap_pages(c, addr, a - addr, NULL);
			return 1;
		}
		lap(res, CAL_VMM_MAP, &t);
		idmap_put(&c->pages, a, (void *)(uintptr_t)(h + 1));
	}
	if (c->setaccess((CUdeviceptr)addr, size, &c->access, 1) != CUDA_SUCCESS) {
		unmap_pages(c, addr, size, NULL);
		return 1;
	}
	lap(res, CAL_VMM_ACCESS, &t);
	return 0;
}

/* A physical handle of the replay: the policy's page as physical allocations of the granularity, as
 * map_range makes them (one cuMemCreate per granule). */
typedef struct cuphys {
	size_t n;
	CUmemGenericAllocationHandle h[];
} cuphys;

static int cu_create(as_device *d, uint64_t size, as_phys *out)
{
	cudadev *c = d->priv;
	if (!c->vmm || !size || size % c->gran)
		return 1;
	size_t n = size / c->gran;
	cuphys *p = xmalloc(sizeof(*p) + n * sizeof(p->h[0]));
	for (p->n = 0; p->n < n; p->n++)
		if (c->create(&p->h[p->n], c->gran, &c->prop, 0) != CUDA_SUCCESS) {
			while (p->n)
				c->release(p->h[--p->n]);
			free(p);
			return 1;
		}
	*out = (as_phys)(uintptr_t)p;
	idmap_put(&c->phys, *out, p);
	return 0;
}

static void cu_release(as_device *d, as_phys h)
{
	cudadev *c = d->priv;
	cuphys *p = idmap_del(&c->phys, h);
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		c->release(p->h[i]);
	free(p);
}

static void cu_unmap(as_device *d, uint64_t addr, uint64_t size)
{
	cudadev *c = d->priv;
	for (uint64_t a = addr; a < addr + size; a += c->gran)
		if (idmap_del(&c->mapped, a))
			c->unmap((CUdeviceptr)a, c->gran);
}

/* The handles one after another from addr (cuMemMap per granule), then access for the whole range. */
static int cu_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n)
{
	cudadev *c = d->priv;
	if (!c->vmm || !n || addr % c->gran || size % c->gran)
		return 1;
	uint64_t a = addr;
	for (size_t i = 0; i < n; i++) {
		cuphys *p = idmap_get(&c->phys, h[i]);
		for (size_t j = 0; p && j < p->n; j++, a += c->gran) {
			if (c->map((CUdeviceptr)a, c->gran, 0, p->h[j], 0) != CUDA_SUCCESS) {
				cu_unmap(d, addr, a - addr);
				return 1;
			}
			idmap_put(&c->mapped, a, (void *)1);
		}
	}
	if (a != addr + size || c->setaccess((CUdeviceptr)addr, size, &c->access, 1) != CUDA_SUCCESS) {
		cu_unmap(d, addr, a - addr);
		return 1;
	}
	return 0;
}

static int cu_pool_open(as_device *d, uint64_t threshold, int reuse)
{
	cudadev *c = d->priv;
	struct cudaMemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = c->ordinal;
	if (cudaMemPoolCreate(&c->pool, &props) != cudaSuccess) {
		c->pool = NULL;
		return 1;
	}
	cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &threshold);
	int on = reuse ? 1 : 0;
	cudaMemPoolSetAttribute(c->pool, cudaMemPoolReuseFollowEventDependencies, &on);
	cudaMemPoolSetAttribute(c->pool, cudaMemPoolReuseAllowOpportunistic, &on);
	cudaMemPoolSetAttribute(c->pool, cudaMemPoolReuseAllowInternalDependencies, &on);
	idmap_init(&c->pool_live);
	return 0;
}

static void cu_pool_free(as_device *d, uint64_t addr)
{
	cudadev *c = d->priv;
	if (idmap_del(&c->pool_live, addr))
		cudaFreeAsync((void *)(uintptr_t)addr, 0);
}

static void cu_pool_trim(as_device *d, uint64_t keep)
{
	cudadev *c = d->priv;
	cudaStreamSynchronize(0);
	cudaMemPoolTrimTo(c->pool, keep);
}

static uint64_t cu_pool_reserved(as_device *d)
{
	cudadev *c = d->priv;
	cuuint64_t v = 0;
	if (c->pool)
		cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrReservedMemCurrent, &v);
	return (uint64_t)v;
}

static int cu_pool_alloc(as_device *d, uint64_t size, uint64_t *addr)
{
	cudadev *c = d->priv;
	void *p = NULL;
	if (cudaMallocFromPoolAsync(&p, size, c->pool, 0) != cudaSuccess) {
		cudaGetLastError();
		return 1;
	}
	*addr = (uint64_t)(uintptr_t)p;
	idmap_put(&c->pool_live, *addr, (void *)1);
	if (d->capacity && cu_pool_reserved(d) > d->capacity) {
		/* --capacity: the pool may not grow past it; give the memory back and refuse */
		cu_pool_free(d, *addr);
		cu_pool_trim(d, d->capacity);
		return 1;
	}
	return 0;
}

static void cu_destroy(as_device *d)
{
	cudadev *c = d->priv;
	if (c->pool) {
		for (size_t i = 0; i < c->pool_live.cap; i++)
			if (idmap_live(&c->pool_live, i))
				cudaFreeAsync((void *)(uintptr_t)c->pool_live.keys[i], 0);
		cudaStreamSynchronize(0);
		cudaMemPoolDestroy(c->pool);
		idmap_free(&c->pool_live);
	}
	for (size_t i = 0; i < c->mapped.cap; i++)
		if (idmap_live(&c->mapped, i))
			c->unmap((CUdeviceptr)c->mapped.keys[i], c->gran);
	for (size_t i = 0; i < c->phys.cap; i++)
		if (idmap_live(&c->phys, i)) {
			cuphys *p = c->phys.vals[i];
			for (size_t j = 0; j < p->n; j++)
				c->release(p->h[j]);
			free(p);
		}
	for (size_t i = 0; i < c->pages.cap; i++)
		if (idmap_live(&c->pages, i)) {
			c->unmap((CUdeviceptr)c->pages.keys[i], c->gran);
			c->release((CUmemGenericAllocationHandle)((uintptr_t)c->pages.vals[i] - 1));
		}
	for (size_t i = 0; i < c->vas.cap; i++)
		if (idmap_live(&c->vas, i))
			c->addrfree((CUdeviceptr)c->vas.keys[i], (size_t)(uintptr_t)c->vas.vals[i]);
	for (size_t i = 0; i < c->segs.cap; i++)
		if (idmap_live(&c->segs, i))
			cudaFree((void *)(uintptr_t)c->segs.keys[i]);
	cudaDeviceSynchronize();
	idmap_free(&c->pages);
	idmap_free(&c->mapped);
	idmap_free(&c->phys);
	idmap_free(&c->vas);
	idmap_free(&c->segs);
	free(c);
	free(d);
}

static const as_device_ops cuda_ops = {
	.name = "cuda",
	.alloc = cu_alloc, .free = cu_free,
	.reserve = cu_reserve, .unreserve = cu_unreserve,
	.create = cu_create, .release = cu_release, .map = cu_map, .unmap = cu_unmap,
	.destroy = cu_destroy,
	.pool = {
		.open = cu_pool_open,
		.alloc = cu_pool_alloc,
		.free = cu_pool_free,
		.trim = cu_pool_trim,
		.reserved = cu_pool_reserved, /* the driver creates the pool's memory: follow its attribute */
		.check = NULL,
	},
};

static void *entry(const char *name)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult st;
	if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &st) != cudaSuccess ||
	    st != cudaDriverEntryPointSuccess)
		return NULL;
	return fn;
}

as_device *as_cuda_device_new(int ordinal, uint64_t capacity, as_err *err)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		as_fail(err, AS_EXIT_UNAVAILABLE, "no usable CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return NULL;
	}
	if (ordinal < 0 || ordinal >= n) {
		as_fail(err, AS_EXIT_UNAVAILABLE, "CUDA device %d does not exist (%d found)", ordinal, n);
		return NULL;
	}
	if ((e = cudaSetDevice(ordinal)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
		as_fail(err, AS_EXIT_UNAVAILABLE, "cannot use CUDA device %d: %s", ordinal, cudaGetErrorString(e));
		return NULL;
	}
	as_device *d = xcalloc(1, sizeof(*d));
	cudadev *c = xcalloc(1, sizeof(*c));
	c->ordinal = ordinal;
	idmap_init(&c->segs);
	idmap_init(&c->pages);
	idmap_init(&c->phys);
	idmap_init(&c->mapped);
	idmap_init(&c->vas);
	c->reserve = (pf_reserve)entry("cuMemAddressReserve");
	c->addrfree = (pf_addrfree)entry("cuMemAddressFree");
	c->create = (pf_create)entry("cuMemCreate");
	c->release = (pf_release)entry("cuMemRelease");
	c->map = (pf_map)entry("cuMemMap");
	c->unmap = (pf_unmap)entry("cuMemUnmap");
	c->setaccess = (pf_access)entry("cuMemSetAccess");
	c->granularity = (pf_gran)entry("cuMemGetAllocationGranularity");
	c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	c->prop.location.id = ordinal;
	c->access.location = c->prop.location;
	c->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	c->vmm = c->reserve && c->addrfree && c->create && c->release && c->map && c->unmap && c->setaccess &&
		c->granularity && c->granularity(&c->gran, &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && c->gran;
	if (!c->gran)
		c->gran = 2ULL << 20;
	size_t fr = 0, tot = 0;
	cudaMemGetInfo(&fr, &tot);
	d->ops = &cuda_ops;
	d->capacity = capacity;
	d->total_memory = tot;
	d->measured = 1;
	d->priv = c;
	return d;
}

int as_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
	size_t f = 0, t = 0;
	if (cudaMemGetInfo(&f, &t) != cudaSuccess)
		return -1;
	*free_bytes = f;
	*total_bytes = t;
	return 0;
}


/* cudaMalloc: n allocations held together, then their frees. */
static int cal_malloc(as_device *d, uint64_t size, int n, uint64_t *a, as_cal_result *res)
{
	int made = 0;
	for (; made < n; made++) {
		double t0 = as_dev_now_us();
		int fail = cu_alloc(d, size, 0, &a[made]);
		double t = as_dev_now_us() - t0;
		if (fail)
			break;
		cal_add(res, LAT_MALLOC, t);
	}
	for (int i = 0; i < made; i++) {
		double t0 = as_dev_now_us();
		cu_free(d, a[i], size);
		cal_add(res, LAT_FREE, as_dev_now_us() - t0);
	}
	return made == n ? 0 : -1;
}

/* VMM as expandable segments use it: n successive mappings in one reserved range, then their
 * unmapping; per call and, through map_range and unmap_pages, per primitive. */
static int cal_vmm(as_device *d, uint64_t size, int n, as_cal_result *res)
{
	cudadev *c = d->priv;
	uint64_t bytes = (size + c->gran - 1) / c->gran * c->gran, va = 0;
	if (cu_reserve(d, bytes * (uint64_t)n, &va))
		return -1;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		double t0 = as_dev_now_us();
		rc = map_range(c, va + bytes * (uint64_t)i, bytes, res) ? -1 : 0;
		if (!rc)
			cal_add(res, LAT_MAP, as_dev_now_us() - t0);
	}
	for (uint64_t a = va; a < va + bytes * (uint64_t)n; a += bytes) {
		if (!idmap_get(&c->pages, a))
			continue;
		double t0 = as_dev_now_us();
		unmap_pages(c, a, bytes, res);
		cal_add(res, LAT_UNMAP, as_dev_now_us() - t0);
	}
	cu_unreserve(d, va, bytes * (uint64_t)n);
	return rc;
}

/* cudaMallocAsync on a pool of its own that keeps what is freed (release threshold: all): n
 * allocations, their frees, and the same again. Each allocation counts as pool_grow when the
 * pool's reserved memory grew during it, else as pool_malloc. */
static int cal_pool(as_device *d, uint64_t size, int n, uint64_t *a, as_cal_result *res)
{
	cudadev *c = d->priv;
	if (cu_pool_open(d, UINT64_MAX, 1))
		return -1;
	int rc = 0;
	for (int pass = 0; pass < 2 && !rc; pass++) {
		int made = 0;
		for (; made < n; made++) {
			uint64_t before = cu_pool_reserved(d);
			double t0 = as_dev_now_us();
			int fail = cu_pool_alloc(d, size, &a[made]);
			double t = as_dev_now_us() - t0;
			if (fail) {
				rc = -1;
				break;
			}
			static int first = 1; /* the process's first cudaMallocAsync */
			cal_add(res, first ? LAT_POOL_INIT : cu_pool_reserved(d) > before ? LAT_POOL_GROW : LAT_POOL_MALLOC, t);
			first = 0;
		}
		for (int i = 0; i < made; i++) {
			double t0 = as_dev_now_us();
			cu_pool_free(d, a[i]);
			cal_add(res, LAT_POOL_FREE, as_dev_now_us() - t0);
		}
		cudaStreamSynchronize(0);
	}
	cudaMemPoolDestroy(c->pool);
	idmap_free(&c->pool_live);
	c->pool = NULL;
	return rc;
}

/* One calibration point: the family's primitives on `size` bytes, n calls held together (fewer if
 * the GPU's free memory would not hold them: at most 70% of it is used). res gets mean times. */
int as_cuda_measure(int family, uint64_t size, int n, as_cal_result *res, as_err *err)
{
	memset(res, 0, sizeof(*res));
	as_device *d = as_cuda_device_new(0, 0, err);
	if (!d)
		return -1;
	size_t fr = 0, tot = 0;
	cudaMemGetInfo(&fr, &tot);
	uint64_t room = (uint64_t)((double)fr * 0.7), rounded = (size + (2ULL << 20) - 1) / (2ULL << 20) * (2ULL << 20);
	if ((uint64_t)n * rounded > room)
		n = (int)(room / rounded);
	int rc = 0;
	if (n < 1) {
		rc = as_fail(err, AS_EXIT_UNAVAILABLE, "%llu bytes do not fit in the GPU's free memory", (unsigned long long)size);
	} else {
		uint64_t *a = xcalloc((size_t)n, sizeof(uint64_t));
		int r = family == CAL_MALLOC ? cal_malloc(d, size, n, a, res) : family == CAL_VMM ? cal_vmm(d, size, n, res)
			: cal_pool(d, size, n, a, res);
		if (r)
			rc = as_fail(err, AS_EXIT_UNAVAILABLE, "allocating %d x %llu bytes failed", n, (unsigned long long)size);
		free(a);
	}
	for (int k = 0; k < CAL_NRESULTS; k++)
		if (res->calls[k])
			res->us[k] /= (double)res->calls[k];
	cu_destroy(d);
	return rc;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* allocsim transfer: host<->device copy time from pageable (malloc) and pinned (cudaHostAlloc)
 * memory, and the cost of cudaHostAlloc/cudaFreeHost, over sizes; median of n. CSV on out. */
int as_cuda_transfer(FILE *out, int n, as_err *err)
{
	static const uint64_t sizes[] = { 4096, 65536, 1ULL << 20, 16ULL << 20, 64ULL << 20, 256ULL << 20, 1ULL << 30 };
	as_device *d = as_cuda_device_new(0, 0, err);
	if (!d)
		return -1;
	double *t = xcalloc((size_t)n, sizeof(double));
	int rc = 0;
	fputs("size_bytes,host_memory,operation,median_us,gb_per_s\n", out);
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && !rc; k++) {
		uint64_t sz = sizes[k];
		void *dev = NULL, *pageable = malloc(sz), *pinned = NULL;
		if (!pageable || cudaMalloc(&dev, sz) != cudaSuccess) {
			rc = as_fail(err, AS_EXIT_UNAVAILABLE, "cannot allocate %llu bytes for the transfer test", (unsigned long long)sz);
			free(pageable);
			break;
		}
		memset(pageable, 1, sz);
		for (int i = 0; i < n; i++) { /* cudaHostAlloc / cudaFreeHost */
			double t0 = as_dev_now_us();
			if (cudaHostAlloc(&pinned, sz, cudaHostAllocDefault) != cudaSuccess) {
				rc = as_fail(err, AS_EXIT_UNAVAILABLE, "cudaHostAlloc of %llu bytes failed", (unsigned long long)sz);
				break;
			}
			t[i] = as_dev_now_us() - t0;
			if (i < n - 1)
				cudaFreeHost(pinned);
		}
		if (rc) {
			cudaFree(dev);
			free(pageable);
			break;
		}
		qsort(t, (size_t)n, sizeof(double), cmp_dbl);
		fprintf(out, "%llu,pinned,cudaHostAlloc,%.3f,\n", (unsigned long long)sz, t[n / 2]);
		memset(pinned, 1, sz);
		static const char *const names[2] = { "pageable", "pinned" };
		for (int h = 0; h < 2; h++) {
			void *host = h ? pinned : pageable;
			for (int dir = 0; dir < 2; dir++) {
				for (int i = 0; i < n; i++) {
					double t0 = as_dev_now_us();
					if (dir == 0)
						cudaMemcpy(dev, host, sz, cudaMemcpyHostToDevice);
					else
						cudaMemcpy(host, dev, sz, cudaMemcpyDeviceToHost);
					t[i] = as_dev_now_us() - t0;
				}
				qsort(t, (size_t)n, sizeof(double), cmp_dbl);
				fprintf(out, "%llu,%s,%s,%.3f,%.3f\n", (unsigned long long)sz, names[h], dir ? "D2H" : "H2D", t[n / 2],
					(double)sz / (t[n / 2] * 1e-6) / 1e9);
			}
		}
		double t0 = as_dev_now_us();
		cudaFreeHost(pinned);
		fprintf(out, "%llu,pinned,cudaFreeHost,%.3f,\n", (unsigned long long)sz, as_dev_now_us() - t0);
		cudaFree(dev);
		free(pageable);
	}
	free(t);
	cu_destroy(d);
	return rc;
}

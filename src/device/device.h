/* device.h - what policies ask for memory: segments (cudaMalloc) and VMM reservations/pages.
 * The wrappers below count every call and track reserved bytes, so all backends and all
 * policies are measured the same way. */
#ifndef ALLOCSIM_DEVICE_H
#define ALLOCSIM_DEVICE_H
#include "util/common.h"
#include "device/latency.h"
#include <stdio.h>

typedef struct as_device as_device;

enum { DEV_OP_ALLOC, DEV_OP_FREE, DEV_OP_MAP, DEV_OP_UNMAP };

/* A physical memory allocation (cuMemCreate's handle on the GPU); the backend's own value. */
typedef uint64_t as_phys;

/* Optional (a backend with a stream-ordered memory pool, cudaMallocAsync): the pool's calls. */
typedef struct as_device_pool_ops {
	int (*open)(as_device *d, uint64_t release_threshold, int reuse);
	int (*alloc)(as_device *d, uint64_t size, uint64_t *addr);   /* 0 ok, 1 out of memory */
	void (*free)(as_device *d, uint64_t addr);
	void (*trim)(as_device *d, uint64_t keep);
	/* the pool's physical memory where the backend cannot create it through as_dev_phys_create
	 * (the driver's own pool); NULL when it does (the simulated pool) */
	uint64_t (*reserved)(as_device *d);
	int (*check)(as_device *d, char *why, size_t n);            /* optional: the model's invariants */
} as_device_pool_ops;

typedef struct as_device_ops {
	const char *name;
	/* cudaMalloc / cudaFree: physical memory with an address range of its own */
	int (*alloc)(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr); /* 0 ok, 1 out of memory */
	void (*free)(as_device *d, uint64_t addr, uint64_t size);
	/* virtual address ranges */
	int (*reserve)(as_device *d, uint64_t size, uint64_t *addr);
	void (*unreserve)(as_device *d, uint64_t addr, uint64_t size);
	/* physical memory (cuMemCreate / cuMemRelease) and its mapping into reserved ranges: map puts n
	 * handles of size / n bytes each one after another from addr (cuMemMap each, cuMemSetAccess
	 * once); unmap takes the pages of [addr, addr + size) out again (cuMemUnmap). */
	int (*create)(as_device *d, uint64_t size, as_phys *h);                      /* 0 ok, 1 out of memory */
	void (*release)(as_device *d, as_phys h);
	int (*map)(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n); /* 0 ok, 1 failed */
	void (*unmap)(as_device *d, uint64_t addr, uint64_t size);
	void (*destroy)(as_device *d);
	as_device_pool_ops pool;
	/* optional, where addresses are the simulation's (device_sim.c; device_map.c passes them to its
	 * simulated device): as_dev_hint and as_dev_placement below */
	void (*hint)(as_device *d, uint64_t addr, uint64_t size);
	void (*placement)(as_device *d, int mode);
} as_device_ops;

typedef void (*as_dev_observer)(void *ctx, int op, uint64_t addr, uint64_t size, uint64_t stream);

/* The device has one owner: its fields are written in src/device only. A backend makes its device with
 * as_device_new; the rest of the program reads the counters and sets what it may with the as_dev_set_*
 * calls below. */
struct as_device {
	const as_device_ops *ops;
	uint64_t capacity;        /* bytes the allocator may hold (--capacity; 0 = unlimited) */
	/* set by a policy that keeps to the capacity itself, as PyTorch keeps to
	 * set_per_process_memory_fraction: it checks a request's allocation size, and an expandable
	 * segment's mapping, in whole pages, may then go past the limit (the real device has the memory) */
	int capacity_by_policy;
	uint64_t total_memory;    /* the GPU's physical memory: no backend maps more (sim: an H200's) */
	uint64_t reserved, peak_reserved;
	uint64_t num_alloc, num_free;   /* device calls that obtain / return memory */
	uint64_t num_failed;
	/* latency: measured (real backend) or modelled (simulation with a latency model) */
	int measured;
	const struct as_lat_model *model;
	double op_us;             /* device time during the current policy call (the engine resets it) */
	double time_us;           /* all device time */
	uint64_t calls;           /* all device calls */
	as_dev_observer observer;
	void *observer_ctx;
	FILE *log;                /* --device-log: one row per device call (as_dev_log_header) */
	uint64_t event;           /* the trace event being replayed, for the log */
	int pool_used;            /* a pool call was made (the first one pays pool_init) */
	uint64_t pool_bytes;      /* the pool's physical memory, as pool.reserved last reported it */
	uint64_t last_event;      /* the event of the previous device call (the model's idle gap) */
	uint64_t gap;             /* events between it and the current call (0: the first call) */
	void *priv;
	const as_device *real;    /* a stack layer's device (src/policies/stack.c): the device underneath; NULL otherwise */
};

/* A device of backend ops with its state priv (ops->destroy frees both): capacity and total_memory as
 * in struct as_device; over: the device a stack layer's device stands on (its total memory and its
 * real device are taken from it), or NULL. */
as_device *as_device_new(const as_device_ops *ops, void *priv, uint64_t capacity, uint64_t total_memory, const as_device *over);
/* What the replay attaches: the latency model (NULL: none), the --device-log file (NULL: none), the
 * observer of every call (NULL: none). */
void as_dev_set_model(as_device *d, const struct as_lat_model *m);
/* The simulated device's total memory (cudaMemGetInfo's total: rmm's N% pools, pytorch's expandable
 * VA reservation and per_process_memory_fraction); 0 leaves it (an H200's, AS_H200_TOTAL_MEMORY). */
void as_dev_set_total(as_device *d, uint64_t total);
void as_dev_set_log(as_device *d, FILE *log);
void as_dev_set_observer(as_device *d, as_dev_observer fn, void *ctx);
/* A policy that keeps to the capacity itself (the field's comment above) says so. */
void as_dev_set_capacity_by_policy(as_device *d);
/* The engine, before each event's policy call: the event (for the log and the model's idle gap) and
 * the call's device time back to 0. Inline: once per event. */
static inline void as_dev_begin_event(as_device *d, uint64_t event)
{
	d->op_us = 0;
	d->event = event;
}

/* Writes the --device-log header (AS_DEVLOG_HEADER). */
void as_dev_log_header(FILE *f);
/* The monotonic clock device calls are timed with, in microseconds. */
double as_dev_now_us(void);

/* Address assignment of the simulated device. ADDR_ASCENDING: bottom-up, as the driver placed the
 * regions of JAX's BFC allocator (device_sim.c). ADDR_SHUFFLED: a simulated driver for
 * as_mapped_device_new (--backend shuffled): segments bottom-up and reserved ranges top-down, far from
 * the model's, so that its addresses come in another order than the simulation's, as a real driver's
 * do; it checks that every map lies in a range it reserved. */
enum { ADDR_AUTO, ADDR_MODEL, ADDR_RECORDED, ADDR_ASCENDING, ADDR_SHUFFLED };

#define AS_H200_TOTAL_MEMORY 150109880320ULL /* totalGlobalMem of the H200 the traces come from */
as_device *as_sim_device_new(uint64_t capacity, int addr_mode);
/* Placement hints, optional device ops (nothing on a device without them: a stack layer's, the GPU's).
 * as_dev_hint: a segment the recording's allocator obtained (segment_alloc), in trace order: the
 * simulated device hands out the same address for the same call while the call sequences agree.
 * as_dev_placement: a policy asks for the placement the driver showed in the process it models (e.g.
 * ADDR_ASCENDING for bfc); it applies to the simulated device in the default (auto) mode only. */
void as_dev_hint(as_device *d, uint64_t addr, uint64_t size);
void as_dev_placement(as_device *d, int mode);

int as_dev_alloc(as_device *d, uint64_t size, uint64_t stream, uint64_t *addr);
/* 1 when a request of size bytes exceeds the device's memory or capacity, counted as a failed call
 * (as_dev_alloc and as_dev_map refuse such a request this way, before any call); else 0, nothing
 * counted. A policy asks first where preparing the call costs (a handle array per page). */
int as_dev_refuses(as_device *d, uint64_t size);
/* What cudaMemGetInfo's free says now: the device's memory (the capacity if smaller) minus what is
 * reserved on it; for a stack layer's device, the real device's (RMM sizes its pools from it). */
uint64_t as_dev_mem_free(const as_device *d);
void as_dev_free(as_device *d, uint64_t addr, uint64_t size, uint64_t stream);
int as_dev_reserve(as_device *d, uint64_t size, uint64_t *addr);
void as_dev_unreserve(as_device *d, uint64_t addr, uint64_t size);
/* Physical memory: the device's reserved bytes change here and only here (a cudaMalloc'd segment,
 * a created handle, the pool's chunks), so every backend and policy is measured the same way.
 * Creating or releasing is not a device call by itself: the calls below count as the program sees them. */
int as_dev_phys_create(as_device *d, uint64_t size, as_phys *h);   /* 0 ok, 1 out of memory or over capacity */
void as_dev_phys_release(as_device *d, as_phys h, uint64_t size);
/* Maps n existing handles (size / n bytes each) one after another from addr, and takes them out again:
 * physical memory mapped a second time (virtual-memory stitching) or moved. Timed and logged as device
 * calls ("remap", "unmap_only"); reserved bytes do not change (nothing is created or released). */
int as_dev_phys_map(as_device *d, uint64_t addr, uint64_t size, const as_phys *h, size_t n);
void as_dev_phys_unmap(as_device *d, uint64_t addr, uint64_t size);
/* One device call (counted, timed, logged as "map"): creates n pages of page bytes, handles into h[],
 * and maps them from addr, which lies in a reserved range (expandable segments map a run of pages
 * this way). 0 ok, 1 out of memory (nothing is left created). */
int as_dev_map(as_device *d, uint64_t addr, uint64_t page, size_t n, as_phys *h, uint64_t stream);
/* One device call ("unmap"): unmaps the n pages from addr and releases their handles h[]. */
void as_dev_unmap(as_device *d, uint64_t addr, uint64_t page, size_t n, const as_phys *h, uint64_t stream);
void as_device_destroy(as_device *d);
/* The pool wrappers count calls and time like the others and take reserved bytes from the pool. */
int as_dev_pool_alloc(as_device *d, uint64_t size, uint64_t *addr);
void as_dev_pool_free(as_device *d, uint64_t addr, uint64_t size);
void as_dev_pool_trim(as_device *d, uint64_t keep);

/* A device whose policy sees the addresses of a simulated device (capacity, addr_mode: as
 * as_sim_device_new's), each call made on the driver drv as well at the driver's own address
 * (device_map.c): the real backend decides exactly as the simulation and makes its calls. Takes drv. */
as_device *as_mapped_device_new(as_device *drv, uint64_t capacity, int addr_mode);

/* The real GPU (device_cuda.c, or a stub without CUDA): NULL and exit status 69 when unusable. Its
 * addresses are the driver's: a replay wraps it in as_mapped_device_new. */
as_device *as_cuda_device_new(int ordinal, uint64_t capacity, as_err *err);
int as_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes);
/* allocsim calibrate: one family of primitives measured as allocators use them, n calls held
 * together (fewer where the GPU's free memory would not hold n). Results per LAT_* operation and
 * per VMM primitive: the mean host microseconds of one call and how many calls were seen. */
enum { CAL_MALLOC, CAL_VMM, CAL_POOL };
enum { CAL_VMM_CREATE = LAT_NOPS, CAL_VMM_MAP, CAL_VMM_ACCESS, CAL_VMM_UNMAP, CAL_VMM_RELEASE, CAL_NRESULTS };
extern const char *const as_cal_result_names[CAL_NRESULTS];
typedef struct as_cal_result {
	double us[CAL_NRESULTS];
	uint64_t calls[CAL_NRESULTS];
} as_cal_result;
int as_cuda_measure(int family, uint64_t size, int n, as_cal_result *res, as_err *err);
/* Pageable vs pinned copy times and cudaHostAlloc cost over sizes, as CSV (allocsim transfer). */
int as_cuda_transfer(FILE *out, int n, as_err *err);

#endif

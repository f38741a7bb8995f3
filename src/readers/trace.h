/* trace.h - the trace model (events + metadata) and the streaming reader interface. */
#ifndef ALLOCSIM_TRACE_H
#define ALLOCSIM_TRACE_H
#include "util/common.h"
#include <stdio.h>
#include <zlib.h>

typedef enum as_ev_type {
	EV_ALLOC = 0,     /* id, size (requested bytes), stream, thread */
	EV_FREE_REQ,      /* id: the caller released it; the block may still be in use by other streams */
	EV_FREE,          /* id: the block returns to the allocator (PyTorch free_completed) */
	EV_EMPTY_CACHE,   /* torch.cuda.empty_cache() */
	EV_PHASE,         /* a marker with a label */
	/* What the recorded allocator did with the device (informational: validate, address hints). */
	EV_SEG_ALLOC, EV_SEG_FREE, EV_SEG_MAP, EV_SEG_UNMAP,
	EV_POOL_RELEASE,  /* pool: the program let go of a private pool (its CUDA graphs destroyed, its
	                   * torch.cuda.MemPool deleted): empty_cache may now release its cached segments */
	EV__COUNT
} as_ev_type;

extern const char *const as_ev_names[EV__COUNT];


#define EVF_OOM 1u   /* this allocation failed with out-of-memory in the recording */
#define EVF_MAYBE 2u /* EV_EMPTY_CACHE: inferred, unless the next allocation's own fallback explains the release */
#define EVF_STREAM 8u /* EV_FREE: the free names the stream it is made on (RMM logs' free lines, native s=); without it a
                      * free's stream is unknown (0) */
#define EVF_POOL_EMPTY 16u /* EV_POOL_RELEASE: the pool's cache is emptied as it is released, and nothing else's (a
                          * MemPool's destructor: releasePool, then emptyCache(its id)) */
#define EVF_DEFER 4u /* EV_FREE, set by a stage: count the free, complete it later (as_engine_complete) */

typedef struct as_event {
	as_ev_type type;
	uint32_t flags;
	uint64_t id;
	uint64_t size;    /* requested bytes (alloc) or bytes (segment events) */
	uint64_t stream;
	uint64_t thread;  /* the thread that made the request (0 if unknown: a snapshot records none) */
	uint64_t addr;    /* recorded address (0 if unknown) */
	int64_t time_us;  /* -1 if unknown */
	uint64_t pos;     /* line number or byte offset where the event starts */
	uint64_t index;   /* 0-based index of the source record (trace entry) */
	const char *label; /* EV_PHASE only; valid until the next call */
	const char *site;  /* EV_ALLOC, where the reader has it (as_reader_opts.keep_sites): the
	                    * allocation's frames, "file:line function" joined by " < ", the culprit (the
	                    * innermost frame outside torch) first; NULL if none; valid until the next call */
	uint32_t pool;    /* EV_ALLOC, EV_POOL_RELEASE: the memory pool the request goes to (AS_POOL_*) */
	uint32_t slot;    /* alloc/free events: a dense number for the live allocation, set by
	                   * as_reader_next (the lowest numbers are reused once freed, so slots stay
	                   * below the most allocations ever live at once); the engine indexes by it */
} as_event;

/* One segment of a snapshot's end state (for validate). */
typedef struct as_snap_block {
	uint64_t size;
	int state; /* 0 inactive, 1 active_allocated, 2 active_pending_free */
} as_snap_block;
typedef struct as_snap_segment {
	uint64_t addr, total_size, stream;
	int is_small, is_expandable;
	size_t nblocks;
	as_snap_block *blocks;
} as_snap_segment;

typedef struct as_meta {
	char format[16];        /* native, pytorch, rmm, host */
	char source[64];
	char device[64];
	uint64_t device_total;  /* 0 = unknown */
	uint64_t capacity;      /* 0 = none recorded */
	int has_settings;
	char *settings;         /* PYTORCH_CUDA_ALLOC_CONF of the recording */
	/* Known only after the whole input has been read: */
	uint64_t unmatched_frees;   /* frees of blocks whose alloc is not in the (truncated) history */
	uint64_t inferred_empty_cache;
	size_t nsegments;
	as_snap_segment *segments;
	int history_truncated;
	int device_index;       /* the device replayed (snapshots: one of several) */
	size_t ndevices;        /* devices in the trace (snapshots: lists in 'device_traces') */
	uint64_t *device_entries; /* history entries per device (NULL: one device, not counted) */
	uint32_t pyfields;      /* snapshots: AS_PF_* bits, the fields that date the writer (pyversion.c) */
	uint32_t private_segments; /* snapshots: end-state segments in private pools (segment_pool_id not (0, 0)) */
	uint32_t named_pools;   /* private pools the events name (as_event.pool) */
	uint32_t inferred_pools; /* snapshots: pools inferred from the segments (poolinfer.c; 0: not inferred) */
	uint64_t pool_unplaced; /* ... requests in segments the cut history never shows made nor the end state holds */
	uint64_t pool_evidence; /* snapshots naming no pool, not inferred: segments showing private pools were used */
	int host_traces;        /* snapshots (2.14+): 1 the top-level 'host_traces' list is there (pinned host history) */
	uint64_t host_entries;  /* ... its entries (record_pinned_host_memory=True; replayed with --device host) */
	int trace_overflowed;   /* snapshots (2.12+): allocator_settings.trace_alloc_overflowed, the history ring wrapped */
	uint64_t trace_max_entries; /* ... allocator_settings.trace_alloc_max_entries (0: not recorded) */
} as_meta;

/* The fields of a PyTorch snapshot that tell which release wrote it (src/readers/pyversion.c). */
enum {
	AS_PF_SNAPSHOT = 1u << 0,  /* a snapshot dict was read */
	AS_PF_ENTRY = 1u << 1,     /* it has a trace entry (the first one was looked at) */
	AS_PF_TIME_US = 1u << 2, AS_PF_COMPILE_CONTEXT = 1u << 3, AS_PF_USER_METADATA = 1u << 4,
	AS_PF_POOL_ID = 1u << 5,   /* trace-entry keys */
	AS_PF_SETTINGS = 1u << 6, AS_PF_EXT_ANNOTATIONS = 1u << 7, AS_PF_HOST = 1u << 8, /* top-level keys */
	AS_PF_STREAM_REUSE = 1u << 9, /* allocator_settings has graph_capture_record_stream_reuse */
	AS_PF_RING_FLAGS = 1u << 10,  /* allocator_settings has trace_alloc_overflowed / trace_alloc_max_entries (2.12) */
	AS_PF_PINNED_SETTINGS = 1u << 11, /* allocator_settings has max_round_threshold / max_cached_size (2.13) */
};
/* The ring-buffer flags of allocator_settings (2.12+; trace_alloc_overflowed, trace_alloc_max_entries):
 * an overflowed ring means the history lost its beginning (history_truncated). */
void as_pyver_ring(as_meta *m, int overflowed, int64_t max_entries);
enum { AS_PF_TOP, AS_PF_IN_ENTRY, AS_PF_IN_SETTINGS };
/* Records the key KEY of the top-level dict, a trace entry or allocator_settings (WHERE). */
void as_pyver_note(as_meta *m, int where, const char *key);
/* The AS_PF_* bit of KEY at WHERE (0: a key that dates nothing). */
uint32_t as_pyver_bit(int where, const char *key);
/* The releases 2.LO .. 2.HI that write the fields seen (HI 12: newer than 2.11); WHY says which
 * fields decided. Returns 0 if the trace is not a snapshot, -1 if its fields contradict, else 1. */
int as_pyver_range(const as_meta *m, int *lo, int *hi, char *why, size_t whylen);

/* Buffered input, gzip-transparent. It reads with pread at its own offset from a seekable file: a
 * pipe, FIFO or terminal is first copied to an unlinked temporary file, so every input gives the same
 * result however it arrives. */
typedef struct as_input {
	int fd;           /* a regular file (or the spool of a non-seekable input) */
	uint64_t raw_off; /* the next file byte to read */
	int gzip;         /* 1: gzip members, inflated; 0: plain */
	int zdone;        /* the current gzip member has ended */
	z_stream zs;
	void *isal;       /* ISA-L's inflater while it reads the input (input.c), else NULL */
	unsigned char *raw;
	char *path;
	unsigned char *buf;
	size_t len, pos;
	uint64_t offset;  /* uncompressed bytes consumed before buf[0] */
	int eof, error;
} as_input;

int as_input_open(as_input *in, const char *path, as_err *err);
int as_input_open_fd(as_input *in, int fd, const char *name, as_err *err);
void as_input_close(as_input *in);
/* Ensure at least n bytes are buffered (fewer at end of input); returns bytes available. */
size_t as_input_fill(as_input *in, size_t n, as_err *err);
static inline uint64_t as_input_tell(const as_input *in) { return in->offset + in->pos; }
/* Reads one line (without the newline, CR stripped) into *line; returns 1, 0 at EOF, -1 error. */
int as_input_line(as_input *in, char **line, size_t *cap, as_err *err);

typedef struct as_reader as_reader;
struct as_reader_ops {
	const char *name;
	int (*next)(as_reader *r, as_event *ev, as_err *err); /* 1 event, 0 end, -1 error */
	void (*close)(as_reader *r);
};

#define AS_DEVICE_HOST (-2)  /* as_reader_opts.device: a snapshot's 'host_traces' (2.14+), not a device */
typedef struct as_reader_opts {
	int want_segments;  /* keep the snapshot's end-state segments */
	uint64_t max_bytes; /* snapshot reader: bytes its values may hold at once (0: the default, 1 GiB) */
	int has_device, device; /* replay this device of a multi-device snapshot (--device N), or the pinned
	                         * host history (--device host: AS_DEVICE_HOST) */
	int any_device;     /* no --device and several devices with history: the first (info), not an error */
	int keep_sites;     /* give alloc events their site (as_event.site), where the trace has one */
	int pool_prepass;   /* internal: the snapshot reader's first pass for pool inference (snapshot.c) */
	int pool_reread;    /* internal: the read again that as_reader_again asked for (as_reader_reopen) */
} as_reader_opts;

struct as_reader {
	const struct as_reader_ops *ops;
	as_input in;
	as_meta meta;
	int pos_is_line;  /* error positions are lines (text) or byte offsets (binary) */
	void *priv;    /* the format's own state */
	void *live;    /* ids live in the trace (generic checks, reader.c) */
	struct as_tracecheck *check; /* times, addresses, segment sizes (tracecheck.c) */
	int time_unordered; /* set by the format: times may go backwards (RMM) */
	int slots_assigned; /* set by the format: it numbers live allocations (as_event.slot) itself, with
	                     * fresh ids and frees of live ids only (the snapshot reader), so
	                     * as_reader_next keeps no map of its own */
	int finished;
	int again;     /* set by the format at the end: read the trace once more (as_reader_again) */
	as_reader_opts opts; /* as opened (as_reader_reopen) */
};


int as_reader_open(as_reader **out, const char *path, const as_reader_opts *opts, as_err *err);
/* --device N: which device of a multi-device snapshot to read (or 'host': its pinned host history,
 * AS_DEVICE_HOST); -1 for a bad value. */
int as_reader_opts_device(as_reader_opts *o, const char *arg);
/* The same over an open descriptor (taken over and closed by the reader); name is for messages. */
int as_reader_open_fd(as_reader **out, int fd, const char *name, const as_reader_opts *opts, as_err *err);
int as_reader_next(as_reader *r, as_event *ev, as_err *err);
/* After the last event (as_reader_next gave 0): 1 when the events must be read once more, from the
 * start, by as_reader_reopen's reader (and the ones given forgotten): a PyTorch 2.11 snapshot whose
 * private pools were all released before its end showed them only as it went (snapshot.c). */
int as_reader_again(const as_reader *r);
/* A new reader over R's input from its start, with R's options, reading it the way as_reader_again asks. */
int as_reader_reopen(const as_reader *r, as_reader **out, as_err *err);
void as_reader_close(as_reader *r);
/* For the line-oriented readers (csvline.c): fails with "PATH:LINE: what 'arg'" (arg may be NULL), exit status 65. */
int as_reader_line_err(as_reader *r, uint64_t line, as_err *err, const char *what, const char *arg);
/* The next non-blank line of a CSV log (counted in *lineno), split into its n fields at f; cols
 * ("a,b,c") names them in the message for any other count. 1, 0 at the end of the input, -1 on error. */
int as_reader_csv_line(as_reader *r, char **line, size_t *cap, uint64_t *lineno, char **f, int n, const char *cols,
	as_err *err);
void as_meta_free(as_meta *m); /* meta.c */

/* Format-specific constructors (called by as_reader_open after detection). */
int as_native_open(as_reader *r, const as_reader_opts *o, as_err *err);
int as_pickle_open(as_reader *r, const as_reader_opts *o, as_err *err);
int as_rmm_open(as_reader *r, const as_reader_opts *o, as_err *err);
int as_hostlog_open(as_reader *r, const as_reader_opts *o, as_err *err);

/* Native writer (convert). */
typedef struct as_writer as_writer;
as_writer *as_native_writer_open(const char *path, const as_meta *meta, as_err *err);
int as_native_writer_event(as_writer *w, const as_event *ev, as_err *err);
int as_native_writer_close(as_writer *w, int commit, as_err *err); /* commit=0 discards the output */

/* Output files: src/util/outfile.h. */
#include "util/outfile.h"

#endif

/* source.h - the one place that decides how a trace file is read for a replay: streamed by its
 * reader (native text and other formats whose metadata comes first), a snapshot decoded first into
 * a temporary file (its settings come at its end) or into memory (a second pass, an offline plan),
 * a binary trace (.asbin) read in chunks or mapped in place, and --cache's binary copy beside the
 * trace. Commands say what the replay needs (AS_SRC_*); the events come from as_source_next. */
#ifndef ALLOCSIM_SOURCE_H
#define ALLOCSIM_SOURCE_H
#include "readers/evbuf.h"

enum {
	AS_SRC_WHOLE = 1,  /* every event in memory (a second pass over the same events: --segments) */
	AS_SRC_KEEP = 2,   /* in memory where it is decoded whole anyway (a snapshot, a binary trace mapped in
	                    * place): an offline policy plans over it without reading the file again */
	AS_SRC_CACHE = 4,  /* --cache: the binary form kept beside the trace (TRACE.asbin), rewritten when stale */
	AS_SRC_SPOOL = 8,  /* every trace decoded first into a temporary file, through its reader (validate:
	                    * the whole trace checked, and its metadata complete, before the replay) */
};

typedef struct as_source_opts {
	const as_reader_opts *ro;  /* which device of a snapshot (--device); may be NULL */
	unsigned flags;            /* AS_SRC_* */
	const char *no_binary;     /* with AS_SRC_SPOOL: a binary trace is refused, "PATH: " and this said */
} as_source_opts;

/* Opens path (zeroes s first). 0, or -1 with err set (nothing left open). */
int as_source_open(as_source *s, const char *path, const as_source_opts *o, as_err *err);
/* The trace's metadata: complete unless the events stream from a reader that learns it as it goes. */
const as_meta *as_source_meta(const as_source *s);
/* The name of the trace for messages (a reader's, else path). */
const char *as_source_name(const as_source *s, const char *path);
/* Requests that failed in the recording (EVF_OOM), where known before the replay (a spool); else 0. */
uint64_t as_source_recorded_ooms(const as_source *s);
/* Checks the records not read yet (a binary trace read in chunks: a replay that stopped early still
 * validates the whole file); 0 for the others. */
int as_source_check_rest(as_source *s, as_err *err);
/* Starts the events again from the first (events in memory only; -1 otherwise). */
int as_source_rewind(as_source *s);
void as_source_close(as_source *s);
#endif

/* spool.h - a trace decoded once into a temporary file of records and replayed from it in chunks:
 * the metadata complete before the replay (a snapshot's settings come at its end) without holding
 * the events in memory (replay and validate of a snapshot; doc/reliability.md, "Memory"). */
#ifndef ALLOCSIM_SPOOL_H
#define ALLOCSIM_SPOOL_H
#include "readers/evbuf.h"

#define AS_SPOOL_CHUNK 4096 /* records written and read at a time (224 KiB) */

struct as_spool {
	int fd;              /* an unlinked temporary file of as_rec records, in $TMPDIR (else /tmp) */
	uint64_t n;          /* records in it */
	as_evbuf w;          /* the chunk being written (its label arena and slot count are the trace's) */
	as_meta meta;        /* complete once spooled */
	uint64_t recorded_ooms; /* requests that failed in the recording (EVF_OOM) */
	as_rec *chunk;       /* reading: the current chunk, its records and the next one */
	size_t have, at;
	uint64_t next;       /* the index of the next record to read from the file */
};

/* Decodes the rest of the open reader into s (zeroed first; the reader is left at its end and the
 * metadata taken over, as as_evbuf_from_reader does). Errors: the reader's, a temporary file that
 * cannot be written (exit 74), Ctrl-C (130). The events read back are as_evbuf_event's of the same
 * trace (ids are slot + 1), so a replay from the spool is the replay from memory. */
int as_spool_from_reader(as_spool *s, as_reader *r, as_err *err);
/* The next event: 1, 0 at the end, -1 a read error (err set). */
int as_spool_next(as_spool *s, as_event *ev, as_err *err);
void as_spool_free(as_spool *s);
#endif

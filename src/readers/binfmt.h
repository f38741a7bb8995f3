/* binfmt.h - allocsim's binary event format (.asbin; doc/trace-format.md, "Binary format").
 *
 * A 256-byte header, the recorded settings and the phase labels, then fixed-size 56-byte records
 * (as_rec, little-endian) with dense slot numbers instead of ids. The file is validated whole when
 * written and when mapped, and record by record when read in chunks or streamed; bad input is exit
 * 65 with the byte offset. */
#ifndef ALLOCSIM_BINFMT_H
#define ALLOCSIM_BINFMT_H
#include "readers/evbuf.h"
#include <sys/stat.h>

#define AS_BIN_MAGIC "\x89" "ASIMEV\n"
#define AS_BIN_MAGIC_LEN 8
#define AS_BIN_VERSION 2 /* the newest read; 1 is written when no record names a pool */
#define AS_BIN_HEADER 256
#define AS_BIN_EXT ".asbin"

/* The header's counts (binfmt.c fills them from a checked header). */
typedef struct as_binhdr {
	uint64_t nrec, nslots, nlabels, nsettings, records_at;
	uint32_t version; /* 1: no pools; 2: records may name a pool (as_rec.pool, EV_POOL_RELEASE) */
} as_binhdr;

/* A binary trace in a regular file read front to back in chunks of records, each record checked
 * as it is read, with the same checks and messages as a mapping (replay: the one pass that needs
 * no random access). Why not the mapping: on a virtual machine, the first touch of a file's
 * pages through a fresh 4 KiB mapping can cost more than reading them into a buffer that stays
 * in cache (on the development VM, about 20 against 6 ns a record; scripts/bench.sh). */
struct as_binstream {
	int fd;
	as_binhdr hd;
	as_meta meta;
	char *path;
	unsigned char *strings; /* the settings and phase labels as in the file */
	const char *labels;   /* the phase labels, in strings */
	unsigned char *st;    /* slot states while checking (nslots bytes) */
	as_rec *chunk;
	size_t have, at;      /* records in the chunk, the next one */
	uint64_t i;           /* the index of chunk[at] */
};

/* Whether a path names a binary trace by its extension (convert's output format). */
int as_binfmt_path(const char *path);
/* Maps a binary trace into b, validated: 0 done, 1 not a binary trace (nothing done; b untouched),
 * -1 error (bad or unreadable file: err set). */
int as_binfmt_map(as_evbuf *b, const char *path, as_err *err);
/* Validates b and writes it to path (atomically; "-" standard output). src, if not NULL, is the
 * trace the file caches (its size and modification time are recorded, see as_binfmt_cache_ok). */
int as_binfmt_write(const as_evbuf *b, const char *path, const struct stat *src, as_err *err);
/* Whether the binary file at path (already validated) was made from a trace with this status. */
int as_binfmt_cache_ok(const as_evbuf *b, const struct stat *src);
/* Opens a binary trace for reading in chunks, its header and strings checked (and the file's size
 * against the header): 0 done, 1 not a binary trace in a regular file (nothing done; s zeroed),
 * -1 error (err set; s zeroed). */
int as_binfmt_stream_open(as_binstream *s, const char *path, as_err *err);
/* The next event (its pos: the source record's index, as a mapping gives it): 1, 0 at the end, -1 a
 * bad record or a read error (err set). */
int as_binstream_next(as_binstream *s, as_event *ev, as_err *err);
/* Checks the records not read yet (a replay stopped early still validates the whole file). */
int as_binstream_check_rest(as_binstream *s, as_err *err);
void as_binstream_close(as_binstream *s);
/* The streaming reader (as_reader_open's detection calls it after the magic). */
int as_binfmt_open(as_reader *r, const as_reader_opts *o, as_err *err);
#endif

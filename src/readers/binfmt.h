/* binfmt.h - allocsim's binary event format (.asbin; doc/trace-format.md, "Binary format").
 *
 * A 256-byte header, the recorded settings and the phase labels, then fixed-size 56-byte records
 * (as_rec, little-endian) with dense slot numbers instead of ids. The file is validated whole when
 * written and when mapped, and record by record when streamed; bad input is exit 65 with the byte
 * offset. */
#ifndef ALLOCSIM_BINFMT_H
#define ALLOCSIM_BINFMT_H
#include "readers/evbuf.h"
#include <sys/stat.h>

#define AS_BIN_MAGIC "\x89" "ASIMEV\n"
#define AS_BIN_MAGIC_LEN 8
#define AS_BIN_VERSION 2 /* the newest read; 1 is written when no record names a pool */
#define AS_BIN_HEADER 256
#define AS_BIN_EXT ".asbin"

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
/* The streaming reader (as_reader_open's detection calls it after the magic). */
int as_binfmt_open(as_reader *r, const as_reader_opts *o, as_err *err);
#endif

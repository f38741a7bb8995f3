/* fuzz_common.h - shared driver for the libFuzzer targets (built by 'make fuzz').
 * Each reader target feeds the input, behind its format's magic, through the generic reader, then
 * replays the events it let through with every registered policy (as_policies[]), checking the
 * policy's invariants after every event on short traces and at the end on all.
 *
 * Structure-aware generation: an input that starts with FUZZ_GEN_MAGIC is not a trace but a program
 * that fuzz_generate() expands into one (native or RMM text), up to FUZZ_GEN_EVENTS records: long
 * runs of allocations and frees, sizes and addresses near 2^60 and 2^64, many streams, segment
 * events, times that jump, so the fuzzer reaches what a 64 KiB input cannot spell out. */
#ifndef ALLOCSIM_FUZZ_COMMON_H
#define ALLOCSIM_FUZZ_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/reconcile.h"
#include "engine/lifetimes.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_MAX_EVENTS 200000
#define FUZZ_CHECK_EACH 2000 /* --check after every event on traces up to this long */
#define FUZZ_GEN_MAGIC 0xA5
#define FUZZ_GEN_EVENTS 150000
/* The longest run of allocations the generator writes in one go (its first runs of 20,000 found the
 * simulated device's placement quadratic in live segments; now O(log n)). */
#define FUZZ_GEN_RUN 20000

typedef struct fuzz_bytes {
	const uint8_t *p;
	size_t n, i;
} fuzz_bytes;

static unsigned fb_u8(fuzz_bytes *b)
{
	return b->i < b->n ? b->p[b->i++] : 0;
}

static uint64_t fb_u16(fuzz_bytes *b)
{
	return fb_u8(b) | (uint64_t)fb_u8(b) << 8;
}

/* Sizes across the whole legal range and its edges. */
static uint64_t fb_size(fuzz_bytes *b)
{
	unsigned c = fb_u8(b), k = c & 63;
	switch (c >> 6) {
	case 0: return 1 + k * 512 + fb_u8(b);
	case 1: return (1ULL << (k % 61)) + (fb_u8(b) & 3) - 1 + !k;
	case 2: return (1ULL << 60) - 1 - k;
	default: return (uint64_t)(k + 1) << 20;
	}
}

/* Addresses: none, ordinary, near 2^63, near 2^64 (some wrap). */
static uint64_t fb_addr(fuzz_bytes *b)
{
	unsigned c = fb_u8(b);
	switch (c >> 6) {
	case 0: return 0;
	case 1: return 0x7f0000000000ULL + ((uint64_t)(c & 63) << 21);
	case 2: return (1ULL << 63) - ((uint64_t)(c & 63) << 20);
	default: return UINT64_MAX - ((uint64_t)(c & 63) << 12);
	}
}

/* Expands the program in b into a native trace (rmm = 0) or an RMM log (1); NULL if it is empty. */
static char *fuzz_generate(fuzz_bytes *b, int rmm, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	uint64_t *live = calloc(FUZZ_GEN_EVENTS, sizeof(uint64_t)), *addr = calloc(FUZZ_GEN_EVENTS, sizeof(uint64_t));
	size_t nlive = 0, nev = 0;
	uint64_t id = 0, t = 1000, streams = 1 + fb_u8(b) % 64;
	fputs(rmm ? "Thread,Time,Action,Pointer,Size,Stream\n" : "#allocsim-trace 1\n", f);
#define EMIT_ALLOC(sz, a, st) do { \
	id++; if (rmm) fprintf(f, "%" PRIu64 ",%" PRIu64 ",allocate,0x%" PRIx64 ",%" PRIu64 ",%" PRIu64 "\n", (st) % 7, t, (a) ? (a) : id << 12, sz, st); \
	else if (a) fprintf(f, "a %" PRIu64 " %" PRIu64 " %" PRIu64 " t=%" PRIu64 " addr=0x%" PRIx64 "\n", id, sz, st, t, a); \
	else fprintf(f, "a %" PRIu64 " %" PRIu64 " %" PRIu64 " t=%" PRIu64 "\n", id, sz, st, t); \
	if (nlive < FUZZ_GEN_EVENTS) { live[nlive] = id; addr[nlive++] = (a) ? (a) : id << 12; } nev++; } while (0)
#define EMIT_FREE(k0) do { size_t k = (k0); \
	if (rmm) fprintf(f, "1,%" PRIu64 ",free,0x%" PRIx64 ",1,0\n", t, addr[k]); \
	else fprintf(f, "f %" PRIu64 "\n", live[k]); \
	live[k] = live[--nlive]; addr[k] = addr[nlive]; nev++; } while (0)
	while (b->i < b->n && nev < FUZZ_GEN_EVENTS) {
		unsigned op = fb_u8(b) % 8;
		switch (op) {
		case 0: { /* one allocation */
			uint64_t sz = fb_size(b), a = fb_addr(b), st = fb_u8(b) % streams;
			EMIT_ALLOC(sz, a, st);
			break;
		}
		case 1: /* one free */
			if (nlive)
				EMIT_FREE(fb_u16(b) % nlive);
			break;
		case 2: { /* a run of n allocations of one size, then (maybe) their frees, newest first */
			uint64_t n = 1 + fb_u16(b) % FUZZ_GEN_RUN, sz = fb_size(b), st = fb_u8(b) % streams;
			int frees = fb_u8(b) & 1;
			for (uint64_t k = 0; k < n && nev < FUZZ_GEN_EVENTS; k++, t++)
				EMIT_ALLOC(sz, (uint64_t)0, (st + k) % streams);
			if (frees)
				while (nlive && nev < FUZZ_GEN_EVENTS)
					EMIT_FREE(nlive - 1);
			break;
		}
		case 3: /* empty_cache, a phase, or an RMM allocation failure */
			if (rmm)
				fprintf(f, "1,%" PRIu64 ",allocate failure,0x0,%" PRIu64 ",0\n", t, fb_size(b));
			else
				fputs(fb_u8(b) & 1 ? "e\n" : "p phase\n", f);
			nev++;
			break;
		case 4: { /* free requested (native) */
			if (nlive && !rmm)
				fprintf(f, "r %" PRIu64 "\n", live[fb_u16(b) % nlive]);
			nev++;
			break;
		}
		case 5: { /* segment events with any address and size */
			uint64_t a = fb_addr(b), sz = fb_size(b);
			if (!rmm)
				fprintf(f, "%c 0x%" PRIx64 " %" PRIu64 " %u\n", "SXMU"[fb_u8(b) & 3], a, sz, fb_u8(b));
			nev++;
			break;
		}
		case 6: /* time jumps: forwards, far, or backwards */
			switch (fb_u8(b) & 3) {
			case 0: t += fb_u16(b); break;
			case 1: t = (uint64_t)INT64_MAX - fb_u16(b); break;
			case 2: t = t > 100 ? t - 100 : 0; break;
			default: t++; break;
			}
			break;
		default: /* free everything live, oldest first */
			while (nlive && nev < FUZZ_GEN_EVENTS)
				EMIT_FREE(0);
			break;
		}
	}
#undef EMIT_ALLOC
#undef EMIT_FREE
	fclose(f);
	free(live);
	free(addr);
	return buf;
}

typedef struct fuzz_events {
	as_event *v;
	size_t n;
} fuzz_events;

/* Replays the events with every registered policy (settings picked by sel) and checks them. */
static void fuzz_replay(const fuzz_events *evs, unsigned sel)
{
	static const char *const confs[][3] = {
		{ "", "expandable_segments:True", "max_split_size_mb:20,roundup_power2_divisions:4,garbage_collection_threshold:0.5" },
		{ "", "per_stream:False,min_segment:20MiB", "granule:1024PiB" },
		{ "", "", "" },
		{ "", "release_threshold:1GiB", "reuse:False" },
	};
	for (size_t k = 0; as_policies[k]; k++) {
		as_err err = { 0, "" };
		as_device *dev = as_sim_device_new(sel & 1 ? (64ULL << 20) : sel & 2 ? (1ULL << 62) : 0, ADDR_AUTO);
		as_engine e;
		/* optimal: both of its heuristic's paths on small traces, and its time bounded on generated ones */
		const char *conf = k < 4 ? confs[k][(sel >> 2) % 3] : !strcmp(as_policies[k]->name, "optimal") ? "fit_max:64" : "";
		if (as_engine_init(&e, as_policies[k], conf, dev, &err) == 0) {
			as_lifetimes plan; /* an offline policy's first pass */
			as_lifetimes_init(&plan);
			if (as_plan_from_array(&e, &plan, evs->v, evs->n, &err))
				abort();
			as_reconcile_attach(&e, 1);
			e.check = evs->n <= FUZZ_CHECK_EACH;
			for (size_t i = 0; i < evs->n; i++)
				if (as_engine_step(&e, &evs->v[i], &err)) {
					fprintf(stderr, "%s: %s\n", as_policies[k]->name, err.msg);
					abort(); /* the engine must accept whatever the readers let through */
				}
			as_engine_finish(&e);
			if (e.pol->ops->check(e.pol, &err)) {
				fprintf(stderr, "%s invariant: %s\n", as_policies[k]->name, err.msg);
				abort();
			}
			as_engine_free(&e);
			as_lifetimes_free(&plan);
		} else if (err.code != AS_EXIT_USAGE) {
			abort();
		}
		as_device_destroy(dev);
	}
}

static void fuzz_reader(const char *magic, const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", 0);
	if (fd < 0)
		abort();
	size_t ml = strlen(magic);
	if (write(fd, magic, ml) != (ssize_t)ml || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	lseek(fd, 0, SEEK_SET);
	as_err err = { 0, "" };
	as_reader *r;
	as_reader_opts ro = { .want_segments = 1, .keep_sites = 1 };
	if (as_reader_open_fd(&r, fd, "fuzz-input", &ro, &err))
		return;
	fuzz_events evs = { calloc(FUZZ_MAX_EVENTS, sizeof(as_event)), 0 };
	as_event ev;
	while (evs.n < FUZZ_MAX_EVENTS && as_reader_next(r, &ev, &err) > 0) {
		ev.label = NULL; /* valid only until the next call */
		ev.site = NULL;
		evs.v[evs.n++] = ev;
	}
	as_reader_close(r);
	fuzz_replay(&evs, (unsigned)size);
	free(evs.v);
}

/* The reader targets: a generator program (first byte FUZZ_GEN_MAGIC) or the text itself. */
static void fuzz_text_target(const char *magic, size_t mlen, int rmm, const uint8_t *data, size_t size)
{
	if (size && data[0] == FUZZ_GEN_MAGIC) {
		fuzz_bytes b = { data + 1, size - 1, 0 };
		size_t len = 0;
		char *text = fuzz_generate(&b, rmm, &len);
		if (text)
			fuzz_reader("", (const uint8_t *)text, len);
		free(text);
		return;
	}
	fuzz_reader(size >= mlen && !memcmp(data, magic, mlen) ? "" : magic, data, size);
}
#endif

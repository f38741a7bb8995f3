/* fuzz_pickle.c - PyTorch snapshot (pickle) reader + pytorch policy.
 *
 * Besides libFuzzer's byte mutations, a structure-aware generator (LLVMFuzzerCustomMutator) writes
 * whole pickles of the classes byte mutation cannot reach: nesting hundreds of thousands deep,
 * strings around the 1 MiB limit, runs of millions of trace entries, memo amplification (one
 * large value fetched many times, tuples of fetches), duplicate and misplaced keys, several
 * devices. Inputs larger than the fuzzer's -max_len are gzip-compressed (the reader undoes gzip
 * by content), so a 30 MB pickle fits in a 1 MiB input. */
#include "fuzz_common.h"
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the seeds are whole snapshots (plain or gzip'd); inputs without a header get one */
	int whole = size >= 2 && (data[0] == 0x80 || (data[0] == 0x1f && data[1] == 0x8b));
	fuzz_reader(whole ? "" : "\x80\x04", data, size);
	return 0;
}

/* ---- the generator ---------------------------------------------------------------------- */

typedef struct gbuf {
	unsigned char *b;
	size_t n, cap;
	uint64_t rng;
} gbuf;

static uint64_t rnd(gbuf *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return g->rng;
}

static uint64_t below(gbuf *g, uint64_t n) { return n ? rnd(g) % n : 0; }

/* A size up to max, log-uniform: mostly small (fast inputs), now and then the limit's order. */
static uint64_t lsize(gbuf *g, uint64_t max)
{
	int bits = 0;
	while (bits < 63 && ((uint64_t)1 << bits) < max)
		bits++;
	uint64_t v = below(g, (uint64_t)1 << below(g, (uint64_t)bits + 1));
	return v > max ? max : v;
}

static void put(gbuf *g, const void *p, size_t n)
{
	if (g->n + n > g->cap) {
		g->cap = (g->n + n) * 2;
		g->b = realloc(g->b, g->cap);
		if (!g->b)
			abort();
	}
	memcpy(g->b + g->n, p, n);
	g->n += n;
}

static void op(gbuf *g, int c)
{
	unsigned char x = (unsigned char)c;
	put(g, &x, 1);
}

static void str(gbuf *g, const char *s)
{
	size_t n = strlen(s);
	op(g, 0x8c);
	op(g, (int)n);
	put(g, s, n);
}

static void u32(gbuf *g, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	put(g, b, 4);
}

static void int_(gbuf *g, uint64_t v)
{
	if (v < 256) {
		op(g, 'K');
		op(g, (int)v);
	} else {
		op(g, 0x8a);
		op(g, 8);
		for (int i = 0; i < 8; i++)
			op(g, (int)(v >> (8 * i)) & 0xff);
	}
}

/* Memo slots 1..n hold the keys and actions (written once, fetched with BINGET as the pickler does). */
static const char *const keys[] = { "action", "addr", "size", "stream", "time_us", "frames", "device_traces",
	"segments", "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
	"segment_unmap", "oom", "snapshot", "allocator_settings", "PYTORCH_CUDA_ALLOC_CONF", "device", "address",
	"total_size", "blocks", "state", "active_allocated" };
enum { K_ACTION = 1, K_ADDR, K_SIZE, K_STREAM, K_TIME, K_FRAMES, K_DT, K_SEG, K_ALLOC };
#define NKEYS (sizeof keys / sizeof keys[0])

static void get(gbuf *g, int slot)
{
	op(g, 'h');
	op(g, slot);
}

static void define_keys(gbuf *g)
{
	for (size_t i = 0; i < NKEYS; i++) {
		str(g, keys[i]);
		op(g, 'q');
		op(g, (int)i + 1);
		op(g, '0');
	}
	op(g, ']'); /* the shared empty frames list, memo 30 */
	op(g, 'q');
	op(g, 30);
	op(g, '0');
}

/* A trace entry; memo: memoize the dict at that index (LONG_BINPUT; 0: not); frames: with the
 * shared frames list (the decoder's opcode loop) or without (its fast path, when batched). */
static void entry(gbuf *g, int action, uint64_t addr, uint64_t size, uint32_t memo, int frames)
{
	op(g, '}');
	if (memo) {
		op(g, 'r');
		u32(g, memo);
	}
	op(g, '(');
	get(g, K_ACTION);
	get(g, K_ALLOC + action);
	get(g, K_ADDR);
	int_(g, addr);
	get(g, K_SIZE);
	int_(g, size);
	get(g, K_STREAM);
	int_(g, 0);
	if (frames) {
		get(g, K_FRAMES);
		get(g, 30);
	}
	op(g, 'u');
}

/* A snapshot whose history is a long, partly random run of entries on one or more devices. */
static void gen_history(gbuf *g, size_t budget)
{
	op(g, 0x80);
	op(g, 4);
	define_keys(g);
	op(g, '}');
	op(g, '(');
	get(g, K_SEG);
	op(g, ']');
	if (below(g, 8) == 0) { /* a misplaced or duplicated history key */
		get(g, K_DT);
		op(g, below(g, 2) ? ']' : '}');
	}
	get(g, K_DT);
	op(g, ']');
	int ndev = 1 + (int)below(g, 3);
	size_t n = 1 + budget;
	int kind = (int)below(g, 4);
	/* batched: MARK ... APPENDS of up to 1000 entries, as the snapshot writer lays them out (the
	 * decoder reads such entries as they come), with now and then a memoized entry fetched again
	 * or popped before its batch is appended (refused) */
	int batched = (int)below(g, 2), frames = (int)below(g, 2), memoize = (int)below(g, 2);
	uint32_t memo = 100;
	for (int d = 0; d < ndev; d++) {
		op(g, ']');
		if (batched)
			op(g, '(');
		for (size_t i = 0; i < n / (size_t)ndev; i++) {
			int a;
			uint64_t addr = 0x7f0000000000ULL + (below(g, kind == 0 ? 4 : 4096) << 21);
			if (kind == 0)
				a = 4; /* segment_free after segment_free: the release-run buffer */
			else if (kind == 1)
				a = (int)(i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 2);
			else
				a = (int)below(g, 8);
			entry(g, a, addr, 1 + below(g, 1u << 24), memoize ? memo : 0, frames);
			if (!batched) {
				op(g, 'a');
			} else {
				if (memoize && below(g, 256) == 0) { /* fetch this entry again */
					op(g, 'j');
					u32(g, memo);
				} else if (below(g, 512) == 0) {
					op(g, '0');
				}
				if (i % 1000 == 999) {
					op(g, 'e');
					op(g, '(');
				}
			}
			memo++;
		}
		if (batched)
			op(g, 'e');
		op(g, 'a');
	}
	op(g, 'u');
	if (below(g, 4) == 0) { /* device_traces appended twice (last wins) */
		op(g, '(');
		get(g, K_DT);
		op(g, ']');
		op(g, 'u');
	}
	op(g, '.');
}

/* Containers nested deep without MARK (TUPLE1, APPEND, SETITEM) or with it. */
static void gen_deep(gbuf *g, size_t depth)
{
	op(g, 0x80);
	op(g, 4);
	int how = (int)below(g, 4);
	if (how == 0) {
		int_(g, 1);
		for (size_t i = 0; i < depth; i++)
			op(g, 0x85);
	} else if (how == 1) {
		for (size_t i = 0; i < depth; i++)
			op(g, ']');
		for (size_t i = 0; i < depth; i++)
			op(g, 'a');
	} else if (how == 2) {
		for (size_t i = 0; i < depth; i++) {
			op(g, '}');
			str(g, "k");
		}
		op(g, 'N');
		for (size_t i = 0; i < depth; i++)
			op(g, 's');
	} else {
		for (size_t i = 0; i < depth; i++)
			op(g, '(');
		for (size_t i = 0; i < depth; i++)
			op(g, 't');
	}
	op(g, '.');
}

/* One large value in the memo, fetched many times, and tuples of fetches fetched again. */
static void gen_memo(gbuf *g, size_t gets)
{
	op(g, 0x80);
	op(g, 4);
	op(g, '}');
	size_t len = below(g, 8) == 0 ? (1u << 20) + below(g, 2) : lsize(g, 1u << 20);
	op(g, 'X');
	u32(g, (uint32_t)len);
	for (size_t i = 0; i < len; i++)
		op(g, 'x');
	op(g, 'r');
	u32(g, 1);
	for (uint32_t level = 2; level < 2 + below(g, 40); level++) {
		op(g, 'j');
		u32(g, level - 1);
		op(g, 'j');
		u32(g, level - 1);
		op(g, 'j');
		u32(g, level - 1);
		op(g, 0x87); /* TUPLE3 of the previous level: 3^level values by reference */
		op(g, 'r');
		u32(g, level);
		op(g, '0');
	}
	op(g, ']');
	for (size_t i = 0; i < gets; i++) {
		op(g, 'h');
		op(g, (int)below(g, 8));
		op(g, below(g, 2) ? 'a' : '0');
	}
	op(g, '.');
}

static size_t finish(gbuf *g, uint8_t *data, size_t max)
{
	size_t out = 0;
	if (g->n <= max && below(g, 2)) {
		memcpy(data, g->b, g->n);
		out = g->n;
	} else {
		/* gzip it (the reader detects gzip by its magic) */
		z_stream z;
		memset(&z, 0, sizeof z);
		if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			abort();
		z.next_in = g->b;
		z.avail_in = (uInt)g->n;
		z.next_out = data;
		z.avail_out = (uInt)max;
		deflate(&z, Z_FINISH); /* truncated gzip when it does not fit: the reader must say so */
		out = max - z.avail_out;
		deflateEnd(&z);
	}
	free(g->b);
	return out;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed)
{
	gbuf g = { NULL, 0, 0, (uint64_t)seed * 0x9e3779b97f4a7c15ULL + 1 };
	if (below(&g, 3))
		return LLVMFuzzerMutate(data, size, max);
	switch (below(&g, 3)) {
	case 0: gen_history(&g, lsize(&g, 300000)); break;
	case 1: gen_deep(&g, lsize(&g, 500000)); break;
	default: gen_memo(&g, lsize(&g, 300000)); break;
	}
	return finish(&g, data, max);
}

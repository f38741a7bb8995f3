/*
 * pkvm.h - the pickle VM of the snapshot reader: pickle opcodes -> values, the stack, the memo
 * (pkval.c), interned strings, and the sink the VM reports to (snapshot.c).
 *
 * Python's own pickle.load would execute code named in an untrusted file; the VM instead interprets
 * only the data-building opcodes (protocols 2-5: dicts, lists, tuples, strings, ints, floats, bools,
 * None, memo) and rejects everything that could name or call code (GLOBAL, REDUCE, BUILD, ...).
 *
 * Values are 16 bytes held by value on the stack, in the memo and in containers: numbers, None
 * and booleans need no object at all; strings and containers are shared, reference-counted
 * objects (pv) from a pool, so a memo GET costs a copy and a count, however large the value.
 * The VM knows nothing of snapshots: what the values mean is the sink's (pk_sink, below).
 */
#ifndef ALLOCSIM_PKVM_H
#define ALLOCSIM_PKVM_H
#include "readers/trace.h"
#include "util/idmap.h"
#include <string.h>

/* Kinds of values. From V_STR on, a value is an object (pv), shared by reference. */
enum { V_EMPTY, V_NONE, V_BOOL, V_INT, V_FLOAT, V_GHOST, V_STR, V_BYTES, V_TUPLE, V_LIST, V_DICT };
/* V_GHOST: a trace entry the sink already turned into events as it was read (its entry hook, pkfast.c);
 * it stands in its device's list until the pickle appends it there (u.i: the device). */
#define V_OBJ V_STR
/* What the sink makes of a list (pv.role, set by its list hook). ROLE_NONE: the VM builds it; any
 * other: the VM hands the items appended to it to the sink's append hook. A ROLE_DEVTRACE list's
 * entries may also be read whole by the entry hook, each standing as a V_GHOST until APPENDS. */
enum pv_role { ROLE_NONE, ROLE_TRACES, ROLE_DEVTRACE, ROLE_SEGMENTS };

#define INLINE_STR 16 /* strings shorter than this live in the object itself (and are interned) */

struct pv;
/* A value: its kind and the byte offset where it starts (low 8 bits / high 56), and its content. */
typedef struct val {
	uint64_t kp;
	union {
		int64_t i;
		double f;
		struct pv *p;
	} u;
} val;

/* In the kind byte: an interned string, which lives as long as the reader (its table holds it), so
 * its references are not counted. */
#define V_IMMORTAL 0x80
#define VKIND(v) ((int)((v).kp & 0x7f))
#define VPOS(v) ((v).kp >> 8)
#define VOBJ(v) ((unsigned)((v).kp & 0xff) - V_OBJ < 0x80u - V_OBJ) /* an object whose references count */
#define MKKP(k, pos) (((uint64_t)(pos) << 8) | (uint64_t)(k))

typedef struct pv {
	unsigned char kind, role;
	unsigned char kid, aid; /* V_STR: what it is as a trace entry's key, as an action (0: not yet known) */
	unsigned char embedded; /* placed in a container: may no longer change (no cycles) */
	unsigned short depth; /* containers nested inside this value (0 for a string) */
	uint32_t refs;      /* references held by the stack, containers, the memo and the string table */
	int dev;            /* ROLE_DEVTRACE: device ordinal */
	uint64_t memo_at;   /* 1 + the memo index of its last PUT (0: none) */
	char *s;            /* V_STR/V_BYTES, NUL-terminated (inl when short) */
	size_t n;           /* string length, or item count */
	size_t cap;
	val *items;         /* tuple/list items; dict: key, value, key, value ... (kept in the pool) */
	uint64_t pos;       /* byte offset where the value starts */
	struct pv *next;    /* in the pool of free values */
	char inl[INLINE_STR];
} pv;

/* Limits that keep a hostile file from taking unbounded memory or stack (doc/reliability.md,
 * allocsim(1) LIMITS). Values are shared, never copied (a memo GET adds a reference), and every
 * byte a value holds counts against AS_PICKLE_MAX_BYTES, so memory follows the input's size. */
#define MAX_STACK   (4u << 20)   /* values on the stack */
#define MAX_MARKS   4096         /* MARKs open at once */
#define MAX_DEPTH   128          /* containers inside containers (however they were built) */
#define MAX_STRING  (1u << 20)   /* one string */
#define MAX_MEMO    (1u << 26)   /* memo index */
#define MAX_BYTES   ((uint64_t)1 << 30) /* bytes held by values, the stack and the memo at once (default) */
#define MEMO_SLOT   32           /* bytes a sparse memo entry costs (idmap key and value at half load) */
#define MEMO_DENSE  65536        /* the flat memo array covers indices below 2x the PUTs so far plus this */
#define MEMO_PAGE   4096         /* slots a page of the flat memo (32 KiB), the unit it is packed in */
#define MEMO_LAG    2            /* pages behind the newest slot kept as they are */

/* A memo slot holds one word: 0 (empty), an object's address (| 1: an interned string, not
 * counted), or (i << 2 | 2): scalar i of p->scal. Eight bytes a slot: the writer memoizes every
 * trace entry's 'N/A' string, so the memo grows with the trace. A value fetched from the memo
 * carries the byte offset of the object (for an interned string, of its first occurrence). */
#define MW_INTERNED 1u
#define MW_SCALAR 2u

/* A packed page of the flat memo. The writer memoizes every trace entry's 'N/A' string (a new
 * object each time) and the entry's dict, which leaves the memo when it is replayed: so a page the
 * writer has passed holds empty slots and one interned string. Such a page is packed into a bitmap
 * of its set slots and that word, and its memory given back (MADV_DONTNEED: it reads as zeros): 8
 * bytes a slot become 1 bit, and the memo no longer grows with the trace (a 2.5M-event snapshot:
 * 60 MB -> 1 MB). A GET of a packed slot takes the slow path (memo_at); a PUT or a clear there
 * unpacks the page first. Pages holding anything else (counted objects, scalars, two strings) stay. */
typedef struct mzpage {
	uint64_t *bits;  /* MEMO_PAGE bits: the slot holds word; NULL: not packed */
	uintptr_t word;
} mzpage;

struct pk_sink;

/* The VM's state. */
typedef struct pkvm {
	val *stack;
	size_t sp, scap;
	size_t marks[MAX_MARKS];
	size_t nmarks;
	uintptr_t *memo;     /* index -> memo word (see memo_word), a flat array for the dense indices the pickler writes
	                      * (a reservation of MAX_MEMO words: pages are touched as they are written) */
	size_t memocap;
	struct mzpage *mz;   /* per page of the flat memo: packed or not (see memo_pack) */
	size_t mzcap, mzdone; /* pages in mz; the pages below mzdone were looked at */
	int memo_mapped;     /* memo is the reservation (else a heap array: nothing is packed) */
	size_t memohw;       /* slots below this are set or empty; those above, not yet written (no page touched) */
	uint64_t nputs;      /* PUTs so far: the flat array covers indices up to 2x this (+ MEMO_DENSE) */
	idmap memo_sparse;   /* indices beyond the flat array (a hostile pickle's): index -> memo word */
	val *scal;           /* numbers, None and booleans memoized (the snapshot writer memoizes none) */
	size_t nscal, capscal;
	pv *pool;            /* freed objects, reused (with their item arrays) */
	pv **strtab;         /* interned short strings (one reference each) */
	size_t strcap, strcount;
	pv *laststr;         /* the last short string the fast path (pkfast.c) read: interned, so it lives on */
	/* the fast path's key ids by BINGET index: ktag[i] is the key id (snap_key_id, 0: not a string) of
	 * the memo word kword[i], an interned string or a scalar (never another object at that address),
	 * good while memo slot i still holds that word (it is compared at each GET) */
	uintptr_t kword[256];
	unsigned char ktag[256];
	uint64_t memo_next;  /* MEMOIZE's next index */
	uint64_t bytes;      /* bytes held by values, the stack and the memo */
	uint64_t max_bytes;  /* ... at most (MAX_BYTES unless the caller says) */
	pv **dead;           /* iterative freeing's work list */
	size_t ndead, capdead;
	size_t nghosts;      /* trace entries replayed as read (V_GHOST) on the stack */
	int yield;           /* set by the sink: pkvm_run returns (events to hand out, or STOP seen) */
	const struct pk_sink *sink;
	void *ctx;           /* the sink's */
} pkvm;

/*
 * The sink: what the VM reports, the one way it reaches the snapshot interpretation (no call goes
 * back from pkvm.c to snapshot.c). Each hook returns -1 on error (err set), else 0 (entry: 1 when it
 * took the entry). A hook that has events to hand out, or has seen the end, sets vm->yield.
 */
typedef struct pk_sink {
	/* EMPTY_LIST: a new list l (not yet on the stack); the hook may give it a role */
	int (*list)(void *ctx, as_reader *r, pv *l, as_err *err);
	/* EMPTY_DICT opening the next entry of a ROLE_DEVTRACE list's batch (only ghosts above its MARK),
	 * the input at the '}': 1 when the hook read the entry whole (and pushed its ghost), 0 to let the
	 * VM build it */
	int (*entry)(void *ctx, as_reader *r, pv *list, as_err *err);
	/* APPEND/APPENDS of n items to a list with a role; the items' references move to the hook */
	int (*append)(void *ctx, as_reader *r, pv *list, val *items, size_t n, as_err *err);
	/* STOP, with one value on the stack and no MARK: the pickle's result */
	int (*stop)(void *ctx, as_reader *r, val top, uint64_t pos, as_err *err);
} pk_sink;

void pkvm_init(pkvm *p, uint64_t max_bytes, const pk_sink *sink, void *ctx);
/* Runs opcodes until the sink sets yield or an error (-1). */
int pkvm_run(as_reader *r, pkvm *p, as_err *err);
/* "PATH: byte offset POS: message" (exit status 65); returns -1. */
int pkvm_err(as_reader *r, uint64_t pos, as_err *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Values (pkval.c; pkvm_intern: pkvm.c). */
pv *pkvm_new(pkvm *p, int kind, uint64_t pos);
void pkvm_release(pkvm *p, pv *v);
pv *pkvm_intern(pkvm *p, const char *b, size_t n, pv *v);
/* Releases every value, the stack and the memo. */
void pkvm_free(pkvm *p);

/* The memo (pkval.c). */
void pkvm_memo_grow(pkvm *p, uint64_t idx);
void pkvm_memo_pack(pkvm *p);
/* Sets (w: one reference moves in) or clears (w == 0) memo slot idx. */
void pkvm_memo_set(pkvm *p, uint64_t idx, uintptr_t w);
void pkvm_memo_forget(pkvm *p, pv *v);

/* Drops one reference to an object. */
static inline void pv_unref(pkvm *p, pv *v)
{
	if (v && !--v->refs)
		pkvm_release(p, v);
}

/* Drops a value (a reference, for an object). */
static inline void val_drop(pkvm *p, val v)
{
	if (VOBJ(v))
		pv_unref(p, v.u.p);
}

static inline val obj_val(pv *o)
{
	val v;
	v.kp = MKKP(o->kind, o->pos);
	v.u.p = o;
	return v;
}

/* The object a value is if it has that kind, else NULL. */
static inline pv *as_obj(const val *v, int kind)
{
	return v && VKIND(*v) == kind ? v->u.p : NULL;
}

static inline val word_val(const pkvm *p, uintptr_t w)
{
	if ((w & 3) == MW_SCALAR)
		return p->scal[w >> 2];
	pv *o = (pv *)(w & ~(uintptr_t)3);
	val v;
	v.kp = MKKP(o->kind | ((w & MW_INTERNED) ? V_IMMORTAL : 0), o->pos);
	v.u.p = o;
	return v;
}

/* Drops the reference a memo word holds (counted objects only). */
static inline void word_drop(pkvm *p, uintptr_t w)
{
	if (w && !(w & 3))
		pv_unref(p, (pv *)w);
}

/* Makes slot idx of the flat memo valid: the slots up to it are cleared as they are first reached,
 * so a grown array costs pages only as far as the pickle's indices go. */
static inline void memo_touch(pkvm *p, uint64_t idx)
{
	if (idx >= p->memohw) {
		if (idx - p->memohw < 4) /* (the fast path's one or two slots an entry: a call to memset cost 35) */
			for (size_t i = p->memohw; i <= idx; i++)
				p->memo[i] = 0;
		else
			memset(p->memo + p->memohw, 0, (idx + 1 - p->memohw) * sizeof(uintptr_t));
		p->memohw = idx + 1;
	}
}

static inline int memo_packed(const pkvm *p, uint64_t idx)
{
	return idx / MEMO_PAGE < p->mzcap && p->mz[idx / MEMO_PAGE].bits;
}

/* Whether a PUT at idx fills an empty slot of the flat memo (the fast path's own case). */
static inline int memo_fresh(const pkvm *p, uint64_t idx)
{
	return idx < MAX_MEMO && idx < p->memocap && (idx >= p->memohw || (!p->memo[idx] && !memo_packed(p, idx)));
}

static inline size_t mark_base(const pkvm *p)
{
	return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

static inline uintptr_t pkvm_memo_word(pkvm *p, val v)
{
	if (VKIND(v) >= V_OBJ)
		return (uintptr_t)v.u.p | ((v.kp & V_IMMORTAL) ? MW_INTERNED : 0);
	if (!v.kp || VKIND(v) == V_GHOST)
		return 0; /* a trace entry replayed as read: never fetched */
	if (p->nscal == p->capscal) {
		size_t nc = p->capscal ? p->capscal * 2 : 64;
		p->scal = xrealloc(p->scal, nc * sizeof(val));
		p->bytes += (nc - p->capscal) * sizeof(val);
		p->capscal = nc;
	}
	p->scal[p->nscal] = v;
	return (uintptr_t)p->nscal++ << 2 | MW_SCALAR;
}

static inline uintptr_t pkvm_memo_at(const pkvm *p, uint64_t idx)
{
	if (idx < p->memohw && p->memo[idx])
		return p->memo[idx];
	if (idx < p->memohw && memo_packed(p, idx)) {
		const mzpage *z = &p->mz[idx / MEMO_PAGE];
		size_t i = idx % MEMO_PAGE;
		return (z->bits[i / 64] >> (i % 64)) & 1 ? z->word : 0;
	}
	return p->memo_sparse.count ? (uintptr_t)idmap_get(&p->memo_sparse, idx) : 0;
}

#endif

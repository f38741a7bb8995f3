/* pkfast.h - the trace-entry fast path of the snapshot reader (pkfast.c). */
#ifndef ALLOCSIM_PKFAST_H
#define ALLOCSIM_PKFAST_H
#include "readers/snapevents.h"

#define FAST_PUTS 32
#define FAST_OBJS 32

/* A trace entry read whole. */
typedef struct pkfast {
	rec x;             /* its fields (snap_entry_fields; x.pos and x.index not set) */
	int code;          /* EF_OK or EF_SKIP */
	uint64_t pos;      /* the byte offset of its dict */
	unsigned have;     /* 1 << K_*: the keys it holds */
	val f[K_POOL + 1]; /* the last value of each of those keys */
	uint32_t pyf;      /* first: its keys' AS_PF_IN_ENTRY bits (pyversion.c) */
	pv *objs[FAST_OBJS]; /* its long strings, held until pkfast_done */
	int nobj;
} pkfast;

/* At the EMPTY_DICT (the input there) of the next entry of list (ROLE_DEVTRACE), when only ghosts
 * of its batch are above its MARK: 1 when the entry was read whole into o (the memo has what the
 * pickle puts there, a V_GHOST of the list's device stands for it on the stack, the input is past
 * it), 0 when it is left to the opcode loop (nothing changed but strings interned). first: the
 * first entry (its keys noted in o->pyf). Then pkfast_done. */
int pkfast_entry(as_reader *r, pkvm *p, const pv *list, int first, pkfast *o, as_err *err);
static inline void pkfast_done(pkvm *p, pkfast *o)
{
	for (int i = 0; i < o->nobj; i++)
		pv_unref(p, o->objs[i]);
}

#endif

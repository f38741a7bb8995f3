/* pkval.c - the pickle VM's values and memo: reference-counted objects from a pool and their release
 * (without recursion), and the memo: a flat array of one word a slot for the dense indices a pickler
 * writes (moved to a reservation whose passed pages are packed past 2^19 slots), a sparse map for the
 * rest, and the memoized scalars. The opcodes that use them are pkvm.c's. */
#include "readers/pkvm.h"
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>

static uint64_t pv_bytes(const pv *v)
{
	return sizeof(pv) + (v->s && v->s != v->inl ? v->n + 1 : 0) + v->cap * sizeof(val);
}

static void dead_push(pkvm *p, pv *v)
{
	AS_GROW(p->dead, p->ndead, p->capdead, 64);
	p->dead[p->ndead++] = v;
}

/* Frees an object no longer referenced, and what only it referenced, without recursion (the
 * nesting depth is the input's choice), through a work list. */
void pkvm_release(pkvm *p, pv *v)
{
	size_t base = p->ndead;
	dead_push(p, v);
	while (p->ndead > base) {
		pv *d = p->dead[--p->ndead];
		if (d->kind >= V_TUPLE)
			for (size_t i = 0; i < d->n; i++)
				if (VOBJ(d->items[i]) && !--d->items[i].u.p->refs)
					dead_push(p, d->items[i].u.p);
		p->bytes -= pv_bytes(d);
		if (d->s != d->inl)
			free(d->s);
		if (d->cap > 64) {
			free(d->items);
			d->items = NULL;
			d->cap = 0;
		}
		d->next = p->pool;
		p->pool = d;
	}
}

/* A new object (one reference, the caller's), from the pool when it has one: a snapshot's trace
 * entries come and go by the million. */
pv *pkvm_new(pkvm *p, int kind, uint64_t pos)
{
	pv *v = p->pool;
	if (v) {
		p->pool = v->next;
	} else {
		v = xmalloc(sizeof(*v));
		v->items = NULL;
		v->cap = 0;
	}
	v->kind = (unsigned char)kind;
	v->role = v->kid = v->aid = v->embedded = 0;
	v->depth = 0;
	v->refs = 1;
	v->dev = 0;
	v->memo_at = 0;
	v->s = NULL;
	v->n = 0;
	v->pos = pos;
	p->bytes += sizeof(pv) + v->cap * sizeof(val);
	return v;
}

void pkvm_free(pkvm *p)
{
	for (size_t i = 0; i < p->sp; i++)
		val_drop(p, p->stack[i]);
	free(p->stack);
	for (size_t lo = 0; lo < p->memohw; lo += MEMO_PAGE) {
		if (memo_packed(p, lo))
			continue; /* its string is interned: nothing to drop; reading the given-back page would map it again */
		size_t hi = p->memohw - lo < MEMO_PAGE ? p->memohw : lo + MEMO_PAGE;
		for (size_t i = lo; i < hi; i++)
			word_drop(p, p->memo[i]);
	}
	if (p->memo_mapped)
		munmap(p->memo, (size_t)MAX_MEMO * sizeof(uintptr_t));
	else
		free(p->memo);
	for (size_t i = 0; i < p->mzcap; i++)
		free(p->mz[i].bits);
	free(p->mz);
	for (size_t i = 0; i < p->memo_sparse.cap; i++)
		if (idmap_live(&p->memo_sparse, i))
			word_drop(p, (uintptr_t)p->memo_sparse.vals[i]);
	free(p->scal);
	idmap_free(&p->memo_sparse);
	for (size_t i = 0; i < p->strcap; i++)
		if (p->strtab[i]) {
			p->bytes -= pv_bytes(p->strtab[i]);
			free(p->strtab[i]->items);
			free(p->strtab[i]);
		}
	free(p->strtab);
	while (p->pool) {
		pv *v = p->pool;
		p->pool = v->next;
		free(v->items);
		free(v);
	}
	free(p->dead);
}

/* Grows the flat memo to cover idx (doubling). Up to MEMO_MAP_AT slots it is a heap array (on the
 * heap's huge pages: a small snapshot's memo costs no page faults of its own); beyond, it moves to a
 * reservation of MAX_MEMO slots, whose pages memo_pack can give back. */
#define MEMO_MAP_AT ((size_t)1 << 19) /* 4 MiB of slots */
void pkvm_memo_grow(pkvm *p, uint64_t idx)
{
	size_t nc = p->memocap ? p->memocap : 1024;
	while (nc <= idx)
		nc *= 2;
	if (nc <= MEMO_MAP_AT) {
		p->memo = xrealloc(p->memo, nc * sizeof(uintptr_t));
	} else if (!p->memo_mapped) {
		void *m = mmap(NULL, (size_t)MAX_MEMO * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) {
			p->memo = xrealloc(p->memo, nc * sizeof(uintptr_t)); /* (nothing packed then) */
		} else {
			if (p->memohw)
				memcpy(m, p->memo, p->memohw * sizeof(uintptr_t));
			free(p->memo);
			p->memo = m;
			p->memo_mapped = 1;
		}
	}
	p->bytes += (nc - p->memocap) * sizeof(uintptr_t);
	p->memocap = nc;
}

/* Restores a packed page's slots (a PUT or a clear there: never in a snapshot as written). */
static void memo_unpack(pkvm *p, uint64_t idx)
{
	mzpage *z = &p->mz[idx / MEMO_PAGE];
	uintptr_t *w = p->memo + idx / MEMO_PAGE * MEMO_PAGE;
	for (size_t i = 0; i < MEMO_PAGE; i++)
		if ((z->bits[i / 64] >> (i % 64)) & 1)
			w[i] = z->word;
	free(z->bits);
	z->bits = NULL;
	p->bytes -= MEMO_PAGE / 8;
}

/* Packs the pages of the flat memo that the pickle has left MEMO_LAG pages behind, where each holds
 * only empty slots and one interned string (see mzpage). */
void pkvm_memo_pack(pkvm *p)
{
	if (!p->memo_mapped)
		return;
	while ((p->mzdone + MEMO_LAG + 1) * MEMO_PAGE <= p->memohw) {
		size_t pg = p->mzdone++;
		uintptr_t *w = p->memo + pg * MEMO_PAGE, one = 0;
		uint64_t bits[MEMO_PAGE / 64] = { 0 }; /* its set slots, noted in the one pass that looks at them */
		size_t i;
		for (i = 0; i < MEMO_PAGE; i++) {
			uintptr_t x = w[i];
			if (!x)
				continue;
			if ((x & 3) != MW_INTERNED || (one && x != one))
				break;
			one = x;
			bits[i / 64] |= (uint64_t)1 << (i % 64);
		}
		if (i < MEMO_PAGE || !one)
			continue;
		if (pg >= p->mzcap) {
			size_t nc = p->mzcap ? p->mzcap : 64;
			while (nc <= pg)
				nc *= 2;
			p->mz = xrealloc(p->mz, nc * sizeof(mzpage));
			memset(p->mz + p->mzcap, 0, (nc - p->mzcap) * sizeof(mzpage));
			p->mzcap = nc;
		}
		mzpage *z = &p->mz[pg];
		z->bits = xmalloc(sizeof(bits));
		memcpy(z->bits, bits, sizeof(bits));
		z->word = one;
		p->bytes += MEMO_PAGE / 8;
		if (madvise(w, MEMO_PAGE * sizeof(uintptr_t), MADV_DONTNEED)) {
			free(z->bits); /* (kept as it is) */
			z->bits = NULL;
			p->bytes -= MEMO_PAGE / 8;
		}
	}
}

/* Sets (w: one reference moves in) or clears (w == 0) memo slot idx. */
void pkvm_memo_set(pkvm *p, uint64_t idx, uintptr_t w)
{
	uintptr_t old = 0;
	if (p->memo_sparse.count && (old = (uintptr_t)idmap_del(&p->memo_sparse, idx)))
		p->bytes -= MEMO_SLOT;
	if (idx >= p->memocap && w && idx < 2 * p->nputs + MEMO_DENSE)
		pkvm_memo_grow(p, idx);
	if (idx < p->memocap) {
		memo_touch(p, idx);
		if (memo_packed(p, idx))
			memo_unpack(p, idx);
		if (p->memo[idx])
			old = p->memo[idx];
		p->memo[idx] = w;
	} else if (w) {
		idmap_put(&p->memo_sparse, idx, (void *)w);
		p->bytes += MEMO_SLOT;
	}
	word_drop(p, old);
}

/* A trace entry or segment turned into events leaves the memo, so memory does not grow with the
 * trace (the snapshot writer memoizes every dict). */
void pkvm_memo_forget(pkvm *p, pv *v)
{
	if (v->memo_at && v->refs > 1 && pkvm_memo_at(p, v->memo_at - 1) == (uintptr_t)v)
		pkvm_memo_set(p, v->memo_at - 1, 0);
}


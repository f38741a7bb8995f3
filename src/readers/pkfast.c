/*
 * pkfast.c - the trace-entry fast path of the snapshot reader. The snapshot writer pickles each trace entry as EMPTY_DICT, MEMOIZE, MARK, key/value pairs of
 * memo GETs, strings and numbers (strings memoized as they first appear), SETITEMS, in batches of
 * a MARK, up to 1000 entries and APPENDS to its device's list. When such an entry lies whole in
 * the buffer, it is read here in one pass, keeping only the fields replayed, and handed to the snapshot
 * reader (snapshot.c's entry hook), which turns it into events at once (not when its batch is appended); no dict is built, and a V_GHOST stands in the list's
 * batch on the stack until APPENDS. The memo gets what the opcodes put there, but for the entry
 * itself: the writer never fetches an entry again, and a pickle that does is refused (as one that
 * fetches an entry already appended always was). Anything else - another opcode (a frames list),
 * a container from the memo, an index that is not a fresh slot of the flat memo, an entry with a
 * bad field, an entry after one the opcode loop built in the same batch - is left to the opcode
 * loop, with nothing changed but strings interned: it then reports the same errors as before.
 * It reads; what the entry means is snapevents.c's (its keys, its fields) and snapshot.c's.
 */
#include "readers/pkfast.h"
#include <stdlib.h>
#include <string.h>

static inline uint64_t le32(const unsigned char *c)
{
	return (uint64_t)c[0] | (uint64_t)c[1] << 8 | (uint64_t)c[2] << 16 | (uint64_t)c[3] << 24;
}

static inline uint64_t le64(const unsigned char *c)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t u;
	memcpy(&u, c, 8); /* (the byte loop below was 16 instructions: compilers do not merge it) */
	return u;
#else
	uint64_t u = 0;
	for (unsigned i = 0; i < 8; i++)
		u |= (uint64_t)c[i] << (8 * i);
	return u;
#endif
}

/* Whether the n < INLINE_STR bytes at a (16 readable) are those of interned string s. */
static inline int short_eq(const unsigned char *a, const pv *s, size_t n)
{
	if (s->n != n)
		return 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t a0, a1, s0, s1; /* two loads a side, the bytes past n masked off (s->s is s->inl: 16 bytes) */
	memcpy(&a0, a, 8);
	memcpy(&a1, a + 8, 8);
	memcpy(&s0, s->s, 8);
	memcpy(&s1, s->s + 8, 8);
	uint64_t m0 = n >= 8 ? ~0ULL : (1ULL << (8 * n)) - 1, m1 = n > 8 ? (1ULL << (8 * (n - 8))) - 1 : 0;
	return !(((a0 ^ s0) & m0) | ((a1 ^ s1) & m1));
#else
	return !memcmp(a, s->s, n);
#endif
}

#define OPPOS (off + (uint64_t)(at - b))
int pkfast_entry(as_reader *r, pkvm *p, const pv *list, int first, pkfast *o, as_err *err)
{
	as_input *in = &r->in;
	if (in->len - in->pos < 4096 && !in->eof) {
		as_input_fill(in, 4096, err); /* the entry whole in the buffer (the opcode loop sees any read error) */
		if (in->error)
			return 0;
	}
	const unsigned char *b = in->buf, *c = b + in->pos, *e = b + in->len;
	uint64_t off = in->offset;
	val puts_v[FAST_PUTS];
	uint64_t puts_i[FAST_PUTS];
	pv **objs = o->objs;
	int np = 0, nobj = 0, nv = 0, ok = 0, kid = 0;
	val cur, *f = o->f; /* f[K_ACTION..K_POOL]: the last value of each key read */
	unsigned have = 0;
	uintptr_t curw = 0; /* cur is this memo word's value, not built yet (0: cur is built) */
	uint64_t dict_idx = UINT64_MAX, next = p->memo_next;
	if (p->sp >= p->scap || p->memo_sparse.count || p->bytes + 65536 > p->max_bytes || e - c < 24)
		return 0;
	/* the first entry's keys date the writer (pyversion.c) */
	uint32_t pyf = 0;
	/* room for the entry's MEMOIZEs (the array grows as a PUT there would make it grow) */
	if (p->memo_next + FAST_PUTS >= p->memocap && p->memo_next + FAST_PUTS < 2 * p->nputs + MEMO_DENSE &&
	    p->memo_next + FAST_PUTS < MAX_MEMO)
		pkvm_memo_grow(p, p->memo_next + FAST_PUTS);
	uint64_t dpos = off + (uint64_t)(c - b);
	const uintptr_t *memo = p->memo;
	const size_t memohw = p->memohw;
	/* the key ids known by BINGET index (none for the first entry: its keys' strings date the writer) */
	static const uintptr_t nokw[256];
	const uintptr_t *kword = first ? nokw : p->kword;
	c++; /* '}' */
	if (*c == 0x94) {
		dict_idx = next++;
		c++;
	} else if (*c == 'q') {
		dict_idx = c[1];
		c += 2;
	} else if (*c == 'r') {
		dict_idx = le32(c + 1);
		c += 5;
	}
	if (dict_idx != UINT64_MAX && !memo_fresh(p, dict_idx))
		return 0;
	if (*c == 0x95)
		c += 9;
	if (*c++ != '(')
		return 0;
	const unsigned char *lim = e - 24; /* an opcode starts at most here (24 bytes of slack; in the buffer: e - c >= 24 above) */
	for (;;) {
		if (c > lim)
			goto out;
		const unsigned char *at = c; /* the opcode (OPPOS: its byte offset, made only where a value keeps it) */
		int op = *c++;
		uint64_t idx;
		if (op == 'h') { /* BINGET, 45% of the opcodes: ahead of the switch's table */
			idx = *c++;
			goto get;
		}
		switch (op) {
		case 'u':
			goto done;
		case 0x95: /* FRAME: the pickler's framing (protocol 4), anywhere between opcodes */
			c += 8;
			continue;
		case 'j': {
			idx = le32(c);
			c += 4;
		get:;
			uintptr_t w;
			if (idx >= memohw || !(w = memo[idx])) {
				/* a slot this entry put (fresh: empty in the memo until the entry is taken) */
				int k = np - 1;
				while (k >= 0 && puts_i[k] != idx)
					k--;
				if (k >= 0) {
					cur = puts_v[k];
					break;
				}
				goto out; /* undefined: the opcode loop decides */
			}
			int wkid; /* the word's key id (0: not a string) */
			if (idx < 256 && kword[idx] == w) {
				wkid = p->ktag[idx];
			} else {
				pv *ob = (w & 3) == MW_SCALAR ? NULL : (pv *)(w & ~(uintptr_t)3);
				if (ob && ob->kind >= V_TUPLE)
					goto out; /* a container: the same */
				wkid = ob && ob->kind == V_STR ? snap_key_id(ob) : 0;
				if (first && wkid && !(nv & 1))
					pyf |= as_pyver_bit(AS_PF_IN_ENTRY, ob->s);
				if (idx < 256 && (w & 3)) { /* (an interned string or a scalar: that word is that value for good) */
					p->kword[idx] = w;
					p->ktag[idx] = (unsigned char)wkid;
				}
			}
			/* the value itself (word_val) only where it is kept: a key's id is its string's, and
			 * most values are of keys not replayed (a GET is 45% of a snapshot's opcodes) */
			curw = w;
			if (!(nv++ & 1)) {
				kid = wkid;
			} else if (kid > K_OTHER) {
				f[kid] = word_val(p, w);
				have |= 1u << kid;
			}
			continue;
		}
		case 0x8c: case 'X': {
			size_t len;
			if (op == 0x8c) {
				len = *c++;
			} else {
				len = le32(c);
				c += 4;
			}
			if (len > MAX_STRING || (size_t)(e - c) < len + 24)
				goto out;
			if (len < INLINE_STR) {
				/* the writer's 'N/A' of every entry: the last short string again, or the table's */
				pv *s = p->laststr && short_eq(c, p->laststr, len) ? p->laststr : pkvm_intern(p, (const char *)c, len, NULL);
				if (!s) {
					s = pkvm_new(p, V_STR, OPPOS);
					s->s = s->inl;
					memcpy(s->s, c, len);
					s->s[len] = 0;
					s->n = len;
					pkvm_intern(p, (const char *)c, len, s);
				}
				p->laststr = s;
				cur.kp = MKKP(V_STR | V_IMMORTAL, OPPOS);
				cur.u.p = s;
			} else {
				if (nobj == FAST_OBJS)
					goto out;
				pv *s = pkvm_new(p, V_STR, OPPOS);
				s->s = xmalloc(len + 1);
				p->bytes += len + 1;
				memcpy(s->s, c, len);
				s->s[len] = 0;
				s->n = len;
				objs[nobj++] = s;
				cur = obj_val(s);
			}
			c += len;
			break;
		}
		case 'K':
			cur.kp = MKKP(V_INT, OPPOS);
			cur.u.i = *c++;
			break;
		case 'M':
			cur.kp = MKKP(V_INT, OPPOS);
			cur.u.i = (int64_t)((uint64_t)c[0] | (uint64_t)c[1] << 8);
			c += 2;
			break;
		case 'J':
			cur.kp = MKKP(V_INT, OPPOS);
			cur.u.i = (int32_t)(uint32_t)le32(c);
			c += 4;
			break;
		case 0x8a: {
			unsigned n = *c++;
			if (n > 8)
				goto out;
			uint64_t u = le64(c); /* little-endian, n bytes (the buffer holds 8 more: one load) */
			if (n < 8)
				u = n ? (u & ((1ULL << (8 * n)) - 1)) : 0;
			if (n && n < 8 && (u >> (8 * n - 1)) & 1)
				u |= ~0ULL << (8 * n);
			c += n;
			cur.kp = MKKP(V_INT, OPPOS);
			cur.u.i = (int64_t)u;
			break;
		}
		case 'N':
			cur.kp = MKKP(V_NONE, OPPOS);
			cur.u.i = 0;
			break;
		case 0x88: case 0x89:
			cur.kp = MKKP(V_BOOL, OPPOS);
			cur.u.i = op == 0x88;
			break;
		case 'G': {
			uint64_t u = 0;
			for (int i = 0; i < 8; i++)
				u = (u << 8) | c[i];
			c += 8;
			cur.kp = MKKP(V_FLOAT, OPPOS);
			memcpy(&cur.u.f, &u, 8);
			break;
		}
		case 0x94: case 'q': case 'r':
			/* memoizes the value just read (the stack's top); not the dict itself */
			if (!nv || np == FAST_PUTS)
				goto out;
			if (op == 0x94) {
				idx = next++;
			} else if (op == 'q') {
				idx = *c++;
			} else {
				idx = le32(c);
				c += 4;
			}
			if (!memo_fresh(p, idx) || idx == dict_idx)
				goto out;
			for (int k = 0; k < np; k++)
				if (puts_i[k] == idx)
					goto out;
			if (curw) { /* the value of a GET, built now */
				cur = word_val(p, curw);
				curw = 0;
			}
			puts_i[np] = idx;
			puts_v[np++] = cur;
			continue;
		default:
			goto out;
		}
		/* a key, then its value */
		curw = 0;
		if (!(nv++ & 1)) {
			kid = VKIND(cur) == V_STR ? snap_key_id(cur.u.p) : 0;
			if (first && kid)
				pyf |= as_pyver_bit(AS_PF_IN_ENTRY, cur.u.p->s);
		} else if (kid > K_OTHER) {
			f[kid] = cur;
			have |= 1u << kid;
		}
	}
done:
	/* an entry the writer has finished: its batch goes on (another entry, or APPENDS) */
	if (nv % 2 || e - c < 10 || (*c != '}' && *c != 'e' && (*c != 0x95 || (c[9] != '}' && c[9] != 'e'))))
		goto out;
	rec *x = &o->x;
	int code = snap_entry_fields(have & 1u << K_ACTION ? &f[K_ACTION] : NULL, have & 1u << K_SIZE ? &f[K_SIZE] : NULL,
		have & 1u << K_ADDR ? &f[K_ADDR] : NULL, have & 1u << K_STREAM ? &f[K_STREAM] : NULL,
		have & 1u << K_TIME ? &f[K_TIME] : NULL, x);
	if (code != EF_OK && code != EF_SKIP)
		goto out; /* the opcode loop builds it and says what is wrong when its batch is appended */
	ok = 1;
	o->code = code;
	o->have = have;
	o->pyf = pyf;
	o->pos = dpos;
out:
	if (!ok) {
		for (int i = 0; i < nobj; i++)
			pv_unref(p, objs[i]);
		return 0;
	}
	/* what the opcodes leave in the memo */
	for (int k = 0; k < np; k++) {
		val v = puts_v[k];
		if (VOBJ(v)) {
			v.u.p->refs++;
			v.u.p->memo_at = puts_i[k] + 1;
		}
		memo_touch(p, puts_i[k]);
		p->memo[puts_i[k]] = pkvm_memo_word(p, v);
	}
	p->nputs += (uint64_t)np + (dict_idx != UINT64_MAX);
	p->memo_next = next;
	o->nobj = nobj; /* (held until pkfast_done: the pool is read from the metadata string) */
	in->pos = (size_t)(c - b);
	val g;
	g.kp = MKKP(V_GHOST, dpos);
	g.u.i = list->dev;
	p->stack[p->sp++] = g;
	p->nghosts++;
	return 1;
}
#undef OPPOS

/* pkvm.c - the pickle VM: opcodes -> values on its stack, shared by reference, under the limits that
 * keep a hostile file from taking unbounded memory or stack; what the values mean is the sink's
 * (pkvm.h). The values and the memo are pkval.c's. */
#include "readers/pkvm.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static inline int depth_of(val v)
{
	return VKIND(v) >= V_TUPLE ? v.u.p->depth : 0;
}

/* Adds item to container c (the item's reference moves into c); callers check too_deep first. */
static inline void pv_add(pkvm *p, pv *c, val item)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 8;
		c->items = xrealloc(c->items, nc * sizeof(val));
		p->bytes += (nc - c->cap) * sizeof(val);
		c->cap = nc;
	}
	c->items[c->n++] = item;
	if (VKIND(item) >= V_TUPLE) {
		item.u.p->embedded = 1;
		if (item.u.p->depth + 1 > c->depth)
			c->depth = (unsigned short)(item.u.p->depth + 1);
	} else if (!c->depth) {
		c->depth = 1;
	}
}

/* Whether putting these values into a container would nest containers deeper than MAX_DEPTH. */
static int too_deep(const pkvm *p, size_t from, size_t n)
{
	for (size_t i = from; i < from + n; i++)
		if (depth_of(p->stack[i]) + 1 > MAX_DEPTH)
			return 1;
	return 0;
}

/* Values are shared (the memo hands out references), so a container could be put inside itself;
 * that cannot happen when a container never changes once placed in another, and never holds
 * itself. Snapshots (and pickle.dump of acyclic data) fill every container before placing it. */
static int cycle(const pkvm *p, const pv *c, size_t from, size_t n)
{
	if (c->embedded)
		return 1;
	for (size_t i = from; i < from + n; i++)
		if (VKIND(p->stack[i]) >= V_TUPLE && p->stack[i].u.p == c)
			return 1;
	return 0;
}

int pkvm_err(as_reader *r, uint64_t pos, as_err *err, const char *fmt, ...)
{
	char m[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	return as_fail(err, AS_EXIT_DATAERR, "%s: byte offset %" PRIu64 ": %s", r->in.path, pos, m);
}

/* ---- the opcode interpreter ----------------------------------------------------------- */

static inline int need(as_reader *r, size_t n, as_err *err)
{
	if (r->in.len - r->in.pos >= n)
		return 0;
	if (as_input_fill(&r->in, n, err) < n) {
		if (r->in.error)
			return -1;
		return pkvm_err(r, as_input_tell(&r->in), err, "truncated pickle (needs %zu more bytes)", n);
	}
	return 0;
}

static inline uint64_t rd_le(as_reader *r, int n)
{
	const unsigned char *b = r->in.buf + r->in.pos;
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	r->in.pos += (size_t)n;
	return v;
}

static int push_slow(as_reader *r, pkvm *p, val v, as_err *err)
{
	if (p->sp == MAX_STACK) {
		val_drop(p, v);
		return pkvm_err(r, VPOS(v), err, "pickle stack exceeds %u values (reader memory cap)", MAX_STACK);
	}
	if (p->sp == p->scap) {
		size_t nc = p->scap ? p->scap * 2 : 1024;
		p->stack = xrealloc(p->stack, nc * sizeof(val));
		p->bytes += (nc - p->scap) * sizeof(val);
		p->scap = nc;
	}
	p->stack[p->sp++] = v;
	return 0;
}

static inline int push(as_reader *r, pkvm *p, val v, as_err *err)
{
	if (p->sp < p->scap) {
		p->stack[p->sp++] = v;
		return 0;
	}
	return push_slow(r, p, v, err);
}

static inline int push_scalar(as_reader *r, pkvm *p, int kind, uint64_t pos, int64_t i, as_err *err)
{
	val v;
	v.kp = MKKP(kind, pos);
	v.u.i = i;
	return push(r, p, v, err);
}

static inline int push_obj(as_reader *r, pkvm *p, pv *o, as_err *err)
{
	return push(r, p, obj_val(o), err);
}


static int pop_mark(as_reader *r, pkvm *p, uint64_t pos, size_t *base, as_err *err)
{
	if (!p->nmarks)
		return pkvm_err(r, pos, err, "pickle opcode needs a MARK but none is set");
	*base = p->marks[--p->nmarks];
	return 0;
}

static inline uint64_t str_hash(const char *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)b[i]) * 0x100000001b3ULL;
	return h;
}

/* The interned string with these bytes, or NULL after adding v (given) to the table.
 * Short strings repeat in a snapshot: keys, actions, 'N/A' in every trace entry. */
pv *pkvm_intern(pkvm *p, const char *b, size_t n, pv *v)
{
	if (p->strcount * 2 >= p->strcap) {
		size_t nc = p->strcap ? p->strcap * 2 : 1024;
		pv **t = xcalloc(nc, sizeof(pv *));
		for (size_t i = 0; i < p->strcap; i++)
			if (p->strtab[i]) {
				size_t j = str_hash(p->strtab[i]->s, p->strtab[i]->n) & (nc - 1);
				while (t[j])
					j = (j + 1) & (nc - 1);
				t[j] = p->strtab[i];
			}
		free(p->strtab);
		p->bytes += (nc - p->strcap) * sizeof(pv *);
		p->strtab = t;
		p->strcap = nc;
	}
	size_t j = str_hash(b, n) & (p->strcap - 1);
	for (; p->strtab[j]; j = (j + 1) & (p->strcap - 1)) {
		pv *s = p->strtab[j];
		if (s->n == n) { /* short: compared here, not through a call */
			size_t i = 0;
			while (i < n && s->s[i] == b[i])
				i++;
			if (i == n)
				return s;
		}
	}
	if (v) {
		v->refs++;
		p->strtab[j] = v;
		p->strcount++;
	}
	return NULL;
}

static int read_string(as_reader *r, pkvm *p, uint64_t pos, size_t len, int kind, as_err *err)
{
	if (len > MAX_STRING)
		return pkvm_err(r, pos, err, "string of %zu bytes exceeds the reader's 1 MiB limit", len);
	if (len < INLINE_STR) {
		if (need(r, len, err))
			return -1;
		const char *b = (const char *)r->in.buf + r->in.pos;
		pv *v = kind == V_STR ? pkvm_intern(p, b, len, NULL) : NULL;
		if (!v) {
			v = pkvm_new(p, kind, pos);
			v->s = v->inl;
			memcpy(v->s, b, len);
			v->s[len] = 0;
			v->n = len;
			if (kind == V_STR)
				pkvm_intern(p, b, len, v);
		}
		r->in.pos += len;
		val sv;
		sv.kp = MKKP(kind == V_STR ? V_STR | V_IMMORTAL : kind, pos);
		sv.u.p = v;
		return push(r, p, sv, err);
	}
	pv *v = pkvm_new(p, kind, pos);
	v->s = xmalloc(len + 1);
	p->bytes += len + 1;
	size_t got = 0;
	while (got < len) {
		size_t chunk = len - got > 65536 ? 65536 : len - got;
		if (need(r, chunk, err)) {
			v->n = len;
			pv_unref(p, v);
			return -1;
		}
		memcpy(v->s + got, r->in.buf + r->in.pos, chunk);
		r->in.pos += chunk;
		got += chunk;
	}
	v->s[len] = 0;
	v->n = len;
	return push_obj(r, p, v, err);
}

static int memo_put(pkvm *p, uint64_t idx)
{
	if (idx >= MAX_MEMO)
		return -1;
	/* The memo shares values (a reference each), so a GET costs nothing however large the value;
	 * containers are shared too, as Python does (frames shared between trace entries), with cycles
	 * refused (see cycle()). A trace entry leaves the memo when it is turned into events. */
	val v = p->stack[p->sp - 1];
	p->nputs++;
	if (VOBJ(v)) {
		v.u.p->refs++;
		v.u.p->memo_at = idx + 1;
	}
	uintptr_t w = pkvm_memo_word(p, v);
	if (idx < p->memocap && (idx >= p->memohw || (!p->memo[idx] && !memo_packed(p, idx))) && !p->memo_sparse.count) {
		memo_touch(p, idx);
		p->memo[idx] = w; /* the common case: a fresh index in the flat array */
		return 0;
	}
	pkvm_memo_set(p, idx, w);
	return 0;
}

static int memo_get(as_reader *r, pkvm *p, uint64_t idx, uint64_t pos, as_err *err)
{
	uintptr_t w = pkvm_memo_at(p, idx);
	if (!w)
		return pkvm_err(r, pos, err, "pickle memo index %" PRIu64 " is undefined (or a trace entry already "
			"replayed, which snapshots do not refer to again)", idx);
	val v = word_val(p, w);
	if (VOBJ(v))
		v.u.p->refs++;
	return push(r, p, v, err);
}

static const char *opname(int op)
{
	switch (op) {
	case 'c': return "GLOBAL";
	case 0x93: return "STACK_GLOBAL";
	case 'R': return "REDUCE";
	case 'b': return "BUILD";
	case 'i': return "INST";
	case 'o': return "OBJ";
	case 0x81: return "NEWOBJ";
	case 0x92: return "NEWOBJ_EX";
	case 'P': case 'Q': return "PERSID";
	case 0x82: case 0x83: case 0x84: return "EXT";
	default: return NULL;
	}
}

/* Items are being appended to list L (which stays on the stack): the VM's own list takes them, a list
 * with a role hands them to the sink. */
static inline int append(as_reader *r, pkvm *p, pv *list, val *items, size_t n, as_err *err)
{
	if (list->role == ROLE_NONE) {
		for (size_t i = 0; i < n; i++)
			pv_add(p, list, items[i]);
		return 0;
	}
	return p->sink->append(p->ctx, r, list, items, n, err);
}

/* Whether values from..from+n of the stack hold an entry already replayed (V_GHOST) that goes
 * anywhere but into its device's list (target: the container they go into). */
static int ghost_misplaced(const pkvm *p, size_t from, size_t n, const pv *target)
{
	if (!p->nghosts)
		return 0;
	for (size_t i = from; i < from + n; i++)
		if (VKIND(p->stack[i]) == V_GHOST &&
		    (!target || target->kind != V_LIST || target->role != ROLE_DEVTRACE || target->dev != p->stack[i].u.i))
			return 1;
	return 0;
}

static int ghost_err(as_reader *r, const pkvm *p, uint64_t pos, as_err *err)
{
	(void)p;
	return pkvm_err(r, pos, err, "pickle drops or moves a trace entry of a device's list after reading it (entries are "
		"replayed as they are read; a PyTorch snapshot appends each one to its list once)");
}

int pkvm_run(as_reader *r, pkvm *p, as_err *err)
{
	as_input *in = &r->in;
	while (!p->yield) {
		/* every opcode's fixed-size argument (at most 8 bytes) is then in the buffer, but at the end */
		if (in->len - in->pos < 16 && need(r, 1, err))
			return -1;
		uint64_t pos = in->offset + in->pos;
		if (p->bytes > p->max_bytes)
			return pkvm_err(r, pos, err, "pickle values take more than %" PRIu64 " MiB at once (reader memory cap)",
				p->max_bytes >> 20);
		int op = in->buf[in->pos++];
		pv *v;
		size_t base = 0;
		uint64_t n;
		switch (op) {
		case 0x80: /* PROTO */
			if (need(r, 1, err))
				return -1;
			n = rd_le(r, 1);
			if (n < 2 || n > 5)
				return pkvm_err(r, pos, err, "unsupported pickle protocol %" PRIu64, n);
			break;
		case 0x95: /* FRAME */
			if (need(r, 8, err))
				return -1;
			rd_le(r, 8);
			break;
		case '.': /* STOP */
			if (p->sp != 1 || p->nmarks)
				return pkvm_err(r, pos, err, "pickle STOP with %zu values and %zu marks left (corrupt pickle)", p->sp, p->nmarks);
			if (p->sink->stop(p->ctx, r, p->stack[0], pos, err))
				return -1;
			break;
		case '(': /* MARK */
			if (p->nmarks == MAX_MARKS)
				return pkvm_err(r, pos, err, "pickle nesting deeper than %d (reader limit)", MAX_MARKS);
			p->marks[p->nmarks++] = p->sp;
			break;
		case '}': /* EMPTY_DICT (snapshot.c's entry_direct makes this case's and the loop's tests too) */
			if (p->nmarks && (base = p->marks[p->nmarks - 1]) && VKIND(p->stack[base - 1]) == V_LIST &&
			    p->stack[base - 1].u.p->role == ROLE_DEVTRACE && p->sp - base == p->nghosts) {
				in->pos--;
				int fr = p->sink->entry(p->ctx, r, p->stack[base - 1].u.p, err);
				if (fr < 0)
					return -1;
				if (fr)
					break;
				in->pos++;
			}
			if (push_obj(r, p, pkvm_new(p, V_DICT, pos), err))
				return -1;
			break;
		case ']': /* EMPTY_LIST */
			v = pkvm_new(p, V_LIST, pos);
			if (p->sink->list(p->ctx, r, v, err)) {
				pv_unref(p, v);
				return -1;
			}
			if (push_obj(r, p, v, err))
				return -1;
			break;
		case ')': /* EMPTY_TUPLE */
			if (push_obj(r, p, pkvm_new(p, V_TUPLE, pos), err))
				return -1;
			break;
		case 'N':
			if (push_scalar(r, p, V_NONE, pos, 0, err))
				return -1;
			break;
		case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
			if (push_scalar(r, p, V_BOOL, pos, op == 0x88, err))
				return -1;
			break;
		case 'K': /* BININT1 */
			if (need(r, 1, err))
				return -1;
			n = in->buf[in->pos++];
			if (push_scalar(r, p, V_INT, pos, (int64_t)n, err))
				return -1;
			break;
		case 'M': case 'J': /* BININT2, BININT */
			if (need(r, op == 'M' ? 2 : 4, err))
				return -1;
			if (push_scalar(r, p, V_INT, pos, op == 'J' ? (int32_t)(uint32_t)rd_le(r, 4) : (int64_t)rd_le(r, 2), err))
				return -1;
			break;
		case 0x8a: case 0x8b: { /* LONG1, LONG4 */
			if (need(r, op == 0x8a ? 1 : 4, err))
				return -1;
			n = rd_le(r, op == 0x8a ? 1 : 4);
			if (n > 8)
				return pkvm_err(r, pos, err, "integer of %" PRIu64 " bytes does not fit 64 bits", n);
			if (need(r, (size_t)n, err))
				return -1;
			uint64_t u = rd_le(r, (int)n);
			if (n && n < 8 && (u >> (8 * n - 1)) & 1)
				u |= ~0ULL << (8 * n); /* sign-extend */
			if (push_scalar(r, p, V_INT, pos, (int64_t)u, err))
				return -1;
			break;
		}
		case 'G': { /* BINFLOAT, big-endian */
			if (need(r, 8, err))
				return -1;
			uint64_t u = 0;
			for (int i = 0; i < 8; i++)
				u = (u << 8) | in->buf[in->pos + (size_t)i];
			in->pos += 8;
			val f;
			f.kp = MKKP(V_FLOAT, pos);
			memcpy(&f.u.f, &u, 8);
			if (push(r, p, f, err))
				return -1;
			break;
		}
		case 0x8c: case 'X': case 0x8d: /* SHORT_BINUNICODE, BINUNICODE, BINUNICODE8 */
		case 'C': case 'B': case 0x8e: { /* SHORT_BINBYTES, BINBYTES, BINBYTES8 */
			int w = (op == 0x8c || op == 'C') ? 1 : (op == 'X' || op == 'B') ? 4 : 8;
			if (need(r, (size_t)w, err))
				return -1;
			n = rd_le(r, w);
			if (read_string(r, p, pos, n > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)n,
					(op == 'C' || op == 'B' || op == 0x8e) ? V_BYTES : V_STR, err))
				return -1;
			break;
		}
		case 0x96: /* BYTEARRAY8 (protocol 5): an in-band bytearray, kept as bytes */
			if (need(r, 8, err))
				return -1;
			n = rd_le(r, 8);
			if (read_string(r, p, pos, n > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)n, V_BYTES, err))
				return -1;
			break;
		case 0x97: case 0x98: /* NEXT_BUFFER, READONLY_BUFFER (protocol 5) */
			return pkvm_err(r, pos, err, "pickle opcode %s (0x%02x) needs an out-of-band buffer (protocol 5 "
				"written with a buffer_callback); the buffers are not in the file, and a snapshot written "
				"by pickle.dump has none", op == 0x97 ? "NEXT_BUFFER" : "READONLY_BUFFER", op);
		case 0x94: /* MEMOIZE */
			if (!p->sp)
				return pkvm_err(r, pos, err, "MEMOIZE on an empty stack");
			if (memo_put(p, p->memo_next++))
				return pkvm_err(r, pos, err, "pickle memo grows beyond the reader limit");
			break;
		case 'q': case 'r': /* BINPUT, LONG_BINPUT */
			if (need(r, op == 'q' ? 1 : 4, err))
				return -1;
			n = rd_le(r, op == 'q' ? 1 : 4);
			if (!p->sp)
				return pkvm_err(r, pos, err, "PUT on an empty stack");
			if (memo_put(p, n))
				return pkvm_err(r, pos, err, "pickle memo index %" PRIu64 " beyond the reader limit", n);
			break;
		case 'h': case 'j': /* BINGET, LONG_BINGET */
			if (need(r, op == 'h' ? 1 : 4, err))
				return -1;
			n = rd_le(r, op == 'h' ? 1 : 4);
			if (memo_get(r, p, n, pos, err))
				return -1;
			break;
		case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
			size_t k = (size_t)(op - 0x84);
			if (p->sp < k + mark_base(p))
				return pkvm_err(r, pos, err, "TUPLE%zu with too few values on the stack", k);
			if (too_deep(p, p->sp - k, k))
				return pkvm_err(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, p->sp - k, k, NULL))
				return ghost_err(r, p, pos, err);
			v = pkvm_new(p, V_TUPLE, pos);
			for (size_t i = p->sp - k; i < p->sp; i++)
				pv_add(p, v, p->stack[i]);
			p->sp -= k;
			if (push_obj(r, p, v, err))
				return -1;
			break;
		}
		case 't': /* TUPLE */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (too_deep(p, base, p->sp - base))
				return pkvm_err(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, base, p->sp - base, NULL))
				return ghost_err(r, p, pos, err);
			v = pkvm_new(p, V_TUPLE, pos);
			for (size_t i = base; i < p->sp; i++)
				pv_add(p, v, p->stack[i]);
			p->sp = base;
			if (push_obj(r, p, v, err))
				return -1;
			break;
		case 'a': /* APPEND */
			if (p->sp < 2 + mark_base(p) || VKIND(p->stack[p->sp - 2]) != V_LIST)
				return pkvm_err(r, pos, err, "APPEND without a list");
			if (cycle(p, p->stack[p->sp - 2].u.p, p->sp - 1, 1))
				return pkvm_err(r, pos, err, "pickle changes a list already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, p->sp - 1, 1))
				return pkvm_err(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, p->sp - 1, 1, p->stack[p->sp - 2].u.p))
				return ghost_err(r, p, pos, err);
			p->sp--;
			if (append(r, p, p->stack[p->sp - 1].u.p, &p->stack[p->sp], 1, err))
				return -1;
			break;
		case 'e': /* APPENDS */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (base < 1 || VKIND(p->stack[base - 1]) != V_LIST)
				return pkvm_err(r, pos, err, "APPENDS without a list");
			if (cycle(p, p->stack[base - 1].u.p, base, p->sp - base))
				return pkvm_err(r, pos, err, "pickle changes a list already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, base, p->sp - base))
				return pkvm_err(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, base, p->sp - base, p->stack[base - 1].u.p))
				return ghost_err(r, p, pos, err);
			{
				size_t k = p->sp - base;
				p->sp = base;
				if (append(r, p, p->stack[base - 1].u.p, &p->stack[base], k, err))
					return -1;
			}
			break;
		case 's': /* SETITEM */
			if (p->sp < 3 + mark_base(p) || VKIND(p->stack[p->sp - 3]) != V_DICT)
				return pkvm_err(r, pos, err, "SETITEM without a dict");
			v = p->stack[p->sp - 3].u.p;
			if (cycle(p, v, p->sp - 2, 2))
				return pkvm_err(r, pos, err, "pickle changes a dict already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, p->sp - 2, 2))
				return pkvm_err(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, p->sp - 2, 2, v))
				return ghost_err(r, p, pos, err);
			pv_add(p, v, p->stack[p->sp - 2]);
			pv_add(p, v, p->stack[p->sp - 1]);
			p->sp -= 2;
			break;
		case 'u': /* SETITEMS */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (base < 1 || VKIND(p->stack[base - 1]) != V_DICT || (p->sp - base) % 2)
				return pkvm_err(r, pos, err, "SETITEMS without a dict or with an odd number of values");
			v = p->stack[base - 1].u.p;
			if (cycle(p, v, base, p->sp - base))
				return pkvm_err(r, pos, err, "pickle changes a dict already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, base, p->sp - base))
				return pkvm_err(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, base, p->sp - base, v))
				return ghost_err(r, p, pos, err);
			for (size_t i = base; i < p->sp; i++)
				pv_add(p, v, p->stack[i]);
			p->sp = base;
			break;
		case '0': /* POP */
			if (p->sp <= mark_base(p))
				return pkvm_err(r, pos, err, "POP on an empty stack");
			if (VKIND(p->stack[p->sp - 1]) == V_GHOST)
				return ghost_err(r, p, pos, err);
			val_drop(p, p->stack[--p->sp]);
			break;
		default: {
			const char *name = opname(op);
			if (name)
				return pkvm_err(r, pos, err, "pickle opcode %s (0x%02x) would call code; allocsim never executes "
					"code from a pickle, and PyTorch snapshots do not use it", name, op);
			return pkvm_err(r, pos, err, "unsupported pickle opcode 0x%02x", op);
		}
		}
	}
	return 0;
}

void pkvm_init(pkvm *p, uint64_t max_bytes, const pk_sink *sink, void *ctx)
{
	idmap_init(&p->memo_sparse);
	p->max_bytes = max_bytes;
	p->sink = sink;
	p->ctx = ctx;
}


/* oommsg.c - PyTorch's out-of-memory message read back (see oommsg.h). */
#include "util/oommsg.h"
#include "util/common.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A format_size value at p ("1.48 GiB", "0 bytes"): its end, or NULL. Exact in integers. */
static const char *read_size(const char *p, as_oom_size *s)
{
	uint64_t ip = 0, fp = 0, div = 1;
	int digits = 0;
	while (*p == ' ')
		p++;
	for (; isdigit((unsigned char)*p); p++, digits++) {
		if (ip > UINT64_MAX / 10 - 10)
			return NULL;
		ip = ip * 10 + (uint64_t)(*p - '0');
	}
	if (!digits)
		return NULL;
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (div >= 1000000)
				return NULL;
			fp = fp * 10 + (uint64_t)(*p - '0');
			div *= 10;
		}
	}
	if (*p != ' ')
		return NULL;
	p++;
	static const struct { const char *u; uint64_t mult; } units[] = {
		{ "bytes", 1 }, { "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 }, { "TiB", 1ull << 40 },
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t n = strlen(units[i].u);
		if (strncmp(p, units[i].u, n) || isalpha((unsigned char)p[n]))
			continue;
		if (ip > UINT64_MAX / units[i].mult / 2)
			return NULL;
		s->known = 1;
		s->bytes = ip * units[i].mult + (uint64_t)((unsigned __int128)fp * units[i].mult / div);
		s->ulp = div > 1 || units[i].mult > 1 ? (uint64_t)((unsigned __int128)units[i].mult / div / 2) : 0;
		return p + n;
	}
	return NULL;
}

/* The size right after the first occurrence of key (from), or before it (key after the size). */
static int size_after(const char *text, const char *key, as_oom_size *s)
{
	const char *k = strstr(text, key);
	return k && read_size(k + strlen(key), s) ? 0 : -1;
}

/* The size that ends just before " allowed;" (e.g. "17.30 GiB allowed;"). */
static int size_before(const char *text, const char *key, as_oom_size *s)
{
	const char *k = strstr(text, key);
	if (!k)
		return -1;
	/* back over "<digits>[.<digits>] <unit>" */
	const char *p = k;
	while (p > text && p[-1] != ' ')
		p--; /* the unit */
	if (p == text)
		return -1;
	p--; /* the space */
	while (p > text && (isdigit((unsigned char)p[-1]) || p[-1] == '.'))
		p--;
	const char *end = read_size(p, s);
	return end == k ? 0 : -1;
}

int as_oom_msg_parse(const char *text, as_oom_msg *m, char *why, size_t whylen)
{
	memset(m, 0, sizeof(*m));
	const char *t = strstr(text, "out of memory. Tried to allocate");
	if (!t) {
		snprintf(why, whylen, "not PyTorch's CUDA out-of-memory message (it begins 'CUDA out of memory. Tried to allocate')");
		return -1;
	}
	if (size_after(t, "Tried to allocate", &m->request)) {
		snprintf(why, whylen, "no readable size (a number below 2^63 bytes and a unit) after 'Tried to allocate'");
		return -1;
	}
	const char *g = strstr(t, ". GPU ");
	if (!g || sscanf(g + 6, "%d", &m->gpu) != 1)
		m->gpu = -1;
	if (size_after(t, "has a total capacity of", &m->total) || size_after(t, " of which", &m->free)) {
		snprintf(why, whylen, "no 'total capacity of X of which Y is free'");
		return -1;
	}
	size_after(t, "this process has", &m->process);
	size_before(t, " allowed;", &m->allowed);
	size_after(t, "Of the allocated memory", &m->allocated);
	size_after(t, ", with", &m->private_pools);
	const char *u = strstr(t, " is reserved by PyTorch but unallocated");
	if (u) {
		size_before(t, " is reserved by PyTorch but unallocated", &m->unallocated);
	}
	if (m->allowed.known) {
		m->capacity = m->allowed.bytes;
		m->capacity_ulp = m->allowed.ulp;
		m->capacity_from_allowed = 1;
		return 0;
	}
	if (!m->allocated.known || !m->unallocated.known) {
		snprintf(why, whylen, "no 'X allowed;' and no 'Of the allocated memory X is allocated by PyTorch, ... and Y is reserved "
			"by PyTorch but unallocated': the memory PyTorch could hold is not known");
		return -1;
	}
	m->capacity = m->allocated.bytes + m->unallocated.bytes + m->free.bytes;
	m->capacity_ulp = m->allocated.ulp + m->unallocated.ulp + m->free.ulp;
	return 0;
}

char *as_oom_msg_arg(const char *arg, char *why, size_t whylen)
{
	if (arg[0] != '@')
		return xstrdup(arg);
	FILE *f = fopen(arg + 1, "rb");
	if (!f) {
		snprintf(why, whylen, "cannot read '%s': %s", arg + 1, strerror(errno));
		return NULL;
	}
	size_t cap = 1 << 20, n;
	char *buf = xmalloc(cap + 1);
	n = fread(buf, 1, cap + 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad || n > cap) {
		snprintf(why, whylen, "'%s': %s", arg + 1, bad ? "read error" : "more than 1 MiB: not an error message");
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	if (strlen(buf) != n) {
		snprintf(why, whylen, "'%s' holds a NUL byte: not a text message", arg + 1);
		free(buf);
		return NULL;
	}
	return buf;
}

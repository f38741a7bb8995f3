/* options.c - parsing of policy configuration strings against an option table. */
#include "policy.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The registered policies, for the message about a key of another policy: registry.c hands its table
 * over when the program starts (this file, below every policy, does not look it up: no circle). */
static const as_policy_ops *const *known;

void as_conf_policies(const as_policy_ops *const *list)
{
	known = list;
}

/* An unknown key: the policy that takes it if another one does, else the closest key of this one's. */
static void unknown_key(const char *key, const as_optdesc *tab, as_err *err)
{
	const char *self = NULL, *other = NULL, *names[64] = { 0 };
	size_t n = 0;
	for (size_t i = 0; known && known[i]; i++) {
		if (known[i]->opts == tab)
			self = known[i]->name;
		else if (known[i]->opts && !other)
			for (size_t j = 0; known[i]->opts[j].name; j++)
				if (!strcmp(known[i]->opts[j].name, key))
					other = known[i]->name;
	}
	for (size_t i = 0; tab[i].name && n < 64; i++)
		names[n++] = tab[i].name;
	const char *near = as_closest(key, names, n);
	if (other && self)
		as_fail(err, AS_EXIT_USAGE, "%s is an option of %s, not %s (see 'allocsim policies')", key, other, self);
	else if (near)
		as_fail(err, AS_EXIT_USAGE, "Unrecognized key '%s' in allocator config: did you mean '%s'? (see 'allocsim policies')", key, near);
	else
		as_fail(err, AS_EXIT_USAGE, "Unrecognized key '%s' in allocator config (see 'allocsim policies')", key);
}

/*
 * Tokenising follows PyTorch's allocator-config lexer: ',' ':' '[' ']' are tokens of their own
 * and whitespace is dropped. A value is either one token or a bracketed list, which is passed
 * to the option's parser as text ("[256:1,>:8]").
 */
int as_conf_parse(const char *s, const as_optdesc *tab, void *conf, as_err *err)
{
	size_t n = strlen(s);
	char *buf = xmalloc(n + 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)s[i]))
			buf[k++] = s[i];
	buf[k] = 0;
	int rc = 0;
	char *p = buf;
	while (*p) {
		char *key = p;
		char *colon = strpbrk(p, ":,[]");
		if (!colon || *colon != ':') {
			rc = as_fail(err, AS_EXIT_USAGE, "Error parsing allocator settings '%s': expected ':' after '%.*s'",
				s, colon ? (int)(colon - p) : (int)strlen(p), p);
			break;
		}
		*colon = 0;
		char *val = colon + 1, *end;
		if (*val == '[') {
			end = strchr(val, ']');
			if (!end) {
				rc = as_fail(err, AS_EXIT_USAGE, "Error parsing allocator settings '%s': expected ']'", s);
				break;
			}
			end++;
		} else {
			end = val + strcspn(val, ",");
		}
		char save = *end;
		*end = 0;
		const as_optdesc *d = NULL;
		for (size_t i = 0; tab[i].name; i++)
			if (!strcmp(tab[i].name, key))
				d = &tab[i];
		if (!d) {
			unknown_key(key, tab, err);
			rc = -1;
			break;
		}
		if (!*val) {
			rc = as_fail(err, AS_EXIT_USAGE, "Error parsing allocator settings '%s': no value for '%s'", s, key);
			break;
		}
		if (d->parse(conf, d, val, err)) {
			rc = -1;
			break;
		}
		*end = save;
		p = end;
		if (*p == ',') {
			p++;
			if (!*p) {
				rc = as_fail(err, AS_EXIT_USAGE, "Error parsing allocator settings '%s': trailing ','", s);
				break;
			}
		} else if (*p) {
			rc = as_fail(err, AS_EXIT_USAGE, "Error parsing allocator settings '%s': expected ',' before '%s'", s, p);
			break;
		}
	}
	free(buf);
	return rc;
}

int as_conf_defaults(const as_optdesc *tab, void *conf, as_err *err)
{
	for (size_t i = 0; tab[i].name; i++)
		if (tab[i].parse(conf, &tab[i], tab[i].def, err)) {
			char why[sizeof err->msg];
			snprintf(why, sizeof why, "%s", err->msg);
			err->code = 0; /* as_fail keeps the first error: this one says whose bug it is */
			return as_fail(err, AS_EXIT_SOFTWARE, "the default of option %s ('%s') does not parse: %.200s", tab[i].name, tab[i].def, why);
		}
	return 0;
}

int as_opt_parse_size(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	char m[256];
	uint64_t v;
	if (as_parse_size(val, &v, m, sizeof m))
		return as_fail(err, AS_EXIT_USAGE, "%s: %s", d->name, m);
	*(uint64_t *)((char *)conf + d->off) = v;
	return 0;
}

int as_opt_parse_bool(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	int v;
	if (!strcmp(val, "True"))
		v = 1;
	else if (!strcmp(val, "False"))
		v = 0;
	else
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not True or False", d->name, val);
	*(int *)((char *)conf + d->off) = v;
	return 0;
}

char *as_conf_with(const char *base, const char *key, const char *val)
{
	size_t bl = strlen(base), top = strcspn(base, ";");
	char *out = xmalloc(bl + strlen(key) + strlen(val) + 3);
	memcpy(out, base, top);
	size_t k = top;
	if (top)
		out[k++] = ',';
	k += (size_t)sprintf(out + k, "%s:%s", key, val);
	strcpy(out + k, base + top);
	return out;
}

/* ---- settings strings merged key by key (advise's grid) ---- */

/* The items of a settings string ("key:value", split at the commas outside brackets: the list form
 * of roundup_power2_divisions has commas inside), trimmed of spaces; at most max. */
static size_t conf_items(char *s, char **item, size_t max)
{
	size_t n = 0;
	int depth = 0;
	char *start = s;
	for (char *p = s;; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']' && depth)
			depth--;
		else if ((*p == ',' && !depth) || !*p) {
			int end = !*p;
			*p = 0;
			while (*start == ' ')
				start++;
			if (*start && n < max)
				item[n++] = start;
			if (end)
				return n;
			start = p + 1;
		}
	}
}

static size_t key_len(const char *item)
{
	size_t k = strcspn(item, ":");
	while (k && item[k - 1] == ' ')
		k--;
	return k;
}

/* See policy.h. */
char *as_conf_merge(const char *current, const char *cand, int *changes)
{
	char *cur = xstrdup(current), *cd = xstrdup(cand);
	size_t mc = 1, mk = 1, len = strlen(current) + strlen(cand) + 2;
	for (const char *p = current; *p; p++)
		mc += *p == ',';
	for (const char *p = cand; *p; p++)
		mk += *p == ',';
	char **ci = xcalloc(mc, sizeof(char *)), **ki = xcalloc(mk, sizeof(char *));
	const char **val = xcalloc(mc, sizeof(char *));
	size_t nc = conf_items(cur, ci, mc), nk = conf_items(cd, ki, mk);
	*changes = 0;
	char *out = xmalloc(len + 1), *o = out;
	for (size_t j = 0; j < nk; j++) {
		size_t kl = key_len(ki[j]);
		int found = 0;
		for (size_t i = 0; i < nc; i++)
			if (key_len(ci[i]) == kl && !strncmp(ci[i], ki[j], kl)) {
				found = 1;
				if (strcmp(ci[i], ki[j])) {
					val[i] = ki[j];
					(*changes)++;
				}
			}
		if (!found)
			(*changes)++;
	}
	for (size_t i = 0; i < nc; i++)
		o += sprintf(o, "%s%s", o == out ? "" : ",", val[i] ? val[i] : ci[i]);
	for (size_t j = 0; j < nk; j++) {
		size_t kl = key_len(ki[j]);
		int found = 0;
		for (size_t i = 0; i < nc && !found; i++)
			found = key_len(ci[i]) == kl && !strncmp(ci[i], ki[j], kl);
		if (!found)
			o += sprintf(o, "%s%s", o == out ? "" : ",", ki[j]);
	}
	*o = 0;
	free(cur);
	free(cd);
	free(ci);
	free(ki);
	free(val);
	return out;
}

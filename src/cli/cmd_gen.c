/* cmd_gen.c - allocsim gen: synthetic traces from the models in src/gen (doc/generator.md). */
#include "cli/cli.h"
#include "gen/gen.h"
#include "readers/binfmt.h"
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char gen_usage[] =
	"usage: allocsim gen MODEL [--OPTION VALUE]... [--params FILE] [--seed N] -o TRACE\n"
	"       allocsim gen --fit TRACE [--model phase|iid] [--bins N] [-o PARAMS]\n"
	"       allocsim gen MODEL --help\n"
	"\n"
	"Draws a synthetic trace from a model with GSL's random variates (MT19937 seeded with --seed): the\n"
	"same options and seed give the same bytes. TRACE is allocsim's native format (gzip'd when it ends\n"
	"in .gz, the binary format when it ends in .asbin, '-' standard output), written only once the\n"
	"whole trace was drawn. --fit reads a real trace and prints the phase model's parameters (a\n"
	"parameter file for --params) so that gen can redraw it, longer or scaled; --model iid prints the\n"
	"iid model's instead (the sizes' and lifetimes' empirical distributions, drawn apart).\n"
	"\n"
	"models:\n"
	"   train   training steps of a transformer or CNN (parameters, gradients, optimizer states,\n"
	"           saved activations, temporaries, varying sequence lengths)\n"
	"   serve   KV-cache serving (gamma arrivals, lognormal prompts/outputs, contiguous, growing or\n"
	"           paged KV, preemption)\n"
	"   iid     independent sizes and lifetimes (lognormal, pareto, weibull, gamma, exp, a table)\n"
	"   phase   a repeating step as a table of (position, size, lifetime) classes (what --fit writes)\n"
	"\n"
	"options of every model:\n"
	"   -o, --output TRACE       the trace to write\n"
	"   --seed N                 the generator's seed (default 1)\n"
	"   --params FILE            option lines 'name VALUE' ('#' comments; 'model NAME' names the model);\n"
	"                            options after it on the command line override it\n"
	"   --max-events N           refuse a model that would draw more events (default 4000000, at most\n"
	"                            50000000: the trace is held in memory, 56 bytes an event)\n"
	"   --fragment SIZE          fragmenter prefix: SIZE bytes in --fragment-piece pieces allocated\n"
	"                            before the workload, every --fragment-keep-th kept live to the end\n"
	"   --fragment-piece SIZE    (default 2MiB)\n"
	"   --fragment-keep N        (default 2; 0 frees them all)\n"
	"\n"
	"Exit status: 0 written; 64 a bad option or a model over --max-events; 65 a malformed --params\n"
	"file or --fit trace; 66 an input that cannot be read; 74 a write error. See doc/generator.md.\n";

#define PARAM_LINE_MAX (1 << 20)
#define PARAM_LINES_MAX 2000000

typedef struct genopts {
	uint64_t seed, max_events;
	gen_frag frag;
	const char *out;
} genopts;

static int model_help(const gen_model *mod)
{
	void *m = mod->make();
	printf("allocsim gen %s: %s\n\noptions (doc/generator.md):\n", mod->name, mod->what);
	for (const gen_opt *o = mod->opts(m); o->name; o++)
		printf("   --%-20s %s\n", o->name, o->help);
	mod->destroy(m);
	return 0;
}

static const gen_opt *find_opt(const gen_opt *opts, const char *name, size_t len)
{
	for (const gen_opt *o = opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

/* The common options as a table too (the same parser serves files and the command line). */
static int common_opt(genopts *c, const char *name, const char *val, char *msg, size_t msglen, int *handled)
{
	gen_opt tab[] = {
		{ "seed", GO_U64, &c->seed, 0, 18446744073709551615.0, 0, 0, 0 },
		{ "max-events", GO_U64, &c->max_events, 1, (double)GEN_HARD_MAX_EVENTS, 0, 0, 0 },
		{ "fragment", GO_SIZE, &c->frag.total, 0, (double)(AS_MAX_REQUEST - 1), 0, 0, 0 },
		{ "fragment-piece", GO_SIZE, &c->frag.piece, 1, (double)(AS_MAX_REQUEST - 1), 0, 0, 0 },
		{ "fragment-keep", GO_U64, &c->frag.keep, 0, 1e6, 0, 0, 0 },
		{ 0 },
	};
	*handled = 0;
	for (const gen_opt *o = tab; o->name; o++)
		if (!strcmp(o->name, name)) {
			*handled = 1;
			return gen_opt_set(o, NULL, val, msg, msglen);
		}
	return 0;
}

static const char *const common_names[] = { "seed", "max-events", "fragment", "fragment-piece", "fragment-keep", "params",
	"output", "help" };

static int unknown(const gen_model *mod, void *m, const char *name, as_err *err, const char *where)
{
	const char *names[64];
	size_t n = 0;
	for (size_t i = 0; i < sizeof common_names / sizeof common_names[0]; i++)
		names[n++] = common_names[i];
	for (const gen_opt *o = mod->opts(m); o->name && n < 64; o++)
		names[n++] = o->name;
	const char *near = as_closest(name, names, n);
	return as_fail(err, AS_EXIT_USAGE, "%s'%s' is not an option of the %s model%s%s%s (allocsim gen %s --help)", where, name,
		mod->name, near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "", mod->name);
}

static int apply(const gen_model *mod, void *m, genopts *c, const char *name, size_t nlen, const char *val, as_err *err,
	const char *where)
{
	char msg[900], nm[128];
	if (nlen >= sizeof nm)
		nlen = sizeof nm - 1;
	memcpy(nm, name, nlen);
	nm[nlen] = 0;
	int handled;
	if (common_opt(c, nm, val, msg, sizeof msg, &handled))
		return as_fail(err, AS_EXIT_USAGE, "%s%s", where, msg);
	if (handled)
		return 0;
	const gen_opt *o = find_opt(mod->opts(m), nm, strlen(nm));
	if (!o)
		return unknown(mod, m, nm, err, where);
	if (gen_opt_set(o, m, val, msg, sizeof msg))
		return as_fail(err, AS_EXIT_USAGE, "%s%s", where, msg);
	return 0;
}

/* Reads FILE's 'model NAME' line (or NULL when it has none) into *model; 0 or -1. */
static int file_model(const char *path, char *model, size_t len, as_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	model[0] = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (!strncmp(line, "model ", 6) || !strncmp(line, "model\t", 6)) {
			char *v = line + 6;
			v[strcspn(v, "\r\n")] = 0;
			v += strspn(v, " \t");
			snprintf(model, len, "%s", v);
			break;
		}
	}
	free(line);
	fclose(f);
	return 0;
}

static int read_params(const gen_model *mod, void *m, genopts *c, const char *path, as_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	char *line = NULL, where[4200];
	size_t cap = 0;
	ssize_t n;
	uint64_t lineno = 0;
	int rc = 0;
	while (!rc && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		snprintf(where, sizeof where, "%s:%" PRIu64 ": ", path, lineno);
		if (n > PARAM_LINE_MAX || lineno > PARAM_LINES_MAX) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%sline too long or too many lines (at most %d bytes, %d lines)", where,
				PARAM_LINE_MAX, PARAM_LINES_MAX);
			break;
		}
		if (memchr(line, 0, (size_t)n)) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%sa NUL byte", where);
			break;
		}
		line[strcspn(line, "\r\n")] = 0;
		char *p = line + strspn(line, " \t");
		if (!*p || *p == '#')
			continue;
		size_t klen = strcspn(p, " \t");
		char *v = p + klen;
		v += strspn(v, " \t");
		size_t vl = strlen(v);
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			v[--vl] = 0;
		if (klen == 5 && !strncmp(p, "model", 5)) {
			if (strcmp(v, mod->name))
				rc = as_fail(err, AS_EXIT_DATAERR, "%sthe file is for the '%s' model, not '%s'", where, v, mod->name);
			continue;
		}
		if (!*v) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s'%.*s' has no value", where, (int)klen, p);
			break;
		}
		if (apply(mod, m, c, p, klen, v, err, where))
			rc = err->code = AS_EXIT_DATAERR;
	}
	if (!rc && ferror(f))
		rc = as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s': %s", path, strerror(errno));
	free(line);
	fclose(f);
	return rc ? -1 : 0;
}

static int write_trace(gen_ctx *g, const char *out, const char *model, uint64_t seed, as_err *err)
{
	as_meta *meta = &g->buf.meta;
	snprintf(meta->format, sizeof meta->format, "native");
	snprintf(meta->source, sizeof meta->source, "allocsim-gen %s seed=%" PRIu64, model, seed);
	g->buf.nslots = g->nslots;
	if (as_binfmt_path(out))
		return as_binfmt_write(&g->buf, out, NULL, err);
	as_writer *w = as_native_writer_open(out, meta, err);
	if (!w)
		return -1;
	as_event ev;
	int rc = 0;
	for (size_t i = 0; i < g->buf.n && !rc; i++) {
		if (cli_interrupted) {
			rc = as_fail(err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
			break;
		}
		as_evbuf_event(&g->buf, i, &ev);
		rc = as_native_writer_event(w, &ev, err);
	}
	return as_native_writer_close(w, !rc, err) || rc ? -1 : 0;
}

static int do_fit(int argc, char **argv)
{
	gen_fit_opts fo = { 64, 1, 0, NULL };
	const char *out = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--fit") || !strcmp(a, "--bins") || !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--model")) {
			if (!v)
				return cli_usage_error("gen", "%s needs a value", a);
			i++;
			if (!strcmp(a, "--fit"))
				fo.trace = v;
			else if (!strcmp(a, "--model")) {
				if (strcmp(v, "phase") && strcmp(v, "iid"))
					return cli_usage_error("gen", "--model: --fit writes the phase or the iid model, not '%s'", v);
				fo.iid = !strcmp(v, "iid");
			}
			else if (!strcmp(a, "--bins")) {
				if (as_parse_u64(v, &fo.bins) || fo.bins < 1 || fo.bins > 4096)
					return cli_usage_error("gen", "--bins: '%s' is not a whole number in 1 .. 4096", v);
				fo.bins_auto = 0;
			} else
				out = v;
		} else {
			return cli_usage_error("gen", "--fit takes TRACE, --bins N, --model phase|iid and -o PARAMS, not '%s'", a);
		}
	}
	if (!fo.trace)
		return cli_usage_error("gen", "--fit needs a TRACE");
	as_err err = { 0, "" };
	if (as_outputs_check(&out, 1, &fo.trace, 1, &err))
		return cli_report(&err);
	as_outfile of;
	if (as_outfile_open(&of, out, &err))
		return cli_report(&err);
	int rc = gen_fit(&fo, of.fp, &err);
	if (as_outfile_close(&of, !rc, &err) || rc)
		return cli_report(&err);
	return 0;
}

int cmd_gen(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--fit"))
			return do_fit(argc, argv);
	if (argc < 2)
		return cli_usage_error("gen", "expected a MODEL (train, serve, iid, phase) or --fit TRACE");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(gen_usage, stdout);
		return 0;
	}
	const char *name = argv[1];
	int first = 2;
	char fmodel[64];
	as_err err = { 0, "" };
	if (name[0] == '-') { /* the model from the first --params file */
		name = NULL;
		first = 1;
		for (int i = 1; i + 1 < argc && !name; i++)
			if (!strcmp(argv[i], "--params")) {
				if (file_model(argv[i + 1], fmodel, sizeof fmodel, &err))
					return cli_report(&err);
				if (fmodel[0])
					name = fmodel;
			}
		if (!name)
			return cli_usage_error("gen", "expected a MODEL first (train, serve, iid, phase), or a --params file with a 'model' line");
	}
	const gen_model *mod = gen_model_find(name);
	if (!mod) {
		const char *names[] = { "train", "serve", "iid", "phase" };
		const char *near = as_closest(name, names, 4);
		return cli_usage_error("gen", "'%s' is not a model (train, serve, iid, phase)%s%s%s", name, near ? ": did you mean '" : "",
			near ? near : "", near ? "'?" : "");
	}
	void *m = mod->make();
	genopts c = { .seed = 1, .max_events = GEN_DEFAULT_MAX_EVENTS, .frag = { 0, 2 * AS_MiB, 2, NULL, 0 } };
	const char *ins[64];
	size_t nins = 0;
	int rc = 0;
	for (int i = first; i < argc && !rc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			mod->destroy(m);
			return model_help(mod);
		}
		if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (i + 1 >= argc) {
				rc = as_fail(&err, AS_EXIT_USAGE, "%s needs a value", a);
				break;
			}
			c.out = argv[++i];
			continue;
		}
		if (strncmp(a, "--", 2) || !a[2]) {
			rc = as_fail(&err, AS_EXIT_USAGE, "unexpected argument '%s' (options are --name VALUE)", a);
			break;
		}
		const char *nm = a + 2, *eq = strchr(nm, '=');
		size_t nlen = eq ? (size_t)(eq - nm) : strlen(nm);
		const char *val = eq ? eq + 1 : NULL;
		if (!val) {
			if (i + 1 >= argc) {
				rc = as_fail(&err, AS_EXIT_USAGE, "--%s needs a value", nm);
				break;
			}
			val = argv[++i];
		}
		if (nlen == 6 && !strncmp(nm, "output", 6)) {
			c.out = val;
		} else if (nlen == 6 && !strncmp(nm, "params", 6)) {
			if (nins == 64) {
				rc = as_fail(&err, AS_EXIT_USAGE, "more than 64 --params files");
				break;
			}
			ins[nins++] = val;
			rc = read_params(mod, m, &c, val, &err);
		} else {
			rc = apply(mod, m, &c, nm, nlen, val, &err, "");
		}
	}
	char msg[900];
	if (!rc && !c.out)
		rc = as_fail(&err, AS_EXIT_USAGE, "missing -o TRACE");
	if (!rc && mod->check(m, msg, sizeof msg))
		rc = as_fail(&err, AS_EXIT_USAGE, "%s", msg);
	if (!rc && c.frag.total && c.frag.total / c.frag.piece > c.max_events / 2)
		rc = as_fail(&err, AS_EXIT_USAGE, "--fragment %" PRIu64 " in pieces of %" PRIu64 " bytes is more than --max-events "
			"%" PRIu64 " allows", c.frag.total, c.frag.piece, c.max_events);
	if (!rc && as_outputs_check(&c.out, 1, ins, nins, &err))
		rc = -1;
	if (rc) {
		mod->destroy(m);
		if (err.code == AS_EXIT_USAGE) {
			fprintf(stderr, "%s: error: gen: %s\nTry 'allocsim gen %s --help'.\n", as_progname, err.msg, mod->name);
			return AS_EXIT_USAGE;
		}
		return cli_report(&err);
	}
	cli_catch_signals();
	gen_ctx g;
	gen_ctx_init(&g, c.seed, c.max_events);
	gen_fragment_begin(&g, &c.frag);
	mod->run(m, &g);
	gen_fragment_end(&g, &c.frag);
	if (g.over) {
		as_fail(&err, AS_EXIT_USAGE, "gen: the %s model draws more than --max-events %" PRIu64 " events (at most %llu): "
			"nothing was written; shrink the model or raise --max-events", mod->name, c.max_events,
			(unsigned long long)GEN_HARD_MAX_EVENTS);
		rc = -1;
	} else if (cli_interrupted) {
		as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
		rc = -1;
	} else {
		rc = write_trace(&g, c.out, mod->name, c.seed, &err);
	}
	gen_ctx_free(&g);
	mod->destroy(m);
	return rc ? cli_report(&err) : 0;
}

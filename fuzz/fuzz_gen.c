/* fuzz_gen.c - gen's models under arbitrary option lines ("MODEL" first, then "name value" lines,
 * as a --params file has them), drawn with at most 20000 events: a bad value is refused with a
 * message, a good set draws without a fault. */
#include "fuzz_common.h"
#include "gen/gen.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = 0;
	char *save = NULL, *line = strtok_r(s, "\n", &save);
	const gen_model *mod = line ? gen_model_find(line) : NULL;
	if (!mod) {
		free(s);
		return 0;
	}
	void *m = mod->make();
	char msg[1024];
	int bad = 0;
	while (!bad && (line = strtok_r(NULL, "\n", &save))) {
		char *v = strchr(line, ' ');
		if (!v)
			continue;
		*v++ = 0;
		const gen_opt *o = mod->opts(m);
		for (; o->name && strcmp(o->name, line); o++)
			;
		if (!o->name)
			continue;
		msg[0] = 0;
		if (gen_opt_set(o, m, v, msg, sizeof msg)) {
			if (!msg[0])
				abort(); /* refused without a message */
			bad = 1;
		}
	}
	if (!bad && !mod->check(m, msg, sizeof msg)) {
		gen_ctx g;
		gen_ctx_init(&g, 1, 20000);
		mod->run(m, &g);
		if (!g.over && g.buf.n > 20000)
			abort();
		gen_ctx_free(&g);
	}
	mod->destroy(m);
	free(s);
	return 0;
}

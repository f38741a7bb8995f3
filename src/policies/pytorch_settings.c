/* pytorch_settings.c - what the pytorch policies make of their settings on one trace (as_policy_ops.prepare,
 * .same_settings): the release a snapshot's fields imply (version:2.N), the warnings that apply to a run,
 * and the comparison with the settings a snapshot recorded. Every command goes through here, so a trace
 * under one setting gives one row whatever command produced it (issue 36). */
#include "pytorch.h"
#include "readers/trace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* conf without allocsim's own version:2.N item (the pytorch policy's; never a PyTorch key). */
static char *strip_version(const char *conf)
{
	char *out = xmalloc(strlen(conf) + 1), *o = out;
	const char *p = conf;
	while (*p) {
		const char *end = strchr(p, ','), *k = p;
		size_t len = end ? (size_t)(end - p) : strlen(p);
		while (k < p + len && (*k == ' ' || *k == '\t'))
			k++;
		int is_version = !strncmp(k, "version", 7) && k + 7 <= p + len;
		if (is_version) {
			const char *c = k + 7;
			while (c < p + len && (*c == ' ' || *c == '\t'))
				c++;
			is_version = c < p + len && *c == ':';
		}
		if (!is_version) {
			if (o != out)
				*o++ = ',';
			memcpy(o, p, len);
			o += len;
		}
		p += len + (end ? 1 : 0);
	}
	*o = 0;
	return out;
}

int as_pytorch_same_settings(const char *recorded, const char *config)
{
	char *c = strip_version(config);
	int same = !strcmp(recorded, c);
	free(c);
	return same;
}

/* Both pytorch policies: garbage_collection_threshold acts only under a memory limit (PyTorch:
 * set_per_process_memory_fraction), which comes from --capacity alone (so does the recording's, whose
 * out-of-memory errors a run without one does not reproduce); private pools are kept. */
unsigned as_pytorch_warnings(const char *config, uint64_t capacity)
{
	unsigned w = AS_WARN_UNNAMED_POOLS;
	if (!capacity) {
		w |= AS_WARN_RECORDED_OOMS | (strstr(config, "garbage_collection_threshold") ? AS_WARN_GC_NO_CAPACITY : 0);
		/* per_process_memory_fraction is PyTorch's limit from the start (the DeviceCachingAllocator
		 * constructor's setMemoryFraction); here the limit is --capacity's or --fraction's alone */
		pt_conf c;
		as_err e;
		if (strstr(config, "per_process_memory_fraction") && !pt_conf_parse(&c, config, &e) && c.fraction < 1.0)
			w |= AS_WARN_FRACTION_NO_CAPACITY | (c.throw_on_oom ? AS_WARN_THROW_NO_CAPACITY : 0);
	}
	return w;
}

/* The release a snapshot's fields imply, appended as version:2.N when -c names none and it is older
 * than the default (2.11). */
unsigned as_pytorch_prepare(char **conf, const as_meta *m, uint64_t capacity)
{
	int lo, hi;
	char why[512];
	if (as_pyver_range(m, &lo, &hi, why, sizeof why) == 1 && hi < 11) {
		char *bare = strip_version(*conf);
		int given = strcmp(bare, *conf) != 0;
		free(bare);
		if (!given) {
			size_t n = strlen(*conf) + 16;
			char *c = xmalloc(n);
			snprintf(c, n, "%s%sversion:2.%d", *conf, **conf ? "," : "", hi);
			free(*conf);
			*conf = c;
		}
	}
	return as_pytorch_warnings(*conf, capacity);
}

/* meta.c - a trace's metadata (as_meta): its release, shared by every reader, the decoded
 * traces and the binary format. */
#include "readers/trace.h"
#include <stdlib.h>
#include <string.h>

void as_meta_free(as_meta *m)
{
	for (size_t i = 0; i < m->nsegments; i++)
		free(m->segments[i].blocks);
	free(m->segments);
	free(m->settings);
	free(m->device_entries);
	memset(m, 0, sizeof(*m));
}

/* segview.c - the block arrays of segment views (AS_Q_SEGMENTS), shared by every policy. */
#include "policy.h"

void as_segbuf_push(as_segbuf *b, uint64_t size, int state)
{
	AS_GROW2(b->sizes, b->states, b->n, b->cap, 64);
	b->sizes[b->n] = size;
	b->states[b->n++] = state;
	b->bytes += size;
}

void as_segbuf_emit(as_segbuf *b, as_seg_view *v, as_seg_cb cb, void *ctx)
{
	v->nblocks = b->n;
	v->block_sizes = b->sizes;
	v->block_states = b->states;
	if (!v->size)
		v->size = b->bytes;
	cb(ctx, v);
	b->n = 0;
	b->bytes = 0;
}

void as_segbuf_free(as_segbuf *b)
{
	free(b->sizes);
	free(b->states);
	*b = (as_segbuf){ 0 };
}

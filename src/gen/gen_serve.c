/* gen_serve.c - the serve model: a KV-cache inference server, one decode iteration at a time.
 *
 * Requests arrive with gamma-distributed gaps (shape below 1: bursts), bring a lognormal prompt and
 * want a lognormal number of output tokens. Up to --max-batch run at once. Each holds its KV cache
 * as one buffer sized for prompt + --max-new tokens at admission (contiguous), as buffers
 * re-allocated larger every --grow-chunk tokens (grow: a cache concatenated as it grows, the
 * unpaged HF-style cache), or as fixed pages of --page-tokens (paged). With --kv-budget, a request
 * that cannot get its next KV bytes preempts the newest running one (its cache freed, its prefill
 * redone later). Every iteration makes activation and logit temporaries. */
#include "gen/gen.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { KV_CONTIGUOUS, KV_GROW, KV_PAGED };

typedef struct req {
	uint64_t prompt, out, done, stream;
	double arrive;
	uint64_t *blk;   /* KV buffers: pages, or one per layer group */
	size_t nblk, capblk;
	uint64_t tokens_held;  /* tokens the buffers hold */
} req;

typedef struct serve {
	uint64_t requests, max_batch, max_new, max_len, kv_per_token, page, grow_chunk, kv_groups, act_per_token, vocab;
	uint64_t budget, streams;
	int kv;
	double arrival_shape, arrival_mean;
	gen_dist prompt, output;
	gen_opt opts[20];
} serve;

static void *make(void)
{
	serve *m = xcalloc(1, sizeof *m);
	char msg[256];
	m->requests = 1000, m->max_batch = 32, m->max_new = 512, m->max_len = 4096;
	m->kv_per_token = 512 * 1024; /* 2 (K, V) x 32 layers x 4096 x fp16: a 7B model */
	m->page = 16, m->grow_chunk = 16, m->kv_groups = 1, m->act_per_token = 64 * 1024, m->vocab = 32000;
	m->streams = 1, m->kv = KV_GROW;
	m->arrival_shape = 0.5, m->arrival_mean = 4;
	gen_dist_parse(&m->prompt, "lognormal:256,1", msg, sizeof msg);
	gen_dist_parse(&m->output, "lognormal:128,1", msg, sizeof msg);
	const gen_opt o[] = {
		{ "requests", GO_U64, &m->requests, 1, 1e6, 0, 0, "requests to serve (1000)" },
		{ "arrival-shape", GO_DBL, &m->arrival_shape, 0.01, 100, 0, 0, "gamma shape of the gaps between arrivals (0.5: bursty)" },
		{ "arrival-mean", GO_DBL, &m->arrival_mean, 0, 1e6, 0, 0, "mean gap between arrivals, in decode iterations (4)" },
		{ "prompt", GO_DIST, &m->prompt, 0, 0, 0, 0, "prompt tokens (lognormal:256,1)" },
		{ "output", GO_DIST, &m->output, 0, 0, 0, 0, "output tokens (lognormal:128,1)" },
		{ "max-new", GO_U64, &m->max_new, 1, 1 << 20, 0, 0, "output tokens are clamped to it; contiguous reserves it (512)" },
		{ "max-len", GO_U64, &m->max_len, 2, 1 << 22, 0, 0, "prompts are clamped to it minus --max-new (4096)" },
		{ "kv", GO_ENUM, &m->kv, 0, 0, "contiguous|grow|paged", 0, "KV-cache layout (grow)" },
		{ "kv-bytes-per-token", GO_SIZE, &m->kv_per_token, 1, (double)AS_GiB, 0, 0, "KV bytes per token, all layers (512KiB)" },
		{ "kv-groups", GO_U64, &m->kv_groups, 1, 256, 0, 0, "contiguous/grow: buffers per request (layers or K/V apart) (1)" },
		{ "page-tokens", GO_U64, &m->page, 1, 1 << 16, 0, 0, "paged: tokens per page (16)" },
		{ "grow-chunk", GO_U64, &m->grow_chunk, 1, 1 << 16, 0, 0, "grow: tokens added per re-allocation (16)" },
		{ "max-batch", GO_U64, &m->max_batch, 1, 65536, 0, 0, "requests running at once (32)" },
		{ "kv-budget", GO_SIZE, &m->budget, 0, (double)(AS_MAX_REQUEST - 1), 0, 0, "KV bytes allowed before preemption (0: no limit)" },
		{ "act-bytes-per-token", GO_SIZE, &m->act_per_token, 0, (double)AS_GiB, 0, 0, "activation temporaries per token in flight (64KiB)" },
		{ "vocab", GO_U64, &m->vocab, 1, 1 << 22, 0, 0, "vocabulary: logits are batch x vocab x 4 bytes (32000)" },
		{ "streams", GO_U64, &m->streams, 1, 64, 0, 0, "engines on their own streams, requests dealt round-robin (1)" },
		{ 0 },
	};
	GEN_OPTS_COPY(m->opts, o);
	return m;
}

static const gen_opt *opts(void *m) { return ((serve *)m)->opts; }

static int check(void *mv, char *msg, size_t msglen)
{
	serve *m = mv;
	if (m->max_new >= m->max_len) {
		snprintf(msg, msglen, "--max-new %llu leaves no room for a prompt in --max-len %llu", (unsigned long long)m->max_new,
			(unsigned long long)m->max_len);
		return -1;
	}
	if ((double)m->max_len * (double)m->kv_per_token >= (double)AS_MAX_REQUEST) {
		snprintf(msg, msglen, "--max-len x --kv-bytes-per-token exceeds the largest request (2^60 - 1 bytes)");
		return -1;
	}
	return 0;
}

static void blk_push(req *r, uint64_t id)
{
	AS_GROW(r->blk, r->nblk, r->capblk, 8);
	r->blk[r->nblk++] = id;
}

typedef struct state { serve *m; gen_ctx *g; uint64_t kv_live; } state;

static void release(state *s, req *r)
{
	for (size_t i = 0; i < r->nblk; i++)
		gen_free(s->g, r->blk[i]);
	r->nblk = 0;
	s->kv_live -= r->tokens_held * s->m->kv_per_token;
	r->tokens_held = 0;
}

/* Makes r's cache hold 'tokens' tokens; 0, or -1 when the budget says no. */
static int hold(state *s, req *r, uint64_t tokens)
{
	serve *m = s->m;
	if (tokens <= r->tokens_held)
		return 0;
	uint64_t want = tokens;
	if (m->kv == KV_CONTIGUOUS)
		want = r->tokens_held ? tokens : tokens + m->max_new; /* reserved at admission */
	else if (m->kv == KV_GROW)
		want = (tokens + m->grow_chunk - 1) / m->grow_chunk * m->grow_chunk;
	else
		want = (tokens + m->page - 1) / m->page * m->page;
	if (want <= r->tokens_held)
		return 0;
	if (m->budget && s->kv_live + (want - r->tokens_held) * m->kv_per_token > m->budget)
		return -1;
	if (m->kv == KV_PAGED) {
		for (uint64_t t = r->tokens_held; t < want; t += m->page)
			blk_push(r, gen_alloc(s->g, m->page * m->kv_per_token, r->stream));
	} else {
		/* a new buffer per group, then the old one freed (a concatenation) */
		uint64_t per = (want * m->kv_per_token + m->kv_groups - 1) / m->kv_groups;
		for (uint64_t k = 0; k < m->kv_groups; k++) {
			uint64_t id = gen_alloc(s->g, per, r->stream);
			if (k < r->nblk) {
				gen_free(s->g, r->blk[k]);
				r->blk[k] = id;
			} else {
				blk_push(r, id);
			}
		}
	}
	s->kv_live += (want - r->tokens_held) * m->kv_per_token;
	r->tokens_held = want;
	return 0;
}

static void run(void *mv, gen_ctx *g)
{
	serve *m = mv;
	state s = { m, g, 0 };
	uint64_t n = m->requests;
	req *rq = xcalloc(n, sizeof *rq);
	double t = 0;
	for (uint64_t i = 0; i < n; i++) {
		t += m->arrival_mean > 0 ? gsl_ran_gamma(g->rng, m->arrival_shape, m->arrival_mean / m->arrival_shape) : 0;
		rq[i].arrive = t;
		double p = gen_dist_draw(&m->prompt, g->rng), o = gen_dist_draw(&m->output, g->rng);
		uint64_t pmax = m->max_len - m->max_new;
		rq[i].prompt = p < 1 ? 1 : p > (double)pmax ? pmax : (uint64_t)llround(p);
		rq[i].out = o < 1 ? 1 : o > (double)m->max_new ? m->max_new : (uint64_t)llround(o);
		rq[i].stream = i % m->streams;
	}
	/* waiting: a deque of request indices (preempted ones go back to the front) */
	uint64_t *wait = xcalloc(2 * n + 1, sizeof *wait), *runq = xcalloc(m->max_batch, sizeof *runq);
	size_t wh = n, wt = n, nrun = 0; /* wait[wh..wt) */
	uint64_t next = 0, finished = 0, iter = 0;
	double now = 0;
	while (finished < n && !g->over) {
		while (next < n && rq[next].arrive <= now)
			wait[wt++] = next++;
		if (!nrun && wh == wt) { /* idle: jump to the next arrival */
			now = ceil(rq[next].arrive);
			continue;
		}
		/* admit: prefill the prompt into the cache */
		uint64_t prefill = 0;
		while (nrun < m->max_batch && wh < wt) {
			req *r = &rq[wait[wh]];
			if (hold(&s, r, r->prompt + r->done)) {
				if (nrun)
					break;
				release(&s, r); /* alone it does not fit the budget: refused */
				wh++;
				finished++;
				continue;
			}
			prefill += r->prompt + r->done;
			runq[nrun++] = wait[wh++];
		}
		uint64_t act = 0, lg = 0;
		if (prefill + nrun) {
			act = gen_alloc(g, (prefill + nrun) * m->act_per_token, 0);
			lg = gen_alloc(g, nrun * m->vocab * 4, 0);
		}
		/* decode one token each */
		for (size_t i = 0; i < nrun; i++) {
			req *r = &rq[runq[i]];
			int gone = 0;
			while (hold(&s, r, r->prompt + r->done + 1)) {
				/* preempt the newest running request other than r; r alone does not fit: refused */
				size_t v = nrun - 1 == i && nrun > 1 ? nrun - 2 : nrun - 1;
				req *x = &rq[runq[v]];
				release(&s, x);
				x->done = 0;
				if (x == r)
					finished++;
				else
					wait[--wh] = runq[v];
				memmove(&runq[v], &runq[v + 1], (nrun - v - 1) * sizeof *runq);
				nrun--;
				if (x == r) {
					gone = 1;
					break;
				}
				if (v < i)
					i--;
			}
			if (gone) {
				i--;
				continue;
			}
			r->done++;
			if (r->done >= r->out) {
				release(&s, r);
				finished++;
				memmove(&runq[i], &runq[i + 1], (nrun - i - 1) * sizeof *runq);
				nrun--;
				i--;
			}
		}
		gen_free(g, lg);
		gen_free(g, act);
		now += 1;
		if (++iter % 64 == 0)
			gen_phase(g, "iter");
	}
	for (uint64_t i = 0; i < n; i++) {
		release(&s, &rq[i]);
		free(rq[i].blk);
	}
	free(rq);
	free(wait);
	free(runq);
}

static void destroy(void *mv)
{
	serve *m = mv;
	gen_dist_free(&m->prompt);
	gen_dist_free(&m->output);
	free(m);
}

const gen_model gen_model_serve = { "serve", "KV-cache serving (gamma arrivals, lognormal prompts and outputs, contiguous, "
	"growing or paged KV, preemption)", make, opts, check, run, destroy };

/* gen_train.c - the train model: training steps of a transformer or a CNN, drawn as shapes.
 *
 * Parameters live for the whole run; each step draws its sequence length, runs the forward pass
 * (activations saved for backward, temporaries freed at once), the backward pass (each saved
 * activation freed after its gradient is made; parameter gradients allocated as the backward
 * reaches their layer, as PyTorch does with zero_grad(set_to_none=True)), the optimizer (its
 * states allocated on the first step and kept; foreach temporaries) and zero_grad. */
#include "gen/gen.h"
#include <math.h>
#include <stdlib.h>

enum { ARCH_TRANSFORMER, ARCH_CNN };
enum { OPT_ADAM, OPT_SGD, OPT_NONE };

typedef struct train {
	int arch, optimizer;
	uint64_t layers, hidden, heads, ffn_mult, vocab, batch, max_seq, dtype, steps, streams;
	uint64_t image, channels, stages, workspace, ranks, zero, tp;
	gen_dist seq;
	gen_opt opts[24];
	/* state */
	uint64_t *params;     /* sizes */
	size_t nparams, capparams;
	uint64_t *states;     /* optimizer states' ids */
	size_t nstates;
} train;

static void *make(void)
{
	train *m = xcalloc(1, sizeof *m);
	char msg[256];
	m->layers = 12, m->hidden = 768, m->heads = 12, m->ffn_mult = 4, m->vocab = 50257, m->batch = 8;
	m->max_seq = 1024, m->dtype = 4, m->steps = 10, m->streams = 1;
	m->image = 224, m->channels = 64, m->stages = 4, m->workspace = 32 * AS_MiB, m->ranks = 1, m->zero = 0, m->tp = 1;
	gen_dist_parse(&m->seq, "uniform:128,1024", msg, sizeof msg);
	const gen_opt o[] = {
		{ "arch", GO_ENUM, &m->arch, 0, 0, "transformer|cnn", 0, "transformer (default) or cnn" },
		{ "layers", GO_U64, &m->layers, 1, 1024, 0, 0, "transformer layers, or CNN blocks per stage (12)" },
		{ "hidden", GO_U64, &m->hidden, 1, 1 << 16, 0, 0, "hidden size (768)" },
		{ "heads", GO_U64, &m->heads, 1, 1024, 0, 0, "attention heads (12)" },
		{ "ffn-mult", GO_U64, &m->ffn_mult, 1, 64, 0, 0, "feed-forward width / hidden (4)" },
		{ "vocab", GO_U64, &m->vocab, 1, 1 << 22, 0, 0, "vocabulary (50257)" },
		{ "batch", GO_U64, &m->batch, 1, 1 << 16, 0, 0, "batch size (8)" },
		{ "seq", GO_DIST, &m->seq, 0, 0, 0, 0, "sequence length per step (uniform:128,1024)" },
		{ "max-seq", GO_U64, &m->max_seq, 1, 1 << 20, 0, 0, "sequence lengths are clamped to it (1024)" },
		{ "dtype-bytes", GO_U64, &m->dtype, 1, 8, 0, 0, "bytes per element (4)" },
		{ "optimizer", GO_ENUM, &m->optimizer, 0, 0, "adam|sgd|none", 0, "adam (2 states), sgd (momentum), none" },
		{ "steps", GO_U64, &m->steps, 1, 1000000, 0, 0, "training steps (10)" },
		{ "streams", GO_U64, &m->streams, 1, 2, 0, 0, "2: input copies and gradient buckets on a side stream (1)" },
		{ "image", GO_U64, &m->image, 8, 8192, 0, 0, "cnn: image side in pixels (224)" },
		{ "channels", GO_U64, &m->channels, 1, 1 << 14, 0, 0, "cnn: channels of the first stage (64)" },
		{ "stages", GO_U64, &m->stages, 1, 8, 0, 0, "cnn: stages, each halving the side and doubling the channels (4)" },
		{ "workspace", GO_SIZE, &m->workspace, 0, (double)(64 * AS_GiB), 0, 0, "cnn: convolution workspace per call (32MiB)" },
		{ "ranks", GO_U64, &m->ranks, 1, 65536, 0, 0, "data-parallel ranks; the trace is one rank's (1)" },
		{ "zero", GO_U64, &m->zero, 0, 2, 0, 0, "ZeRO stage: 1 shards the optimizer states over --ranks, 2 the gradients too (0)" },
		{ "tp", GO_U64, &m->tp, 1, 1024, 0, 0, "transformer: tensor-parallel ranks splitting heads, MLP and vocabulary (1)" },
		{ 0 },
	};
	GEN_OPTS_COPY(m->opts, o);
	return m;
}

static const gen_opt *opts(void *m) { return ((train *)m)->opts; }

/* n split over the tensor-parallel ranks (rounded up) */
static uint64_t tp(const train *m, uint64_t n) { return (n + m->tp - 1) / m->tp; }

static void param(train *m, uint64_t n)
{
	AS_GROW(m->params, m->nparams, m->capparams, 64);
	m->params[m->nparams++] = n * m->dtype;
}

/* The parameter list: sizes in bytes, in the order the model creates them. */
static void build_params(train *m)
{
	uint64_t H = m->hidden, F = m->ffn_mult * H;
	if (m->arch == ARCH_TRANSFORMER) {
		param(m, tp(m, m->vocab) * H);
		param(m, m->max_seq * H);
		for (uint64_t l = 0; l < m->layers; l++) {
			param(m, H), param(m, H), param(m, tp(m, 3 * H) * H), param(m, tp(m, 3 * H)), param(m, tp(m, H) * H), param(m, H);
			param(m, H), param(m, H), param(m, tp(m, F) * H), param(m, tp(m, F)), param(m, H * tp(m, F)), param(m, H);
		}
		param(m, H), param(m, H);
		return;
	}
	uint64_t c = m->channels;
	param(m, 3 * c * 49), param(m, c), param(m, c);
	for (uint64_t s = 0; s < m->stages; s++, c *= 2)
		for (uint64_t b = 0; b < m->layers; b++) {
			uint64_t cin = b == 0 && s ? c / 2 : c;
			param(m, cin * c * 9), param(m, c), param(m, c);
			param(m, c * c * 9), param(m, c), param(m, c);
		}
	param(m, c / 2 * 1000), param(m, 1000);
}

static int check(void *mv, char *msg, size_t msglen)
{
	train *m = mv;
	if (m->tp > 1 && (m->arch != ARCH_TRANSFORMER || m->heads % m->tp)) {
		snprintf(msg, msglen, "--tp %llu needs the transformer and --heads a multiple of it", (unsigned long long)m->tp);
		return -1;
	}
	if (m->zero && m->ranks < 2) {
		snprintf(msg, msglen, "--zero %llu shards over --ranks, which is 1", (unsigned long long)m->zero);
		return -1;
	}
	if (m->arch == ARCH_TRANSFORMER && m->hidden % m->heads) {
		snprintf(msg, msglen, "--hidden %llu is not a multiple of --heads %llu", (unsigned long long)m->hidden,
			(unsigned long long)m->heads);
		return -1;
	}
	/* the largest activation must be a valid request */
	double S = (double)m->max_seq, B = (double)m->batch, e = (double)m->dtype;
	double big = m->arch == ARCH_TRANSFORMER ? fmax(B * (double)m->heads * S * S, fmax(B * S * (double)m->vocab,
		B * S * (double)(m->ffn_mult * m->hidden))) * e
		: B * (double)m->channels * (double)m->image * (double)m->image * e;
	if (big >= (double)AS_MAX_REQUEST) {
		snprintf(msg, msglen, "the largest activation (%.3g bytes) exceeds the largest request (2^60 - 1 bytes)", big);
		return -1;
	}
	return 0;
}

/* Saved activations of the step, freed in reverse order by the backward pass. */
typedef struct saved { uint64_t *id, *size; size_t n, cap; } saved;
static void save(gen_ctx *g, saved *s, uint64_t size)
{
	AS_GROW2(s->id, s->size, s->n, s->cap, 256);
	s->size[s->n] = size;
	s->id[s->n++] = gen_alloc(g, size, 0);
}
static void temp(gen_ctx *g, uint64_t size)
{
	gen_free(g, gen_alloc(g, size, 0));
}

static void forward(train *m, gen_ctx *g, saved *sv, uint64_t S)
{
	uint64_t B = m->batch, e = m->dtype, H = m->hidden, F = m->ffn_mult * H, T = B * S;
	if (m->arch == ARCH_TRANSFORMER) {
		save(g, sv, T * H * e); /* embeddings */
		for (uint64_t l = 0; l < m->layers; l++) {
			save(g, sv, T * H * e), save(g, sv, T * 4), save(g, sv, T * 4); /* ln1 out, mean, rstd */
			save(g, sv, T * tp(m, 3 * H) * e);                             /* qkv */
			uint64_t sc = B * tp(m, m->heads) * S * S * e;
			uint64_t pre = gen_alloc(g, sc, 0);                              /* scores */
			save(g, sv, sc);                                                 /* softmax */
			gen_free(g, pre);
			save(g, sv, T * tp(m, H) * e);                                   /* attention out */
			temp(g, T * H * e);                                              /* projection */
			save(g, sv, T * H * e);                                          /* residual */
			save(g, sv, T * H * e), save(g, sv, T * 4), save(g, sv, T * 4); /* ln2 */
			save(g, sv, T * tp(m, F) * e), save(g, sv, T * tp(m, F) * e);    /* fc, gelu */
			temp(g, T * H * e);
			save(g, sv, T * H * e);                                          /* residual */
		}
		save(g, sv, T * H * e);                         /* ln_f */
		save(g, sv, T * tp(m, m->vocab) * e);           /* logits */
		save(g, sv, T * tp(m, m->vocab) * e);           /* log_softmax */
		temp(g, 4);                                     /* loss */
		return;
	}
	uint64_t c = m->channels, side = m->image / 2;
	save(g, sv, B * 3 * m->image * m->image * e);
	temp(g, m->workspace);
	save(g, sv, B * c * side * side * e), save(g, sv, B * c * side * side * e);
	side /= 2;
	save(g, sv, B * c * side * side * e);           /* max pool */
	for (uint64_t s = 0; s < m->stages; s++, c *= 2) {
		if (s)
			side = side > 1 ? side / 2 : 1;
		for (uint64_t b = 0; b < m->layers; b++) {
			uint64_t a = B * c * side * side * e;
			for (int k = 0; k < 2; k++) {
				uint64_t ws = m->workspace ? gen_alloc(g, m->workspace, 0) : 0;
				save(g, sv, a);                 /* conv out */
				gen_free(g, ws);
				save(g, sv, a);                 /* bn out (relu in place) */
				save(g, sv, c * 4), save(g, sv, c * 4); /* bn saved mean, invstd */
			}
			save(g, sv, a);                         /* residual */
		}
	}
	save(g, sv, B * c / 2 * e);                     /* pooled */
	save(g, sv, B * 1000 * e);                      /* logits */
	temp(g, 4);
}

static void run(void *mv, gen_ctx *g)
{
	train *m = mv;
	build_params(m);
	uint64_t *grads = xcalloc(m->nparams, sizeof *grads);
	for (size_t i = 0; i < m->nparams; i++)
		gen_alloc(g, m->params[i], 0);            /* the model's parameters: never freed */
	saved sv = { 0 };
	uint64_t pbytes = 0, zshard = 0;
	for (size_t i = 0; i < m->nparams; i++)
		pbytes += m->params[i];
	for (uint64_t step = 0; step < m->steps && !g->over; step++) {
		gen_phase(g, "step");
		double d = gen_dist_draw(&m->seq, g->rng);
		uint64_t S = d < 1 ? 1 : d > (double)m->max_seq ? m->max_seq : (uint64_t)llround(d);
		if (m->arch == ARCH_CNN)
			S = 1;
		uint64_t input = m->arch == ARCH_TRANSFORMER ? m->batch * S * 8 : m->batch * 3 * m->image * m->image * m->dtype;
		uint64_t in_side = m->streams > 1 ? gen_alloc(g, input, 1) : 0; /* the batch copied in on a side stream */
		uint64_t in_main = gen_alloc(g, input, 0);
		gen_free(g, in_side);
		sv.n = 0;
		forward(m, g, &sv, S);
		/* backward: each saved activation's gradient is made, then it is freed; the parameter
		 * gradients of a layer appear as the pass reaches it (parameters in reverse order) */
		size_t p = m->nparams, per = sv.n / (m->nparams ? m->nparams : 1) + 1;
		uint64_t prev = 0, bucket = 0, bucket_fill = 0, zfill = 0;
		size_t zfrom = m->nparams;
		uint64_t *buckets = NULL;
		size_t nb = 0;
		for (size_t i = sv.n; i-- > 0;) {
			uint64_t gi = gen_alloc(g, sv.size[i], 0);
			gen_free(g, prev);
			gen_free(g, sv.id[i]);
			prev = gi;
			while (p && (sv.n - i) * m->nparams >= (m->nparams - p + 1) * sv.n) {
				p--;
				grads[p] = gen_alloc(g, m->params[p], 0);
				if (m->zero >= 2) { /* reduce-scattered into the rank's shard in 25 MiB buckets, then freed */
					zfill += m->params[p];
					if (zfill >= 25 * AS_MiB) {
						for (size_t q = p; q < zfrom; q++)
							gen_free(g, grads[q]), grads[q] = 0;
						zfrom = p;
						zfill = 0;
					}
				}
				if (m->streams > 1) { /* gradient buckets of 25 MiB reduced on the side stream */
					bucket_fill += m->params[p];
					if (!bucket || bucket_fill >= 25 * AS_MiB) {
						bucket = gen_alloc(g, 25 * AS_MiB, 1);
						buckets = xrealloc(buckets, (nb + 1) * sizeof *buckets);
						buckets[nb++] = bucket;
						bucket_fill = 0;
					}
				}
			}
			(void)per;
		}
		gen_free(g, prev);
		while (p) {
			p--;
			grads[p] = gen_alloc(g, m->params[p], 0);
		}
		if (m->zero >= 2) {
			for (size_t q = 0; q < zfrom; q++)
				gen_free(g, grads[q]), grads[q] = 0;
			if (!zshard)
				zshard = gen_alloc(g, (pbytes + m->ranks - 1) / m->ranks, 0); /* the rank's gradient shard */
		}
		gen_free(g, in_main);
		for (size_t i = 0; i < nb; i++)
			gen_free(g, buckets[i]);
		free(buckets);
		/* optimizer */
		int nst = m->optimizer == OPT_ADAM ? 2 : m->optimizer == OPT_SGD ? 1 : 0;
		if (nst && !m->states && m->zero) { /* ZeRO: each state one flat shard of the parameters */
			m->states = xcalloc((size_t)nst, sizeof *m->states);
			for (int k = 0; k < nst; k++)
				m->states[m->nstates++] = gen_alloc(g, (pbytes + m->ranks - 1) / m->ranks, 0);
		} else if (nst && !m->states) {
			m->states = xcalloc(m->nparams * (size_t)nst, sizeof *m->states);
			for (size_t i = 0; i < m->nparams; i++)
				for (int k = 0; k < nst; k++)
					m->states[m->nstates++] = gen_alloc(g, m->params[i], 0);
		}
		if (nst && m->zero) { /* the shard's update, then the updated shard all-gathered */
			temp(g, (pbytes + m->ranks - 1) / m->ranks);
		} else if (nst) { /* foreach kernels: one temporary per parameter, freed together */
			uint64_t *tmp = xcalloc(m->nparams, sizeof *tmp);
			for (size_t i = 0; i < m->nparams; i++)
				tmp[i] = gen_alloc(g, m->params[i], 0);
			for (size_t i = 0; i < m->nparams; i++)
				gen_free(g, tmp[i]);
			free(tmp);
		}
		for (size_t i = 0; i < m->nparams; i++) /* zero_grad(set_to_none=True) */
			gen_free(g, grads[i]);
	}
	free(grads);
	free(sv.id);
	free(sv.size);
}

static void destroy(void *mv)
{
	train *m = mv;
	gen_dist_free(&m->seq);
	free(m->params);
	free(m->states);
	free(m);
}

const gen_model gen_model_train = { "train", "training steps of a transformer or CNN (parameters, gradients, optimizer "
	"states, saved activations, temporaries)", make, opts, check, run, destroy };

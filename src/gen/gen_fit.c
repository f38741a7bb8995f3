/* gen_fit.c - gen --fit: the phase model's parameters from a real trace.
 *
 * Time is counted in allocations: allocation j happens at j, a free between allocations j-1 and j
 * at j - 0.5. An allocation that is never freed, or lives more than half the trace, is persistent
 * (parameters, gradients kept across steps, optimizer states). The rest is transient; its live
 * bytes rise and fall once per step (a training step, a batch), and the steps are cut where they
 * fall below a quarter of their peak after having passed half of it. Within step k (allocations
 * [b_k, b_k+1)) an allocation at x sits at step time k + (x - b_k) / n_k; its bin is the part of the
 * step it starts in, its lifetime the step time between its allocation and its free. Allocations
 * of 1 MiB or more are the step's shape-dependent ones: their bytes per step, over the median
 * step's, give the step's scale, and their sizes are fitted relative to it. Sizes are kept to
 * 1/64 octave (below 1 MiB: to 512 bytes, the allocator's own rounding), lifetimes to 1/8 octave. */
#include "gen/gen.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fa { uint64_t size; double start, end; int persist; uint32_t step; } fa;
typedef struct frow { uint8_t kind; uint32_t bin; double scales; uint64_t size; int64_t qlife; uint64_t count; double off, exact; } frow;
/* exact: a slot's lifetime as measured (the median over the steps), else -1: qlife's */

static int row_cmp(const void *a, const void *b)
{
	const frow *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->bin != y->bin)
		return x->bin < y->bin ? -1 : 1;
	if (x->scales != y->scales)
		return x->scales < y->scales ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	return x->qlife < y->qlife ? -1 : x->qlife > y->qlife;
}

static int sz_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static uint64_t qsize(double s)
{
	if (s < (double)AS_MiB) {
		uint64_t v = (uint64_t)ceil(s);
		return v <= 512 ? 512 : (v + 511) / 512 * 512;
	}
	double q = round(log2(s) * 64) / 64;
	uint64_t v = (uint64_t)llround(exp2(q));
	return (v + 511) / 512 * 512;
}

#define LIFE_ZERO INT64_MIN
#define TS_MAX 1000 /* Theil-Sen: pairs of at most this many steps */

/* The exponent of size ~ scale^e over n (log scale, log size) points: the Theil-Sen median slope of
 * at most TS_MAX steps' pairs for sizes with a median of 1 MiB or more (0 below), rounded to a
 * quarter and clamped to [0, 3]. slopes holds TS_MAX * TS_MAX / 2 + 1 doubles of scratch. */
static double size_exponent(const double *lx, const double *ly, size_t n, double smed, double *slopes)
{
	double e = 0;
	if (smed >= (double)AS_MiB) {
		size_t ns = 0;
		size_t st = n > TS_MAX ? (n + TS_MAX - 1) / TS_MAX : 1;
		for (size_t p1 = 0; p1 < n; p1 += st)
			for (size_t p2 = p1 + st; p2 < n; p2 += st)
				if (fabs(lx[p2] - lx[p1]) > 0.05)
					slopes[ns++] = (ly[p2] - ly[p1]) / (lx[p2] - lx[p1]);
		qsort(slopes, ns, sizeof *slopes, dbl_cmp);
		e = ns ? slopes[ns / 2] : 0;
	}
	return fmin(3, fmax(0, round(e * 4) / 4));
}

/* The smallest lag (in events, at most 20000, over the first 200000 events) at which the trace's
 * sequence of allocations and frees matches itself nearly as well as at the best lag; the match
 * (the fraction of equal events past the first quarter) in *match. 0 when there is none. */
static size_t period(const char *t, size_t n, double *match)
{
	if (n > 200000)
		n = 200000;
	size_t maxlag = n / 3 < 20000 ? n / 3 : 20000, from = n / 4, bestlag = 0;
	double best = 0;
	double *f = xcalloc(maxlag + 1, sizeof *f);
	for (size_t lag = 2; lag <= maxlag; lag++) {
		size_t c = 0;
		for (size_t i = from; i + lag < n; i++)
			c += t[i] == t[i + lag];
		f[lag] = n - lag > from ? (double)c / (double)(n - lag - from) : 0;
		if (f[lag] > best)
			best = f[lag];
	}
	for (size_t lag = 2; lag <= maxlag && !bestlag; lag++)
		if (f[lag] >= best - 0.002)
			bestlag = lag;
	free(f);
	*match = best;
	return bestlag;
}

/* The iid model's parameters: the sizes' and the lifetimes' empirical distributions, apart (what
 * the iid model can take: no phase, no correlation between size and lifetime). Sizes to 1/64
 * octave (below 1 MiB to 512 bytes), lifetimes in allocations to 1/8 octave; never freed: the
 * trace's length. */
static int fit_iid(const fa *a, size_t na, const char *path, FILE *out)
{
	uint64_t *sz = xcalloc(na, sizeof *sz);
	double *lf = xcalloc(na, sizeof *lf);
	for (size_t i = 0; i < na; i++) {
		sz[i] = qsize((double)a[i].size);
		double l = a[i].end < 0 ? (double)na : a[i].end - a[i].start;
		lf[i] = l < 1 ? 0 : exp2(round(log2(l) * 8) / 8);
	}
	qsort(sz, na, sizeof *sz, u64_cmp);
	qsort(lf, na, sizeof *lf, dbl_cmp);
	char *esc = as_escape(path, 0);
	fprintf(out, "# allocsim gen parameters: the iid model, fitted by 'allocsim gen --fit --model iid' (doc/generator.md)\n");
	fprintf(out, "# trace: %s\n# allocations: %zu; sizes and lifetimes drawn apart from their empirical distributions\n", esc, na);
	free(esc);
	fprintf(out, "model iid\ncount %zu\nmax-size %" PRIu64 "\nsize table:", na, AS_MAX_REQUEST - 1);
	for (size_t i = 0; i < na;) {
		size_t j = i;
		while (j < na && sz[j] == sz[i])
			j++;
		fprintf(out, "%s%" PRIu64 ":%zu", i ? "," : "", sz[i], j - i);
		i = j;
	}
	fprintf(out, "\nlifetime table:");
	for (size_t i = 0; i < na;) {
		size_t j = i;
		while (j < na && lf[j] == lf[i])
			j++;
		fprintf(out, "%s%.6g:%zu", i ? "," : "", lf[i], j - i);
		i = j;
	}
	fprintf(out, "\n");
	free(sz);
	free(lf);
	return 0;
}

int gen_fit(const gen_fit_opts *o, FILE *out, as_err *err)
{
	as_evbuf b = { 0 };
	if (as_evbuf_load(&b, o->trace, NULL, err))
		return -1;
	fa *a = NULL;
	size_t na = 0, capa = 0;
	uint64_t *slot_to = xcalloc(b.nslots ? b.nslots : 1, sizeof *slot_to);
	char *tok = xmalloc(b.n + 1);
	size_t ntok = 0;
	as_event ev;
	for (size_t i = 0; i < b.n; i++) {
		as_evbuf_event(&b, i, &ev);
		if (ev.type == EV_ALLOC) {
			AS_GROW(a, na, capa, 4096);
			a[na] = (fa){ ev.size, (double)na, -1, 0, 0 };
			slot_to[ev.slot] = na + 1;
			na++;
			tok[ntok++] = 'a';
		} else if (ev.type == EV_FREE && ev.slot < b.nslots && slot_to[ev.slot]) {
			a[slot_to[ev.slot] - 1].end = (double)na - 0.5;
			slot_to[ev.slot] = 0;
			tok[ntok++] = 'f';
		}
	}
	free(slot_to);
	char path[4096];
	snprintf(path, sizeof path, "%s", o->trace);
	as_evbuf_free(&b);
	if (!na) {
		free(a);
		free(tok);
		return as_fail(err, AS_EXIT_DATAERR, "%s: no allocations to fit", path);
	}
	if (o->iid) {
		free(tok);
		int rc = fit_iid(a, na, path, out);
		free(a);
		return rc;
	}
	/* persistent vs transient; the transient live bytes at each allocation */
	double N = (double)na;
	uint64_t npers = 0, pers_bytes = 0;
	for (size_t i = 0; i < na; i++) {
		a[i].persist = a[i].end < 0 || a[i].end - a[i].start > N / 2;
		if (a[i].persist)
			npers++, pers_bytes += a[i].size;
	}
	/* live transient bytes just before each allocation: frees by time */
	double *live = xcalloc(na + 1, sizeof *live);  /* live[j]: after the frees before alloc j, before it */
	double *delta = xcalloc(na + 1, sizeof *delta); /* bytes freed just before allocation j */
	for (size_t i = 0; i < na; i++)
		if (!a[i].persist)
			delta[(size_t)(a[i].end + 0.5)] += (double)a[i].size;
	double cur = 0, peak = 0;
	double *after = xcalloc(na, sizeof *after);
	for (size_t j = 0; j < na; j++) {
		cur -= delta[j];
		live[j] = cur;
		if (!a[j].persist)
			cur += (double)a[j].size;
		after[j] = cur;
		if (cur > peak)
			peak = cur;
	}
	/* steps: the period of the alloc/free pattern where it repeats, else the cycles of live bytes */
	size_t *cut = xcalloc(na + 2, sizeof *cut), ncut = 0;
	double match = 0;
	size_t lag = period(tok, ntok, &match), pa = 0;
	if (lag) {
		for (size_t i = ntok / 4; i < ntok / 4 + lag; i++)
			pa += tok[i] == 'a';
	}
	int periodic = lag && match >= 0.93 && pa >= 2 && pa * 2 <= na;
	cut[ncut++] = 0;
	if (periodic) {
		/* each cut at the least transient live bytes between half a period and a period and a half
		 * after the last (the first: up to two periods in, set-up makes the first step longer) */
		for (size_t c = 0;;) {
			size_t lo = c + pa / 2, hi = c ? c + pa + pa / 2 : 2 * pa;
			if (hi > na)
				hi = na;
			if (lo >= hi)
				break;
			size_t at = lo;
			for (size_t j = lo; j < hi; j++)
				if (live[j] < live[at])
					at = j;
			if (hi == na && na - at < pa / 2)
				break;
			cut[ncut++] = c = at;
		}
	} else {
		double lmax = 0;
		for (size_t j = 0; j + 1 < na; j++) {
			if (after[j] > lmax)
				lmax = after[j];
			if (lmax > peak / 4 && live[j + 1] < lmax / 4) {
				cut[ncut++] = j + 1;
				lmax = 0;
			}
		}
		/* each cut moved to the trough: the least live bytes in the first half of its step */
		for (size_t k = 1; k < ncut; k++) {
			size_t end = k + 1 < ncut ? cut[k + 1] : na, hi = cut[k] + (end - cut[k]) / 2, at = cut[k];
			for (size_t j = cut[k]; j < hi; j++)
				if (live[j] < live[at])
					at = j;
			cut[k] = at;
		}
	}
	free(tok);
	size_t K = ncut;
	cut[ncut] = na;
	free(delta);
	free(after);
	/* step of every allocation, step time, per-step scale */
	double *tau_of = xcalloc(na + 1, sizeof *tau_of); /* step time of allocation ordinal j (and of na) */
	for (size_t k = 0; k < K; k++) {
		double n = (double)(cut[k + 1] - cut[k]);
		for (size_t j = cut[k]; j < cut[k + 1]; j++) {
			tau_of[j] = (double)k + (double)(j - cut[k]) / n;
			a[j].step = (uint32_t)k;
		}
	}
	tau_of[na] = (double)K;
	/* the first step (set-up: parameters, optimizer states) and a last partial step are kept apart */
	size_t *lens = xcalloc(K, sizeof *lens);
	for (size_t k = 0; k < K; k++)
		lens[k] = cut[k + 1] - cut[k];
	int has_first = K >= 3, has_last = 0;
	if (K >= 3) {
		size_t *ml = xcalloc(K, sizeof *ml), nm = 0;
		for (size_t k = 1; k + 1 < K; k++)
			ml[nm++] = lens[k];
		qsort(ml, nm, sizeof *ml, sz_cmp);
		has_last = (double)lens[K - 1] < 0.9 * (double)ml[nm / 2];
		free(ml);
	}
	size_t r0 = has_first ? 1 : 0, r1 = K - (has_last ? 1 : 0), nrep = r1 - r0;
	double *big = xcalloc(K, sizeof *big), *sorted = xcalloc(K, sizeof *sorted);
	for (size_t i = 0; i < na; i++)
		if (!a[i].persist && a[i].size >= AS_MiB)
			big[a[i].step] += (double)a[i].size;
	memcpy(sorted, big + r0, nrep * sizeof *sorted);
	qsort(sorted, nrep, sizeof *sorted, dbl_cmp);
	double med = sorted[nrep / 2];
	/* shapes vary when the steps' sizes of 1 MiB or more differ: more distinct sizes over all the
	 * steps than 1.5 times a step's own */
	double per_step = 0;
	size_t nall = 0;
	{
		uint64_t *sz = xcalloc(na, sizeof *sz);
		for (size_t k = r0; k < r1; k++) {
			size_t n = 0;
			for (size_t j = cut[k]; j < cut[k + 1]; j++)
				if (!a[j].persist && a[j].size >= AS_MiB)
					sz[n++] = a[j].size;
			qsort(sz, n, sizeof *sz, u64_cmp);
			for (size_t j = 0; j < n; j++)
				per_step += !j || sz[j] != sz[j - 1];
		}
		size_t n = 0;
		for (size_t j = cut[r0]; j < cut[r1]; j++)
			if (!a[j].persist && a[j].size >= AS_MiB)
				sz[n++] = a[j].size;
		qsort(sz, n, sizeof *sz, u64_cmp);
		for (size_t j = 0; j < n; j++)
			nall += !j || sz[j] != sz[j - 1];
		free(sz);
		per_step /= (double)nrep;
	}
	int varies = med > 0 && sorted[0] > 0 && (double)nall > 1.5 * per_step;
	double *scale = xcalloc(K, sizeof *scale);
	for (size_t k = 0; k < K; k++)
		scale[k] = varies && big[k] > 0 && k >= r0 && k < r1 ? big[k] / med : 1;
	/* Periodic with varying shapes: slots. The steps are cut exactly a period apart, so that the
	 * j-th allocation of every step is the same tensor (its slot); a slot's size follows the step's
	 * scale s as SIZE x s^EXP, EXP its least-squares slope in log-log (0 for a weight, 1 for an
	 * activation of the sequence length, 2 for attention scores), the step's scale the median over
	 * the slots of 1 MiB or more of their size over their median size. One row per slot. */
	int slots = periodic && varies && pa <= 4096 && o->bins_auto;
	double *sexp = NULL, *ssize = NULL, *slife = NULL;
	uint64_t *scount = NULL;
	if (slots) {
		size_t at = na - 2 * pa;
		for (size_t j = na - 2 * pa; j < na - pa; j++)
			if (live[j] < live[at])
				at = j;
		ncut = 0;
		cut[ncut++] = 0;
		for (size_t c = at % pa; c < na; c += pa)
			if (c > 0)
				cut[ncut++] = c;
		K = ncut;
		cut[ncut] = na;
		for (size_t k = 0; k < K; k++) {
			double n = (double)(cut[k + 1] - cut[k]);
			for (size_t j = cut[k]; j < cut[k + 1]; j++) {
				tau_of[j] = (double)k + (double)(j - cut[k]) / n;
				a[j].step = (uint32_t)k;
			}
		}
		tau_of[na] = (double)K;
		has_first = K >= 3;
		has_last = K >= 3 && cut[K] - cut[K - 1] < pa;
		r0 = has_first ? 1 : 0, r1 = K - (has_last ? 1 : 0), nrep = r1 - r0;
		double *v = xcalloc(nrep + 1, sizeof *v), *ratio = xcalloc(nrep * pa + 1, sizeof *ratio);
		double *smed = xcalloc(pa, sizeof *smed);
		size_t *nr_k = xcalloc(nrep + 1, sizeof *nr_k);
		for (size_t j = 0; j < pa; j++) { /* each slot's median size */
			size_t n = 0;
			for (size_t k = r0; k < r1; k++)
				if (!a[cut[k] + j].persist)
					v[n++] = (double)a[cut[k] + j].size;
			qsort(v, n, sizeof *v, dbl_cmp);
			smed[j] = n ? v[n / 2] : 0;
			for (size_t k = r0; k < r1 && smed[j] >= (double)AS_MiB; k++)
				if (!a[cut[k] + j].persist)
					ratio[(k - r0) * pa + nr_k[k - r0]++] = (double)a[cut[k] + j].size / smed[j];
		}
		for (size_t k = r0; k < r1; k++) { /* each step's scale */
			double *rk = ratio + (k - r0) * pa;
			qsort(rk, nr_k[k - r0], sizeof *rk, dbl_cmp);
			scale[k] = nr_k[k - r0] ? rk[nr_k[k - r0] / 2] : 1;
		}
		sexp = xcalloc(pa, sizeof *sexp), ssize = xcalloc(pa, sizeof *ssize), slife = xcalloc(pa, sizeof *slife);
		scount = xcalloc(pa, sizeof *scount);
		/* robust to a step that is not aligned (the first after set-up): the exponent is the median
		 * of the slopes between pairs of steps (Theil-Sen), the size the median of size / s^EXP */
		double *lx = xcalloc(nrep + 1, sizeof *lx), *ly = xcalloc(nrep + 1, sizeof *ly);
		double *slopes = xcalloc(TS_MAX * TS_MAX / 2 + 1, sizeof *slopes);
		for (size_t j = 0; j < pa; j++) {
			size_t n = 0;
			for (size_t k = r0; k < r1; k++) {
				const fa *x = &a[cut[k] + j];
				if (x->persist)
					continue;
				lx[n] = log(scale[k]);
				ly[n++] = log((double)x->size);
			}
			double e = size_exponent(lx, ly, n, smed[j], slopes);
			sexp[j] = e;
			size_t nl2 = 0;
			for (size_t k = r0; k < r1; k++) {
				const fa *x = &a[cut[k] + j];
				if (x->persist)
					continue;
				size_t ej = (size_t)(x->end + 0.5);
				v[nl2] = tau_of[ej] - tau_of[cut[k] + j] - 0.5 / (double)pa;
				ly[nl2] = log((double)x->size) - e * log(scale[k]);
				nl2++;
			}
			qsort(v, nl2, sizeof *v, dbl_cmp);
			qsort(ly, nl2, sizeof *ly, dbl_cmp);
			ssize[j] = nl2 ? exp(ly[nl2 / 2]) : 0;
			slife[j] = nl2 ? v[nl2 / 2] : 0;
			scount[j] = nl2;
		}
		free(lx);
		free(ly);
		free(slopes);
		free(v);
		free(ratio);
		free(smed);
		free(nr_k);
	}
	/* No exact period but varying shapes (varlen training, whose steps differ in their number of
	 * allocations): each step's transient allocations are aligned to those of the step of median
	 * length (Needleman-Wunsch on size class relative to the step's scale and lifetime class), and
	 * the matched ones make slots as above; the rest become classes. */
	size_t kR = 0, nR = 0, m = 0;
	int aligned = 0;
	frow *arows = NULL;
	size_t nar = 0;
	if (!slots && !periodic && varies && o->bins_auto && nrep >= 3) {
		size_t *ord = xcalloc(nrep, sizeof *ord);
		for (size_t k = r0; k < r1; k++)
			ord[k - r0] = lens[k] * 65536 + k;
		qsort(ord, nrep, sizeof *ord, sz_cmp);
		kR = ord[nrep / 2] % 65536;
		nR = lens[kR];
		free(ord);
		size_t longest = 0;
		for (size_t k = r0; k < r1; k++)
			longest = lens[k] > longest ? lens[k] : longest;
		/* the alignment's tables: (longest + 1) x (nR + 1) cells of 5 bytes, at most 160 MB */
		aligned = nR <= 8192 && K < 65536 && (double)(longest + 1) * (double)(nR + 1) <= 32e6;
	}
	if (aligned) {
		size_t *R = xcalloc(nR, sizeof *R);
		for (size_t i = cut[kR]; i < cut[kR + 1]; i++)
			if (!a[i].persist)
				R[m++] = i;
		size_t maxlen = 0;
		for (size_t k = r0; k < r1; k++)
			maxlen = lens[k] > maxlen ? lens[k] : maxlen;
		int32_t *H = xcalloc((maxlen + 1) * (m + 1), sizeof *H);
		uint8_t *tr = xcalloc((maxlen + 1) * (m + 1), 1);
		size_t *Sx = xcalloc(maxlen + 1, sizeof *Sx), *M = xcalloc(nrep * m + 1, sizeof *M);
		uint8_t *used = xcalloc(na, 1);
#define TOKS(i, k) (a[i].size >= AS_MiB ? 1000 + llround(log2((double)a[i].size / scale[k]) * 2) : llround(log2((double)a[i].size) * 2))
#define TOKL(i) llround(log2(1 + (a[i].end < 0 ? N : a[i].end - a[i].start)))
		for (size_t k = r0; k < r1; k++) {
			size_t n = 0;
			for (size_t i = cut[k]; i < cut[k + 1]; i++)
				if (!a[i].persist)
					Sx[n++] = i;
			size_t W = m + 1;
			for (size_t y = 0; y <= m; y++)
				H[y] = -(int32_t)y, tr[y] = 2;
			for (size_t x = 1; x <= n; x++) {
				H[x * W] = -(int32_t)x, tr[x * W] = 1;
				long long sx = TOKS(Sx[x - 1], k), lx = TOKL(Sx[x - 1]);
				for (size_t y = 1; y <= m; y++) {
					long long sy = TOKS(R[y - 1], kR), ly = TOKL(R[y - 1]);
					int32_t sim = sx == sy ? (lx == ly ? 3 : 1) : -2;
					int32_t d = H[(x - 1) * W + y - 1] + sim, u = H[(x - 1) * W + y] - 1, l = H[x * W + y - 1] - 1;
					if (d >= u && d >= l)
						H[x * W + y] = d, tr[x * W + y] = 0;
					else if (u >= l)
						H[x * W + y] = u, tr[x * W + y] = 1;
					else
						H[x * W + y] = l, tr[x * W + y] = 2;
				}
			}
			for (size_t x = n, y = m; x || y;) {
				uint8_t t = tr[x * W + y];
				if (t == 0) {
					if (TOKS(Sx[x - 1], k) == TOKS(R[y - 1], kR)) {
						M[(k - r0) * m + y - 1] = Sx[x - 1] + 1;
						used[Sx[x - 1]] = 1;
					}
					x--, y--;
				} else if (t == 1) {
					x--;
				} else {
					y--;
				}
			}
		}
#undef TOKS
#undef TOKL
		free(H);
		free(tr);
		free(Sx);
		/* the steps' scales: the median over the slots of 1 MiB or more of size over the slot's median */
		double *v = xcalloc(nrep + 1, sizeof *v), *smed = xcalloc(m + 1, sizeof *smed);
		double *ratio = xcalloc(nrep * m + 1, sizeof *ratio);
		size_t *nr_k = xcalloc(nrep + 1, sizeof *nr_k);
		for (size_t y = 0; y < m; y++) {
			size_t n = 0;
			for (size_t k = 0; k < nrep; k++)
				if (M[k * m + y])
					v[n++] = (double)a[M[k * m + y] - 1].size;
			qsort(v, n, sizeof *v, dbl_cmp);
			smed[y] = n ? v[n / 2] : 0;
			for (size_t k = 0; k < nrep && smed[y] >= (double)AS_MiB; k++)
				if (M[k * m + y])
					ratio[k * m + nr_k[k]++] = (double)a[M[k * m + y] - 1].size / smed[y];
		}
		double *newscale = xcalloc(K, sizeof *newscale);
		for (size_t k = 0; k < K; k++)
			newscale[k] = 1;
		for (size_t k = 0; k < nrep; k++) {
			qsort(ratio + k * m, nr_k[k], sizeof *ratio, dbl_cmp);
			newscale[k + r0] = nr_k[k] ? ratio[k * m + nr_k[k] / 2] : 1;
		}
		double Bn = (double)nR;
		arows = xcalloc(na + m + 1, sizeof *arows);
		double *lx = xcalloc(nrep + 1, sizeof *lx), *ly = xcalloc(nrep + 1, sizeof *ly);
		double *slopes = xcalloc(TS_MAX * TS_MAX / 2 + 1, sizeof *slopes);
		for (size_t y = 0; y < m; y++) {
			size_t n = 0;
			for (size_t k = 0; k < nrep; k++)
				if (M[k * m + y]) {
					lx[n] = log(newscale[k + r0]);
					ly[n++] = log((double)a[M[k * m + y] - 1].size);
				}
			if (!n)
				continue;
			double e = size_exponent(lx, ly, n, smed[y], slopes);
			size_t c = 0;
			for (size_t k = 0; k < nrep; k++)
				if (M[k * m + y]) {
					size_t i = M[k * m + y] - 1;
					v[c] = tau_of[(size_t)(a[i].end + 0.5)] - tau_of[i] - 0.5 / (double)lens[k + r0];
					ly[c] = log((double)a[i].size) - e * log(newscale[k + r0]);
					c++;
				}
			qsort(v, c, sizeof *v, dbl_cmp);
			qsort(ly, c, sizeof *ly, dbl_cmp);
			double L = v[c / 2] * Bn < 1 ? 0 : v[c / 2];
			arows[nar++] = (frow){ 0, (uint32_t)(R[y] - cut[kR]), e, (uint64_t)fmax(1, llround(exp(ly[c / 2]))),
				L > 0 ? (int64_t)llround(log2(L) * 8) : LIFE_ZERO, c, 0.5 * (double)c, L };
		}
		/* the allocations no slot took: classes in the reference step's parts */
		for (size_t k = r0; k < r1; k++)
			for (size_t i = cut[k]; i < cut[k + 1]; i++) {
				if (a[i].persist || used[i])
					continue;
				double n = (double)lens[k], pos = (double)(i - cut[k]) / n * Bn;
				uint32_t bin = (uint32_t)fmin(Bn - 1, floor(pos));
				double life = tau_of[(size_t)(a[i].end + 0.5)] - tau_of[i] - 0.5 / n;
				int64_t ql = life * n < 1 ? LIFE_ZERO : (int64_t)llround(log2(life) * 8);
				int sc = a[i].size >= AS_MiB;
				arows[nar++] = (frow){ 0, bin, sc, qsize((double)a[i].size / (sc ? newscale[k] : 1)), ql, 1, pos - bin, -1 };
			}
		for (size_t k = 0; k < K; k++)
			scale[k] = newscale[k];
		free(newscale);
		free(lx);
		free(ly);
		free(slopes);
		free(v);
		free(smed);
		free(ratio);
		free(nr_k);
		free(M);
		free(used);
		free(R);
	}
	/* rows */
	double B = slots ? (double)pa : aligned ? (double)nR : (double)o->bins;
	frow *rows = xcalloc(na + nar + 1, sizeof *rows);
	size_t nr = 0;
	frow *prs = xcalloc(npers ? npers : 1, sizeof *prs);
	size_t np = 0;
	double *lives = xcalloc(na, sizeof *lives);
	size_t nl = 0;
	for (size_t i = 0; i < na; i++) {
		size_t k = a[i].step;
		double t0 = tau_of[i], n = (double)(cut[k + 1] - cut[k]);
		uint32_t bin = (uint32_t)fmin(B - 1, floor((t0 - (double)k) * B));
		if (a[i].persist) {
			prs[np++] = (frow){ 0, bin, 0, qsize((double)a[i].size), (int64_t)k, 1, 0, -1 };
			continue;
		}
		/* the free's step time: between the step times of the allocations around it */
		double e = a[i].end + 0.5; /* the allocation ordinal it precedes */
		size_t ej = (size_t)e;
		double life = tau_of[ej] - t0 - 0.5 / n;
		lives[nl++] = a[i].end - a[i].start;
		int64_t ql = life * n < 1 ? LIFE_ZERO : (int64_t)llround(log2(life) * 8);
		uint8_t kind = k < r0 ? 1 : k >= r1 ? 2 : 0;
		if ((slots || aligned) && !kind)
			continue;
		int sc = !kind && varies && a[i].size >= AS_MiB;
		rows[nr++] = (frow){ kind, bin, sc, qsize((double)a[i].size / (sc ? scale[k] : 1)), ql, 1,
			(t0 - (double)k) * B - bin, -1 };
	}
	for (size_t j = 0; j < nar; j++)
		rows[nr++] = arows[j];
	free(arows);
	for (size_t j = 0; slots && j < pa; j++)
		if (scount[j]) {
			double L = slife[j] * (double)pa < 1 ? 0 : slife[j];
			rows[nr++] = (frow){ 0, (uint32_t)j, sexp[j], (uint64_t)fmax(1, llround(ssize[j])), L > 0 ? (int64_t)llround(log2(L) * 8) : LIFE_ZERO,
				scount[j], 0.5 * (double)scount[j], L };
		}
	qsort(rows, nr, sizeof *rows, row_cmp);
	qsort(prs, np, sizeof *prs, row_cmp);
	qsort(lives, nl, sizeof *lives, dbl_cmp);
	/* the report */
	fprintf(out, "# allocsim gen parameters: the phase model, fitted by 'allocsim gen --fit' (doc/generator.md)\n");
	char *esc = as_escape(path, 0);
	fprintf(out, "# trace: %s\n", esc);
	free(esc);
	fprintf(out, "# allocations: %zu; persistent: %" PRIu64 " (%" PRIu64 " bytes); transient: %zu\n", na, npers, pers_bytes, nl);
	fprintf(out, "# steps: %zu, cut where transient live bytes fall below 1/4 of their peak (%.0f bytes)\n", K, peak);
	fprintf(out, "# allocations per step:");
	for (size_t k = 0; k < K; k++)
		fprintf(out, " %zu", cut[k + 1] - cut[k]);
	fprintf(out, "\n");
	if (nl)
		fprintf(out, "# transient lifetime in allocations: p50 %.1f p90 %.1f p99 %.1f max %.1f\n", lives[nl / 2],
			lives[(size_t)(0.9 * (double)(nl - 1))], lives[(size_t)(0.99 * (double)(nl - 1))], lives[nl - 1]);
	fprintf(out, "# size histogram (log2 bucket low bytes: count):");
	{
		uint64_t hist[64] = { 0 };
		for (size_t i = 0; i < na; i++)
			hist[63 - __builtin_clzll(a[i].size | 1)]++;
		for (int i = 0; i < 64; i++)
			if (hist[i])
				fprintf(out, " %llu:%" PRIu64, 1ull << i, hist[i]);
		fprintf(out, "\n");
	}
	fprintf(out, "# step cuts: %s (%s %.4f)%s%s\n", periodic ? "the alloc/free pattern's period" : "cycles of transient live bytes",
		periodic ? "match" : "best period match", match, has_first ? "; first step apart" : "", has_last ? "; last partial step apart" : "");
	fprintf(out, "# shapes: %zu distinct sizes >= 1 MiB over the steps, %.1f per step: %s\n", nall, per_step,
		varies ? "they vary, sizes fitted relative to the step's scale" : "fixed");
	if (slots)
		fprintf(out, "# slots: the steps cut a period (%zu allocations) apart, one row per slot, SCALES its exponent\n", pa);
	if (aligned)
		fprintf(out, "# slots: the steps aligned to step %zu (%zu allocations), one row per slot it matched, SCALES its exponent\n",
			kR, nR);
	fprintf(out, "model phase\nbins %" PRIu64 "\nfitted-steps %zu\nsteps %zu\n", slots ? (uint64_t)pa : aligned ? (uint64_t)nR : o->bins,
		nrep, K);
	if (varies) {
		fprintf(out, "# per-step scale: %s\nscale-draw sequence\nscale table:", slots || aligned ? "the median over the slots of 1 MiB or more of "
			"their size over their median" : "bytes of the allocations >= 1 MiB over the median step's");
		for (size_t k = r0; k < r1; k++)
			fprintf(out, "%s%.6g:1", k > r0 ? "," : "", scale[k]);
		fprintf(out, "\n");
	} else {
		fprintf(out, "scale const:1\n");
	}
	for (size_t i = 0; i < np;) {
		size_t j = i;
		uint64_t c = 0;
		while (j < np && prs[j].bin == prs[i].bin && prs[j].size == prs[i].size && prs[j].qlife == prs[i].qlife)
			c++, j++;
		fprintf(out, "persist %" PRIu64 " %" PRId64 " %u %" PRIu64 "\n", prs[i].size, prs[i].qlife, prs[i].bin, c);
		i = j;
	}
	for (size_t i = 0; i < nr;) {
		size_t j = i;
		uint64_t c = 0;
		double off = 0;
		while (j < nr && !row_cmp(&rows[j], &rows[i]))
			off += rows[j].off, c += rows[j].count, j++;
		double life = rows[i].exact >= 0 ? rows[i].exact : rows[i].qlife == LIFE_ZERO ? 0 : exp2((double)rows[i].qlife / 8);
		static const char *const kw[] = { "row", "first", "last" };
		fprintf(out, "%s %u %" PRIu64 " %.6g %" PRIu64 " %g %.3f\n", kw[rows[i].kind], rows[i].bin, rows[i].size, life, c,
			rows[i].scales, fmin(0.999, off / (double)c));
		i = j;
	}
	free(a);
	free(cut);
	free(tau_of);
	free(big);
	free(sorted);
	free(scale);
	free(lens);
	free(live);
	free(sexp);
	free(ssize);
	free(slife);
	free(scount);
	free(rows);
	free(prs);
	free(lives);
	return 0;
}

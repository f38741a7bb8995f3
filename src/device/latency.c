/* latency.c - quantiles and the device-latency model. */
#include "device/latency.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const as_lat_op_names[LAT_NOPS] = { "malloc", "free", "map", "unmap", "pool_malloc", "pool_grow", "pool_free", "pool_init" };

int as_lat_op_find(const char *name)
{
	for (int i = 0; i < LAT_NOPS; i++)
		if (!strcmp(name, as_lat_op_names[i]))
			return i;
	return -1;
}

/* The estimators start at the first nonzero sample, fed the zeros counted until then: the same
 * sequence of samples, so the same estimates, but a simulation without a latency model or host
 * timing (every sample 0, e.g. sweep) never pays for them. */
void as_quant_init(as_quant *q)
{
	q->p50 = q->p99 = NULL;
	q->max = 0;
	q->n = 0;
}

void as_quant_add_slow(as_quant *q, double ns)
{
	if (!q->p50) {
		if (ns == 0.0) {
			q->n++;
			return;
		}
		q->p50 = gsl_rstat_quantile_alloc(0.5);
		q->p99 = gsl_rstat_quantile_alloc(0.99);
		for (uint64_t i = 0; i < q->n; i++) {
			gsl_rstat_quantile_add(0.0, q->p50);
			gsl_rstat_quantile_add(0.0, q->p99);
		}
	}
	gsl_rstat_quantile_add(ns, q->p50);
	gsl_rstat_quantile_add(ns, q->p99);
	if (ns > q->max)
		q->max = ns;
	q->n++;
}

double as_quant_p50(const as_quant *q)
{
	return q->p50 ? gsl_rstat_quantile_get(q->p50) : 0.0;
}

double as_quant_p99(const as_quant *q)
{
	return q->p99 ? gsl_rstat_quantile_get(q->p99) : 0.0;
}

void as_quant_free(as_quant *q)
{
	if (q->p50)
		gsl_rstat_quantile_free(q->p50);
	if (q->p99)
		gsl_rstat_quantile_free(q->p99);
	q->p50 = q->p99 = NULL;
}

int as_lat_model_load(as_lat_model *m, const char *path, as_err *err)
{
	memset(m, 0, sizeof(*m));
	FILE *f = fopen(path, "r");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open latency model '%s'", path);
	return as_lat_model_read(m, f, path, err);
}

int as_lat_model_read(as_lat_model *m, FILE *f, const char *path, as_err *err)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->source, sizeof m->source, "%s", path);
	char line[512];
	unsigned long lineno = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			fclose(f);
			as_lat_model_free(m);
			return as_fail(err, AS_EXIT_DATAERR, "%s:%lu: line too long for a latency model", path, lineno);
		}
		if (line[0] == '#' || !strncmp(line, "op,", 3) || line[0] == '\n')
			continue;
		char op[32];
		unsigned long long lo, hi;
		double a, b;
		if (sscanf(line, "%31[^,],%llu,%llu,%lf,%lf", op, &lo, &hi, &a, &b) != 5 || lo >= hi || !isfinite(a) || !isfinite(b) ||
		    fabs(a) > 1e12 || fabs(b) > 1e12) {
			fclose(f);
			as_lat_model_free(m);
			return as_fail(err, AS_EXIT_DATAERR, "%s:%lu: expected op,size_lo,size_hi,a_us,b_us_per_mib", path, lineno);
		}
		int idle = !strncmp(op, "idle:", 5), k = as_lat_op_find(op + (idle ? 5 : 0));
		if (idle && k >= 0) {
			if (a <= 0 || a > 1e6 || b < 0 || b >= 18446744073709551616.0 || b != floor(b)) {
				fclose(f);
				as_lat_model_free(m);
				return as_fail(err, AS_EXIT_DATAERR,
					       "%s:%lu: an idle factor must be positive (at most 1e6), with a size in bytes (0: all sizes) in the last column",
					       path, lineno);
			}
			m->idle = xrealloc(m->idle, (m->nidle + 1) * sizeof(*m->idle));
			m->idle[m->nidle++] = (as_lat_band){ k, lo, hi, a, b };
			continue;
		}
		if (k < 0) {
			fclose(f);
			as_lat_model_free(m);
			return as_fail(err, AS_EXIT_DATAERR, "%s:%lu: unknown operation '%s'", path, lineno, op);
		}
		m->bands = xrealloc(m->bands, (m->n + 1) * sizeof(*m->bands));
		m->bands[m->n++] = (as_lat_band){ k, lo, hi, a, b };
	}
	fclose(f);
	if (!m->n) {
		as_lat_model_free(m); /* idle factors alone (found by fuzz_model) */
		return as_fail(err, AS_EXIT_DATAERR, "%s: no model bands", path);
	}
	return 0;
}

void as_lat_model_free(as_lat_model *m)
{
	free(m->bands);
	free(m->idle);
	m->bands = m->idle = NULL;
	m->n = m->nidle = 0;
}

double as_lat_model_factor(const as_lat_model *m, int op, uint64_t gap, uint64_t size)
{
	const as_lat_band *best = NULL;
	for (size_t i = 0; i < m->nidle; i++) {
		const as_lat_band *r = &m->idle[i];
		if (r->op == op && gap >= r->lo && gap < r->hi && (double)size >= r->b_us_per_mib &&
		    (!best || r->b_us_per_mib > best->b_us_per_mib))
			best = r;
	}
	return best ? best->a_us : 1.0;
}

static double clamp0(double us)
{
	return us > 0 ? us : 0.0; /* a band's line may dip below zero outside its points */
}

double as_lat_model_us(const as_lat_model *m, int op, uint64_t size)
{
	const as_lat_band *last = NULL;
	for (size_t i = 0; i < m->n; i++) {
		const as_lat_band *b = &m->bands[i];
		if (b->op != op)
			continue;
		if (size >= b->lo && size < b->hi)
			return clamp0(b->a_us + b->b_us_per_mib * ((double)size / 1048576.0));
		if (!last || b->hi > last->hi)
			last = b;
	}
	/* beyond the calibrated range: extend the last band */
	return last ? clamp0(last->a_us + last->b_us_per_mib * ((double)size / 1048576.0)) : 0.0;
}

int as_devlog_read(as_devcalls *cs, FILE *f, const char *path, as_err *err)
{
	static const char header[] = AS_DEVLOG_HEADER;
	char line[512];
	unsigned long lineno = 0;
	int rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		int whole = strchr(line, '\n') || feof(f);
		line[strcspn(line, "\r\n")] = 0;
		if (!whole && lineno > 1) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%lu: line too long for a device log", path, lineno);
			break;
		}
		if (lineno == 1) {
			if (!whole || strcmp(line, header)) {
				rc = as_fail(err, AS_EXIT_DATAERR, "%s:1: not a device log (expected the header '%s')", path, header);
				break;
			}
			continue;
		}
		char call[32], op[32] = "", res[8];
		unsigned long long bytes, gap;
		double us;
		int got = sscanf(line, "%*[^,],%*[^,],%llu,%31[^,],%31[^,],%llu,%*[^,],%7[^,],%lf,", &gap, call, op, &bytes, res, &us);
		if (got != 6 || us < 0 || !isfinite(us)) {
			if (got == 2 && strstr(line, ",,"))
				continue; /* a call no model operation covers (a pool trim) */
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%lu: expected " AS_DEVLOG_HEADER, path, lineno);
			break;
		}
		int k = as_lat_op_find(op);
		if (k < 0) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%lu: unknown model operation '%s'", path, lineno, op);
			break;
		}
		AS_GROW(cs->v, cs->n, cs->cap, 4096);
		cs->v[cs->n++] = (as_devcall){ k, bytes, gap, us };
	}
	if (!rc && ferror(f))
		rc = as_fail(err, AS_EXIT_IOERR, "read error on '%s'", path);
	if (!rc && lineno == 0)
		rc = as_fail(err, AS_EXIT_DATAERR, "%s: empty device log", path);
	fclose(f);
	return rc;
}

int as_devlog_load(as_devcalls *cs, const char *path, as_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open device log '%s': %s", path, strerror(errno));
	return as_devlog_read(cs, f, path, err);
}

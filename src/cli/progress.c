/* progress.c - the progress bar of long commands (progress.h). */
#include "cli/progress.h"
#include "util/common.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* (called with the lock held) */
static void draw(cli_progress *p)
{
	size_t d = p->done, t = p->total;
	double el = as_seconds_since(&p->start);
	int w = t ? (int)(30 * (d < t ? d : t) / t) : 30;
	fprintf(stderr, "\r%s%s[%.*s%*s] %zu/%zu  ETA %4.0fs ", p->what ? p->what : "", p->what ? " " : "", w,
		"##############################", 30 - w, "", d, t, d && d < t ? el / (double)d * (double)(t - d) : 0.0);
	p->drawn = 1;
}

/* Waits until the deadline `after` seconds from now or the end of the work; 1 when it ended. */
static int wait_for(cli_progress *p, double after)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	long ns = dl.tv_nsec + (long)((after - (double)(long)after) * 1e9);
	dl.tv_sec += (time_t)after + ns / 1000000000L;
	dl.tv_nsec = ns % 1000000000L;
	while (!p->ended)
		if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) != 0)
			break; /* the deadline */
	return p->ended;
}

static void *loop(void *arg)
{
	cli_progress *p = arg;
	pthread_mutex_lock(&p->mu);
	if (p->delay <= 0 || !wait_for(p, p->delay)) {
		for (;;) {
			draw(p);
			if (wait_for(p, 0.2))
				break;
		}
		draw(p); /* the final state */
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

double cli_progress_delay(void)
{
	const char *e = getenv("ALLOCSIM_PROGRESS_DELAY");
	char *end;
	double d = e && *e ? strtod(e, &end) : 0.5;
	return e && *e && !*end && d >= 0 && d < 3600 ? d : 0.5;
}

/* The bars of commands drawing now (a long computation inside them draws none of its own), --quiet,
 * and the one bar of a long computation (cli_progress_work) with the thread it belongs to. */
static pthread_mutex_t gmu = PTHREAD_MUTEX_INITIALIZER;
static int nbars, quiet_all, won;
static cli_progress wbar;
static pthread_t wowner;

static void start(cli_progress *p, const char *what, size_t total, double delay)
{
	memset(p, 0, sizeof(*p));
	p->what = what;
	p->total = total;
	p->delay = delay;
	clock_gettime(CLOCK_MONOTONIC, &p->start);
	if (!isatty(STDERR_FILENO))
		return;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* (a clock change does not stretch a wait) */
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	p->on = pthread_create(&p->th, NULL, loop, p) == 0;
	if (!p->on) {
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
	}
}

void cli_progress_start(cli_progress *p, const char *what, size_t total, double delay)
{
	memset(p, 0, sizeof(*p));
	if (quiet_all)
		return;
	start(p, what, total, delay);
	if (p->on) {
		pthread_mutex_lock(&gmu);
		nbars++;
		pthread_mutex_unlock(&gmu);
	}
}

void cli_progress_quiet(void)
{
	quiet_all = 1;
}

void cli_progress_add(cli_progress *p, size_t n)
{
	if (!p->on)
		return;
	pthread_mutex_lock(&p->mu);
	p->done += n;
	pthread_mutex_unlock(&p->mu);
}

static void end(cli_progress *p)
{
	pthread_mutex_lock(&p->mu);
	p->ended = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	p->on = 0;
}

void cli_progress_end(cli_progress *p)
{
	if (!p->on)
		return;
	end(p);
	pthread_mutex_lock(&gmu);
	nbars--;
	pthread_mutex_unlock(&gmu);
}

void cli_progress_work(const char *what, uint64_t done, uint64_t total)
{
	pthread_mutex_lock(&gmu);
	if (!won && !nbars && !quiet_all && total && done < total) {
		start(&wbar, what, (size_t)total, cli_progress_delay());
		if (wbar.on) {
			won = 1;
			wowner = pthread_self();
		}
	}
	if (won && pthread_equal(wowner, pthread_self())) {
		pthread_mutex_lock(&wbar.mu);
		wbar.done = (size_t)done;
		pthread_mutex_unlock(&wbar.mu);
		if (done >= total) {
			end(&wbar);
			won = 0;
		}
	}
	pthread_mutex_unlock(&gmu);
}

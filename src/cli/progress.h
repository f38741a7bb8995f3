/* progress.h - a progress bar on stderr for long work, on a terminal only: a thread that redraws
 * it every 200 ms and wakes at once when the work ends (no sleep left over: a 13 ms sweep takes
 * 13 ms on a terminal, not 230). */
#ifndef ALLOCSIM_PROGRESS_H
#define ALLOCSIM_PROGRESS_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct cli_progress {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int on;           /* a thread draws (stderr is a terminal) */
	int ended, drawn;
	size_t done, total;
	double delay;     /* seconds before the first draw (short work shows nothing) */
	const char *what;
	struct timespec start;
} cli_progress;

/* Starts the bar for total units of work (nothing when stderr is no terminal); the first draw
 * comes after delay seconds (0: at once). */
void cli_progress_start(cli_progress *p, const char *what, size_t total, double delay);
/* The delay of long commands' bars: 0.5 s, or ALLOCSIM_PROGRESS_DELAY seconds (the tests: 0). */
double cli_progress_delay(void);
/* n more units done (any thread); a no-op on a bar never started. */
void cli_progress_add(cli_progress *p, size_t n);
/* --quiet: no bar from here on, a command's or a computation's. */
void cli_progress_quiet(void);
/* The hook of long computations inside the library (util/work.h: the optimal policy's placement):
 * a bar of its own, on a terminal, after the delay, when no command bar is drawing; one at a time
 * (the thread that started it). */
void cli_progress_work(const char *what, uint64_t done, uint64_t total);
/* The work ended: the thread draws the last state (when it drew before), ends the line and is
 * joined at once. */
void cli_progress_end(cli_progress *p);
#endif

/* work.h - long computations inside the library (the optimal policy's placement) say how far they
 * are, for the command line's progress bar (src/cli/progress.c); nothing happens without a hook. */
#ifndef ALLOCSIM_WORK_H
#define ALLOCSIM_WORK_H
#include <stdint.h>

typedef void (*as_work_fn)(const char *what, uint64_t done, uint64_t total);
/* Set once, before any thread starts (main). */
void as_work_hook(as_work_fn fn);
/* done of total units of what; done == total: finished. Cheap: call it every few thousand units. */
void as_work_report(const char *what, uint64_t done, uint64_t total);
#endif

/* heap.h - the main heap on transparent huge pages (see heap.c). */
#ifndef ALLOCSIM_HEAP_H
#define ALLOCSIM_HEAP_H

/* Called once, first thing in main (before any allocation, before threads). */
void as_heap_init(void);

#endif

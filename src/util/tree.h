/* tree.h - libbsd's <sys/tree.h> red-black trees (ordered sets), with the one attribute macro
 * it expects from a BSD <sys/cdefs.h> that glibc does not define under -std=c11. */
#ifndef ALLOCSIM_TREE_H
#define ALLOCSIM_TREE_H
#include <sys/cdefs.h>
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
#include <sys/tree.h>
#endif

/*
 * Between timectl-static-loader (loader/static_loader.c) and the shim it
 * has in LD_PRELOAD (shim/attach/static_takeover.c): the one call by which a
 * statically linked program the loader has mapped is taken onto the
 * session's timeline before its first instruction runs.
 */
#ifndef TIMECTL_STATIC_PROGRAM_H
#define TIMECTL_STATIC_PROGRAM_H

#include <stdint.h>

struct timectl_static_program {
    uintptr_t text_start, text_end;  /* the span of its executable segments, as mapped */
    int is_go;                       /* it carries Go's build-id note */
    const char *path;                /* its absolute path (what /proc/self/exe would name) */
};

#define TIMECTL_STATIC_PROGRAM_PREPARE "timectl_static_program_prepare"

/*
 * Redirects the vDSO's clock symbols to reads that use no thread-local
 * storage, traps the program's timed waits (and the calls that would take
 * SIGSYS away) made from its text, and starts the threads the shim needs
 * (the loader's malloc never moves the program break, so it may start more
 * later: loader_malloc.c).
 * *attached is set to 0 when this process is not attached to a session
 * (then nothing was done: exec the program). Returns NULL, or a phrase
 * saying what went wrong.
 */
typedef const char *timectl_static_program_prepare_function(const struct timectl_static_program *program,
                                                             int *attached);

#endif

/*
 * A malloc that reads the clock, as jemalloc and profilers do: the shim's
 * initialisation must neither deadlock nor recurse when its own work
 * (pthread_atfork, getenv) ends up in malloc. Preloaded with the shim.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <time.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static void touch_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
}

void *malloc(size_t size) {
    touch_clock();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    touch_clock();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    touch_clock();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

/*
 * The real CLOCK_MONOTONIC through the system call itself: under a preload
 * library the clock functions are the library's, so the benchmarks time
 * themselves with this.
 */
#ifndef TIMECTL_BENCH_RAW_CLOCK_H
#define TIMECTL_BENCH_RAW_CLOCK_H
#include <sys/syscall.h>
#include <time.h>

static inline long long raw_monotonic_ns(void) {
    struct timespec ts;
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(SYS_clock_gettime), "D"(CLOCK_MONOTONIC), "S"(&ts) : "rcx", "r11", "memory");
    (void)ret;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#endif

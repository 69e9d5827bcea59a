/*
 * Reads CLOCK_MONOTONIC (through the shim when attached) in a loop for
 * SECONDS real seconds and reports the longest gap between two reads in
 * real time and in the thread's CPU time, the number of reads and how
 * often the clock went back.
 *   gap_reader SECONDS   prints "reads N", "max_gap_ms X", "max_cpu_gap_ms X", "regressions N"
 * A reader held up by a writer spins or sleeps through the whole hold: its
 * real gap shows it. On a loaded machine the real gap also counts time the
 * reader was not scheduled; the CPU gap does not, so it tells the two apart
 * for a reader that spins. Both clocks are read straight from the kernel
 * (realclock.c), never through the shim.
 */
#define _GNU_SOURCE
#include "timectl_realclock.h"  /* compiled with -I Sources/TimeShimC/include and core/realclock.c, core/vdso_image.c */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gap_reader SECONDS\n");
        return 2;
    }
    tc_realclock_init();
    int64_t end = tc_real_ns(CLOCK_MONOTONIC) + (int64_t)(atof(argv[1]) * 1e9);
    int64_t last = tc_real_ns(CLOCK_MONOTONIC), max_gap = 0, previous = INT64_MIN;
    int64_t last_cpu = tc_real_ns(CLOCK_THREAD_CPUTIME_ID), max_cpu_gap = 0;
    long reads = 0, regressions = 0;
    printf("started\n");
    fflush(stdout);
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t value = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        if (value < previous) regressions++;
        previous = value;
        reads++;
        int64_t now = tc_real_ns(CLOCK_MONOTONIC);
        if (now - last > max_gap) max_gap = now - last;
        last = now;
        int64_t cpu = tc_real_ns(CLOCK_THREAD_CPUTIME_ID);
        if (cpu - last_cpu > max_cpu_gap) max_cpu_gap = cpu - last_cpu;
        last_cpu = cpu;
        if (now >= end) break;
    }
    printf("reads %ld\nmax_gap_ms %.1f\nmax_cpu_gap_ms %.1f\nregressions %ld\n", reads, max_gap / 1e6,
           max_cpu_gap / 1e6, regressions);
    return 0;
}

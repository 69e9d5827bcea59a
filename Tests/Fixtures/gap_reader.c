/*
 * Reads CLOCK_MONOTONIC (through the shim when attached) in a loop for
 * SECONDS real seconds and reports the longest real gap between two reads,
 * the number of reads and how often the clock went back.
 *   gap_reader SECONDS      prints "reads N", "max_gap_ms X", "regressions N"
 * Real time is read straight from the kernel (realclock.c), never the shim.
 */
#define _GNU_SOURCE
#include "timectl_realclock.h"  /* compiled with -I Sources/TimeShimC/include and realclock.c */

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
        if (now >= end) break;
    }
    printf("reads %ld\nmax_gap_ms %.1f\nregressions %ld\n", reads, max_gap / 1e6, regressions);
    return 0;
}

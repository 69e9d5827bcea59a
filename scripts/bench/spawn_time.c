/*
 * Wall time of running a command to completion, for scripts/bench-clock:
 *   spawn_time RUNS COMMAND ARGS...
 * Prints "median_ms X mean_ms Y". Uses the raw clock (raw_clock.h).
 */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "raw_clock.h"

extern char **environ;


static int compare(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: spawn_time RUNS COMMAND [ARGS...]\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    long long *samples = calloc((size_t)runs, sizeof(long long)), total = 0;
    for (int i = 0; i < runs; i++) {
        long long started = raw_monotonic_ns();
        pid_t pid;
        if (posix_spawnp(&pid, argv[2], NULL, NULL, argv + 2, environ) != 0) return 1;
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawn_time: %s failed\n", argv[2]);
            return 1;
        }
        samples[i] = raw_monotonic_ns() - started;
        total += samples[i];
    }
    qsort(samples, (size_t)runs, sizeof(long long), compare);
    printf("median_ms %.3f mean_ms %.3f\n", samples[runs / 2] / 1e6, total / 1e6 / runs);
    return 0;
}

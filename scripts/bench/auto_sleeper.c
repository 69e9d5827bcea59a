/*
 * Workloads for scripts/bench-auto-advance (run under timectl run --auto-advance):
 *   auto_sleeper sleeps N MS        N × nanosleep(MS ms) in one process
 *   auto_sleeper ping-pong N MS     two processes, N rounds: each sleeps MS ms,
 *                                   then hands a byte to the other through a pipe
 * Prints the virtual time it saw pass, in ns.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nap(long ms) {
    struct timespec request = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&request, NULL);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: auto_sleeper sleeps|ping-pong N MS\n");
        return 2;
    }
    long count = atol(argv[2]), ms = atol(argv[3]);
    int64_t start = now();
    if (strcmp(argv[1], "sleeps") == 0) {
        for (long i = 0; i < count; i++) nap(ms);
    } else if (strcmp(argv[1], "ping-pong") == 0) {
        int there[2], back[2];
        if (pipe(there) != 0 || pipe(back) != 0) return 1;
        pid_t child = fork();
        char byte = 0;
        for (long i = 0; i < count; i++) {
            if (child == 0) {
                if (read(there[0], &byte, 1) != 1) _exit(1);
                nap(ms);
                if (write(back[1], &byte, 1) != 1) _exit(1);
            } else {
                nap(ms);
                if (write(there[1], &byte, 1) != 1) return 1;
                if (read(back[0], &byte, 1) != 1) return 1;
            }
        }
        if (child == 0) _exit(0);
        waitpid(child, NULL, 0);
    } else {
        fprintf(stderr, "auto_sleeper: unknown workload '%s' (sleeps or ping-pong)\n", argv[1]);
        return 2;
    }
    printf("%lld\n", (long long)(now() - start));
    return 0;
}

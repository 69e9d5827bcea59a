/*
 * Clock-read cost, for scripts/bench-clock. Under a preloaded shim the
 * clocks themselves are virtual, so elapsed time is measured with a raw
 * clock_gettime system call that no preload library can intercept.
 *   clock_read THREADS READS_PER_THREAD
 * Prints "ns_per_read X reads_per_second Y" (Y aggregated over threads).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "raw_clock.h"

static long reads_per_thread;
static pthread_barrier_t start_line;
static volatile long long sink;

static void *reader(void *unused) {
    (void)unused;
    struct timespec ts;
    long long sum = 0;
    pthread_barrier_wait(&start_line);
    for (long i = 0; i < reads_per_thread; i++) {
        clock_gettime(CLOCK_REALTIME, &ts);
        sum += ts.tv_nsec;
    }
    sink += sum;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: clock_read THREADS READS_PER_THREAD\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    reads_per_thread = atol(argv[2]);
    pthread_t ids[64];
    if (threads < 1 || threads > 64) return 2;
    pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, reader, NULL);
    long long started = raw_monotonic_ns();
    pthread_barrier_wait(&start_line);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    long long elapsed = raw_monotonic_ns() - started;
    double total = (double)reads_per_thread * threads;
    printf("ns_per_read %.3f reads_per_second %.0f\n", (double)elapsed / reads_per_thread, total * 1e9 / (double)elapsed);
    return 0;
}

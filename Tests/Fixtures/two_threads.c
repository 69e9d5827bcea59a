/*
 * Two threads, each reading CLOCK_REALTIME and CLOCK_MONOTONIC three times
 * with a short sleep in between, for the record and replay tests:
 *   two_threads [EXTRA]     EXTRA > 0: the main thread then reads the clock EXTRA more times
 * Prints "A|B|main N REALTIME MONOTONIC" lines.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t output = PTHREAD_MUTEX_INITIALIZER;

static void report(const char *who, int n) {
    struct timespec wall, steady;
    clock_gettime(CLOCK_REALTIME, &wall);
    clock_gettime(CLOCK_MONOTONIC, &steady);
    pthread_mutex_lock(&output);
    printf("%s %d %lld.%09ld %lld.%09ld\n", who, n, (long long)wall.tv_sec, wall.tv_nsec, (long long)steady.tv_sec,
           steady.tv_nsec);
    fflush(stdout);
    pthread_mutex_unlock(&output);
}

static void *worker(void *name) {
    for (int i = 1; i <= 3; i++) {
        report(name, i);
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t a, b;
    pthread_create(&a, NULL, worker, "A");
    pthread_create(&b, NULL, worker, "B");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int extra = argc > 1 ? atoi(argv[1]) : 0;
    for (int i = 1; i <= extra; i++) report("main", i);
    return 0;
}

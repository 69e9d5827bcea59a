/*
 * Sleeps as Ruby's sleep does (hrtime_update_expire): until the monotonic
 * clock is strictly past its deadline, polling with the time left — a zero
 * timeout once it reads exactly the deadline. Prints the virtual ns it
 * slept.
 *   strict_deadline MILLISECONDS
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000LL + now.tv_nsec;
}

int main(int argc, char **argv) {
    long long start = monotonic_ns();
    long long end = start + (argc > 1 ? atoll(argv[1]) : 1000) * 1000000LL;
    long long now;
    while ((now = monotonic_ns()) <= end) {
        long long left = end - now;
        struct timespec timeout = {left / 1000000000LL, left % 1000000000LL};
        ppoll(NULL, 0, &timeout, NULL);
    }
    printf("slept %lld\n", now - start);
    return 0;
}

/*
 * One thread reading CLOCK_REALTIME and CLOCK_MONOTONIC N times (default 3)
 * with a 2 ms sleep after each, for the record and replay tests of static
 * programs (built -static): a single thread, so its readings are the same
 * stream in every run. Prints "N REALTIME MONOTONIC" lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 3;
    for (int i = 1; i <= count; i++) {
        struct timespec wall, steady, nap = {0, 2000000};
        clock_gettime(CLOCK_REALTIME, &wall);
        clock_gettime(CLOCK_MONOTONIC, &steady);
        printf("%d %lld.%09ld %lld.%09ld\n", i, (long long)wall.tv_sec, wall.tv_nsec, (long long)steady.tv_sec, steady.tv_nsec);
        fflush(stdout);
        nanosleep(&nap, NULL);
    }
    return 0;
}

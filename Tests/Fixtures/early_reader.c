/*
 * A preloaded library whose constructor reads the clock. Listed after the
 * shim in LD_PRELOAD, its constructor runs before the shim's, so the shim
 * must initialise on that first call. Prints "early NS".
 */
#include <stdio.h>
#include <time.h>

__attribute__((constructor)) static void read_early(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("early %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    fflush(stdout);
}

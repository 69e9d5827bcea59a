/*
 * Reads the clocks as fast as it can while another process issues verbs,
 * and checks what SPEC §2 promises of every single read:
 *   - CLOCK_MONOTONIC, _RAW and CLOCK_BOOTTIME never decrease;
 *   - in "frozen-ticks" mode (a frozen session advanced only by whole
 *     seconds), every monotonic read is the first one plus whole seconds,
 *     and REALTIME − MONOTONIC never changes: a torn read would mix two
 *     states and break one of these.
 * Usage: clock_hammer MODE SECONDS_OF_VIRTUAL_TIME_TO_WAIT_FOR REAL_TIMEOUT_S [MIN_READS]
 * Prints "started" (flushed) once it has its first readings, so that the
 * process issuing verbs can wait for it; stops when the monotonic clock
 * has moved that far and it has read at least MIN_READS times (default 0),
 * or after the real timeout (a guard against hangs). Prints
 * "reads N violations V moved S".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long ns(struct timespec ts) { return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec; }

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: clock_hammer frozen-ticks|running SECONDS TIMEOUT [MIN_READS]\n");
        return 2;
    }
    int frozen_ticks = strcmp(argv[1], "frozen-ticks") == 0;
    long long target = atoll(argv[2]) * 1000000000LL;
    long long timeout = atoll(argv[3]) * 1000000000LL;
    long long min_reads = argc == 5 ? atoll(argv[4]) : 0;

    /* The timeout guard uses CPU time, which the shim passes through: the
       loop spins, so it tracks real time. */
    struct timespec cpu0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);

    /* REALTIME − MONOTONIC as one state has it: a tick landing between the
       two reads would put every later read 1 s off this offset, so the pair
       is read again until MONOTONIC is the same on both sides of REALTIME
       (in running mode the offset is not used, and one pair does). */
    struct timespec ts;
    long long first_mono, wall_offset;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        first_mono = ns(ts);
        clock_gettime(CLOCK_REALTIME, &ts);
        wall_offset = ns(ts) - first_mono;
        if (!frozen_ticks) break;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (ns(ts) == first_mono) break;
    }
    long long last_mono = first_mono, last_raw = 0, last_boot = 0;
    printf("started\n");
    fflush(stdout);
    long long reads = 0, violations = 0;
    for (;;) {
        struct timespec mono, wall, raw, boot;
        clock_gettime(CLOCK_MONOTONIC, &mono);
        clock_gettime(CLOCK_REALTIME, &wall);
        clock_gettime(CLOCK_MONOTONIC_RAW, &raw);
        clock_gettime(CLOCK_BOOTTIME, &boot);
        reads += 4;
        long long m = ns(mono), r = ns(raw), b = ns(boot);
        if (m < last_mono || r < last_raw || b < last_boot) {
            if (violations < 5) fprintf(stderr, "monotonic went back: %lld<%lld or %lld<%lld or %lld<%lld\n",
                                        m, last_mono, r, last_raw, b, last_boot);
            violations++;
        }
        if (frozen_ticks) {
            /* wall is read after mono: a tick in between moves both by whole seconds */
            long long drift = (ns(wall) - m) - wall_offset;
            if ((m - first_mono) % 1000000000LL != 0 || drift % 1000000000LL != 0 || drift < 0) {
                if (violations < 5) fprintf(stderr, "torn read: mono %lld first %lld wall drift %lld\n", m, first_mono, drift);
                violations++;
            }
        }
        last_mono = m;
        last_raw = r;
        last_boot = b;
        if (m - first_mono >= target && reads >= min_reads) break;
        if ((reads & 0xFFFF) == 0) {
            struct timespec cpu;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
            if (ns(cpu) - ns(cpu0) > timeout) break;
        }
    }
    printf("reads %lld violations %lld moved %lld\n", reads, violations, last_mono - first_mono);
    return violations ? 1 : 0;
}

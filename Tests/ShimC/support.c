/* The helpers every test file uses (shim_test.h). */
#include "shim_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <unistd.h>

int failures;


int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct tc_segment *segment;

void apply(int kind, int wall, int64_t value, uint64_t rate) {
    struct tc_verb verb = {.kind = kind, .wall = wall, .value = value, .rate = rate};
    struct tc_failure failure = {0};
    CHECK(tc_segment_lock(segment, 5000000000LL, &failure) == TC_OK, "lock");
    int result = tc_segment_apply(segment, &verb, NULL);
    tc_segment_unlock(segment);
    CHECK(result == TC_OK, "verb %d: %s", kind, tc_result_phrase(result));
}

void real_pause_ms(long milliseconds) {
    struct timespec pause = {0, milliseconds * 1000000};
    tc_raw_syscall(SYS_nanosleep, &pause, NULL);
}

int wait_for_waits(int count) {
    for (int attempt = 0; attempt < 1000; attempt++) {
        int listed = 0;
        for (uint32_t slot = 0; slot < segment->header.wait_capacity; slot++) {
            struct tc_wait_slot entry;
            listed += tc_wait_read(segment, slot, &entry);
        }
        if (listed >= count) return 1;
        real_pause_ms(1);
    }
    return 0;
}

int listed_waits(void) {
    int listed = 0;
    for (uint32_t slot = 0; slot < segment->header.wait_capacity; slot++) {
        struct tc_wait_slot entry;
        listed += tc_wait_read(segment, slot, &entry);
    }
    return listed;
}

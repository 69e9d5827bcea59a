/* Clock reads against a frozen and a moved session, setting the clock, and verbs racing readers. */
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

void test_frozen_reads(void) {
    const int64_t wall = 1451649600LL * 1000000000LL;
    apply(TC_VERB_FREEZE, TC_WALL_ABSOLUTE, wall, 0);
    CHECK(now_ns(CLOCK_REALTIME) == wall, "frozen wall");
    int64_t monotonic = now_ns(CLOCK_MONOTONIC);
    real_pause_ms(1);
    CHECK(now_ns(CLOCK_MONOTONIC) == monotonic, "frozen monotonic");
    apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 3000000000LL, 0);
    CHECK(now_ns(CLOCK_MONOTONIC) == monotonic + 3000000000LL, "tick moves monotonic");
    CHECK(time(NULL) == 1451649603, "time()");
    struct timeval tv;
    CHECK(gettimeofday(&tv, NULL) == 0 && tv.tv_sec == 1451649603 && tv.tv_usec == 0, "gettimeofday");
    /* libc's headers say nonnull, but the kernel and libc accept NULL: so must the shim. */
    int (*volatile gettimeofday_fn)(struct timeval *, void *) = gettimeofday;
    CHECK(gettimeofday_fn(NULL, NULL) == 0, "gettimeofday accepts NULL");
    struct timespec ts;
    CHECK(syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) == 0 && ts.tv_sec == 1451649603, "syscall()");
    errno = 777;
    CHECK(syscall(SYS_getpid) == getpid(), "syscall passes other numbers through");
    CHECK(errno == 777, "errno untouched");
    CHECK(syscall(SYS_clock_gettime, 99, &ts) == -1 && errno == EINVAL, "bad clock through syscall()");
    errno = 0;
    CHECK(clock_gettime(99, &ts) == -1 && errno == EINVAL, "bad clock id");
    CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0, "CPU clock passes through");
}

static int64_t host_wall_offset(void) { return tc_real_ns(CLOCK_REALTIME) - tc_real_ns(CLOCK_BOOTTIME); }

static void *set_clock_repeatedly(void *argument) {
    struct timespec target = {(time_t)(intptr_t)argument, 0};
    for (int i = 0; i < 200; i++) clock_settime(CLOCK_REALTIME, &target);
    return NULL;
}

/* Setting CLOCK_REALTIME moves the session's wall clock through the writer
   lock, never the host's; errno is untouched on success. Run only once the
   process is known to be attached, and checked against the host's clock. */
void test_setting_the_clock(void) {
    const int64_t wall = 1451649600LL * 1000000000LL;
    apply(TC_VERB_FREEZE, TC_WALL_ABSOLUTE, wall, 0);
    if (now_ns(CLOCK_REALTIME) != wall) {
        CHECK(0, "not attached: setting no clock");
        return;
    }
    int64_t host_before = host_wall_offset();
    struct timex host_ntp_before = {0};
    tc_raw_syscall(SYS_adjtimex, &host_ntp_before);
    int64_t monotonic = now_ns(CLOCK_MONOTONIC);
    struct timespec target = {2000000000, 5};
    errno = 777;
    CHECK(clock_settime(CLOCK_REALTIME, &target) == 0 && errno == 777, "clock_settime: errno %d", errno);
    CHECK(now_ns(CLOCK_REALTIME) == 2000000000000000005LL, "the session reads what was set");
    CHECK(now_ns(CLOCK_MONOTONIC) == monotonic, "monotonic untouched");
    struct timex tx = {.modes = ADJ_SETOFFSET | ADJ_NANO, .time = {-1, 999999995}};
    CHECK(adjtimex(&tx) >= 0 && tx.time.tv_sec == 2000000000, "ADJ_SETOFFSET steps back 5 ns");
    CHECK(now_ns(CLOCK_REALTIME) == 2000000000000000000LL, "after ADJ_SETOFFSET");
    /* What was seen once: clock_adjtime(ADJ_SETOFFSET | ADJ_NANO) left the host kernel in nanosecond mode. */
    struct timex forward = {.modes = ADJ_SETOFFSET | ADJ_NANO, .time = {1, 0}};
    CHECK(clock_adjtime(CLOCK_REALTIME, &forward) >= 0, "clock_adjtime ADJ_SETOFFSET | ADJ_NANO");
    CHECK(now_ns(CLOCK_REALTIME) == 2000000001000000000LL, "after clock_adjtime");
    struct timex host_ntp_after = {0};
    tc_raw_syscall(SYS_adjtimex, &host_ntp_after);
    CHECK((host_ntp_after.status & STA_NANO) == (host_ntp_before.status & STA_NANO) &&
              host_ntp_after.tai == host_ntp_before.tai,
          "the kernel's NTP unit and TAI offset are the host's own");
    struct timespec back = {2000000000, 0};
    CHECK(clock_settime(CLOCK_REALTIME, &back) == 0, "set back");
    CHECK(syscall(SYS_clock_settime, CLOCK_MONOTONIC, &target) == -1 && errno == EINVAL, "monotonic: EINVAL");
    struct timespec bad = {1, 1000000000};
    CHECK(clock_settime(CLOCK_REALTIME, &bad) == -1 && errno == EINVAL, "nanoseconds out of range: EINVAL");
    struct timespec beyond = {8000000000LL, 0};
    CHECK(clock_settime(CLOCK_REALTIME, &beyond) == -1 && errno == EINVAL, "beyond 2200: EINVAL");
    struct timex status = {.modes = ADJ_STATUS};
    CHECK(adjtimex(&status) == -1 && errno == EPERM, "NTP state: EPERM");
    CHECK(now_ns(CLOCK_REALTIME) == 2000000000000000000LL, "refusals change nothing");

    /* Setters in several threads: each set is one whole verb (TSan checks the lock). */
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, set_clock_repeatedly, (void *)(intptr_t)(1700000000 + i));
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    int64_t last = now_ns(CLOCK_REALTIME);
    CHECK(last == 1700000000000000000LL || last == 1700000001000000000LL, "one setter's value: %lld", (long long)last);
    CHECK(now_ns(CLOCK_MONOTONIC) == monotonic, "monotonic untouched by the setters");

    int64_t moved = host_wall_offset() - host_before;
    if (moved > 500000000LL || moved < -500000000LL) {
        struct timespec restored = tc_timespec_from_ns(tc_real_ns(CLOCK_BOOTTIME) + host_before);
        tc_raw_syscall(SYS_clock_settime, CLOCK_REALTIME, &restored);
        CHECK(0, "the host's clock moved by %lld ns (put back)", (long long)moved);
    }
}

static volatile int stop_readers;
static long long reader_violations;

static void *reader(void *unused) {
    (void)unused;
    int64_t last = now_ns(CLOCK_MONOTONIC), last_boot = now_ns(CLOCK_BOOTTIME);
    long long violations = 0;
    while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
        int64_t value = now_ns(CLOCK_MONOTONIC), boot = now_ns(CLOCK_BOOTTIME);
        if (value < last || boot < last_boot) violations++;
        last = value;
        last_boot = boot;
        (void)now_ns(CLOCK_REALTIME);
    }
    __atomic_fetch_add(&reader_violations, violations, __ATOMIC_RELAXED);
    return NULL;
}

/* Threads read while this one applies verbs: monotonic never goes back, and
   under TSan, the seqlock shows no data race. */
void test_concurrent_verbs(void) {
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) pthread_create(&threads[i], NULL, reader, NULL);
    unsigned seed = 12345;
    for (int i = 0; i < 2000; i++) {
        switch (rand_r(&seed) % 5) {
        case 0: apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0); break;
        case 1: apply(TC_VERB_SET_RATE, TC_WALL_KEEP, 0, TC_RATE_ONE * (1 + rand_r(&seed) % 100)); break;
        case 2: apply(TC_VERB_ADVANCE, TC_WALL_KEEP, rand_r(&seed) % 1000000000, 0); break;
        case 3: apply(TC_VERB_SET_WALL, TC_WALL_RELATIVE, -(int64_t)(rand_r(&seed) % 1000000000), 0); break;
        default: apply(TC_VERB_RESET, TC_WALL_KEEP, 0, 0); break;
        }
    }
    __atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    CHECK(reader_violations == 0, "%lld monotonic violations", reader_violations);
}

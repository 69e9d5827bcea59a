/*
 * The shim's own tests, compiled together with the shim's sources (so its
 * interposers replace libc's in this executable) and run under ASan/UBSan
 * and under TSan by scripts/test-shim-sanitizers.sh.
 *
 * The process creates a session segment, then re-executes itself with
 * TIMECTL_SEGMENT set, because the shim attaches when it initialises, and
 * its constructor runs before main.
 */
#define _GNU_SOURCE
#include "timectl_program.h"
#include "timectl_segment_io.h"
#include "timectl_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(condition, ...)                                                   \
    do {                                                                        \
        if (!(condition)) {                                                     \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct tc_segment *segment;

static void apply(int kind, int wall, int64_t value, uint64_t rate) {
    struct tc_verb verb = {.kind = kind, .wall = wall, .value = value, .rate = rate};
    struct tc_failure failure = {0};
    CHECK(tc_segment_lock(segment, 5000000000LL, &failure) == TC_OK, "lock");
    int result = tc_segment_apply(segment, &verb, NULL);
    tc_segment_unlock(segment);
    CHECK(result == TC_OK, "verb %d: %s", kind, tc_result_phrase(result));
}

/* A real pause: every sleep function here is the shim's, and virtual. */
static void real_pause_ms(long milliseconds) {
    struct timespec pause = {0, milliseconds * 1000000};
    tc_raw_syscall(SYS_nanosleep, &pause, NULL);
}

/* Waits (a real second at most) until `count` waits are listed in the segment. */
static int wait_for_waits(int count) {
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

static void test_frozen_reads(void) {
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
static void test_setting_the_clock(void) {
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
static void test_concurrent_verbs(void) {
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

/* ---- waits: each runs in a thread while this one ticks ---- */

struct waiter {
    pthread_t thread;
    int64_t elapsed;
    int result;
};

static int pipe_fds[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;

static void *sleeper(void *argument) {
    struct waiter *self = argument;
    int64_t start = now_ns(CLOCK_MONOTONIC);
    struct timespec request = {5, 0};
    self->result = nanosleep(&request, NULL);
    self->elapsed = now_ns(CLOCK_MONOTONIC) - start;
    return NULL;
}

static void *poller(void *argument) {
    struct waiter *self = argument;
    int64_t start = now_ns(CLOCK_MONOTONIC);
    struct pollfd fds = {pipe_fds[0], POLLIN, 0};
    self->result = poll(&fds, 1, 5000);
    self->elapsed = now_ns(CLOCK_MONOTONIC) - start;
    return NULL;
}

static void *cond_waiter(void *argument) {
    struct waiter *self = argument;
    int64_t start = now_ns(CLOCK_MONOTONIC);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&lock);
    self->result = pthread_cond_timedwait(&cond, &lock, &deadline);
    pthread_mutex_unlock(&lock);
    self->elapsed = now_ns(CLOCK_MONOTONIC) - start;
    return NULL;
}

static void test_waits_follow_ticks(void) {
    apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0);
    CHECK(pipe(pipe_fds) == 0, "pipe");
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&cond, &attributes);
    struct waiter waiters[3];
    void *(*bodies[3])(void *) = {sleeper, poller, cond_waiter};
    for (int i = 0; i < 3; i++) pthread_create(&waiters[i].thread, NULL, bodies[i], &waiters[i]);
    CHECK(wait_for_waits(3), "three waits listed");
    apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 4000000000LL, 0);
    real_pause_ms(20);
    CHECK(wait_for_waits(3), "still waiting after 4 of 5 seconds");
    apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 1000000000LL, 0);
    for (int i = 0; i < 3; i++) {
        pthread_join(waiters[i].thread, NULL);
        CHECK(waiters[i].elapsed == 5000000000LL, "waiter %d woke after %lld ns", i, (long long)waiters[i].elapsed);
    }
    CHECK(waiters[0].result == 0, "nanosleep completed");
    CHECK(waiters[1].result == 0, "poll timed out");
    CHECK(waiters[2].result == ETIMEDOUT, "cond wait timed out");
}

/* A virtual wait converted to real time (tc_real_wait_ns): never ends before
   its deadline, and is at most 1 ns longer than needed. */
static void test_real_wait_conversion(void) {
    const int64_t second = 1000000000LL;
    CHECK(tc_real_wait_ns(5 * second, 5 * second, TC_RATE_ONE) == 0, "due");
    CHECK(tc_real_wait_ns(6 * second, 5 * second, TC_RATE_ONE) == 0, "past due");
    CHECK(tc_real_wait_ns(0, second, 0) == TC_FOREVER, "a clock that stands still waits for a verb");
    CHECK(tc_real_wait_ns(0, second, TC_RATE_ONE) == second, "rate 1");
    CHECK(tc_real_wait_ns(0, second, 2 * TC_RATE_ONE) == second / 2, "rate 2");
    CHECK(tc_real_wait_ns(0, second, TC_RATE_ONE / 2) == 2 * second, "rate 0.5");
    CHECK(tc_real_wait_ns(0, 3, 2 * TC_RATE_ONE) == 2, "1.5 ns rounds up");
    CHECK(tc_real_wait_ns(0, 365 * 86400 * second, TC_RATE_MIN) == TC_FOREVER, "a year at 0.001");
    CHECK(tc_real_wait_ns(INT64_MIN, INT64_MAX, TC_RATE_ONE) == TC_FOREVER, "the widest distance");
    CHECK(tc_real_wait_ns(INT64_MIN, INT64_MAX, TC_RATE_MAX) > 0, "the widest distance at the highest rate");
    const uint64_t rates[] = {TC_RATE_MIN, TC_RATE_ONE / 3, TC_RATE_ONE - 1, TC_RATE_ONE + 1, 3 * TC_RATE_ONE,
                              7 * TC_RATE_ONE / 5, 1000 * TC_RATE_ONE + 12345, TC_RATE_MAX};
    const int64_t distances[] = {1, 2, 3, 999, 1000001, second - 1, 86400 * second + 7};
    for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++) {
        for (size_t d = 0; d < sizeof(distances) / sizeof(distances[0]); d++) {
            int64_t now = -7 * second, deadline = now + distances[d];
            int64_t real = tc_real_wait_ns(now, deadline, rates[r]);
            CHECK(tc_scale(real, rates[r]) >= distances[d], "rate %llu, %lld ns: %lld real ns end early",
                  (unsigned long long)rates[r], (long long)distances[d], (long long)real);
            CHECK(real == 0 || tc_scale(real - 1, rates[r]) < distances[d], "rate %llu, %lld ns: %lld real ns end late",
                  (unsigned long long)rates[r], (long long)distances[d], (long long)real);
        }
    }
}

static void test_periodic_timerfd(void) {
    apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0);
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec every_second = {{1, 0}, {1, 0}};
    CHECK(timerfd_settime(timer, 0, &every_second, NULL) == 0, "timerfd_settime");
    apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 3000000000LL, 0);
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = timer}, out;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer, &event);
    CHECK(epoll_wait(epoll_fd, &out, 1, -1) == 1, "the timerfd fired");
    uint64_t expirations = 0;
    CHECK(read(timer, &expirations, sizeof(expirations)) == sizeof(expirations) && expirations == 3,
          "3 expirations, got %llu", (unsigned long long)expirations);
    close(epoll_fd);
    close(timer);
}

static int listed_waits(void) {
    int listed = 0;
    for (uint32_t slot = 0; slot < segment->header.wait_capacity; slot++) {
        struct tc_wait_slot entry;
        listed += tc_wait_read(segment, slot, &entry);
    }
    return listed;
}

/* A thread cancelled in the middle of a wait leaves nothing listed. */
static void test_cancelled_waiters_leave_no_entry(void) {
    apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0);
    struct waiter waiters[3];
    void *(*bodies[3])(void *) = {sleeper, poller, cond_waiter};
    for (int i = 0; i < 3; i++) pthread_create(&waiters[i].thread, NULL, bodies[i], &waiters[i]);
    CHECK(wait_for_waits(3), "three waits listed");
    for (int i = 0; i < 3; i++) {
        pthread_cancel(waiters[i].thread);
        void *returned;
        pthread_join(waiters[i].thread, &returned);
        CHECK(returned == PTHREAD_CANCELED, "waiter %d was cancelled", i);
    }
    CHECK(listed_waits() == 0, "%d waits still listed", listed_waits());
    /* The condition waiter was cancelled inside the wait: it took the mutex back. */
    CHECK(pthread_mutex_trylock(&lock) == EBUSY, "the cancelled condition waiter holds the mutex, as POSIX says");
}

/* A program that closes every descriptor (as daemons do) cannot close the
   shim's own, so their numbers are never handed out for its files. */
static void test_close_all_spares_shim_descriptors(void) {
    apply(TC_VERB_SET_RATE, TC_WALL_KEEP, 0, TC_RATE_ONE * 1000);
    struct pollfd none;
    poll(&none, 0, 1); /* makes this thread's wake eventfd */
    for (int fd = 3; fd < 1024; fd++) close(fd);
    int survivors = 0;
    for (int fd = 3; fd < 1024; fd++) survivors += fcntl(fd, F_GETFD) >= 0;
    CHECK(survivors >= 1, "the wake eventfd survives a close-all loop");
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    int after = 0;
    for (int fd = 3; fd < 1024; fd++) after += fcntl(fd, F_GETFD) >= 0;
    CHECK(after == survivors + 2, "a new pipe takes new numbers");
    CHECK(poll(&none, 0, 1) == 0, "waits still work");
    close(fds[0]);
    close(fds[1]);
    apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0);
}

static void test_fork_child_stays_attached(void) {
    apply(TC_VERB_FREEZE, TC_WALL_ABSOLUTE, 42LL * 1000000000LL, 0);
    pid_t child = fork();
    if (child == 0) _exit(time(NULL) == 42 ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child reads the session");
}

/* ---- signal handlers: the shim's trampoline is invisible ---- */

static volatile sig_atomic_t plain_calls, siginfo_value, siginfo_code;

static void plain_handler(int signal) {
    (void)signal;
    plain_calls++;
}

static void other_handler(int signal) { (void)signal; }

static void siginfo_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)context;
    siginfo_value = info->si_value.sival_int;
    siginfo_code = info->si_code;
}

static void test_signal_handlers_look_untouched(void) {
    struct sigaction action, old;
    memset(&action, 0, sizeof(action));
    action.sa_handler = plain_handler;
    action.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGUSR1, &action, NULL) == 0, "sigaction");
    CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == plain_handler, "a query shows the application's handler");
    CHECK((old.sa_flags & SA_RESTART) && !(old.sa_flags & SA_SIGINFO), "and its flags: 0x%x", old.sa_flags);
    CHECK(raise(SIGUSR1) == 0 && plain_calls == 1, "the handler runs, %d calls", (int)plain_calls);
    CHECK(signal(SIGUSR1, other_handler) == plain_handler, "signal() returns the previous handler");
    CHECK(signal(SIGUSR1, SIG_DFL) == other_handler, "and again");
    CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == SIG_DFL, "the default is the default");
    CHECK(sigaction(0, &action, NULL) == -1 && errno == EINVAL, "bad signals are refused as libc does");
    CHECK(signal(SIGKILL, plain_handler) == SIG_ERR && errno == EINVAL, "SIGKILL cannot be caught");

    memset(&action, 0, sizeof(action));
    action.sa_sigaction = siginfo_handler;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND;
    CHECK(sigaction(SIGUSR2, &action, NULL) == 0, "sigaction with SA_SIGINFO");
    CHECK(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_sigaction == siginfo_handler && (old.sa_flags & SA_SIGINFO),
          "a query shows it");
    union sigval value = {.sival_int = 42};
    CHECK(sigqueue(getpid(), SIGUSR2, value) == 0, "sigqueue");
    /* ThreadSanitizer delivers signals at its next intercepted call (pthread_sigmask is one), not at once. */
    for (int tries = 0; tries < 1000 && siginfo_value != 42; tries++) {
        sigset_t current;
        pthread_sigmask(SIG_SETMASK, NULL, &current);
        real_pause_ms(1);
    }
    CHECK(siginfo_value == 42 && siginfo_code == SI_QUEUE, "the handler gets the siginfo: value %d code %d",
          (int)siginfo_value, (int)siginfo_code);
    CHECK(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == SIG_DFL, "SA_RESETHAND reset it to the default");
}

/* A signal that arrives just as a verb has woken a virtual sleep still ends
   it with EINTR, and the time left is virtual (the race is tried many times). */
struct interrupted_sleep {
    pthread_t thread;
    int result, error;
    struct timespec left;
};

static void *sleep_to_be_interrupted(void *argument) {
    struct interrupted_sleep *self = argument;
    struct timespec request = {100, 0};
    self->result = nanosleep(&request, &self->left);
    self->error = errno;
    return NULL;
}

__attribute__((unused)) static void test_signal_right_after_a_verb_interrupts_the_sleep(void) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = plain_handler;
    sigaction(SIGUSR1, &action, NULL);
    int lost = 0, wrong = 0;
    for (int round = 0; round < 50; round++) {
        apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0);
        struct interrupted_sleep sleeper = {0};
        pthread_create(&sleeper.thread, NULL, sleep_to_be_interrupted, &sleeper);
        wait_for_waits(1);
        apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 30000000000LL, 0);
        pthread_kill(sleeper.thread, SIGUSR1);
        for (int tries = 0; tries < 200 && listed_waits() > 0; tries++) real_pause_ms(5);
        if (listed_waits() > 0) {
            lost++;
            apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 100000000000LL, 0);
        }
        pthread_join(sleeper.thread, NULL);
        if (!(sleeper.result == -1 && sleeper.error == EINTR && sleeper.left.tv_sec == 70 && sleeper.left.tv_nsec == 0))
            wrong++;
    }
    CHECK(lost == 0, "%d of 50 signals were lost", lost);
    CHECK(wrong == 0, "%d of 50 sleeps did not end with EINTR and 70 s left", wrong);
    signal(SIGUSR1, SIG_DFL);
}

/* ---- record and replay: a workload this binary runs in a child, recorded, then replayed ---- */

#define WORKLOAD_READS 300

struct workload {
    pthread_t thread;
    int reads;
    int64_t values[WORKLOAD_READS + 8];
};

static void *workload_thread(void *argument) {
    struct workload *self = argument;
    for (int i = 0; i < self->reads; i++) {
        self->values[i] = now_ns(CLOCK_REALTIME);
        if (i == WORKLOAD_READS / 2) {
            /* A timed wait whose deadline has passed: recorded, and replayed, as a wait. */
            struct timespec past = {1, 0};
            pthread_mutex_lock(&lock);
            pthread_cond_timedwait(&cond, &lock, &past);
            pthread_mutex_unlock(&lock);
        }
    }
    return NULL;
}

/* The Go runtime's way (trace_replay.c, "Go programs"): time.Now() reads the wall clock and at once the monotonic one;
   the runtime reads the monotonic clock on its own in between. Each round stores the three. */
static void *go_workload_thread(void *argument) {
    struct workload *self = argument;
    for (int i = 0; i + 3 <= self->reads; i += 3) {
        self->values[i] = now_ns(CLOCK_REALTIME);
        self->values[i + 1] = now_ns(CLOCK_MONOTONIC);
        self->values[i + 2] = now_ns(CLOCK_MONOTONIC);
    }
    return NULL;
}

const char *tc_trace_go_program_begins(struct tc_segment *segment);
extern struct tc_segment *tc_shim_attached_segment;  /* attached by the shim's constructor */

/*
 * Two threads read the clock; thread A reads SHIM_TEST_EXTRA more times (rounds, with SHIM_TEST_GO). Writes what
 * they read to SHIM_TEST_RESULTS. With SHIM_TEST_GO the process is taken for a Go program, as the shim takes one
 * at attach, and reads as Go does.
 */
static int run_workload(void) {
    const char *extra = getenv("SHIM_TEST_EXTRA");
    int go = getenv("SHIM_TEST_GO") != NULL;
    static struct workload threads[2];
    threads[0].reads = WORKLOAD_READS + (extra ? atoi(extra) : 0) * (go ? 3 : 1);
    threads[1].reads = WORKLOAD_READS;
    pthread_cond_init(&cond, NULL);
    if (go && (!tc_shim_attached_segment || tc_trace_go_program_begins(tc_shim_attached_segment) != NULL)) return 3;
    for (int i = 0; i < 2; i++) pthread_create(&threads[i].thread, NULL, go ? go_workload_thread : workload_thread, &threads[i]);
    for (int i = 0; i < 2; i++) pthread_join(threads[i].thread, NULL);
    FILE *results = fopen(getenv("SHIM_TEST_RESULTS"), "w");
    if (!results) return 2;
    for (int i = 0; i < 2; i++) {
        fwrite(&threads[i].reads, sizeof(int), 1, results);
        fwrite(threads[i].values, sizeof(int64_t), (size_t)threads[i].reads, results);
    }
    fclose(results);
    return 0;
}

static int run_self(char **argv, const char *const *variables) {
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; variables[i]; i += 2) setenv(variables[i], variables[i + 1], 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void *read_whole(const char *path, size_t *size) {
    FILE *file = fopen(path, "r");
    if (!file) return NULL;
    fseek(file, 0, SEEK_END);
    *size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    void *bytes = malloc(*size ? *size : 1);
    if (fread(bytes, 1, *size, file) != *size) *size = 0;
    fclose(file);
    return bytes;
}

static void write_whole(const char *path, const void *bytes, size_t size) {
    FILE *file = fopen(path, "w");
    CHECK(file && fwrite(bytes, 1, size, file) == size, "writing %s", path);
    if (file) fclose(file);
}

static void make_registry(const char *directory) {
    char path[512];
    snprintf(path, sizeof(path), "%s/" TC_REGISTRY_FILE, directory);
    size_t size = sizeof(struct tc_registry_header) + 256 * sizeof(struct tc_registry_entry);
    struct tc_registry_header *header = calloc(1, size);
    memcpy(header->magic, TC_REGISTRY_MAGIC, sizeof(header->magic));
    header->version = TC_RECORDING_VERSION;
    header->capacity = 256;
    for (int c = 0; c < TC_VCLOCKS; c++) header->last_replayed[c] = INT64_MIN;
    write_whole(path, header, size);
    free(header);
}

/* What each recorded thread's chunks hold, concatenated in sequence order. */
struct recorded_thread {
    uint8_t bytes[1 << 16];
    size_t length;
};

static void collect_raw(const char *directory, struct recorded_thread threads[3], struct tc_raw_header *process) {
    char path[512];
    snprintf(path, sizeof(path), "%s/p0-1.raw", directory);
    size_t size = 0;
    uint8_t *raw = read_whole(path, &size);
    CHECK(raw && size >= TC_RAW_HEADER_SIZE, "the workload's raw file %s", path);
    if (!raw || size < TC_RAW_HEADER_SIZE) return;
    memcpy(process, raw, sizeof(*process));
    CHECK(memcmp(process->magic, TC_RAW_MAGIC, 8) == 0 && process->image == 1 && process->lost_events == 0, "raw header");
    for (uint32_t sequence = 0; sequence < 64; sequence++) {
        for (size_t offset = TC_RAW_HEADER_SIZE; offset + TC_CHUNK_SIZE <= size; offset += TC_CHUNK_SIZE) {
            struct tc_chunk_header chunk;
            memcpy(&chunk, raw + offset, sizeof(chunk));
            if (chunk.magic != TC_CHUNK_MAGIC || chunk.sequence != sequence || chunk.thread > 2) continue;
            struct recorded_thread *thread = &threads[chunk.thread];
            if (thread->length + chunk.length > sizeof(thread->bytes)) continue;
            memcpy(thread->bytes + thread->length, raw + offset + sizeof(chunk), chunk.length);
            thread->length += chunk.length;
        }
    }
    free(raw);
}

/* Checks a recorded thread's events against what it read: its readings in order, and `expected_waits` waits. */
static void check_recorded(const struct recorded_thread *thread, const int64_t *values, int reads, int expected_waits,
                           const char *name) {
    struct tc_decoder decoder = {thread->bytes, thread->bytes + thread->length, {0}};
    struct tc_event event;
    int readings = 0, waits = 0, mismatched = 0, result;
    while ((result = tc_decode_event(&decoder, &event)) == 1) {
        if (event.type == TC_EVENT_READ) mismatched += readings >= reads || event.value != values[readings], readings++;
        if (event.type == TC_EVENT_WAIT_BEGIN) waits++;
    }
    CHECK(result == 0, "thread %s: the recording decodes to its end", name);
    CHECK(readings == reads && mismatched == 0 && waits == expected_waits, "thread %s: %d readings (%d differ), %d waits",
          name, readings, mismatched, waits);
}

/* The workload's results file: per thread, its count, then its values (copied out: they lie unaligned). */
struct workload_results {
    int counts[2];
    int64_t values[2][WORKLOAD_READS + 8];
};

static int read_results(const char *path, struct workload_results *results) {
    size_t size = 0, offset = 0;
    uint8_t *bytes = read_whole(path, &size);
    int complete = bytes != NULL;
    for (int t = 0; t < 2 && complete; t++) {
        complete = offset + sizeof(int) <= size;
        if (!complete) break;
        memcpy(&results->counts[t], bytes + offset, sizeof(int));
        offset += sizeof(int);
        size_t length = (size_t)results->counts[t] * sizeof(int64_t);
        complete = results->counts[t] >= 0 && results->counts[t] <= WORKLOAD_READS + 8 && offset + length <= size;
        if (complete) memcpy(results->values[t], bytes + offset, length);
        offset += length;
    }
    free(bytes);
    return complete;
}

/* The trace timectl would write from the workload's recording: one process, threads 1 and 2. */
static void write_workload_trace(const char *trace_path, const struct recorded_thread threads[3],
                                 const struct tc_raw_header *process) {
    struct tc_trace_header header;
    memset(&header, 0, sizeof(header));
    memcpy(header.magic, TC_TRACE_MAGIC, 8);
    header.version = TC_TRACE_VERSION;
    header.header_size = sizeof(header);
    header.process_count = 1;
    header.stream_count = 2;
    header.processes_offset = sizeof(header);
    header.streams_offset = header.processes_offset + sizeof(struct tc_trace_process);
    header.strings_offset = header.streams_offset + 2 * sizeof(struct tc_trace_stream);
    header.strings_size = 1 + process->argv_length;
    header.data_offset = header.strings_offset + header.strings_size;
    header.data_size = threads[1].length + threads[2].length;
    header.file_size = header.data_offset + header.data_size;
    struct tc_trace_process image = {0, 1, 1, 1, process->argv_length, process->pid, 0, 2};
    struct tc_trace_stream streams[2] = {{0, 1, 0, threads[1].length, 0, 0}, {0, 2, threads[1].length, threads[2].length, 0, 0}};
    uint8_t *file = calloc(1, header.file_size);
    memcpy(file + header.processes_offset, &image, sizeof(image));
    memcpy(file + header.streams_offset, streams, sizeof(streams));
    file[header.strings_offset] = '1';
    memcpy(file + header.strings_offset + 1, process->argv, process->argv_length);
    memcpy(file + header.data_offset, threads[1].bytes, threads[1].length);
    memcpy(file + header.data_offset + threads[1].length, threads[2].bytes, threads[2].length);
    memcpy(file, &header, sizeof(header));
    header.checksum = tc_trace_checksum(file, header.file_size);
    memcpy(file, &header, sizeof(header));
    CHECK(tc_trace_validate(file, header.file_size, 1, NULL) == NULL, "the trace is valid");
    write_whole(trace_path, file, header.file_size);
    free(file);
}

/* A replay's working directory, as timectl replay makes it: a registry, the claim of the one image, no divergences. */
static void prepare_replay(const char *replaying) {
    char path[512];
    mkdir(replaying, 0700);
    make_registry(replaying);
    snprintf(path, sizeof(path), "%s/" TC_CLAIMS_FILE, replaying);
    write_whole(path, "", 1);
    snprintf(path, sizeof(path), "%s/" TC_DIVERGENCES_FILE, replaying);
    write_whole(path, "", 0);
}

/* The workload recorded in `workdir`/NAME-recording, its trace written to `trace_path`; 1 if it ran and was recorded whole. */
static int record_workload(char **argv, const char *workdir, const char *name, int go, struct workload_results *recorded,
                           const char *trace_path) {
    char recording[256], results[256];
    snprintf(recording, sizeof(recording), "%s/%s-recording", workdir, name);
    snprintf(results, sizeof(results), "%s/%s-results", workdir, name);
    mkdir(recording, 0700);
    make_registry(recording);
    const char *record_variables[] = {"SHIM_TEST_WORKLOAD", "1", "TIMECTL_RECORD", recording, "SHIM_TEST_RESULTS", results,
                                      go ? "SHIM_TEST_GO" : NULL, "1", NULL};
    CHECK(run_self(argv, record_variables) == 0, "the recorded %s workload ran", name);
    int complete = read_results(results, recorded);
    CHECK(complete && recorded->counts[0] == WORKLOAD_READS && recorded->counts[1] == WORKLOAD_READS, "%s workload results", name);
    if (!complete) return 0;
    static struct recorded_thread threads[3];
    memset(threads, 0, sizeof(threads));
    struct tc_raw_header process;
    memset(&process, 0, sizeof(process));
    collect_raw(recording, threads, &process);
    CHECK(threads[0].length == 0, "%s: the main thread read nothing", name);
    check_recorded(&threads[1], recorded->values[0], WORKLOAD_READS, go ? 0 : 1, "A");
    check_recorded(&threads[2], recorded->values[1], WORKLOAD_READS, go ? 0 : 1, "B");
    write_workload_trace(trace_path, threads, &process);
    return 1;
}

/* Replays the trace at `trace_path` in `workdir`/NAME-replay, thread A going one step further than recorded; 1 if complete. */
static int replay_workload(char **argv, const char *workdir, const char *name, int go, const char *trace_path,
                           struct workload_results *replayed, char divergences_path[512]) {
    char replaying[256], results[256];
    snprintf(replaying, sizeof(replaying), "%s/%s-replay", workdir, name);
    snprintf(results, sizeof(results), "%s/%s-replayed", workdir, name);
    prepare_replay(replaying);
    snprintf(divergences_path, 512, "%s/" TC_DIVERGENCES_FILE, replaying);
    const char *replay_variables[] = {"SHIM_TEST_WORKLOAD", "1", "TIMECTL_REPLAY", trace_path, "TIMECTL_REPLAY_DIR", replaying,
                                      "SHIM_TEST_RESULTS", results, "SHIM_TEST_EXTRA", "1", go ? "SHIM_TEST_GO" : NULL, "1", NULL};
    CHECK(run_self(argv, replay_variables) == 0, "the replayed %s workload ran", name);
    return read_results(results, replayed);
}

static void test_record_and_replay(char **argv, const char *workdir) {
    char trace_path[256], path[512];
    snprintf(trace_path, sizeof(trace_path), "%s/workload.trace", workdir);
    static struct workload_results recorded, replayed;
    if (!record_workload(argv, workdir, "threads", 0, &recorded, trace_path)) return;
    const int64_t *a = recorded.values[0], *b = recorded.values[1];

    /* Replayed, thread A reading once more than it was recorded reading. */
    int complete = replay_workload(argv, workdir, "threads", 0, trace_path, &replayed, path);
    CHECK(complete && replayed.counts[0] == WORKLOAD_READS + 1, "thread A read once more");
    if (complete && replayed.counts[0] == WORKLOAD_READS + 1) {
        CHECK(memcmp(replayed.values[0], a, WORKLOAD_READS * sizeof(int64_t)) == 0, "thread A read its recorded values");
        CHECK(memcmp(replayed.values[1], b, WORKLOAD_READS * sizeof(int64_t)) == 0, "thread B read its recorded values");
        CHECK(replayed.values[0][WORKLOAD_READS] >= a[WORKLOAD_READS - 1], "after the divergence the clock went on from the last value");
    }
    size_t size = 0;
    struct tc_divergence *divergences = read_whole(path, &size);
    CHECK(divergences && size == sizeof(struct tc_divergence), "one divergence reported, %zu bytes", size);
    if (divergences && size == sizeof(struct tc_divergence)) {
        CHECK(divergences->reason == TC_DIVERGED_PAST_END && divergences->thread == 1 &&
                  divergences->call == WORKLOAD_READS + 2 && strcmp(divergences->path, "1") == 0 &&
                  divergences->asked.type == TC_EVENT_READ && divergences->asked.clock == CLOCK_REALTIME,
              "the divergence: reason %u thread %u call %u path %s", divergences->reason, divergences->thread,
              divergences->call, divergences->path);
    }
    free(divergences);
}

/*
 * A Go program is replayed per process (trace_replay.c): its two threads' time.Now() rounds hand out the recorded
 * (wall, monotonic) pairs in monotonic order, whichever thread asks; the runtime's own monotonic reads never go
 * back; one round more than recorded is one divergence of the process.
 */
static void test_go_replay(char **argv, const char *workdir) {
    char trace_path[256], path[512];
    snprintf(trace_path, sizeof(trace_path), "%s/go.trace", workdir);
    static struct workload_results recorded, replayed;
    if (!record_workload(argv, workdir, "go", 1, &recorded, trace_path)) return;
    int complete = replay_workload(argv, workdir, "go", 1, trace_path, &replayed, path);
    CHECK(complete && replayed.counts[0] == WORKLOAD_READS + 3, "thread A read one round more");
    if (!complete || replayed.counts[0] != WORKLOAD_READS + 3) return;
    const int rounds = WORKLOAD_READS / 3;
    int unmatched = 0, out_of_order = 0, went_back = 0;
    for (int t = 0; t < 2; t++) {
        int64_t last_observed = INT64_MIN, last_runtime = INT64_MIN;
        for (int i = 0; i < replayed.counts[t]; i += 3) {
            const int64_t *round = &replayed.values[t][i];
            int found = 0;
            for (int u = 0; u < 2 && !found; u++)
                for (int j = 0; j < rounds * 3 && !found; j += 3)
                    found = recorded.values[u][j] == round[0] && recorded.values[u][j + 1] == round[1];
            unmatched += !found;
            if (found) {
                out_of_order += round[1] < last_observed;
                last_observed = round[1];
            }
            went_back += round[2] < last_runtime;
            last_runtime = round[2];
        }
    }
    /* Two hundred recorded rounds, two hundred and one asked for: exactly one is not a recorded one. */
    CHECK(unmatched == 1, "%d of the replayed time.Now() rounds are not recorded (wall, monotonic) pairs", unmatched);
    CHECK(out_of_order == 0, "%d rounds took an observation earlier than the thread's previous one", out_of_order);
    CHECK(went_back == 0, "%d of the runtime's own monotonic reads went back", went_back);
    size_t size = 0;
    struct tc_divergence *divergences = read_whole(path, &size);
    CHECK(divergences && size == sizeof(struct tc_divergence), "one divergence for the process, %zu bytes", size);
    if (divergences && size == sizeof(struct tc_divergence)) {
        CHECK(divergences->reason == TC_DIVERGED_GO_PAST_END && divergences->call == 2 * rounds + 1 &&
                  strcmp(divergences->path, "1") == 0 && divergences->asked.clock == CLOCK_REALTIME,
              "the divergence: reason %u call %u path %s", divergences->reason, divergences->call, divergences->path);
    }
    free(divergences);
}

/* Appends one ELF note to `notes` at `at`, padded to `alignment`; returns where the next one goes. */
static size_t put_note(unsigned char *notes, size_t at, const char *name, uint32_t name_size, uint32_t type,
                       uint32_t desc_size, size_t alignment) {
    uint32_t header[3] = {name_size, desc_size, type};
    memcpy(notes + at, header, sizeof(header));
    memcpy(notes + at + 12, name, name_size);
    at = (at + 12 + name_size + alignment - 1) & ~(alignment - 1);
    memset(notes + at, 0xA5, desc_size);
    return (at + desc_size + alignment - 1) & ~(alignment - 1);
}

/* The notes checked from a heap copy of exactly `size` bytes: AddressSanitizer sees any read past them. */
static int go_program(const unsigned char *notes, size_t size, size_t alignment) {
    unsigned char *copy = malloc(size ? size : 1);
    memcpy(copy, notes, size);
    int found = tc_notes_mark_go_program(copy, size, alignment);
    free(copy);
    return found;
}

/* The one test of "is this a Go program" (timectl_program.h), as both its users meet notes. */
static void test_go_notes(void) {
    static unsigned char notes[512];
    /* What a cgo build carries: the GNU build id, then Go's ("Go\0\0", type 4). */
    size_t gnu_end = put_note(notes, 0, "GNU", 4, 3, 20, 4);
    size_t go_end = put_note(notes, gnu_end, "Go\0", 4, 4, 83, 4);
    CHECK(go_program(notes, go_end, 4), "the Go linker's build-id note after the GNU one");
    CHECK(!go_program(notes, gnu_end, 4), "the GNU build id alone");
    CHECK(!go_program(notes, gnu_end + 12 + 2, 4), "a Go note cut inside its name");
    CHECK(!go_program(notes, 0, 4) && !go_program(notes, 11, 4), "no note, or less than a note header");

    size_t end = put_note(notes, 0, "Go", 3, 1, 8, 4);
    CHECK(go_program(notes, end, 4), "an owner of 3 bytes (\"Go\\0\") and another Go note type");
    end = put_note(notes, 0, "Gopher", 7, 4, 8, 4);
    CHECK(!go_program(notes, end, 4), "an owner that only begins with Go");
    end = put_note(notes, 0, "Go\0x", 4, 4, 8, 4);
    CHECK(!go_program(notes, end, 4), "an owner with more than NULs after Go");

    /* A descriptor size that points far past the end ends the walk. */
    memset(notes, 0, sizeof(notes));
    put_note(notes, 0, "GNU", 4, 3, 0, 4);
    uint32_t huge = UINT32_MAX;
    memcpy(notes + 4, &huge, sizeof(huge));
    put_note(notes, 16, "Go\0", 4, 4, 8, 4);
    CHECK(!go_program(notes, 36, 4), "a note whose descriptor runs past the segment hides what follows");

    /* An 8-aligned segment (.note.gnu.property): a 12-byte descriptor is padded to 16. */
    end = put_note(notes, 0, "GNU", 4, 5, 12, 8);
    CHECK(end == 32, "an 8-aligned note takes 32 bytes, %zu", end);
    end = put_note(notes, end, "Go\0", 4, 4, 8, 8);
    CHECK(go_program(notes, end, 8), "a Go note after an 8-aligned one");

    /* The controller's note, as controller/controller.c lays it out. */
    end = put_note(notes, 0, "timectl", 8, TC_CONTROLLER_NOTE_TYPE, 4, 4);
    CHECK(tc_notes_include(notes, end, 4, "timectl", TC_CONTROLLER_NOTE_TYPE), "the controller note");
    CHECK(!tc_notes_include(notes, end, 4, "timectl", TC_CONTROLLER_NOTE_TYPE + 1), "another type of timectl's");
    CHECK(!go_program(notes, end, 4), "the controller note is not Go's");

    /* And a program of the same file test: this C test program is no Go program. */
    struct tc_program program;
    tc_program_inspect(AT_FDCWD, "/proc/self/exe", &program);
    CHECK(program.kind == TC_PROGRAM_CONTROLLABLE, "this test program's kind: %d", (int)program.kind);
}

int main(int argc, char **argv) {
    const char *path = getenv("TIMECTL_SEGMENT");
    if (!path) {
        char directory[] = "/tmp/timectl-shim-test-XXXXXX";
        if (!mkdtemp(directory)) return 2;
        int dirfd = open(directory, O_RDONLY | O_DIRECTORY);
        struct tc_mapping mapping;
        struct tc_failure failure = {0};
        if (tc_segment_create(dirfd, "shimtest", "shimtest.seg", &mapping, &failure) != TC_OK) {
            fprintf(stderr, "cannot create a segment: %s\n", tc_result_phrase(failure.result));
            return 2;
        }
        tc_segment_unmap(&mapping);
        char segment_path[256];
        snprintf(segment_path, sizeof(segment_path), "%s/shimtest.seg", directory);
        setenv("TIMECTL_SEGMENT", segment_path, 1);
        pid_t child = fork();
        if (child == 0) {
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status = 0;
        waitpid(child, &status, 0);
        /* The recorded workloads read a running clock, whatever the tests in the child left it at. */
        struct tc_mapping running;
        if (tc_segment_open(AT_FDCWD, segment_path, &running, &failure) == TC_OK) {
            segment = running.segment;
            apply(TC_VERB_RESET, TC_WALL_KEEP, 0, 0);
            tc_segment_unmap(&running);
            segment = NULL;
        }
        test_record_and_replay(argv, directory);
        test_go_replay(argv, directory);
        char cleanup[600];
        snprintf(cleanup, sizeof(cleanup), "rm -rf '%s'", directory);
        if (system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", directory);
        close(dirfd);
        if (failures) fprintf(stderr, "%d record and replay test failures\n", failures);
        return failures ? 1 : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    (void)argc;
    if (getenv("SHIM_TEST_WORKLOAD")) return run_workload();
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    if (tc_segment_open(AT_FDCWD, path, &mapping, &failure) != TC_OK) return 2;
    segment = mapping.segment;
    test_real_wait_conversion();
    test_frozen_reads();
    test_setting_the_clock();
    test_concurrent_verbs();
    test_waits_follow_ticks();
    test_periodic_timerfd();
    /* AddressSanitizer cannot unwind from glibc's cancellation signal handler. */
    if (!getenv("SHIM_TEST_NO_ASYNC_CANCEL")) test_cancelled_waiters_leave_no_entry();
    test_fork_child_stays_attached();
    test_close_all_spares_shim_descriptors();
    test_signal_handlers_look_untouched();
    test_go_notes();
#ifndef __SANITIZE_THREAD__
    /* ThreadSanitizer calls signal handlers when it gets to them (at its next
       intercepted call), not when the kernel delivers the signal: the race
       this test tries is then TSan's, not the shim's. */
    test_signal_right_after_a_verb_interrupts_the_sleep();
#endif
    tc_segment_unmap(&mapping);
    if (failures) {
        fprintf(stderr, "%d shim test failures\n", failures);
        return 1;
    }
    printf("shim tests passed\n");
    return 0;
}

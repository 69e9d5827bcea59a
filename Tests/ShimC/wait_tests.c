/* Waits: each runs in a thread while the test ticks the session. */
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

void test_waits_follow_ticks(void) {
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
void test_real_wait_conversion(void) {
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

void test_periodic_timerfd(void) {
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


/* A thread cancelled in the middle of a wait leaves nothing listed. */
void test_cancelled_waiters_leave_no_entry(void) {
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
void test_close_all_spares_shim_descriptors(void) {
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

void test_fork_child_stays_attached(void) {
    apply(TC_VERB_FREEZE, TC_WALL_ABSOLUTE, 42LL * 1000000000LL, 0);
    pid_t child = fork();
    if (child == 0) _exit(time(NULL) == 42 ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child reads the session");
}

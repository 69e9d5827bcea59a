/*
 * Waits the way C programs wait, one kind per run, for the end-to-end tests:
 *   wait_probe KIND [ARGS]
 * Prints "ready" when it is about to block, then one line "KEY=VALUE ..."
 * with what the wait returned and the virtual CLOCK_MONOTONIC time that
 * passed (elapsed=NS). Exits 0, or 1 if the wait misbehaved on its own terms.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* glibc's clock-taking waits (2.30); musl has none: their kinds fail there with a line saying so. */
#ifndef __GLIBC__
static int unavailable(const char *name) {
    fprintf(stderr, "wait_probe: %s is not in this C library\n", name);
    exit(2);
}
#define pthread_cond_clockwait(cond, mutex, clock, deadline) unavailable("pthread_cond_clockwait")
#define sem_clockwait(semaphore, clock, deadline) unavailable("sem_clockwait")
#endif

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t started;

static void ready(void) {
    started = now_ns(CLOCK_MONOTONIC);
    printf("ready\n");
    fflush(stdout);
}

static int64_t elapsed(void) { return now_ns(CLOCK_MONOTONIC) - started; }

static struct timespec at(clockid_t clock, int64_t seconds) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += seconds;
    return ts;
}

static struct timespec after_ns(clockid_t clock, int64_t nanoseconds) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    int64_t total = ts.tv_nsec + nanoseconds;
    ts.tv_sec += total / 1000000000;
    ts.tv_nsec = total % 1000000000;
    return ts;
}

static clockid_t clock_named(const char *name) {
    return strcmp(name, "monotonic") == 0 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
}

static const char *error_name(int error) {
    return error == 0 ? "0" : error == ETIMEDOUT ? "ETIMEDOUT" : error == EINTR ? "EINTR" : strerror(error);
}

/* ---- condition variables, semaphores, mutexes ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static sem_t semaphore;
static int flag;

static void *signal_soon(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    flag = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static int cond_wait(clockid_t clock, int64_t nanoseconds, int signalled, int use_clockwait) {
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, clock);
    pthread_cond_init(&cond, &attributes);
    struct timespec deadline = after_ns(clock, nanoseconds);
    pthread_mutex_lock(&lock);
    ready();
    pthread_t thread;
    if (signalled) pthread_create(&thread, NULL, signal_soon, NULL);
    int result = 0;
    while (!flag && result == 0)
        result = use_clockwait ? pthread_cond_clockwait(&cond, &lock, clock, &deadline)
                               : pthread_cond_timedwait(&cond, &lock, &deadline);
    pthread_mutex_unlock(&lock);
    if (signalled) pthread_join(thread, NULL);
    printf("result=%s flag=%d elapsed=%lld\n", error_name(result), flag, (long long)elapsed());
    return 0;
}

static void *post_soon(void *unused) {
    (void)unused;
    sem_post(&semaphore);
    return NULL;
}

static int sem_wait_for(clockid_t clock, int64_t seconds, int posted) {
    sem_init(&semaphore, 0, 0);
    struct timespec deadline = at(clock, seconds);
    ready();
    pthread_t thread;
    if (posted) pthread_create(&thread, NULL, post_soon, NULL);
    int result = clock == CLOCK_REALTIME ? sem_timedwait(&semaphore, &deadline)
                                         : sem_clockwait(&semaphore, clock, &deadline);
    int error = result == 0 ? 0 : errno;
    if (posted) pthread_join(thread, NULL);
    printf("result=%s elapsed=%lld\n", error_name(error), (long long)elapsed());
    return 0;
}

static sem_t held;

static void *hold_forever(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    sem_post(&held);
    pause();
    return NULL;
}

static int mutex_wait(int64_t seconds) {
    sem_init(&held, 0, 0);
    pthread_t thread;
    pthread_create(&thread, NULL, hold_forever, NULL);
    while (sem_wait(&held) != 0) continue;
    struct timespec deadline = at(CLOCK_REALTIME, seconds);
    ready();
    int result = pthread_mutex_timedlock(&lock, &deadline);
    printf("result=%s elapsed=%lld\n", error_name(result), (long long)elapsed());
    return 0;
}

/* ---- descriptors ---- */

static int pipe_fds[2];

static void *write_soon(void *unused) {
    (void)unused;
    if (write(pipe_fds[1], "x", 1) != 1) abort();
    return NULL;
}

static int poll_wait(int64_t seconds, int written) {
    if (pipe(pipe_fds) != 0) return 2;
    struct pollfd fds = {pipe_fds[0], POLLIN, 0};
    ready();
    pthread_t thread;
    if (written) pthread_create(&thread, NULL, write_soon, NULL);
    int result = poll(&fds, 1, (int)(seconds * 1000));
    if (written) pthread_join(thread, NULL);
    printf("result=%d revents=%s elapsed=%lld\n", result, (fds.revents & POLLIN) ? "POLLIN" : "0",
           (long long)elapsed());
    return 0;
}

static int select_wait(int64_t seconds, int use_pselect) {
    if (pipe(pipe_fds) != 0) return 2;
    fd_set read_set;
    FD_ZERO(&read_set);
    FD_SET(pipe_fds[0], &read_set);
    ready();
    int result;
    if (use_pselect) {
        struct timespec timeout = {seconds, 0};
        result = pselect(pipe_fds[0] + 1, &read_set, NULL, NULL, &timeout, NULL);
        printf("result=%d set=%d elapsed=%lld\n", result, FD_ISSET(pipe_fds[0], &read_set), (long long)elapsed());
    } else {
        /* Linux's select leaves the time not slept in the timeout: none, once it timed out. */
        struct timeval timeout = {seconds, 0};
        result = select(pipe_fds[0] + 1, &read_set, NULL, NULL, &timeout);
        printf("result=%d set=%d left_us=%lld elapsed=%lld\n", result, FD_ISSET(pipe_fds[0], &read_set),
               (long long)timeout.tv_sec * 1000000 + timeout.tv_usec, (long long)elapsed());
    }
    return 0;
}

static int epoll_timeout(int64_t seconds) {
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (pipe(pipe_fds) != 0) return 2;
    struct epoll_event event = {.events = EPOLLIN, .data.fd = pipe_fds[0]};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, pipe_fds[0], &event);
    ready();
    struct epoll_event out;
    int result = epoll_wait(epoll_fd, &out, 1, (int)(seconds * 1000));
    printf("result=%d elapsed=%lld\n", result, (long long)elapsed());
    return 0;
}

/* A periodic timerfd in epoll, waited on with no timeout, as an event loop does. */
static int timerfd_periodic(int64_t interval_ms, int64_t wanted) {
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = timer};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer, &event);
    struct itimerspec setting = {{interval_ms / 1000, (interval_ms % 1000) * 1000000},
                                 {interval_ms / 1000, (interval_ms % 1000) * 1000000}};
    timerfd_settime(timer, 0, &setting, NULL);
    ready();
    uint64_t total = 0;
    while ((int64_t)total < wanted) {
        struct epoll_event out;
        if (epoll_wait(epoll_fd, &out, 1, -1) != 1) continue;
        uint64_t expirations = 0;
        if (read(timer, &expirations, sizeof(expirations)) != sizeof(expirations)) continue;
        total += expirations;
        printf("expirations=%llu elapsed=%lld\n", (unsigned long long)expirations, (long long)elapsed());
        fflush(stdout);
    }
    struct itimerspec left;
    timerfd_gettime(timer, &left);
    printf("total=%llu next_in=%lld\n", (unsigned long long)total,
           (long long)left.it_value.tv_sec * 1000000000LL + left.it_value.tv_nsec);
    return 0;
}

/*
 * A periodic timerfd closed while armed (a static program's close is a raw
 * system call the shim does not see). Prints "armed pid=PID", waits for
 * SIGUSR1, closes the timerfd and prints "closed", waits for SIGUSR1
 * again, and prints "elapsed=NS" from when it armed it.
 */
static int timerfd_closed(int64_t seconds) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec setting = {{seconds, 0}, {seconds, 0}};
    timerfd_settime(timer, 0, &setting, NULL);
    started = now_ns(CLOCK_MONOTONIC);
    printf("armed pid=%d\n", (int)getpid());
    fflush(stdout);
    int signal;
    sigwait(&usr1, &signal);
    close(timer);
    printf("closed\n");
    fflush(stdout);
    sigwait(&usr1, &signal);
    printf("elapsed=%lld\n", (long long)elapsed());
    return 0;
}

/* ---- signals from timers ---- */

static volatile sig_atomic_t alarmed;

static void on_alarm(int signal) {
    (void)signal;
    alarmed = 1;
}

static int interval_timer(const char *how, int64_t seconds) {
    struct sigaction action = {0};
    action.sa_handler = on_alarm;
    sigaction(SIGALRM, &action, NULL);
    if (strcmp(how, "alarm") == 0) {
        alarm((unsigned int)seconds);
    } else {
        struct itimerval value = {{0, 0}, {seconds, 0}};
        setitimer(ITIMER_REAL, &value, NULL);
    }
    struct itimerval left;
    getitimer(ITIMER_REAL, &left);
    ready();
    while (!alarmed) pause();
    printf("signal=SIGALRM initially_left=%lld elapsed=%lld\n", (long long)left.it_value.tv_sec,
           (long long)elapsed());
    return 0;
}

static int posix_timer(int64_t seconds) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct sigevent event = {0};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGUSR2;
    event.sigev_value.sival_int = 42;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return 2;
    struct itimerspec setting = {{0, 0}, {seconds, 0}};
    timer_settime(timer, 0, &setting, NULL);
    ready();
    siginfo_t info;
    int signal = sigwaitinfo(&set, &info);
    printf("signal=%s code=%s value=%d elapsed=%lld\n", signal == SIGUSR2 ? "SIGUSR2" : "?",
           info.si_code == SI_TIMER ? "SI_TIMER" : "other", info.si_value.sival_int, (long long)elapsed());
    return 0;
}

/* SIGEV_THREAD: libc runs the function on a thread of its own (glibc: a helper thread that waits for the
   kernel timer's signal, then starts one). */
static sem_t notified;
static volatile int notified_value;

static void on_timer_thread(union sigval value) {
    notified_value = value.sival_int;
    sem_post(&notified);
}

static int thread_timer(int64_t seconds) {
    sem_init(&notified, 0, 0);
    struct sigevent event = {0};
    event.sigev_notify = SIGEV_THREAD;
    event.sigev_notify_function = on_timer_thread;
    event.sigev_value.sival_int = 7;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return 2;
    struct itimerspec setting = {{0, 0}, {seconds, 0}};
    timer_settime(timer, 0, &setting, NULL);
    ready();
    while (sem_wait(&notified) != 0) {}
    printf("notified=1 value=%d elapsed=%lld\n", notified_value, (long long)elapsed());
    timer_delete(timer);
    return 0;
}

/* ---- sleeps ---- */

static void on_usr1(int signal) { (void)signal; }

static int interrupted_sleep(int64_t seconds) {
    struct sigaction action = {0};
    action.sa_handler = on_usr1;
    action.sa_flags = SA_RESTART; /* nanosleep is never restarted, whatever the flags */
    sigaction(SIGUSR1, &action, NULL);
    struct timespec request = {seconds, 0}, left = {0, 0};
    ready();
    int result = nanosleep(&request, &left);
    printf("result=%s left=%lld elapsed=%lld\n", error_name(result == 0 ? 0 : errno),
           (long long)left.tv_sec * 1000000000LL + left.tv_nsec, (long long)elapsed());
    return 0;
}

static int absolute_wall_sleep(int64_t seconds) {
    struct timespec deadline = at(CLOCK_REALTIME, seconds);
    ready();
    int result = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &deadline, NULL);
    int64_t wall = now_ns(CLOCK_REALTIME);
    printf("result=%s past_deadline=%d elapsed=%lld\n", error_name(result),
           wall >= (int64_t)deadline.tv_sec * 1000000000LL + deadline.tv_nsec, (long long)elapsed());
    return 0;
}

/* A relative clock_nanosleep on CLOCK_REALTIME: it measures elapsed time, whatever the wall clock does. */
static int relative_wall_sleep(int64_t milliseconds) {
    struct timespec request = {milliseconds / 1000, (milliseconds % 1000) * 1000000};
    int64_t wall = now_ns(CLOCK_REALTIME);
    ready();
    int result = clock_nanosleep(CLOCK_REALTIME, 0, &request, NULL);
    printf("result=%s wall_moved=%lld elapsed=%lld\n", error_name(result), (long long)(now_ns(CLOCK_REALTIME) - wall),
           (long long)elapsed());
    return 0;
}

static void *sleep_long(void *unused) {
    (void)unused;
    struct timespec request = {3600, 0};
    nanosleep(&request, NULL);
    return NULL;
}

static int many_sleepers(int count) {
    pthread_t threads[count];
    for (int i = 0; i < count; i++) pthread_create(&threads[i], NULL, sleep_long, NULL);
    ready();
    for (int i = 0; i < count; i++) pthread_join(threads[i], NULL);
    printf("result=0 elapsed=%lld\n", (long long)elapsed());
    return 0;
}

/*
 * Many threads in timed waits at once, each until its own deadline: thread
 * I (from 0) waits I + 1 seconds — the even ones in nanosleep, the odd ones
 * on a condition variable never signalled (a futex wait with a timeout),
 * until an absolute deadline. All measure from one instant read before any
 * starts, so a wait that began late or ended late shows. Prints "ready"
 * once every thread is about to wait, then "thread=I slept=NS" as each wakes.
 */
static int64_t staggered_start;
static pthread_barrier_t staggered_barrier;
static pthread_mutex_t staggered_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t staggered_never;

static void *staggered_sleeper(void *argument) {
    int index = (int)(intptr_t)argument;
    int64_t wake = staggered_start + (int64_t)(index + 1) * 1000000000LL;
    pthread_barrier_wait(&staggered_barrier);
    if (index % 2 == 0) {
        struct timespec duration = {index + 1, 0};
        while (nanosleep(&duration, &duration) != 0 && errno == EINTR) {}
    } else {
        struct timespec deadline = {(time_t)(wake / 1000000000LL), (long)(wake % 1000000000LL)};
        pthread_mutex_lock(&staggered_lock);
        while (pthread_cond_timedwait(&staggered_never, &staggered_lock, &deadline) == 0) {}
        pthread_mutex_unlock(&staggered_lock);
    }
    int64_t slept = now_ns(CLOCK_MONOTONIC) - staggered_start;
    pthread_mutex_lock(&staggered_lock);
    printf("thread=%d slept=%lld\n", index, (long long)slept);
    fflush(stdout);
    pthread_mutex_unlock(&staggered_lock);
    return NULL;
}

static int staggered_sleepers(int count) {
    if (count <= 0) return 2;
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&staggered_never, &attributes);
    pthread_barrier_init(&staggered_barrier, NULL, (unsigned)count + 1);
    staggered_start = now_ns(CLOCK_MONOTONIC);
    pthread_t threads[count];
    for (int i = 0; i < count; i++)
        if (pthread_create(&threads[i], NULL, staggered_sleeper, (void *)(intptr_t)i) != 0) return 1;
    pthread_barrier_wait(&staggered_barrier);
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < count; i++) pthread_join(threads[i], NULL);
    return 0;
}

/* A 0 s timer re-armed for ever: a timerfd set to expire "now" after every
   expiration. It never blocks for long, so no scheduler can step it forward;
   only the loop guard ends it. */
static _Noreturn void rearm_zero_timer(void) {
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = timer};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer, &event);
    ready();
    for (;;) {
        struct itimerspec due_now = {{0, 0}, {0, 0}};
        clock_gettime(CLOCK_MONOTONIC, &due_now.it_value);
        timerfd_settime(timer, TFD_TIMER_ABSTIME, &due_now, NULL);
        struct epoll_event out;
        uint64_t expirations;
        if (epoll_wait(epoll_fd, &out, 1, -1) == 1) (void)!read(timer, &expirations, sizeof(expirations));
    }
}

int main(int argc, char **argv) {
    if (argc < 2) goto usage;
    const char *kind = argv[1];
    int64_t n = argc > 2 ? atoll(argv[argc - 1]) : 0;
    if (strcmp(kind, "cond") == 0 && argc == 4) return cond_wait(clock_named(argv[2]), n * 1000000000, 0, 0);
    if (strcmp(kind, "cond-ms") == 0 && argc == 3) return cond_wait(CLOCK_MONOTONIC, n * 1000000, 0, 0);
    if (strcmp(kind, "cond-clockwait") == 0 && argc == 4) return cond_wait(clock_named(argv[2]), n * 1000000000, 0, 1);
    if (strcmp(kind, "cond-signalled") == 0) return cond_wait(CLOCK_MONOTONIC, 3600LL * 1000000000, 1, 0);
    if (strcmp(kind, "sem") == 0 && argc == 4) return sem_wait_for(clock_named(argv[2]), n, 0);
    if (strcmp(kind, "sem-posted") == 0) return sem_wait_for(CLOCK_REALTIME, 3600, 1);
    if (strcmp(kind, "mutex") == 0 && argc == 3) return mutex_wait(n);
    if (strcmp(kind, "poll") == 0 && argc == 3) return poll_wait(n, 0);
    if (strcmp(kind, "poll-ready") == 0) return poll_wait(3600, 1);
    if (strcmp(kind, "select") == 0 && argc == 3) return select_wait(n, 0);
    if (strcmp(kind, "pselect") == 0 && argc == 3) return select_wait(n, 1);
    if (strcmp(kind, "epoll") == 0 && argc == 3) return epoll_timeout(n);
    if (strcmp(kind, "timerfd-periodic") == 0 && argc == 4) return timerfd_periodic(atoll(argv[2]), n);
    if (strcmp(kind, "timerfd-closed") == 0 && argc == 3) return timerfd_closed(n);
    if ((strcmp(kind, "alarm") == 0 || strcmp(kind, "setitimer") == 0) && argc == 3) return interval_timer(kind, n);
    if (strcmp(kind, "timer-signal") == 0 && argc == 3) return posix_timer(n);
    if (strcmp(kind, "timer-thread") == 0 && argc == 3) return thread_timer(n);
    if (strcmp(kind, "nanosleep-eintr") == 0 && argc == 3) return interrupted_sleep(n);
    if (strcmp(kind, "abs-wall-sleep") == 0 && argc == 3) return absolute_wall_sleep(n);
    if (strcmp(kind, "rel-wall-sleep-ms") == 0 && argc == 3) return relative_wall_sleep(n);
    if (strcmp(kind, "sleepers") == 0 && argc == 3) return many_sleepers((int)n);
    if (strcmp(kind, "staggered-sleepers") == 0 && argc == 3) return staggered_sleepers((int)n);
    if (strcmp(kind, "rearm-zero-timer") == 0) rearm_zero_timer();
usage:
    fprintf(stderr, "usage: wait_probe KIND [ARGS] (see the source)\n");
    return 2;
}

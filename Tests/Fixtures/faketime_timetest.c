/*
 * What libfaketime's own `timetest` checks, written anew for timectl
 * (Tests/TimeControlKitTests/LibfaketimeParityTests.swift runs it):
 * timed condition waits on both clocks, POSIX timer overruns while the
 * timer's signal is blocked, a one-shot absolute timer, and every way of
 * reading the wall clock. Prints one `name value` line per check, so the
 * test can assert each value against the session's virtual time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/timeb.h>
#include <time.h>
#include <unistd.h>

static long long ns_of(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

static long long now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return ns_of(&t);
}

/* A timed wait on a condition nobody signals: ETIMEDOUT after exactly one virtual second. */
static void *condition_waits(void *unused) {
    (void)unused;
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t realtime_condition = PTHREAD_COND_INITIALIZER;
    pthread_condattr_t attributes;
    pthread_cond_t monotonic_condition;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&monotonic_condition, &attributes);

    struct {
        const char *name;
        clockid_t clock;
        pthread_cond_t *condition;
    } waits[] = {{"cond_realtime", CLOCK_REALTIME, &realtime_condition},
                 {"cond_monotonic", CLOCK_MONOTONIC, &monotonic_condition}};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        long long start = now_ns(CLOCK_MONOTONIC);
        struct timespec deadline;
        clock_gettime(waits[i].clock, &deadline);
        deadline.tv_sec += 1;
        pthread_mutex_lock(&mutex);
        int result = pthread_cond_timedwait(waits[i].condition, &mutex, &deadline);
        pthread_mutex_unlock(&mutex);
        printf("%s %s %lld\n", waits[i].name, result == ETIMEDOUT ? "ETIMEDOUT" : "other",
               now_ns(CLOCK_MONOTONIC) - start);
    }
    pthread_cond_destroy(&monotonic_condition);
    return NULL;
}

static void on_signal(int signal, siginfo_t *info, void *context) {
    (void)signal, (void)info, (void)context;
}

int main(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, condition_waits, NULL);
    pthread_join(thread, NULL);

    struct sigaction action = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigprocmask(SIG_SETMASK, &blocked, NULL);

    /* Periodic: first at 1 s, then every 300 ms; blocked for 2 s, so one
       signal pends and 3 more expirations (1.3, 1.6, 1.9 s) are overruns. */
    timer_t periodic, one_shot;
    struct sigevent event = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
    timer_create(CLOCK_REALTIME, &event, &periodic);
    struct itimerspec periodic_setting = {.it_value = {1, 0}, .it_interval = {0, 300000000}};
    timer_settime(periodic, 0, &periodic_setting, NULL);
    /* One-shot, absolute, 3 s ahead: not due within the 2 s, so no overrun. */
    timer_create(CLOCK_REALTIME, &event, &one_shot);
    struct itimerspec one_shot_setting = {0};
    clock_gettime(CLOCK_REALTIME, &one_shot_setting.it_value);
    one_shot_setting.it_value.tv_sec += 3;
    timer_settime(one_shot, TIMER_ABSTIME, &one_shot_setting, NULL);

    time_t seconds;
    time(&seconds);
    printf("time %lld\n", (long long)seconds);
    printf("time_null %lld\n", (long long)time(NULL));
    struct timeb timeb;
    ftime(&timeb);
    printf("ftime %lld\n", (long long)timeb.time);

    sleep(1);
    usleep(1000000);

    struct timeval timeval;
    gettimeofday(&timeval, NULL);
    printf("gettimeofday %lld\n", (long long)timeval.tv_sec);
    sigprocmask(SIG_UNBLOCK, &blocked, NULL);
    printf("clock_gettime %lld\n", (long long)(now_ns(CLOCK_REALTIME) / 1000000000LL));
    printf("overrun_periodic %d\n", timer_getoverrun(periodic));
    printf("overrun_one_shot %d\n", timer_getoverrun(one_shot));
    struct itimerspec remaining;
    timer_gettime(one_shot, &remaining);
    printf("one_shot_remaining %lld\n", ns_of(&remaining.it_value));
    return 0;
}

/*
 * The waiting side of scripts/bench-wake: waits one virtual second at a
 * time, forever, and after each wake prints the real (raw) CLOCK_MONOTONIC
 * time it woke at.
 *   wake_waiter sleep      nanosleep(1 s)
 *   wake_waiter timerfd    epoll_wait(-1) on a timerfd armed 1 s ahead
 *   wake_waiter poll       poll(pipe, 1000 ms)
 *   wake_waiter idle N KIND   N threads waiting an hour in nanosleep, poll or
 *                             pthread_cond_timedwait (KIND sleep|poll|cond); prints "ready"
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "raw_clock.h"

static void woke(void) {
    printf("%lld\n", raw_monotonic_ns());
    fflush(stdout);
}

static void *sleep_an_hour(void *unused) {
    (void)unused;
    for (;;) {
        struct timespec hour = {3600, 0};
        nanosleep(&hour, NULL);
    }
    return NULL;
}

static void *poll_an_hour(void *unused) {
    (void)unused;
    int fds[2];
    if (pipe(fds) != 0) return NULL;
    for (;;) {
        struct pollfd wait_for = {fds[0], POLLIN, 0};
        poll(&wait_for, 1, 3600 * 1000);
    }
    return NULL;
}

static void *cond_wait_an_hour(void *unused) {
    (void)unused;
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_condattr_t attributes;
    pthread_cond_t cond;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&cond, &attributes);
    pthread_mutex_lock(&mutex);
    for (;;) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 3600;
        pthread_cond_timedwait(&cond, &mutex, &deadline);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "sleep") == 0) {
        for (;;) {
            struct timespec second = {1, 0};
            nanosleep(&second, NULL);
            woke();
        }
    }
    if (strcmp(mode, "timerfd") == 0) {
        int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event event = {.events = EPOLLIN, .data.fd = timer};
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer, &event);
        for (;;) {
            struct itimerspec one_second = {{0, 0}, {1, 0}};
            timerfd_settime(timer, 0, &one_second, NULL);
            struct epoll_event out;
            while (epoll_wait(epoll_fd, &out, 1, -1) != 1) continue;
            uint64_t expirations;
            if (read(timer, &expirations, sizeof(expirations)) < 0) return 1;
            woke();
        }
    }
    if (strcmp(mode, "poll") == 0) {
        int fds[2];
        if (pipe(fds) != 0) return 1;
        for (;;) {
            struct pollfd wait_for = {fds[0], POLLIN, 0};
            poll(&wait_for, 1, 1000);
            woke();
        }
    }
    if (strcmp(mode, "idle") == 0 && argc == 4) {
        int count = atoi(argv[2]);
        void *(*body)(void *) = strcmp(argv[3], "poll") == 0   ? poll_an_hour
                                : strcmp(argv[3], "cond") == 0 ? cond_wait_an_hour
                                                               : sleep_an_hour;
        for (int i = 0; i < count; i++) {
            pthread_t thread;
            pthread_create(&thread, NULL, body, NULL);
        }
        printf("ready\n");
        fflush(stdout);
        pause();
    }
    fprintf(stderr, "usage: wake_waiter sleep|timerfd|poll | idle N sleep|poll|cond\n");
    return 2;
}

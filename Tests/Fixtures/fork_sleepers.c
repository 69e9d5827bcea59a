/*
 * A process forks, without exec, a child whose threads wait at once.
 *
 *   fork_sleepers fork|syscall-fork THREADS
 *
 * The parent reads CLOCK_MONOTONIC, forks (libc's fork, or the raw fork
 * system call through syscall(2)) and waits for the child with waitpid. The
 * child starts THREADS threads: thread I (from 0) waits I + 1 seconds — in
 * nanosleep, on a condition variable never signalled (a futex wait with a
 * timeout) or in poll with no descriptors, by I mod 3 — while the child's
 * main thread sleeps THREADS + 1 seconds in clock_nanosleep. Every duration
 * is measured from the parent's reading before the fork.
 *
 * Prints "child pid=P ready" once every thread of the child is about to
 * wait, "child thread=I slept=NS" and "child main slept=NS" as each wakes,
 * then, from the parent, "parent status=S elapsed=NS" (S the child's wait
 * status, NS the parent's own monotonic time from before the fork).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t start;
static pthread_barrier_t barrier;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never;

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static void report(const char *who, int64_t slept) {
    pthread_mutex_lock(&lock);
    printf("child %s slept=%lld\n", who, (long long)slept);
    fflush(stdout);
    pthread_mutex_unlock(&lock);
}

static void *sleeper(void *argument) {
    int index = (int)(intptr_t)argument;
    int64_t wake = start + (int64_t)(index + 1) * 1000000000LL;
    pthread_barrier_wait(&barrier);
    switch (index % 3) {
    case 0: {
        struct timespec deadline = {(time_t)(wake / 1000000000LL), (long)(wake % 1000000000LL)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {}
        break;
    }
    case 1: {
        struct timespec deadline = {(time_t)(wake / 1000000000LL), (long)(wake % 1000000000LL)};
        pthread_mutex_lock(&lock);
        while (pthread_cond_timedwait(&never, &lock, &deadline) == 0) {}
        pthread_mutex_unlock(&lock);
        break;
    }
    default:
        for (int64_t left; (left = wake - monotonic_ns()) > 0;) poll(NULL, 0, (int)((left + 999999) / 1000000));
        break;
    }
    char who[32];
    snprintf(who, sizeof who, "thread=%d", index);
    report(who, monotonic_ns() - start);
    return NULL;
}

static _Noreturn void child(int count) {
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&never, &attributes);
    pthread_barrier_init(&barrier, NULL, (unsigned)count + 1);
    pthread_t threads[count];
    for (int i = 0; i < count; i++)
        if (pthread_create(&threads[i], NULL, sleeper, (void *)(intptr_t)i) != 0) _exit(3);
    pthread_barrier_wait(&barrier);
    printf("child pid=%d ready\n", (int)getpid());
    fflush(stdout);
    struct timespec duration = {count + 1, 0};
    while (nanosleep(&duration, &duration) != 0 && errno == EINTR) {}
    report("main", monotonic_ns() - start);
    for (int i = 0; i < count; i++) pthread_join(threads[i], NULL);
    _exit(0);
}

int main(int argc, char **argv) {
    int count = argc == 3 ? atoi(argv[2]) : -1;
    int raw = argc == 3 && strcmp(argv[1], "syscall-fork") == 0;
    if (count < 0 || count > 1000 || (!raw && strcmp(argv[1], "fork") != 0)) {
        fprintf(stderr, "usage: fork_sleepers fork|syscall-fork THREADS (0-1000)\n");
        return 2;
    }
    fflush(stdout);
    start = monotonic_ns();
    pid_t pid = raw ? (pid_t)syscall(SYS_fork) : fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) child(count);
    int status = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    printf("parent status=%d elapsed=%lld\n", status, (long long)(monotonic_ns() - start));
    return 0;
}

/*
 * Waits with raw futex system calls through libc's syscall(), as Rust's
 * std, tokio, the BEAM and libstdc++ do, one wait per argument, in order:
 *   futex_probe WAIT...
 * WAIT is KIND:SECONDS with KIND one of
 *   relative  FUTEX_WAIT_PRIVATE, a relative timeout
 *   absolute  FUTEX_WAIT_BITSET_PRIVATE, an absolute CLOCK_MONOTONIC deadline
 *   realtime  FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, an absolute wall deadline
 *   waitv     futex_waitv on two words, an absolute CLOCK_MONOTONIC deadline
 *   lockpi    FUTEX_LOCK_PI_PRIVATE on a lock another thread holds, an absolute wall deadline
 *   lockpi2   FUTEX_LOCK_PI2_PRIVATE, the same on an absolute CLOCK_MONOTONIC deadline
 *   lockpi2rt FUTEX_LOCK_PI2_PRIVATE | FUTEX_CLOCK_REALTIME, on an absolute wall deadline
 *   woken     FUTEX_WAIT_PRIVATE for SECONDS, which another thread wakes at once
 * Prints "waiting KIND" before each wait and "KIND RESULT ELAPSED" after it:
 * RESULT is 0 or the errno name, ELAPSED the virtual CLOCK_MONOTONIC seconds
 * it took, to the nanosecond. Exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef FUTEX_LOCK_PI2
#define FUTEX_LOCK_PI2 13
#endif

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct timespec in_seconds(clockid_t clock, int64_t seconds) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += seconds;
    return ts;
}

static const char *result_name(long result) {
    if (result == 0) return "0";
    switch (errno) {
    case ETIMEDOUT: return "ETIMEDOUT";
    case EAGAIN: return "EAGAIN";
    case EINTR: return "EINTR";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    default: return strerror(errno);
    }
}

static uint32_t pi_lock, holder_release;
static volatile int holder_ready;

/* Takes the PI lock and holds it, blocked (not spinning: auto-advance steps only when every thread blocks). */
static void *hold_pi_lock(void *unused) {
    (void)unused;
    __atomic_store_n(&pi_lock, (uint32_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
    holder_ready = 1;
    while (!__atomic_load_n(&holder_release, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &holder_release, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return NULL;
}

static uint32_t woken_word;
static volatile int waiter_started;

static void *wake_soon(void *unused) {
    (void)unused;
    while (!waiter_started) sched_yield();
    /* Let the waiter block: 20 ms of this thread's CPU time, which no session changes. */
    int64_t until = now_ns(CLOCK_THREAD_CPUTIME_ID) + 20 * 1000 * 1000;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until) {}
    __atomic_store_n(&woken_word, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &woken_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    return NULL;
}

static long wait_once(const char *kind, int64_t seconds) {
    uint32_t word = 0, other = 0;
    if (strcmp(kind, "relative") == 0) {
        struct timespec timeout = {seconds, 0};
        return syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &timeout, NULL, 0);
    }
    if (strcmp(kind, "absolute") == 0 || strcmp(kind, "realtime") == 0) {
        int realtime = kind[0] == 'r';
        struct timespec deadline = in_seconds(realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC, seconds);
        return syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE | (realtime ? FUTEX_CLOCK_REALTIME : 0), 0,
                       &deadline, NULL, FUTEX_BITSET_MATCH_ANY);
    }
    if (strcmp(kind, "waitv") == 0) {
        struct futex_waitv waiters[2] = {{0, (uintptr_t)&word, FUTEX_32 | FUTEX_PRIVATE_FLAG, 0},
                                         {0, (uintptr_t)&other, FUTEX_32 | FUTEX_PRIVATE_FLAG, 0}};
        struct timespec deadline = in_seconds(CLOCK_MONOTONIC, seconds);
        return syscall(SYS_futex_waitv, waiters, 2, 0, &deadline, CLOCK_MONOTONIC);
    }
    if (strcmp(kind, "lockpi") == 0 || strcmp(kind, "lockpi2") == 0 || strcmp(kind, "lockpi2rt") == 0) {
        int second = kind[6] == '2', wall = kind[7] == 'r';
        pthread_t holder;
        holder_ready = 0;
        holder_release = 0;
        pthread_create(&holder, NULL, hold_pi_lock, NULL);
        while (!holder_ready) sched_yield();
        struct timespec deadline = in_seconds(second && !wall ? CLOCK_MONOTONIC : CLOCK_REALTIME, seconds);
        long result = syscall(SYS_futex, &pi_lock,
                              (second ? FUTEX_LOCK_PI2 : FUTEX_LOCK_PI) | FUTEX_PRIVATE_FLAG | (wall ? FUTEX_CLOCK_REALTIME : 0),
                              0, &deadline, NULL, 0);
        int saved = errno;
        __atomic_store_n(&holder_release, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &holder_release, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        pthread_join(holder, NULL);
        pi_lock = 0;
        errno = saved;
        return result;
    }
    if (strcmp(kind, "woken") == 0) {
        pthread_t waker;
        woken_word = 0;
        waiter_started = 0;
        pthread_create(&waker, NULL, wake_soon, NULL);
        struct timespec timeout = {seconds, 0};
        waiter_started = 1;
        long result = syscall(SYS_futex, &woken_word, FUTEX_WAIT_PRIVATE, 0, &timeout, NULL, 0);
        int saved = errno;
        pthread_join(waker, NULL);
        errno = saved;
        return result;
    }
    fprintf(stderr, "futex_probe: unknown wait '%s'\n", kind);
    exit(2);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        char kind[32];
        long long seconds;
        if (sscanf(argv[i], "%31[a-z0-9]:%lld", kind, &seconds) != 2) {
            fprintf(stderr, "futex_probe: expected KIND:SECONDS, got '%s'\n", argv[i]);
            return 2;
        }
        printf("waiting %s\n", kind);
        int64_t started = now_ns(CLOCK_MONOTONIC);
        long result = wait_once(kind, seconds);
        int64_t took = now_ns(CLOCK_MONOTONIC) - started;
        printf("%s %s %lld.%09lld\n", kind, result_name(result), (long long)(took / 1000000000),
               (long long)(took % 1000000000));
    }
    return 0;
}

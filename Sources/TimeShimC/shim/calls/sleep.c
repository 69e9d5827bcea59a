/*
 * Sleeps on the virtual timeline: nanosleep, clock_nanosleep, sleep,
 * usleep (SPEC §3). A sleep blocks on the segment's generation futex, so a
 * verb wakes it at once in every process, and it costs nothing while the
 * session is frozen. Interrupted by a signal handler, it reports the
 * virtual time left.
 */
#define _GNU_SOURCE
#include "sleep.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../runtime/threads.h"
#include "../session/signal_guard.h"
#include "../session/wait.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sleeps until `deadline` on `vclock`: 0, or EINTR with the virtual time left in *left. */
static int sleep_until(struct tc_segment *segment, int vclock, int64_t deadline, int64_t *left) {
    struct tc_wait wait;
    struct tc_signal_guard guard;
    volatile int result = 0; /* pthread_cleanup_push may use setjmp */
    /* Handlers are counted from the call's start: one that runs after the wait is listed but before the guard
       is up interrupts the sleep too, as the kernel ends a sleep with EINTR for a signal that comes once the call
       is made. (The shim's C tests met that gap under qemu-user, where a new thread starts slowly.) */
    uint32_t *signals = tc_thread_handled_signals();
    uint32_t signals_seen = __atomic_load_n(signals, __ATOMIC_RELAXED);
    tc_wait_begin(&wait, segment, TC_WAIT_SLEEP, vclock, deadline);
    pthread_cleanup_push(tc_wait_end_cleanup, &wait);
    tc_signal_guard_enter(&guard);
    pthread_cleanup_push(tc_signal_guard_leave_cleanup, &guard);
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_remaining(&view, &wait);
        if (real == 0) break;
        tc_signal_guard_open(&guard);
        int interrupted = tc_wait_futex(segment, view.generation, signals_seen, real) == EINTR;
        tc_signal_guard_close();
        /* Counted after closing: a handler that ran on the way out interrupted the sleep too. */
        if (interrupted || __atomic_load_n(signals, __ATOMIC_RELAXED) != signals_seen) {
            int64_t now = tc_segment_read(segment, vclock);
            if (left) *left = wait.deadline > now ? wait.deadline - now : 0;
            result = EINTR;
            break;
        }
    }
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
    return result;
}

/* clock_nanosleep's contract: 0 or an error number; errno untouched. */
static int sleep_on(struct tc_segment *segment, int vclock, int flags, const struct timespec *request,
                    struct timespec *remain) {
    if (!request) return EFAULT;  /* as the kernel answers */
    if (!tc_timespec_valid(request)) return EINVAL;
    if (!(flags & TIMER_ABSTIME)) {
        int yielded = tc_short_sleep_yield(segment, tc_timespec_ns_saturating(request));
        if (yielded >= 0) {
            if (yielded == EINTR && remain) *remain = *request;  /* no virtual time passed */
            return yielded;
        }
    }
    /* A relative wait measures elapsed time whatever its clock (Linux arms relative CLOCK_REALTIME sleeps on
       CLOCK_MONOTONIC): it goes on while the wall clock stands still (freeze --wall) or jumps (set). */
    if (!(flags & TIMER_ABSTIME)) vclock = tc_wait_relative_clock(vclock);
    int64_t deadline = (flags & TIMER_ABSTIME) ? tc_wait_absolute_deadline(segment, vclock, tc_timespec_ns_saturating(request))
                                               : tc_wait_deadline_after(segment, vclock, tc_timespec_ns_saturating(request));
    int64_t left = 0;
    int result = sleep_until(segment, vclock, deadline, &left);
    if (result == EINTR && remain && !(flags & TIMER_ABSTIME)) *remain = tc_timespec_from_ns(left);
    return result;
}

static int shim_clock_nanosleep(clockid_t clock, int flags, const struct timespec *request, struct timespec *remain) {
    struct tc_segment *segment = tc_shim_segment();
    int vclock = tc_vclock_for_clockid(clock);
    if (!segment || vclock < 0) {
        if (!tc_real.clock_nanosleep)
            return (int)-tc_raw_syscall(SYS_clock_nanosleep, clock, flags, request, remain);
        return tc_real.clock_nanosleep(clock, flags, request, remain);
    }
    return sleep_on(segment, vclock, flags, request, remain);
}

static int shim_nanosleep(const struct timespec *request, struct timespec *remain) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) {
        if (!tc_real.nanosleep) return (int)tc_shim_errno_result(tc_raw_syscall(SYS_nanosleep, request, remain));
        return tc_real.nanosleep(request, remain);
    }
    int result = sleep_on(segment, TC_VCLOCK_MONOTONIC, 0, request, remain);
    if (result == 0) return 0;
    errno = result;
    return -1;
}

static unsigned int shim_sleep(unsigned int seconds) {
    struct timespec request = {seconds, 0}, remain = {0, 0};
    if (shim_nanosleep(&request, &remain) == 0) return 0;
    return (unsigned int)remain.tv_sec;
}

static int shim_usleep(useconds_t microseconds) {
    struct timespec request = {microseconds / 1000000, (long)(microseconds % 1000000) * 1000};
    return shim_nanosleep(&request, NULL);
}

TC_EXPORT int clock_nanosleep(clockid_t, int, const struct timespec *, struct timespec *)
    __attribute__((alias("shim_clock_nanosleep")));
TC_EXPORT int __clock_nanosleep(clockid_t, int, const struct timespec *, struct timespec *)
    __attribute__((alias("shim_clock_nanosleep")));
TC_EXPORT int nanosleep(const struct timespec *, struct timespec *) __attribute__((alias("shim_nanosleep")));
TC_EXPORT int __nanosleep(const struct timespec *, struct timespec *) __attribute__((alias("shim_nanosleep")));
TC_EXPORT unsigned int sleep(unsigned int) __attribute__((alias("shim_sleep")));
TC_EXPORT int usleep(useconds_t) __attribute__((alias("shim_usleep")));

long tc_syscall_sleep(long number, long a1, long a2, long a3, long a4) {
    if (number == SYS_nanosleep) {
        int saved_errno = errno;
        return tc_shim_kernel_result(shim_nanosleep((const struct timespec *)a1, (struct timespec *)a2), saved_errno);
    }
    /* clock_nanosleep's own convention is already an error number, errno untouched. */
    return -shim_clock_nanosleep((clockid_t)a1, (int)a2, (const struct timespec *)a3, (struct timespec *)a4);
}

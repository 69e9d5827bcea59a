/*
 * Timed waits on synchronisation objects, on the virtual timeline:
 * pthread_cond_timedwait / _clockwait, sem_timedwait / sem_clockwait,
 * pthread_mutex_timedlock / _clocklock (SPEC §3).
 *
 * Each runs the real call with a real deadline (CLOCK_MONOTONIC) worked out
 * from the virtual remainder, and re-evaluates when it returns. The object
 * itself always wins: a signal, a post or an unlock returns at once. A
 * condition waiter is woken by the helper thread when a verb makes its
 * deadline due (see session/waiters.h), so it costs nothing while frozen; semaphores
 * and mutexes cannot be woken from outside, so their real waits are bounded
 * by TC_SLICE_NS and notice a verb within that.
 */
#define _GNU_SOURCE
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../runtime/threads.h"
#include "../session/signal_guard.h"
#include "../session/wait.h"
#include "../session/waiters.h"

#include <errno.h>
#include <string.h>

static int valid_abstime(const struct timespec *abstime) { return abstime && tc_deadline_valid(abstime); }

/* An absolute deadline on the real `clock`, `real_ns` from now. */
static struct timespec real_deadline(clockid_t clock, int64_t real_ns) {
    struct timespec timeout = tc_real_timeout(real_ns);
    return tc_timespec_from_ns(tc_real_ns(clock) + tc_timespec_ns(timeout));
}

/* ---- condition variables ---- */

/*
 * A condition variable's clock (pthread_condattr_setclock) is kept inside
 * the object: glibc sets bit 1 of __data.__wrefs for CLOCK_MONOTONIC; musl
 * keeps the clock id in its fifth int (_c_clock in its pthread_impl.h).
 * Checked once against condition variables made for the purpose; if the
 * layout ever differs, every condvar is taken as CLOCK_REALTIME, POSIX's
 * default.
 */
#ifdef __GLIBC__
#define GLIBC_COND_CLOCK_MONOTONIC 2u
static int marked_monotonic(const pthread_cond_t *cond) {
    return (__atomic_load_n(&cond->__data.__wrefs, __ATOMIC_RELAXED) & GLIBC_COND_CLOCK_MONOTONIC) != 0;
}
#else
static int marked_monotonic(const pthread_cond_t *cond) {
    return __atomic_load_n(&cond->__u.__i[4], __ATOMIC_RELAXED) == CLOCK_MONOTONIC;
}
#endif

static int cond_clock_mark_checked;   /* 0 unknown, 1 usable, 2 not usable */

static int cond_clock_mark_usable(void) {
    int state = __atomic_load_n(&cond_clock_mark_checked, __ATOMIC_ACQUIRE);
    if (state) return state == 1;
    pthread_condattr_t attributes;
    pthread_cond_t monotonic, realtime = PTHREAD_COND_INITIALIZER;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&monotonic, &attributes);
    int usable = marked_monotonic(&monotonic) && !marked_monotonic(&realtime);
    pthread_cond_destroy(&monotonic);
    pthread_condattr_destroy(&attributes);
    __atomic_store_n(&cond_clock_mark_checked, usable ? 1 : 2, __ATOMIC_RELEASE);
    return usable;
}

static clockid_t cond_clock(const pthread_cond_t *cond) {
    if (!cond_clock_mark_usable()) return CLOCK_REALTIME;
    return marked_monotonic(cond) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
}

/*
 * The real waits a virtual one is made of, each until `real_ns` from now.
 * glibc takes the clock (the *clock* calls: CLOCK_MONOTONIC, which nobody
 * sets); musl 1.2 has only the timed calls, which measure a condition
 * variable's deadline on its own clock, a semaphore's and a mutex's on
 * CLOCK_REALTIME.
 */
static int real_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t real_ns) {
#ifdef __GLIBC__
    struct timespec until = real_deadline(CLOCK_MONOTONIC, real_ns);
    return tc_real.pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &until);
#else
    struct timespec until = real_deadline(cond_clock(cond), real_ns);
    return tc_real.pthread_cond_timedwait(cond, mutex, &until);
#endif
}

static int real_sem_wait(sem_t *sem, int64_t real_ns) {
#ifdef __GLIBC__
    struct timespec until = real_deadline(CLOCK_MONOTONIC, real_ns);
    return tc_real.sem_clockwait(sem, CLOCK_MONOTONIC, &until);
#else
    struct timespec until = real_deadline(CLOCK_REALTIME, real_ns);
    return tc_real.sem_timedwait(sem, &until);
#endif
}

static int real_mutex_lock(pthread_mutex_t *mutex, int64_t real_ns) {
#ifdef __GLIBC__
    struct timespec until = real_deadline(CLOCK_MONOTONIC, real_ns);
    return tc_real.pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &until);
#else
    struct timespec until = real_deadline(CLOCK_REALTIME, real_ns);
    return tc_real.pthread_mutex_timedlock(mutex, &until);
#endif
}

static int cond_wait_until(struct tc_segment *segment, pthread_cond_t *cond, pthread_mutex_t *mutex, int vclock,
                           int64_t deadline) {
    int64_t now = tc_segment_read(segment, vclock);
    int64_t left = deadline > now ? deadline - now : 0;
    if (tc_wait_yields(segment, left)) {
        int returned = real_cond_wait(cond, mutex, left);
        tc_spin_note_futile_wait();
        return returned;
    }
    struct tc_wait wait;
    volatile int result = ETIMEDOUT; /* pthread_cleanup_push may use setjmp */
    tc_wait_begin(&wait, segment, TC_WAIT_COND, vclock, deadline);
    pthread_cleanup_push(tc_wait_end_cleanup, &wait);
    volatile int woken_by_helper = tc_waiter_enter_cond(cond, mutex, &wait) == 0;
    pthread_cleanup_push(tc_waiter_leave_cleanup, (void *)&woken_by_helper);
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_remaining(&view, &wait);
        if (real == 0) break;
        if (!woken_by_helper && real > TC_SLICE_NS) real = TC_SLICE_NS;
        if (woken_by_helper) tc_waiter_set_rate(view.rate);
        int returned = real_cond_wait(cond, mutex, real);
        if (returned == ETIMEDOUT) continue;
        /* Woken by the helper because a verb made the deadline due: that is a timeout. */
        result = returned == 0 && woken_by_helper && tc_waiter_woken_at_deadline() ? ETIMEDOUT : returned;
        break;
    }
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
    return result;
}

static int shim_pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *abstime) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.pthread_cond_timedwait(cond, mutex, abstime);
    if (!valid_abstime(abstime)) return EINVAL;
    int vclock = tc_vclock_for_clockid(cond_clock(cond));
    return cond_wait_until(segment, cond, mutex, vclock, tc_wait_absolute_deadline(segment, vclock, tc_deadline_ns(abstime)));
}

TC_EXPORT int pthread_cond_timedwait(pthread_cond_t *, pthread_mutex_t *, const struct timespec *)
    __attribute__((alias("shim_pthread_cond_timedwait")));

/* glibc's (2.30); musl has no pthread_cond_clockwait. */
#ifdef __GLIBC__
static int shim_pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                                       const struct timespec *abstime) {
    struct tc_segment *segment = tc_shim_segment();
    int vclock = tc_vclock_for_clockid(clock);
    if (!segment || vclock < 0) return tc_real.pthread_cond_clockwait(cond, mutex, clock, abstime);
    if (!valid_abstime(abstime)) return EINVAL;
    return cond_wait_until(segment, cond, mutex, vclock, tc_wait_absolute_deadline(segment, vclock, tc_deadline_ns(abstime)));
}

TC_EXPORT int pthread_cond_clockwait(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *)
    __attribute__((alias("shim_pthread_cond_clockwait")));
#endif

/* ---- semaphores ---- */

static int sem_wait_until(struct tc_segment *segment, sem_t *sem, int vclock, int64_t deadline) {
    /* As libc: a semaphore that can be taken now is taken, whatever the deadline. */
    if (sem_trywait(sem) == 0) return 0;
    if (errno != EAGAIN) return -1;
    struct tc_wait wait;
    struct tc_signal_guard guard;
    volatile int result = -1, error = ETIMEDOUT; /* pthread_cleanup_push may use setjmp */
    /* From the call's start, as a sleep counts them (calls/sleep.c). */
    uint32_t signals_seen = __atomic_load_n(tc_thread_handled_signals(), __ATOMIC_RELAXED);
    tc_wait_begin(&wait, segment, TC_WAIT_SEM, vclock, deadline);
    pthread_cleanup_push(tc_wait_end_cleanup, &wait);
    tc_signal_guard_enter(&guard);
    pthread_cleanup_push(tc_signal_guard_leave_cleanup, &guard);
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_remaining(&view, &wait);
        if (real == 0) break;
        tc_signal_guard_open(&guard);
        int returned = real_sem_wait(sem, real < TC_SLICE_NS ? real : TC_SLICE_NS);
        int returned_errno = errno;
        tc_signal_guard_close();
        if (returned == 0) {
            result = 0;
            break;
        }
        /* Counted after closing: a handler that ran just before the slice, or on the way out, interrupted the wait too. */
        if (returned_errno == ETIMEDOUT && __atomic_load_n(tc_thread_handled_signals(), __ATOMIC_RELAXED) != signals_seen)
            returned_errno = EINTR;
        if (returned_errno != ETIMEDOUT) {
            error = returned_errno;
            break;
        }
    }
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
    if (result != 0) errno = error;
    return result;
}

static int sem_wait_virtual(struct tc_segment *segment, sem_t *sem, int vclock, const struct timespec *abstime) {
    if (!valid_abstime(abstime)) {
        if (sem_trywait(sem) == 0) return 0;
        errno = EINVAL;
        return -1;
    }
    return sem_wait_until(segment, sem, vclock, tc_wait_absolute_deadline(segment, vclock, tc_deadline_ns(abstime)));
}

static int shim_sem_timedwait(sem_t *sem, const struct timespec *abstime) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.sem_timedwait(sem, abstime);
    return sem_wait_virtual(segment, sem, tc_vclock_for_clockid(CLOCK_REALTIME), abstime);
}

TC_EXPORT int sem_timedwait(sem_t *, const struct timespec *) __attribute__((alias("shim_sem_timedwait")));

/* glibc's (2.30); musl has no sem_clockwait. */
#ifdef __GLIBC__
static int shim_sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime) {
    struct tc_segment *segment = tc_shim_segment();
    int vclock = tc_vclock_for_clockid(clock);
    if (!segment || vclock < 0) return tc_real.sem_clockwait(sem, clock, abstime);
    return sem_wait_virtual(segment, sem, vclock, abstime);
}

TC_EXPORT int sem_clockwait(sem_t *, clockid_t, const struct timespec *) __attribute__((alias("shim_sem_clockwait")));
#endif

/* ---- mutexes ---- */

static int mutex_lock_until(struct tc_segment *segment, pthread_mutex_t *mutex, int vclock, int64_t deadline) {
    struct tc_wait wait;
    int result = ETIMEDOUT;
    tc_wait_begin(&wait, segment, TC_WAIT_MUTEX, vclock, deadline);
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_remaining(&view, &wait);
        /* Even when due: a mutex that is free now is taken, as libc does. */
        int returned = real_mutex_lock(mutex, real < TC_SLICE_NS ? real : TC_SLICE_NS);
        if (returned != ETIMEDOUT || real == 0) {
            result = returned;
            break;
        }
    }
    tc_wait_end(&wait);
    return result;
}

static int mutex_lock_virtual(struct tc_segment *segment, pthread_mutex_t *mutex, int vclock,
                              const struct timespec *abstime) {
    if (!valid_abstime(abstime)) return pthread_mutex_trylock(mutex) == 0 ? 0 : EINVAL;
    return mutex_lock_until(segment, mutex, vclock, tc_wait_absolute_deadline(segment, vclock, tc_deadline_ns(abstime)));
}

static int shim_pthread_mutex_timedlock(pthread_mutex_t *mutex, const struct timespec *abstime) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.pthread_mutex_timedlock(mutex, abstime);
    return mutex_lock_virtual(segment, mutex, tc_vclock_for_clockid(CLOCK_REALTIME), abstime);
}

TC_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *, const struct timespec *)
    __attribute__((alias("shim_pthread_mutex_timedlock")));

/* glibc's (2.30); musl has no pthread_mutex_clocklock. */
#ifdef __GLIBC__
static int shim_pthread_mutex_clocklock(pthread_mutex_t *mutex, clockid_t clock, const struct timespec *abstime) {
    struct tc_segment *segment = tc_shim_segment();
    int vclock = tc_vclock_for_clockid(clock);
    if (!segment || vclock < 0) return tc_real.pthread_mutex_clocklock(mutex, clock, abstime);
    return mutex_lock_virtual(segment, mutex, vclock, abstime);
}

TC_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *, clockid_t, const struct timespec *)
    __attribute__((alias("shim_pthread_mutex_clocklock")));
#endif

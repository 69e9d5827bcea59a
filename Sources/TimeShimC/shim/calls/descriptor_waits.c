/*
 * Waits on file descriptors with a timeout, on the virtual timeline: poll,
 * ppoll, select, pselect, epoll_wait, epoll_pwait, epoll_pwait2 (SPEC §3).
 *
 * A wait with no timeout (or a zero one) is passed straight through: it
 * has no deadline to move, and timerfds it waits on are eventfds the helper
 * thread fires. A wait with a timeout runs the real call on the user's
 * descriptors plus the thread's wake eventfd (session/waiters.h), for as long as the
 * remaining virtual time takes in real time; the helper makes the wake fd
 * readable after every verb, and the wait re-evaluates. An event on the
 * user's descriptors ends the wait at once, with that event.
 */
#define _GNU_SOURCE
#include "descriptor_waits.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../session/signal_guard.h"
#include "../session/wait.h"
#include "../session/waiters.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

/* A zero timeout: the wait cannot block (for the starvation policy, starvation.h). */
static int is_zero_timespec(const struct timespec *timeout) {
    return timeout && timeout->tv_sec == 0 && timeout->tv_nsec == 0;
}

static int is_zero_timeval(const struct timeval *timeout) {
    return timeout && timeout->tv_sec == 0 && timeout->tv_usec == 0;
}

/* Larger poll sets than this wait in slices instead of copying onto the stack. */
#define TC_MAX_POLL_COPY 1024

/*
 * One real wait of at most `timeout`, plus `wake_fd` when it is ≥ 0, with
 * the signal mask `mask` in force while it blocks (see tc_signal_guard).
 * Returns > 0 when user descriptors are ready (the call's result), 0 when
 * nothing is (timeout, or only the wake fd), −1 with errno on error.
 */
typedef int (*fd_wait_once)(void *context, int wake_fd, const struct timespec *timeout, const sigset_t *mask);

/* Runs `once` until it reports something or the virtual deadline passes
   (then 0). `mask` is the caller's sigmask argument, or NULL for the thread's. */
static int wait_until(struct tc_segment *segment, int kind, int64_t deadline, fd_wait_once once, void *context,
                      int can_wake, const sigset_t *mask) {
    struct tc_wait wait;
    struct tc_signal_guard guard;
    /* volatile: pthread_cleanup_push may use setjmp. */
    volatile int result = 0;
    volatile int saved_errno = errno;
    tc_wait_begin(&wait, segment, kind, TC_VCLOCK_MONOTONIC, deadline);
    pthread_cleanup_push(tc_wait_end_cleanup, &wait);
    volatile int wake_fd = can_wake ? tc_waiter_enter_fd() : -1;
    volatile int entered = wake_fd >= 0;
    pthread_cleanup_push(tc_waiter_leave_cleanup, (void *)&entered);
    tc_signal_guard_enter(&guard);
    pthread_cleanup_push(tc_signal_guard_leave_cleanup, &guard);
    const sigset_t *during = mask ? mask : &guard.application;
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, TC_VCLOCK_MONOTONIC);
        int64_t real = tc_wait_remaining(&view, &wait);
        if (real == 0) break;
        if (wake_fd < 0 && real > TC_SLICE_NS) real = TC_SLICE_NS;
        struct timespec timeout = tc_real_timeout(real);
        result = once(context, wake_fd, &timeout, during);
        saved_errno = errno;
        if (result != 0) break;
    }
    pthread_cleanup_pop(1); /* the application's mask again: a signal that came meanwhile is handled now */
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
    errno = saved_errno;
    return result;
}


/* ---- poll, ppoll ---- */

struct poll_context {
    struct pollfd *user;
    nfds_t count;
    struct pollfd *local;  /* user's set plus the wake fd, or NULL to use the user's set */
};

static int poll_once(void *argument, int wake_fd, const struct timespec *timeout, const sigset_t *mask) {
    struct poll_context *context = argument;
    struct pollfd *set = context->user;
    nfds_t count = context->count;
    if (context->local && wake_fd >= 0) {
        memcpy(context->local, context->user, context->count * sizeof(struct pollfd));
        context->local[count] = (struct pollfd){wake_fd, POLLIN, 0};
        set = context->local;
        count++;
    }
    int ready = tc_real.ppoll(set, count, timeout, mask);
    if (ready <= 0) return ready;
    if (set != context->user) {
        if (set[context->count].revents) {
            tc_waiter_drain(wake_fd);
            ready--;
        }
        for (nfds_t i = 0; i < context->count; i++) context->user[i].revents = set[i].revents;
    }
    return ready;
}

static int poll_until(struct tc_segment *segment, struct pollfd *fds, nfds_t count, int64_t relative,
                      const sigset_t *mask) {
    int64_t deadline = tc_wait_deadline_after(segment, TC_VCLOCK_MONOTONIC, relative);
    int copy = count < TC_MAX_POLL_COPY;
    struct pollfd local[copy ? count + 1 : 1];
    struct poll_context context = {fds, count, copy ? local : NULL};
    int result = wait_until(segment, TC_WAIT_POLL, deadline, poll_once, &context, copy, mask);
    if (result == 0)
        for (nfds_t i = 0; i < count; i++) fds[i].revents = 0;
    return result;
}

/* poll() before libc's is resolved: the kernel's poll, which aarch64 has only as ppoll. */
static long raw_poll(struct pollfd *fds, nfds_t count, int timeout_ms) {
#if defined(__x86_64__)
    return tc_raw_syscall(SYS_poll, fds, count, timeout_ms);
#elif defined(__aarch64__)
    struct timespec timeout = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};
    return tc_raw_syscall(SYS_ppoll, fds, count, timeout_ms < 0 ? NULL : &timeout, NULL, 8);
#endif
}

static int shim_poll(struct pollfd *fds, nfds_t count, int timeout_ms) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && timeout_ms == 0) tc_spin_note_futile_wait();
    if (!segment || timeout_ms <= 0) {
        if (!tc_real.poll) return (int)tc_shim_errno_result(raw_poll(fds, count, timeout_ms));
        return tc_real.poll(fds, count, timeout_ms);
    }
    return poll_until(segment, fds, count, (int64_t)timeout_ms * 1000000, NULL);
}

static int shim_ppoll(struct pollfd *fds, nfds_t count, const struct timespec *timeout, const sigset_t *mask) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && is_zero_timespec(timeout)) tc_spin_note_futile_wait();
    if (!segment || !timeout || (timeout->tv_sec == 0 && timeout->tv_nsec == 0))
        return tc_real.ppoll(fds, count, timeout, mask);
    if (!tc_timespec_valid(timeout)) {
        errno = EINVAL;
        return -1;
    }
    return poll_until(segment, fds, count, tc_timespec_ns_saturating(timeout), mask);
}

TC_EXPORT int poll(struct pollfd *, nfds_t, int) __attribute__((alias("shim_poll")));
TC_EXPORT int __poll(struct pollfd *, nfds_t, int) __attribute__((alias("shim_poll")));
TC_EXPORT int ppoll(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *)
    __attribute__((alias("shim_ppoll")));

/* ---- select, pselect ---- */

struct select_context {
    int count;
    fd_set *read, *write, *except;   /* the user's sets (each may be NULL) */
};

static int select_once(void *argument, int wake_fd, const struct timespec *timeout, const sigset_t *mask) {
    struct select_context *context = argument;
    fd_set read, write, except;
    FD_ZERO(&read);
    FD_ZERO(&write);
    FD_ZERO(&except);
    if (context->read) read = *context->read;
    if (context->write) write = *context->write;
    if (context->except) except = *context->except;
    int count = context->count;
    int watch_wake = wake_fd >= 0 && wake_fd < FD_SETSIZE;
    if (watch_wake) {
        FD_SET(wake_fd, &read);
        if (wake_fd >= count) count = wake_fd + 1;
    }
    int ready = tc_real.pselect(count, &read, context->write ? &write : NULL, context->except ? &except : NULL,
                                timeout, mask);
    if (ready <= 0) return ready;
    if (watch_wake && FD_ISSET(wake_fd, &read)) {
        tc_waiter_drain(wake_fd);
        FD_CLR(wake_fd, &read);
        ready--;
    }
    if (ready > 0) {
        if (context->read) *context->read = read;
        if (context->write) *context->write = write;
        if (context->except) *context->except = except;
    }
    return ready;
}

/* The virtual time left until `deadline`, for select's timeout out-parameter. */
static struct timespec left_until(struct tc_segment *segment, int64_t deadline) {
    int64_t now = tc_segment_read(segment, TC_VCLOCK_MONOTONIC);
    return tc_timespec_from_ns(deadline > now ? deadline - now : 0);
}

static int select_until(struct tc_segment *segment, int count, fd_set *read, fd_set *write, fd_set *except,
                        int64_t deadline, const sigset_t *mask) {
    struct select_context context = {count, read, write, except};
    int result = wait_until(segment, TC_WAIT_SELECT, deadline, select_once, &context, 1, mask);
    if (result == 0) {
        if (read) FD_ZERO(read);
        if (write) FD_ZERO(write);
        if (except) FD_ZERO(except);
    }
    return result;
}

/*
 * select; with `leave_time`, the timeout is updated to the (virtual) time
 * not slept, as the kernel's select does and glibc's passes on. musl's
 * select gives the kernel a copy and leaves the caller's as it was.
 */
#ifdef __GLIBC__
#define LIBC_SELECT_LEAVES_TIME 1
#else
#define LIBC_SELECT_LEAVES_TIME 0
#endif

static int select_leaving(int count, fd_set *read, fd_set *write, fd_set *except, struct timeval *timeout,
                          int leave_time) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && is_zero_timeval(timeout)) tc_spin_note_futile_wait();
    if (!segment || !timeout || (timeout->tv_sec == 0 && timeout->tv_usec == 0))
        return tc_real.select(count, read, write, except, timeout);
    if (timeout->tv_sec < 0 || timeout->tv_usec < 0 || count < 0) {
        errno = EINVAL;
        return -1;
    }
    /* Linux normalises a tv_usec of a million or more rather than refusing it. */
    struct timespec relative = {timeout->tv_sec + timeout->tv_usec / 1000000, (timeout->tv_usec % 1000000) * 1000};
    int64_t deadline = tc_wait_deadline_after(segment, TC_VCLOCK_MONOTONIC, tc_timespec_ns_saturating(&relative));
    int result = select_until(segment, count, read, write, except, deadline, NULL);
    if (leave_time) {
        struct timespec left = left_until(segment, deadline);
        timeout->tv_sec = left.tv_sec;
        timeout->tv_usec = left.tv_nsec / 1000;
    }
    return result;
}

static int shim_select(int count, fd_set *read, fd_set *write, fd_set *except, struct timeval *timeout) {
    return select_leaving(count, read, write, except, timeout, LIBC_SELECT_LEAVES_TIME);
}

/* pselect; with `left`, as the raw system call: the virtual time not slept is written there (glibc's select
   is pselect6 underneath, and gives the caller's timeval what the kernel left in the timespec). */
static int pselect_leaving(int count, fd_set *read, fd_set *write, fd_set *except, const struct timespec *timeout,
                           const sigset_t *mask, struct timespec *left) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && is_zero_timespec(timeout)) tc_spin_note_futile_wait();
    if (!segment || !timeout || (timeout->tv_sec == 0 && timeout->tv_nsec == 0))
        return tc_real.pselect(count, read, write, except, timeout, mask);
    if (!tc_timespec_valid(timeout) || count < 0) {
        errno = EINVAL;
        return -1;
    }
    int64_t deadline = tc_wait_deadline_after(segment, TC_VCLOCK_MONOTONIC, tc_timespec_ns_saturating(timeout));
    int result = select_until(segment, count, read, write, except, deadline, mask);
    if (left) *left = left_until(segment, deadline);
    return result;
}

static int shim_pselect(int count, fd_set *read, fd_set *write, fd_set *except, const struct timespec *timeout,
                        const sigset_t *mask) {
    return pselect_leaving(count, read, write, except, timeout, mask, NULL);
}

TC_EXPORT int select(int, fd_set *, fd_set *, fd_set *, struct timeval *) __attribute__((alias("shim_select")));
TC_EXPORT int __select(int, fd_set *, fd_set *, fd_set *, struct timeval *) __attribute__((alias("shim_select")));
TC_EXPORT int pselect(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)
    __attribute__((alias("shim_pselect")));

/* ---- epoll ---- */

struct epoll_context {
    int epoll_fd;
    struct epoll_event *events;
    int capacity;
};

static int epoll_once(void *argument, int wake_fd, const struct timespec *timeout, const sigset_t *mask) {
    struct epoll_context *context = argument;
    struct pollfd set[2] = {{context->epoll_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int ready = tc_real.ppoll(set, wake_fd >= 0 ? 2 : 1, timeout, mask);
    if (ready < 0) return ready;
    if (wake_fd >= 0 && set[1].revents) tc_waiter_drain(wake_fd);
    /* An epoll fd is readable when it has events: collect them without waiting. */
    if (!set[0].revents) return 0;
    return tc_real.epoll_wait(context->epoll_fd, context->events, context->capacity, 0);
}

static int epoll_until(struct tc_segment *segment, int epoll_fd, struct epoll_event *events, int capacity,
                       int64_t relative, const sigset_t *mask) {
    if (capacity <= 0) {
        errno = EINVAL;
        return -1;
    }
    int64_t deadline = tc_wait_deadline_after(segment, TC_VCLOCK_MONOTONIC, relative);
    struct epoll_context context = {epoll_fd, events, capacity};
    return wait_until(segment, TC_WAIT_EPOLL, deadline, epoll_once, &context, 1, mask);
}

static int shim_epoll_wait(int epoll_fd, struct epoll_event *events, int capacity, int timeout_ms) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && timeout_ms == 0) tc_spin_note_futile_wait();
    if (!segment || timeout_ms <= 0) return tc_real.epoll_wait(epoll_fd, events, capacity, timeout_ms);
    return epoll_until(segment, epoll_fd, events, capacity, (int64_t)timeout_ms * 1000000, NULL);
}

static int shim_epoll_pwait(int epoll_fd, struct epoll_event *events, int capacity, int timeout_ms,
                            const sigset_t *mask) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && timeout_ms == 0) tc_spin_note_futile_wait();
    if (!segment || timeout_ms <= 0) return tc_real.epoll_pwait(epoll_fd, events, capacity, timeout_ms, mask);
    return epoll_until(segment, epoll_fd, events, capacity, (int64_t)timeout_ms * 1000000, mask);
}

static int shim_epoll_pwait2(int epoll_fd, struct epoll_event *events, int capacity, const struct timespec *timeout,
                             const sigset_t *mask) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment && is_zero_timespec(timeout)) tc_spin_note_futile_wait();
    if (!segment || !timeout || (timeout->tv_sec == 0 && timeout->tv_nsec == 0))
        return tc_real.epoll_pwait2(epoll_fd, events, capacity, timeout, mask);
    if (!tc_timespec_valid(timeout)) {
        errno = EINVAL;
        return -1;
    }
    return epoll_until(segment, epoll_fd, events, capacity, tc_timespec_ns_saturating(timeout), mask);
}

TC_EXPORT int epoll_wait(int, struct epoll_event *, int, int) __attribute__((alias("shim_epoll_wait")));
TC_EXPORT int epoll_pwait(int, struct epoll_event *, int, int, const sigset_t *)
    __attribute__((alias("shim_epoll_pwait")));
TC_EXPORT int epoll_pwait2(int, struct epoll_event *, int, const struct timespec *, const sigset_t *)
    __attribute__((alias("shim_epoll_pwait2")));

/* ---- for the system-call table: the kernel's convention ---- */

long tc_epoll_pwait(int epoll_fd, struct epoll_event *events, int capacity, int timeout_ms, const sigset_t *mask) {
    int saved_errno = errno;
    return tc_shim_kernel_result(shim_epoll_pwait(epoll_fd, events, capacity, timeout_ms, mask), saved_errno);
}

long tc_epoll_pwait2(int epoll_fd, struct epoll_event *events, int capacity, const struct timespec *timeout,
                     const sigset_t *mask) {
    int saved_errno = errno;
    return tc_shim_kernel_result(shim_epoll_pwait2(epoll_fd, events, capacity, timeout, mask), saved_errno);
}

long tc_poll(struct pollfd *fds, nfds_t count, int timeout_ms) {
    int saved_errno = errno;
    return tc_shim_kernel_result(shim_poll(fds, count, timeout_ms), saved_errno);
}

long tc_ppoll(struct pollfd *fds, nfds_t count, const struct timespec *timeout, const sigset_t *mask) {
    int saved_errno = errno;
    return tc_shim_kernel_result(shim_ppoll(fds, count, timeout, mask), saved_errno);
}

long tc_select(int count, fd_set *read, fd_set *write, fd_set *except, struct timeval *timeout) {
    int saved_errno = errno;
    return tc_shim_kernel_result(select_leaving(count, read, write, except, timeout, 1), saved_errno);
}

long tc_pselect6(int count, fd_set *read, fd_set *write, fd_set *except, struct timespec *timeout,
                 const sigset_t *mask) {
    int saved_errno = errno;
    return tc_shim_kernel_result(pselect_leaving(count, read, write, except, timeout, mask, timeout), saved_errno);
}

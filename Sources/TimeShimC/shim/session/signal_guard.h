/*
 * Keeping a signal from being lost between the real waits of one virtual
 * wait (signal_guard.c).
 */
#ifndef TIMECTL_SIGNAL_GUARD_H
#define TIMECTL_SIGNAL_GUARD_H

#include <signal.h>

/*
 * Signals during a virtual wait. A virtual wait is a series of real waits,
 * one after each verb that moves time; a signal handled between two of
 * them would be lost to the caller, who expects the wait to end with
 * EINTR. So between real waits every signal is blocked, and the
 * application's own mask is let in only during one: atomically for ppoll,
 * pselect and epoll_pwait (their sigmask argument). Futex and semaphore
 * waits take no mask; around them the mask is opened and closed again,
 * and the thread's count of handlers (tc_thread_handled_signals) tells
 * whether one ran meanwhile. Cancellation is not affected: libc never
 * blocks its cancellation signal.
 */
struct tc_signal_guard {
    sigset_t application;  /* the mask the application had when the wait began */
};

void tc_signal_guard_enter(struct tc_signal_guard *guard);
/* Back to the application's mask: a signal that arrived meanwhile is handled now. */
void tc_signal_guard_leave(struct tc_signal_guard *guard);
/* pthread_cleanup_push handler for tc_signal_guard_leave. */
void tc_signal_guard_leave_cleanup(void *guard);
/* Around one real wait that takes no signal mask. */
void tc_signal_guard_open(const struct tc_signal_guard *guard);
void tc_signal_guard_close(void);

#endif

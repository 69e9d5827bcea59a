/*
 * Signals during a virtual wait; see signal_guard.h.
 */
#define _GNU_SOURCE
#include "signal_guard.h"

#include <pthread.h>
#include <signal.h>

void tc_signal_guard_enter(struct tc_signal_guard *guard) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &guard->application);
}

void tc_signal_guard_leave(struct tc_signal_guard *guard) { pthread_sigmask(SIG_SETMASK, &guard->application, NULL); }

void tc_signal_guard_leave_cleanup(void *guard) { tc_signal_guard_leave((struct tc_signal_guard *)guard); }

void tc_signal_guard_open(const struct tc_signal_guard *guard) {
    pthread_sigmask(SIG_SETMASK, &guard->application, NULL);
}

void tc_signal_guard_close(void) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
}

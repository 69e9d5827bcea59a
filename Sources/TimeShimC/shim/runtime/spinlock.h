/*
 * A spinlock held with every signal blocked, for the shim's small
 * process-local tables. Functions such as alarm() and sigaction() are
 * async-signal-safe, so a signal handler may call them while its own
 * thread holds the lock: blocking signals first means it never can.
 */
#ifndef TIMECTL_SPINLOCK_H
#define TIMECTL_SPINLOCK_H

#include "timectl_realclock.h"

#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>

static inline void tc_spin_lock(int *lock, sigset_t *saved) {
    sigset_t all;
    sigfillset(&all);
    tc_raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, saved, sizeof(uint64_t));
    int expected = 0;
    while (!__atomic_compare_exchange_n(lock, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        expected = 0;
        tc_raw_syscall(SYS_sched_yield, 0);
    }
}

static inline void tc_spin_unlock(int *lock, const sigset_t *saved) {
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, saved, NULL, sizeof(uint64_t));
}

#endif

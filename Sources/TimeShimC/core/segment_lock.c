/*
 * The segment's writer lock (timectl_segment_lock.h): one owner word (pid
 * and process start), taken over from a dead owner, never from a live one.
 */
#define _GNU_SOURCE
#include "timectl_segment_lock.h"
#include "timectl_segment_checks.h"
#include "timectl_procfs.h"
#include "timectl_realclock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long a lock waiter yields before it sleeps; see tc_segment_lock. */
#define LOCK_YIELD_NS 1000000


static int32_t lock_owner_pid(uint64_t owner) { return (int32_t)(owner & 0xffffffffu); }
static uint32_t lock_owner_started(uint64_t owner) { return (uint32_t)(owner >> 32); }

/* This process as a lock owner; recomputed after fork. */
static uint64_t own_lock_word(void) {
    static uint64_t cached;
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    uint64_t word = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (lock_owner_pid(word) != pid) {
        uint64_t started = tc_proc_start_ticks(pid, NULL);
        word = tc_lock_owner(pid, started ? started : 1);
        __atomic_store_n(&cached, word, __ATOMIC_RELAXED);
    }
    return word;
}

/* The holder named by `owner` is gone: its pid is free, or names a process that started at another time. */
static int lock_owner_gone(uint64_t owner) {
    int32_t pid = lock_owner_pid(owner);
    if (tc_raw_syscall(SYS_kill, pid, 0) == -ESRCH) return 1;
    uint64_t started = tc_proc_start_ticks(pid, NULL);
    return started != 0 && (uint32_t)started != lock_owner_started(owner);
}

static int lock_owner_plausible(uint64_t owner) {
    int32_t pid = lock_owner_pid(owner);
    /* Start times are clock ticks after boot: at most 1000 a second (CONFIG_HZ). */
    uint64_t uptime_ticks = (uint64_t)tc_real_ns(CLOCK_BOOTTIME) / 1000000 + 1000;
    return pid > 0 && pid <= TC_PID_MAX && lock_owner_started(owner) != 0 &&
           (uptime_ticks > UINT32_MAX || lock_owner_started(owner) <= uptime_ticks);
}

int tc_segment_lock_damaged(const struct tc_segment *segment) {
    uint64_t owner = __atomic_load_n(&segment->writer_lock, __ATOMIC_ACQUIRE);
    return owner != 0 && !lock_owner_plausible(owner);
}

/*
 * A compare-and-swap lock: the lock is held for a verb's few microseconds,
 * and no libc lock is involved (in the shim, pthread's timed locks are the
 * shim's own interposers). Its word names its holder, so a dead holder is
 * replaced and a damaged word is reported.
 *
 * For its first millisecond a waiter yields instead of sleeping: a thread
 * asleep in a real clock_nanosleep looks, to an auto-advance scheduler, like
 * one blocked on something outside time, so a program whose clock set met a
 * verb would let the scheduler step past it. A yielding thread stays
 * runnable. Only a holder kept off its CPU for longer makes it sleep.
 */
int tc_segment_lock(struct tc_segment *segment, int64_t timeout_ns, struct tc_failure *failure) {
    uint64_t self = own_lock_word();
    int64_t started = tc_real_ns(CLOCK_MONOTONIC);
    int64_t deadline = started + timeout_ns;
    for (;;) {
        uint64_t owner = __atomic_load_n(&segment->writer_lock, __ATOMIC_ACQUIRE);
        if (owner == 0 || (lock_owner_plausible(owner) && owner != self && lock_owner_gone(owner))) {
            if (__atomic_compare_exchange_n(&segment->writer_lock, &owner, self, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return TC_OK;
            continue;
        }
        if (!lock_owner_plausible(owner)) return tc_segment_fail(failure, TC_E_CORRUPT);
        int64_t now = tc_real_ns(CLOCK_MONOTONIC);
        if (now >= deadline) return tc_segment_fail(failure, TC_E_LOCK_TIMEOUT);
        if (now - started < LOCK_YIELD_NS) {
            tc_raw_syscall(SYS_sched_yield, 0);
        } else {
            struct timespec pause = {0, 200000};
            tc_raw_syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &pause, 0);
        }
    }
}

/* One attempt, never a wait: for a writer whose verb may as well be skipped when another is under way. */
int tc_segment_try_lock(struct tc_segment *segment) {
    uint64_t owner = __atomic_load_n(&segment->writer_lock, __ATOMIC_ACQUIRE);
    if (owner != 0 && !(lock_owner_plausible(owner) && owner != own_lock_word() && lock_owner_gone(owner)))
        return TC_E_LOCK_TIMEOUT;
    return __atomic_compare_exchange_n(&segment->writer_lock, &owner, own_lock_word(), 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE)
               ? TC_OK
               : TC_E_LOCK_TIMEOUT;
}

void tc_segment_unlock(struct tc_segment *segment) {
    uint64_t self = own_lock_word();
    __atomic_compare_exchange_n(&segment->writer_lock, &self, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void tc_segment_mark_removed(struct tc_segment *segment) {
    __atomic_fetch_or(&segment->header.flags, TC_SEGMENT_FLAG_REMOVED, __ATOMIC_RELEASE);
    __atomic_fetch_add(&segment->generation, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &segment->generation, FUTEX_WAKE, INT_MAX, 0, 0, 0);
}

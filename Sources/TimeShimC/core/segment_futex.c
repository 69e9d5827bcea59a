/*
 * Waiting on the segment's futex words (timectl_segment_futex.h):
 * `generation`, which every verb bumps, and `wait_changes`, which every
 * claim and release of the wait table bumps.
 */
#define _GNU_SOURCE
#include "timectl_segment_futex.h"
#include "timectl_timeline.h"

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

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

struct tc_futex_waitv {
    uint64_t value;
    uint64_t address;
    uint32_t flags;
    uint32_t reserved;
};

#define TC_FUTEX2_SIZE_U32 0x02
#define TC_FUTEX2_PRIVATE 128

int tc_segment_wait_for_change(struct tc_segment *segment, const uint32_t *shared_word, uint32_t shared_value,
                               const uint32_t *local_word, uint32_t local_value, int64_t timeout_ns) {
    static int no_waitv;
    const int64_t year = 365LL * 86400 * TC_NS_PER_SECOND;
    int64_t wait_ns = timeout_ns < 0 || timeout_ns > year ? year : timeout_ns;
    struct timespec deadline = tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + wait_ns);
    (void)segment;
    if (local_word && !__atomic_load_n(&no_waitv, __ATOMIC_RELAXED)) {
        struct tc_futex_waitv waiters[2] = {
            {shared_value, (uint64_t)(uintptr_t)shared_word, TC_FUTEX2_SIZE_U32, 0},
            {local_value, (uint64_t)(uintptr_t)local_word, TC_FUTEX2_SIZE_U32 | TC_FUTEX2_PRIVATE, 0},
        };
        long result = tc_raw_syscall(SYS_futex_waitv, waiters, 2, 0, &deadline, CLOCK_MONOTONIC);
        if (result != -ENOSYS) return result == -ETIMEDOUT ? ETIMEDOUT : result == -EINTR ? EINTR : 0;
        __atomic_store_n(&no_waitv, 1, __ATOMIC_RELAXED);
    }
    if (local_word) {
        /* Without futex_waitv a change of the local word is noticed within 20 ms. */
        struct timespec soon = tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + 20 * 1000 * 1000);
        if (soon.tv_sec < deadline.tv_sec || (soon.tv_sec == deadline.tv_sec && soon.tv_nsec < deadline.tv_nsec))
            deadline = soon;
        if (__atomic_load_n(local_word, __ATOMIC_ACQUIRE) != local_value) return 0;
    }
    long result = tc_raw_syscall(SYS_futex, shared_word, FUTEX_WAIT_BITSET, shared_value, &deadline, 0,
                                 FUTEX_BITSET_MATCH_ANY);
    return result == -ETIMEDOUT ? ETIMEDOUT : result == -EINTR ? EINTR : 0;
}

long tc_futex_wait_either(const uint32_t *shared_word, uint32_t shared_value, const uint32_t *word, uint32_t value,
                          int word_private, int64_t timeout_ns) {
    const int64_t year = 365LL * 86400 * TC_NS_PER_SECOND;
    int64_t wait_ns = timeout_ns < 0 || timeout_ns > year ? year : timeout_ns;
    struct timespec deadline = tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + wait_ns);
    struct tc_futex_waitv waiters[2] = {
        {value, (uint64_t)(uintptr_t)word, TC_FUTEX2_SIZE_U32 | (word_private ? TC_FUTEX2_PRIVATE : 0), 0},
        {shared_value, (uint64_t)(uintptr_t)shared_word, TC_FUTEX2_SIZE_U32, 0},
    };
    return tc_raw_syscall(SYS_futex_waitv, waiters, 2, 0, &deadline, CLOCK_MONOTONIC);
}

void tc_segment_watch_waits(struct tc_segment *segment, int watching) {
    __atomic_fetch_add(&segment->wait_watchers, watching ? 1u : (uint32_t)-1, __ATOMIC_ACQ_REL);
}

/*
 * Raw futex waits on the virtual timeline; see futex.h.
 *
 * A plain wait (FUTEX_WAIT, relative on the monotonic timeline;
 * FUTEX_WAIT_BITSET, absolute, on the wall clock with FUTEX_CLOCK_REALTIME)
 * and futex_waitv block in one futex_waitv on the program's words and the
 * segment's generation at once: a wake of the program's word ends the wait
 * at once, a verb makes it look at the session again, and the kernel's own
 * timeout is the real time the virtual remainder takes (a year while
 * frozen). A wake with a bitset reaches a FUTEX_WAIT_BITSET waiter whatever
 * the bitset: a spurious wakeup, which every futex caller allows.
 *
 * A priority-inheritance lock (FUTEX_LOCK_PI, FUTEX_LOCK_PI2) cannot wait
 * on a second word: it waits in slices of TC_SLICE_NS real time, each a
 * real lock attempt, and looks at the session between them, so a tick that
 * passes its deadline ends it within a slice. FUTEX_WAIT_REQUEUE_PI with a
 * timeout is refused with ENOSYS, as a kernel without PI support answers
 * (glibc then uses its other condition-variable path): a slice that timed
 * out cannot tell whether the waiter had already been requeued, so it could
 * not be re-entered without losing a signal.
 */
#define _GNU_SOURCE
#include "futex.h"
#include "../runtime/process.h"
#include "../session/wait.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>

#define FUTEX2_SIZE_U32 FUTEX_32
#define FUTEX2_PRIVATE FUTEX_PRIVATE_FLAG

static long kernel_futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout, uint32_t *word2,
                         uint32_t value3) {
    return tc_raw_syscall(SYS_futex, word, op, value, timeout, word2, value3);
}

/* Ends with the segment's generation word as one more waiter: the index of the woken word, `count` when a verb
   moved the session, or the kernel's −errno. */
static long wait_with_generation(struct tc_segment *segment, const struct futex_waitv *waiters, unsigned int count,
                                 uint32_t generation, int64_t real_ns) {
    struct futex_waitv all[FUTEX_WAITV_MAX + 1];
    memcpy(all, waiters, count * sizeof(all[0]));
    all[count] = (struct futex_waitv){generation, (uint64_t)(uintptr_t)&segment->generation, FUTEX2_SIZE_U32, 0};
    struct timespec span = tc_real_timeout(real_ns);
    struct timespec deadline =
        tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + tc_timespec_ns(span));
    return tc_raw_syscall(SYS_futex_waitv, all, count + 1, 0, &deadline, CLOCK_MONOTONIC);
}

/* Whether every word still holds what its waiter expects (so a kernel EAGAIN was the generation's). */
static int words_unchanged(const struct futex_waitv *waiters, unsigned int count) {
    for (unsigned int i = 0; i < count; i++)
        if (__atomic_load_n((const uint32_t *)(uintptr_t)waiters[i].uaddr, __ATOMIC_ACQUIRE) != (uint32_t)waiters[i].val)
            return 0;
    return 1;
}

/*
 * Waits on `waiters` until one is woken (its index), `deadline` passes on `vclock` (−ETIMEDOUT), or the kernel
 * ends the wait otherwise (−EAGAIN, −EINTR, −EFAULT, −EINVAL). Listed in the session's wait table meanwhile.
 */
static long wait_words(struct tc_segment *segment, const struct futex_waitv *waiters, unsigned int count, int vclock,
                       int64_t deadline) {
    struct tc_wait wait;
    tc_wait_begin(&wait, segment, TC_WAIT_FUTEX, vclock, deadline);
    long result;
    for (int round = 0;; round++) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_remaining(&view, &wait);
        if (real == 0) {
            result = -ETIMEDOUT;
            break;
        }
        long woken = wait_with_generation(segment, waiters, count, view.generation, real);
        if (woken == -ENOSYS && count == 1) {
            /* Linux < 5.16: the word alone, looking at the session between slices. */
            struct timespec slice = tc_real_timeout(real < TC_SLICE_NS ? real : TC_SLICE_NS);
            int op = waiters[0].flags & FUTEX2_PRIVATE ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT;
            woken = kernel_futex((uint32_t *)(uintptr_t)waiters[0].uaddr, op, (uint32_t)waiters[0].val, &slice, NULL, 0);
            if (woken == -ETIMEDOUT) woken = (long)count;
        }
        if (woken >= 0 && woken < (long)count) {
            result = woken;
        } else if (woken == (long)count || woken == -ETIMEDOUT) {
            continue; /* a verb, or the real time for the remainder passed: look again */
        } else if (woken == -EAGAIN && words_unchanged(waiters, count)) {
            continue; /* the generation had moved */
        } else {
            /* −EAGAIN after a first round: a word changed while the wait looked at the session (a wake it
               missed), which callers take as a wakeup. */
            result = woken == -EAGAIN && round > 0 ? 0 : woken;
        }
        break;
    }
    tc_wait_end(&wait);
    return result;
}

/* A priority-inheritance lock in slices of real time (see above): the kernel's result of the last attempt. */
static long lock_pi(struct tc_segment *segment, uint32_t *word, int op, int vclock, int64_t deadline) {
    int command = op & FUTEX_CMD_MASK;
    clockid_t kernel_clock = command == FUTEX_LOCK_PI || (op & FUTEX_CLOCK_REALTIME) ? CLOCK_REALTIME : CLOCK_MONOTONIC;
    struct tc_wait wait;
    tc_wait_begin(&wait, segment, TC_WAIT_FUTEX, vclock, deadline);
    long result;
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_remaining(&view, &wait);
        if (real == 0) {
            /* The kernel takes no clock flag with FUTEX_TRYLOCK_PI (ENOSYS): only the private flag carries over. */
            result = kernel_futex(word, (op & FUTEX_PRIVATE_FLAG) | FUTEX_TRYLOCK_PI, 0, NULL, NULL, 0);
            if (result == -EAGAIN || result == -EWOULDBLOCK) result = -ETIMEDOUT;
            break;
        }
        struct timespec until = tc_timespec_from_ns(tc_real_ns(kernel_clock) + (real < TC_SLICE_NS ? real : TC_SLICE_NS));
        result = kernel_futex(word, op, 0, &until, NULL, 0);
        if (result != -ETIMEDOUT) break;
    }
    tc_wait_end(&wait);
    return result;
}

long tc_futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout, uint32_t *word2,
              uint32_t value3) {
    int command = op & FUTEX_CMD_MASK;
    int timed = timeout && (command == FUTEX_WAIT || command == FUTEX_WAIT_BITSET || command == FUTEX_LOCK_PI ||
                            command == FUTEX_LOCK_PI2 || command == FUTEX_WAIT_REQUEUE_PI);
    struct tc_segment *segment = timed ? tc_shim_segment() : NULL;
    if (!segment) return kernel_futex(word, op, value, timeout, word2, value3);
    int64_t ns;
    if (!tc_timespec_to_ns(timeout, &ns)) return -EINVAL;
    if (command == FUTEX_WAIT_REQUEUE_PI) return -ENOSYS;
    if (command == FUTEX_WAIT_BITSET && value3 == 0) return -EINVAL;
    int realtime = op & FUTEX_CLOCK_REALTIME;
    if (command == FUTEX_LOCK_PI || command == FUTEX_LOCK_PI2) {
        int vclock = command == FUTEX_LOCK_PI || realtime ? TC_VCLOCK_REALTIME : TC_VCLOCK_MONOTONIC;
        return lock_pi(segment, word, op, vclock, tc_wait_absolute_deadline(segment, vclock, ns));
    }
    int vclock;
    int64_t deadline;
    if (command == FUTEX_WAIT) {
        vclock = TC_VCLOCK_MONOTONIC; /* relative, whatever the clock flag */
        deadline = tc_wait_deadline_after(segment, vclock, ns);
    } else {
        vclock = realtime ? TC_VCLOCK_REALTIME : TC_VCLOCK_MONOTONIC;
        deadline = tc_wait_absolute_deadline(segment, vclock, ns);
    }
    struct futex_waitv waiter = {value, (uint64_t)(uintptr_t)word,
                                 FUTEX2_SIZE_U32 | (op & FUTEX_PRIVATE_FLAG ? FUTEX2_PRIVATE : 0), 0};
    return wait_words(segment, &waiter, 1, vclock, deadline);
}

long tc_futex_waitv(struct futex_waitv *waiters, unsigned int count, unsigned int flags,
                    const struct timespec *timeout, clockid_t clock) {
    struct tc_segment *segment = timeout ? tc_shim_segment() : NULL;
    if (!segment) return tc_raw_syscall(SYS_futex_waitv, waiters, count, flags, timeout, clock);
    int64_t ns;
    if (flags != 0 || count == 0 || count > FUTEX_WAITV_MAX || !waiters ||
        (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME) || !tc_timespec_to_ns(timeout, &ns))
        return -EINVAL;
    int vclock = clock == CLOCK_REALTIME ? TC_VCLOCK_REALTIME : TC_VCLOCK_MONOTONIC;
    return wait_words(segment, waiters, count, vclock, tc_wait_absolute_deadline(segment, vclock, ns));
}

/*
 * Waiting on the virtual timeline (SPEC §3): the pieces every wait
 * interposer shares.
 *
 * A wait has a virtual deadline on one session clock. It blocks in real
 * time for as long as the session says the remainder takes (forever while
 * frozen) and re-evaluates whenever a verb changes the timeline:
 *
 * This file (wait.c) is the wait itself; signal_guard.h keeps signals from
 * being lost between its real waits, waiters.h lets the helper thread wake
 * the waits that cannot watch the futex:
 *
 *  - sleeps block on the segment's generation futex, which every verb bumps
 *    and wakes (tc_wait_futex);
 *  - waits on file descriptors add the thread's own wake eventfd to what they
 *    wait on; the process's helper thread, blocked on the same futex, writes
 *    those eventfds after each verb, and fires the process's virtual timers;
 *  - condition waits register their condvar, mutex and deadline; the helper
 *    broadcasts the condvar, holding the mutex (so the broadcast cannot fall
 *    between the waiter's look at the clock and its wait), when a verb makes
 *    the deadline due — the wait then reports ETIMEDOUT — or changes the
 *    rate (a spurious wakeup, which POSIX allows).
 *
 * Nothing here allocates except starting the helper thread once, and
 * nothing takes a lock that a clock read could block on.
 */
#ifndef TIMECTL_WAIT_H
#define TIMECTL_WAIT_H

#include "../runtime/process.h"

/* Bounded real waits for primitives nobody can wake early (semaphores, mutexes). */
#define TC_SLICE_NS (50 * 1000 * 1000LL)

/* A consistent look at the session for a wait: the generation is read first,
   so a verb that lands after the look changes it and ends the wait. */
struct tc_wait_view {
    uint32_t generation;
    uint64_t rate;
    int64_t now;          /* virtual ns on the wait's clock */
};

struct tc_wait_view tc_wait_look(struct tc_segment *segment, int vclock);

/* Real ns until `deadline` at the view's rate: 0 if due, TC_FOREVER if frozen. */
int64_t tc_wait_real_remaining(const struct tc_wait_view *view, int64_t deadline);

struct tc_wait;
/* The same for a pending wait: TC_FOREVER too while it is due but a seeded scheduler holds it (SPEC §11). */
int64_t tc_wait_remaining(const struct tc_wait_view *view, const struct tc_wait *wait);

/* A deadline `relative` virtual ns from now on `vclock` (saturating). */
int64_t tc_wait_deadline_after(struct tc_segment *segment, int vclock, int64_t relative);

/* The clock a relative wait on `vclock` measures: the elapsed track's (a wall clock may stand still or jump). */
static inline int tc_wait_relative_clock(int vclock) {
    return tc_track_of(vclock) == TC_TRACK_WALL ? TC_VCLOCK_MONOTONIC : vclock;
}

/* The session's deadline for an absolute one the application gave on `vclock`, on its own clock: its creep
   earlier (runtime/starvation.h); under replay, see trace/trace_replay.h. */
int64_t tc_wait_absolute_deadline(struct tc_segment *segment, int vclock, int64_t absolute);

/* A pending wait of this thread, listed in the segment's wait table. */
struct tc_wait {
    struct tc_segment *segment;
    int vclock;
    int64_t deadline;     /* as given, or later by a seeded jitter: what the wait waits for */
    int slot;
    uint64_t owner;
};

/* Lists the wait; its deadline (wait->deadline) may be stretched by a seeded jitter (SPEC §11). */
void tc_wait_begin(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline);
/* The same for an armed timer, listed as the whole process's: `key` tells the process's timers apart (the
   same in every run), `descriptors` is a timerfd's (tc_wait_descriptors, else 0). */
void tc_wait_begin_timer(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline,
                         uint32_t key, uint64_t descriptors);
void tc_wait_end(struct tc_wait *wait);
/* pthread_cleanup_push handler: ends the wait `argument` points to. */
void tc_wait_end_cleanup(void *argument);

/*
 * Blocks until the generation moves on from `generation`, `real_ns` real ns
 * pass, or the calling thread runs a signal handler: the kernel interrupts
 * the wait, or the thread's count of handlers (runtime/threads.h, counted by calls/signals.c) has left
 * `signals_seen` — a handler that ran just before the wait, or just after
 * it, while the shim's own code ran. Returns 0 or EINTR. Always given a
 * timeout, so that the kernel reports EINTR after any handler, as nanosleep
 * does, instead of restarting under SA_RESTART. A cancellation point.
 */
int tc_wait_futex(struct tc_segment *segment, uint32_t generation, uint32_t signals_seen, int64_t real_ns);

/* timespec for a real relative timeout in ns (TC_FOREVER → a year). */
struct timespec tc_real_timeout(int64_t real_ns);

#endif

/*
 * Waiting on the virtual timeline (SPEC §3): the pieces every wait
 * interposer shares.
 *
 * A wait has a virtual deadline on one session clock. It blocks in real
 * time for as long as the session says the remainder takes (forever while
 * frozen) and re-evaluates whenever a verb changes the timeline:
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
#ifndef TIMECTL_WAITER_H
#define TIMECTL_WAITER_H

#include "real.h"
#include "shim.h"

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

/* A deadline `relative` virtual ns from now on `vclock` (saturating). */
int64_t tc_wait_deadline_after(struct tc_segment *segment, int vclock, int64_t relative);

/* The clock a relative wait on `vclock` measures: the elapsed track's (a wall clock may stand still or jump). */
static inline int tc_wait_relative_clock(int vclock) {
    return tc_track_of(vclock) == TC_TRACK_WALL ? TC_VCLOCK_MONOTONIC : vclock;
}

/* The deadline for an absolute one the application gave on `vclock` (different only under replay: see trace.h). */
int64_t tc_wait_absolute_deadline(struct tc_segment *segment, int vclock, int64_t absolute);

/* A pending wait of this thread, listed in the segment's wait table. */
struct tc_wait {
    struct tc_segment *segment;
    int vclock;
    int64_t deadline;
    int slot;
    uint64_t owner;
};

void tc_wait_begin(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline);
/* The same for an armed timer, listed as the whole process's; `descriptors`: a timerfd's (tc_wait_descriptors), else 0. */
void tc_wait_begin_timer(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline,
                         uint64_t descriptors);
void tc_wait_end(struct tc_wait *wait);
/* pthread_cleanup_push handler: ends the wait `argument` points to. */
void tc_wait_end_cleanup(void *argument);

/*
 * Blocks until the generation moves on from `generation`, `real_ns` real ns
 * pass, or the calling thread runs a signal handler: the kernel interrupts
 * the wait, or the thread's count of handlers (see signals.c) has left
 * `signals_seen` — a handler that ran just before the wait, or just after
 * it, while the shim's own code ran. Returns 0 or EINTR. Always given a
 * timeout, so that the kernel reports EINTR after any handler, as nanosleep
 * does, instead of restarting under SA_RESTART. A cancellation point.
 */
int tc_wait_futex(struct tc_segment *segment, uint32_t generation, uint32_t signals_seen, int64_t real_ns);

/* The calling thread's count of signal handlers run through the shim's trampoline (signals.c). */
uint32_t *tc_thread_handled_signals(void);

/* timespec for a real relative timeout in ns (TC_FOREVER → a year). */
struct timespec tc_real_timeout(int64_t real_ns);

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

/*
 * Registers the calling thread as waiting on file descriptors until
 * tc_waiter_leave(); returns its wake eventfd, which turns readable after
 * every verb, or −1 (no eventfd, or too many waiters): the caller then
 * waits in slices of TC_SLICE_NS.
 */
int tc_waiter_enter_fd(void);
/* Registers the calling thread as waiting on `cond` (holding `mutex`) until
   `deadline` on `vclock`; 0, or −1 (too many waiters: then slices). */
int tc_waiter_enter_cond(pthread_cond_t *cond, pthread_mutex_t *mutex, int vclock, int64_t deadline);
/* The rate the calling condition waiter's current real timeout was worked out for. */
void tc_waiter_set_rate(uint64_t rate);
/* Whether the helper woke the calling condition waiter because its deadline came. */
int tc_waiter_woken_at_deadline(void);
/* Ends the registration an enter call made (only one that succeeded: a
   wait in a signal handler nests inside the thread's outer wait). */
void tc_waiter_leave(void);
/* For pthread_cleanup_push: tc_waiter_leave() if *(volatile int *)entered. */
void tc_waiter_leave_cleanup(void *entered);
/* Empties a wake eventfd after it woke its thread. */
void tc_waiter_drain(int wake_fd);

#include "descriptors.h"

/* dup2/dup3 is about to replace `fd`, one of the shim's wake eventfds: stop using it. */
void tc_wake_fd_taken(int fd);
/* The same for one of the timers' descriptors: moves it to another number; 0 if `fd` is no timer's. In timers.c. */
int tc_timerfd_number_taken(int fd);
/* `fd` is being closed or replaced: if it was a virtual timerfd, the timer goes. In timers.c. */
void tc_timerfd_forget(int fd);

/* Tells the helper thread that the process's timers changed (starting it if needed). */
void tc_helper_poke(void);

/*
 * Starts one of the shim's own threads: detached, with `stack_size` bytes
 * of stack and every signal blocked (a signal meant for the application
 * must never land on it), through libc's own pthread_create (record and
 * replay number only the application's threads). 0, or an error number.
 */
int tc_start_shim_thread(void *(*body)(void *), void *argument, size_t stack_size);

/* For the helper: fires due virtual timers; returns real ns until the next one, or TC_FOREVER. In timers.c. */
int64_t tc_timers_fire_due(struct tc_segment *segment);
void tc_timers_before_fork(void);
void tc_timers_after_fork_in_parent(void);
void tc_timers_after_fork_in_child(void);
/* For the signal trampoline: a POSIX timer's signal (SI_TIMER) is being handled; sets its si_overrun. */
void tc_timers_signal_taken(int signal, siginfo_t *info);
/* A timer system call (timerfd_*, timer_*, alarm, setitimer, getitimer) with the kernel's arguments, made raw by a
   Go or static program and trapped (syscall_trap.c): run as libc's is here; the kernel's result form. In timers.c. */
long tc_timers_syscall(long number, long a1, long a2, long a3, long a4);

/* Called by shim.c in a fork child. */
void tc_waiters_after_fork_in_child(void);
/* Called by shim.c in a fork child: the handler table's lock may have been held by a thread the child does not have. */
void tc_signals_after_fork_in_child(void);

/* Thread id, cached per thread. */
int32_t tc_gettid(void);
/* The thread id the calling TCB now serves: a static program's trap borrows a TCB of another thread (static_program.c). */
void tc_gettid_adopt(int32_t tid);

#endif

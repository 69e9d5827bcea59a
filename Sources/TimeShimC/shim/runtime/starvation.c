/*
 * The starvation policy (docs/starvation.md, SPEC §3 "No real runtime
 * starves", §11 "Determinism").
 *
 * Spinning: programs written for a clock that always creeps forward wait
 * for it to move — libuuid allows eleven ids per gettimeofday value and
 * then re-reads it; Ruby's sleep polls with a zero timeout until now > end;
 * a busy-wait reads the clock until a deadline. On a frozen session the
 * value never moves, and they spin for ever. So a thread that reads one
 * value of one clock TC_SPIN_READS times in a row, or makes TC_SPIN_WAITS
 * futile waits in a row each after reading it, moves its own clocks
 * forward by TC_SPIN_TURN_NS for each of those turns: its creep
 * (starvation.h). Only its own, and only by
 * counting what it did itself: what a thread reads depends on the session's
 * settings and on that thread alone, never on real time or on other threads
 * (the same run twice reads the same values). Its waits end on its own
 * clock: an absolute deadline it gives is its creep ahead of the session's
 * (session/wait.c), a relative one is the same length on both.
 *
 * Yielding: HotSpot brings threads to a safepoint with 10 µs sleeps, sleeps
 * 1 ms on its way out and, if a compiler thread is still busy then, waits
 * for it on a condition variable 10 ms at a time; on a frozen clock with
 * nothing to advance it those waits never end, and the JVM hangs before or
 * after main. So on a frozen session that has no scheduler, a relative
 * sleep or a condition wait with at most TC_YIELD_WAIT_NS to go waits that
 * long in real time and returns as if timed out (a condition signalled
 * meanwhile still wins), time not having moved: the one bounded exception
 * to "a wait never ends before its deadline". With a scheduler, such a
 * wait is an ordinary virtual wait the scheduler steps to.
 *
 * Go's back-offs: a Go program's runtime waits up to 10 ms at a time on
 * real time (trap/syscall_trap.c) and then compares nanotime() with a
 * deadline; such a wait that times out moves the process's clocks
 * (tc_runtime_backoff_futex, below).
 */
#define _GNU_SOURCE
#include "starvation.h"
#include "process.h"

#include <errno.h>
#include <sys/syscall.h>

TC_TLS struct tc_spin_state tc_spin_state;
int64_t tc_process_creep;

static int frozen(const struct tc_segment *segment) { return tc_segment_rate(segment) == 0; }

/* Whether this process's clocks creep as one (Go, static programs): see starvation.h. */
static int creeps_per_process(void) { return tc_syscall_trap_active(); }

void tc_spin_set_creep(int64_t creep) {
    struct tc_spin_state *state = &tc_spin_state;
    state->creep = creep;
    state->creep_seconds = creep / TC_NS_PER_SECOND;
    state->creep_nanoseconds = creep % TC_NS_PER_SECOND;
    if (creep) state->vclock |= TC_SPIN_CREPT;
}

int64_t tc_own_creep(void) {
    return creeps_per_process() ? __atomic_load_n(&tc_process_creep, __ATOMIC_RELAXED) : tc_spin_state.creep;
}

/* Moves the calling thread's clocks (and, where clocks are per process, the process's) `ns` ahead. */
static void creep(int64_t ns) {
    struct tc_spin_state *state = &tc_spin_state;
    if (creeps_per_process()) __atomic_fetch_add(&tc_process_creep, ns, __ATOMIC_RELAXED);
    /* A thread of such a process that reads through libc (a cgo call) sees its own creep. */
    tc_spin_set_creep(state->creep + ns);
    state->repeats = 0;
    state->futile_waits = 0;
}

int tc_spin_note_unusual(int vclock, struct timespec *value) {
    struct tc_spin_state *state = &tc_spin_state;
    int32_t crept = state->vclock & TC_SPIN_CREPT;
    /* The session's reading is what the state keeps on this path (starvation.h); the thread sees its own. */
    state->seconds = value->tv_sec;
    state->nanoseconds = value->tv_nsec;
    state->vclock = vclock | crept;
    state->repeats = 0;
    state->futile_waits = 0;
    state->read_since_wait = 1;
    if (crept) tc_creep_apply(state->creep, value);
    return 0;
}

__attribute__((noinline)) void tc_spin_tripped(void) { creep((int64_t)TC_SPIN_READS * TC_SPIN_TURN_NS); }

void tc_spin_note_futile_wait(void) {
    struct tc_spin_state *state = &tc_spin_state;
    if (!state->read_since_wait) return;  /* polling descriptors, not waiting on the clock */
    state->read_since_wait = 0;
    if (++state->futile_waits < TC_SPIN_WAITS) return;
    creep((int64_t)TC_SPIN_WAITS * TC_SPIN_TURN_NS);
}

static int has_scheduler(const struct tc_segment *segment) {
    int32_t pid = __atomic_load_n(&segment->scheduler_pid, __ATOMIC_ACQUIRE);
    return pid != 0 && tc_raw_syscall(SYS_kill, pid, 0) != -ESRCH;
}

int tc_wait_yields(const struct tc_segment *segment, int64_t length) {
    return length > 0 && length <= TC_YIELD_WAIT_NS && frozen(segment) && !has_scheduler(segment);
}

int tc_short_sleep_yield(struct tc_segment *segment, int64_t length) {
    if (!tc_wait_yields(segment, length)) return -1;
    struct timespec real = {0, (long)length};
    int interrupted = tc_raw_syscall(SYS_nanosleep, &real, NULL) == -EINTR;
    tc_spin_note_futile_wait();
    return interrupted ? EINTR : 0;
}

/*
 * Go's runtime waits for the other Ps to stop (stopTheWorldWithSema) or to
 * pass a safe point (forEachP) with notetsleep(note, 100 µs): a relative
 * FUTEX_WAIT, then, while the note is not woken, nanotime() against its
 * deadline and another FUTEX_WAIT for what is left; only once that returns
 * does it ask the goroutines that still run to stop again (preemptall). The
 * wait is a runtime back-off and runs on real time (trap/syscall_trap.c), but
 * on a standing monotonic clock the deadline is never reached: a goroutine
 * that missed the first request (the background sweeper, spinning until the
 * collection that waits releases it) is never asked again, and both spin for
 * ever. So such a wait of at most 100 µs (its first or what is left of it)
 * that times out while the monotonic clock stands still moves the process's
 * clocks TC_BACKOFF_CREEP_NS: after ten of them the runtime asks again, however
 * loaded the machine (a tenth of the real time a collection stays stopped,
 * where real time would have moved them by all of it).
 * Sysmon's nap until the next timer, the runtime's other such wait, begins
 * with every P idle: it moves nothing unless the process's other threads
 * were on a CPU for at least a quarter of its length (TC_BACKOFF_OTHERS_RAN:
 * a goroutine woken meanwhile computes without a system call, which would
 * wake sysmon), and then only TC_BACKOFF_CREEP_NS — docs/starvation.md says so. A
 * static program's threads have no thread-local storage of the shim's:
 * this touches the process's creep only.
 */
static void creep_process(int64_t ns) { __atomic_fetch_add(&tc_process_creep, ns, __ATOMIC_RELAXED); }

long tc_runtime_backoff_futex(long word, long op, long expected, long timeout) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || tc_segment_clock_rate(segment, TC_VCLOCK_MONOTONIC) != 0)
        return tc_raw_syscall(SYS_futex, word, op, expected, timeout, 0, 0);
    int64_t length = tc_timespec_ns(*(const struct timespec *)timeout);
    if (length <= TC_GO_STOP_WAIT_NS) {
        long result = tc_raw_syscall(SYS_futex, word, op, expected, timeout, 0, 0);
        if (result == -ETIMEDOUT) creep_process(TC_BACKOFF_CREEP_NS);
        return result;
    }
    int64_t process = tc_real_ns(CLOCK_PROCESS_CPUTIME_ID), thread = tc_real_ns(CLOCK_THREAD_CPUTIME_ID);
    long result = tc_raw_syscall(SYS_futex, word, op, expected, timeout, 0, 0);
    if (result != -ETIMEDOUT) return result;
    thread = tc_real_ns(CLOCK_THREAD_CPUTIME_ID) - thread;
    process = tc_real_ns(CLOCK_PROCESS_CPUTIME_ID) - process;
    /* The back-off's own length, not the real time it took: on a loaded machine a 100 µs wait can take
       milliseconds, the running goroutine getting no more of them than the waiter. */
    if ((process - thread) * TC_BACKOFF_OTHERS_RAN >= length) creep_process(TC_BACKOFF_CREEP_NS);
    return result;
}

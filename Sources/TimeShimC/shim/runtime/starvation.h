/*
 * The starvation policy (docs/starvation.md): on a frozen session a thread
 * that spins on the clock moves its own clocks forward, TC_SPIN_TURN_NS a
 * turn (its creep, below); with no scheduler to advance time, a relative sleep or a
 * condition wait with at most TC_YIELD_WAIT_NS to go is a yield. See
 * starvation.c.
 */
#ifndef TIMECTL_STARVATION_H
#define TIMECTL_STARVATION_H

#include "process.h"

#include <time.h>

/* Identical readings in a row of one clock, with no wait between them, that make a thread a spinner: fifty times
   the longest run a program that merely reads the clock often was seen to make (HotSpot's main thread, 1024 to
   2047 readings while it starts), and ten times a thread's longest wait for another process seen (Python's
   multiprocessing pool, up to 10,000 readings of one value while its workers end). */
#define TC_SPIN_READS 100000
/* Futile waits in a row, each after a reading of the same value, that make a thread a spinner: far more than
   the zero-timeout polls a thread makes while it waits for another process (the same pool's, up to 5000). */
#define TC_SPIN_WAITS 10000
/* How far a spin moves the spinner's clocks: 10 ns a turn, about what such a loop costs on a real clock, so
   that a loop waiting for a deadline gets there in as many turns whatever the counts above (and more than
   gettimeofday's microsecond: libuuid makes 11 ids per microsecond, the 11th equal to the next microsecond's
   first, and a clock moving exactly 1 µs at a time would make it repeat ids). */
#define TC_SPIN_TURN_NS 10
/* How far a Go runtime back-off that times out on a standing clock moves its process's clocks (below). */
#define TC_BACKOFF_CREEP_NS 10000
/* A relative sleep or condition wait this short on a frozen session with no scheduler is a yield: HotSpot's
   longest such wait is the 10 ms its exit waits, in a loop, for compiler threads to stop. */
#define TC_YIELD_WAIT_NS 10000000

/*
 * A thread's clocks are the session's plus its creep: what its own spins
 * moved them (SPEC §11: what a thread reads depends only on the session and
 * on what that thread did). Everything here counts the thread's own readings
 * and waits, never real time. A new thread starts with its creator's creep
 * (trace/trace_registry.c's pthread_create), a fork child with its parent
 * thread's.
 */
struct tc_spin_state {
    /* The thread's last reading: the session's on the plain read of a clock that stands still
       (tc_spin_note_still), else as the thread saw it (its creep included). */
    int64_t seconds, nanoseconds;
    int32_t vclock;                /* | TC_SPIN_CREPT once the thread crept */
    uint32_t repeats;              /* readings of it in a row */
    int64_t creep;                 /* ns its clocks are ahead of the session's */
    uint32_t futile_waits;         /* futile waits since it was first read, none of them blocking */
    int read_since_wait;
    int64_t creep_seconds, creep_nanoseconds;  /* the same creep split, for the read path's addition */
};

extern TC_TLS struct tc_spin_state tc_spin_state;

/*
 * Programs whose clocks are per process: Go's goroutines move between
 * threads (a timer's deadline is computed on one and waited for on
 * another), and a static program's threads have no thread-local storage of
 * the shim's. In such a process (the trap is in place: runtime/process.h)
 * every reading through the vDSO entries adds the process's creep, and
 * every spin moves it.
 */
extern int64_t tc_process_creep;

/* `value` moved `creep` ns ahead (creep ≥ 0). */
__attribute__((always_inline)) static inline void tc_creep_apply(int64_t creep, struct timespec *value) {
    value->tv_sec += creep / TC_NS_PER_SECOND;
    long nsec = value->tv_nsec + (long)(creep % TC_NS_PER_SECOND);
    if (nsec >= TC_NS_PER_SECOND) {
        nsec -= TC_NS_PER_SECOND;
        value->tv_sec += 1;
    }
    value->tv_nsec = nsec;
}

/* Sets the calling thread's creep (a new thread's: its creator's). */
void tc_spin_set_creep(int64_t creep);

/* How far the calling thread's clocks run ahead of the session's: its creep, or its process's. */
int64_t tc_own_creep(void);

/* The spin of a thread whose readings tripped TC_SPIN_READS: its clocks (or its process's) creep. */
void tc_spin_tripped(void);

/* In tc_spin_state.vclock: the thread has crept. On the plain read of a clock that stands still its repeats
   then have its creep added inline and its new readings go out of line (tc_spin_note_unusual): a thread that
   never crept pays nothing for creeping on that path. */
#define TC_SPIN_CREPT 0x100

/*
 * After a reading the application asks for, as the thread saw it (its creep
 * included): contended and recorded reads note theirs whatever the clock
 * does, a Go program's reads of a clock that stands still theirs. A field is
 * written only when its value changes: a new value stores the reading, a
 * repeated one the count, and the rest of the state is rewritten only when
 * it was not already reset.
 */
__attribute__((always_inline)) static inline void tc_spin_note_reading(int vclock, const struct timespec *value) {
    struct tc_spin_state *state = &tc_spin_state;
    /* Read before the first store to the state, which might alias it as far as the compiler knows: the reading
       then stays in the registers it was computed in, rather than being loaded back from memory just written. */
    int64_t seconds = value->tv_sec, nanoseconds = value->tv_nsec;
    int32_t crept = state->vclock & TC_SPIN_CREPT;
    if (__builtin_expect(state->nanoseconds == nanoseconds && state->seconds == seconds && state->vclock == (vclock | crept), 1)) {
        if (__builtin_expect(!state->read_since_wait, 0)) state->read_since_wait = 1;
        if (__builtin_expect(++state->repeats >= TC_SPIN_READS, 0)) tc_spin_tripped();
        return;
    }
    state->seconds = seconds;
    state->nanoseconds = nanoseconds;
    if (__builtin_expect(state->vclock != (vclock | crept) || state->repeats != 0 || state->futile_waits != 0 ||
                             !state->read_since_wait, 0)) {
        state->vclock = vclock | crept;
        state->repeats = 0;
        state->futile_waits = 0;
        state->read_since_wait = 1;
    }
}

/* A plain read of a clock that stands still whose state needs resetting (or whose thread crept and read a new
   value): *value, the session's reading, made the thread's own, and noted. Returns 0, clock_gettime's success,
   so that callers jump to it. */
int tc_spin_note_unusual(int vclock, struct timespec *value);

/*
 * The plain read of a clock that stands still: `reading`, the session's
 * reading, already stored in *value. The state holds the session's
 * readings on this path, so a thread that crept (TC_SPIN_CREPT in its
 * vclock) still counts its repeats here, and only then has its creep
 * added. The common cases — a repeat, a new reading — are compares, stores
 * and that addition: 0. 1 for the rest, which the caller hands to
 * tc_spin_note_unusual as its last call (so that the common path saves no
 * register).
 */
__attribute__((always_inline)) static inline int tc_spin_note_still(int vclock, const struct timespec *reading,
                                                                    struct timespec *value) {
    struct tc_spin_state *state = &tc_spin_state;
    int64_t seconds = reading->tv_sec, nanoseconds = reading->tv_nsec;
    if (__builtin_expect(state->nanoseconds == nanoseconds && state->seconds == seconds, 1)) {
        if (__builtin_expect(state->vclock == (vclock | TC_SPIN_CREPT), 0))
            *value = tc_timespec_normalised(seconds + state->creep_seconds, nanoseconds + state->creep_nanoseconds);
        else if (__builtin_expect(state->vclock != vclock, 0)) return 1;
        if (__builtin_expect(!state->read_since_wait, 0)) state->read_since_wait = 1;
        if (__builtin_expect(++state->repeats >= TC_SPIN_READS, 0)) tc_spin_tripped();
        return 0;
    }
    if (__builtin_expect(state->vclock != vclock || state->repeats != 0 || state->futile_waits != 0 ||
                             !state->read_since_wait, 0))
        return 1;
    state->seconds = seconds;
    state->nanoseconds = nanoseconds;
    return 0;
}

/* A wait that could not block: a zero timeout, a deadline already passed, a yield. */
void tc_spin_note_futile_wait(void);

/* A wait that blocks: the thread is not spinning. */
static inline void tc_spin_note_blocking_wait(void) { tc_spin_state.futile_waits = 0; }

/* Whether a wait with `length` virtual ns to go is a yield: it then waits that long in real time, counts as a
   futile wait (tc_spin_note_futile_wait) and returns as if timed out, virtual time unmoved. */
int tc_wait_yields(const struct tc_segment *segment, int64_t length);

/* A relative sleep of `length` virtual ns that is a yield sleeps that long in real time and returns 0, or EINTR
   if a signal handler interrupted it; −1: it is no yield, sleep on the virtual timeline. */
int tc_short_sleep_yield(struct tc_segment *segment, int64_t length);

/* How long Go's stop-the-world and forEachP wait for the other Ps at a time (notetsleep in proc.go): a runtime
   back-off of at most this long that times out on a standing monotonic clock moves the process's clocks
   TC_BACKOFF_CREEP_NS. */
#define TC_GO_STOP_WAIT_NS 100000
/* Any other Go runtime back-off (a relative FUTEX_WAIT of at most 10 ms from the Go executable, on real time)
   that times out with the monotonic clock standing still, while the process's other threads were on a CPU for
   at least 1/this of its length, moves them TC_BACKOFF_CREEP_NS: the runtime waits on the clock for a goroutine that
   runs. */
#define TC_BACKOFF_OTHERS_RAN 4

/* Such a back-off, with the raw futex's arguments: the kernel's result. */
long tc_runtime_backoff_futex(long word, long op, long expected, long timeout);

#endif

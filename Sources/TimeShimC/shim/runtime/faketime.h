/*
 * A process on libfaketime's settings (no session named: SPEC §13): what
 * its clock reads and its waits need once attach/faketime_env.c has set it
 * up from the environment (docs/from-libfaketime.md).
 *
 * Such a process reads its clocks from a segment of its own (private, or
 * shared by its process tree), built with the core's verbs. While that
 * clock stands still (libfaketime's absolute dates, and its "i" steps
 * between readings) waits still take real time, as libfaketime's do: they
 * are measured on a second segment that runs at the "x" rate, the one the
 * process is attached to, and an absolute deadline the program computed
 * from its clock is moved onto that one (tc_faketime_wait_deadline).
 *
 * Reads that need work per call ("i", the start and stop conditions, a
 * timestamp file re-read, monotonic clocks left real at a rate other than
 * 1) leave the plain read path: tc_shim_read_segment stays NULL and
 * calls/clock.c's out-of-line reads come here. Everything here uses no
 * thread-local storage (a static program's threads have none of the
 * shim's), allocates nothing, and is async-signal-safe except where a
 * segment's writer lock is taken ("i").
 */
#ifndef TIMECTL_SHIM_FAKETIME_H
#define TIMECTL_SHIM_FAKETIME_H

#include "process.h"
#include "timectl_faketime.h"

/* How a process on libfaketime's settings reads and waits; filled by attach/faketime_env.c before it attaches. */
struct tc_faketime_process {
    struct tc_segment *clock;      /* what the program reads; NULL: not on libfaketime's settings */
    struct tc_segment *waits;      /* where its waits are measured: `clock`, or its own while that stands still */
    int per_call;                  /* reads go through tc_faketime_read */
    int monotonic_real;            /* FAKETIME_DONT_FAKE_MONOTONIC: monotonic clocks and BOOTTIME read real */
    int file_times_real;           /* NO_FAKE_STAT */
    int dont_reset;                /* FAKETIME_DONT_RESET: '@' counts from the tree's start, not the process's */
    int smooth_rate_changes;       /* FAKETIME_XRESET */
    int64_t start_after_ns, stop_after_ns;        /* −1: none */
    int64_t start_after_calls, stop_after_calls;  /* −1: none */
    /* Where FAKETIME's value comes from when it is re-read (libfaketime's cache): FAKETIME itself (only a '%'
       is re-read, for its file's time), else the first of these files that opens. */
    const char *fixed_text;        /* FAKETIME's value, or NULL */
    const char *timestamp_file;    /* FAKETIME_TIMESTAMP_FILE */
    const char *home_faketimerc;   /* $HOME/.faketimerc */
    const char *follow_file;       /* FAKETIME_FOLLOW_FILE, for '%' */
    const char *format;            /* FAKETIME_FMT, or NULL */
    int64_t reread_every_ns;       /* 0: every call (FAKETIME_NO_CACHE=1); −1: never */
    struct tc_faketime_spec spec;  /* in effect */
    int ready;                     /* set last, once everything above is */
};

extern struct tc_faketime_process tc_faketime;

/* Whether this process is on libfaketime's settings. */
static inline int tc_faketime_active(void) { return __atomic_load_n(&tc_faketime.ready, __ATOMIC_ACQUIRE); }

/* The timeline the program sees (what setting the clock moves, and file times map through): the session's, or
   the faketime clock. */
static inline struct tc_segment *tc_shim_timeline_segment(void) {
    return tc_faketime_active() ? tc_faketime.clock : tc_shim_segment();
}

/* The spec in effect, as parsed (a process that joins its tree's clock applies none). */
void tc_faketime_set_spec(const struct tc_faketime_spec *spec);

/*
 * Puts the clock (and the waits' rate) where the spec says at this real
 * instant, with the core's verbs: `first` when the segment was just made
 * (an offset then counts from now), else a change read from the timestamp
 * file. 0, or a TC_E_* result.
 */
int tc_faketime_apply_spec(const struct tc_faketime_spec *spec, int first);

/* FAKETIME's value as the process starts: FAKETIME itself, else the first file's setting (into `buffer`), else "+0". */
const char *tc_faketime_initial_text(char *buffer, size_t capacity);

/* The value just applied (from FAKETIME or a file): a re-read applies only a different one. */
void tc_faketime_note_applied(const char *text);

/* The reading of `vclock` through libfaketime's per-call settings: 1 with *value, or 0 for the real clock. */
int tc_faketime_read(int vclock, struct timespec *value);

/* A deadline the program computed from its clock, moved onto the waits' segment (the same when they are one). */
int64_t tc_faketime_wait_deadline(struct tc_segment *waits, int vclock, int64_t absolute);

/*
 * File times as libfaketime's FAKE_STAT shows them: every instant through
 * the clock's present line (the offset, or the rate from the tree's start;
 * a clock that stands still shows every file at its instant), and back for
 * times given to the utime family. A session maps only the instants it
 * lived through (timectl_filetimes.h).
 */
int64_t tc_faketime_file_time(int64_t real);
int64_t tc_faketime_file_time_back(int64_t virtual_time);

/*
 * The file of a segment the process tree shares (attach/faketime_env.c):
 * every process registers in it as it joins (a fork child too), and the
 * last to leave — at exit, or at _exit, which dash and others call instead
 * of exit — removes it, if `path` still names that file.
 */
void tc_faketime_join_tree(const char *path, uint64_t device, uint64_t inode);
void tc_faketime_leave_tree(void);
/* Whether a process other than `self` is registered in `segment` and still runs. */
int tc_faketime_others_alive(const struct tc_segment *segment, int32_t self);

/* After fork, in the child: registered in the tree's segment too; the re-read's guard may have been held by a
   thread the child does not have. */
void tc_faketime_after_fork_in_child(void);

#endif

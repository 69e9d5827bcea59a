/* The machine's wake-ups, as the kernel makes them, for the scheduler (controller/wakelog.c; controllers only). */
#ifndef TIMECTL_WAKELOG_H
#define TIMECTL_WAKELOG_H

#include <stddef.h>
#include <stdint.h>

struct tc_wakelog;

/*
 * A log of every wake-up the kernel makes on this machine (its
 * `sched:sched_waking` tracepoint: one task making another runnable) and of
 * every task it starts (`sched:sched_wakeup_new`), whoever makes them — a
 * task, a timer, an interrupt — read from per-CPU perf rings mapped into this
 * process: reading it costs no system call. Needs CAP_PERFMON (root), the
 * tracepoints' ids (tracefs: read where it is mounted, else from a mount of
 * this process's own that is never attached anywhere), and perf events not
 * forbidden (a container's seccomp filter). NULL with errno when any is missing.
 * docs/scheduler.md says what the scheduler proves with it.
 */
struct tc_wakelog *tc_wakelog_open(void);
void tc_wakelog_close(struct tc_wakelog *log);

/* What one reading found, since the one before. */
struct tc_wakelog_reading {
    /* Records lost (a ring was full), or more tasks than the caller had room for: everything may have changed. */
    int overflowed;
    /* How many of `woken` were filled: tasks made runnable (thread ids), repeats and all. */
    int woken;
    /* How many of `starters` were filled: tasks that started a new thread or process (thread ids). */
    int starters;
};

/*
 * Consumes what was logged since the last reading, keeping only what
 * concerns the thread ids set in the bitmap `watched` (`words` 64-bit words,
 * bit `tid % 64` of word `tid / 64`): those woken into `woken` (at most
 * `capacity`), those that started another task into `starters` (at most
 * `capacity`). A record is published before the task it wakes can run, so a
 * task blocked when the previous reading began and not named by this one
 * has not been runnable in between.
 */
struct tc_wakelog_reading tc_wakelog_read(struct tc_wakelog *log, const uint64_t *watched, size_t words, int32_t *woken,
                                          int32_t *starters, int capacity);

/* Has the kernel log only wake-ups of, and tasks started by, thread ids from `lowest` to `highest`: what a
   reading would leave out anyway, taken out before it costs room in the rings. 0, or −1 with errno. */
int tc_wakelog_limit(struct tc_wakelog *log, int32_t lowest, int32_t highest);

/* Consumes everything logged so far without looking at it. */
void tc_wakelog_skip(struct tc_wakelog *log);

#endif

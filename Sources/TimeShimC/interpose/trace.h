/*
 * Record and replay in the shim (SPEC §5): the interposers' side of it.
 * The formats are timectl_trace.h's; trace.c and its parts (trace_registry.c,
 * trace_recording.c, trace_replay.c) implement this.
 *
 * A process records when TIMECTL_RECORD names a recording directory, and
 * replays when TIMECTL_REPLAY names a trace (TIMECTL_REPLAY_DIR the
 * replay's working directory). Either way it is attached to a session as
 * usual: recording reads the session's clocks and notes what they said;
 * replay answers each reading from the recording, and runs its waits on the
 * session, which `timectl replay` advances automatically.
 */
#ifndef TIMECTL_TRACE_SHIM_H
#define TIMECTL_TRACE_SHIM_H

#include "shim.h"

#include <time.h>

enum tc_trace_mode {
    TC_TRACE_OFF = 0,
    TC_TRACE_RECORDING = 1,
    TC_TRACE_REPLAYING = 2,
};

/* Exit status of a process whose replay diverged, under `timectl replay --strict`. */
#define TC_SHIM_DIVERGED_STATUS 121

extern int tc_trace_mode;

/*
 * Called once the process is attached: sets recording or replay up from
 * the environment. Returns NULL, or a phrase saying what is wrong, with
 * the path it concerns in *path.
 */
const char *tc_trace_attach(struct tc_segment *segment, const char **path);

/* Recording: notes a reading the session gave (`value`). */
void tc_trace_record_reading(int call, clockid_t clock, int vclock, const struct timespec *value);
/* Replay: replaces the session's reading in `value` with the recorded one. */
void tc_trace_replay_reading(int call, clockid_t clock, int vclock, struct tc_segment *segment, struct timespec *value);

/*
 * The calling thread set the session's wall clock to `wall` (recorded). In
 * a replay the set is checked against the recording like a reading, and
 * not applied: the replayed readings already show it, and the recorded
 * value becomes the process's last replayed wall time (where a wall-clock
 * deadline computed from it is measured from).
 */
void tc_trace_record_wall_set(int call, int64_t wall);
void tc_trace_replay_wall_set(int call, struct tc_segment *segment);

/* A wait of the calling thread begins and ends (recorded, or checked against the recording). */
void tc_trace_wait_begin(int kind, int vclock, int64_t deadline);
void tc_trace_wait_end(struct tc_segment *segment, int vclock, int64_t deadline);

/*
 * The session-timeline deadline for an absolute deadline on `vclock`. A
 * replayed program computes absolute deadlines from replayed readings,
 * which need not match the session's clocks: the deadline keeps its
 * distance from the process's last replayed reading. Unchanged otherwise.
 */
int64_t tc_trace_session_deadline(struct tc_segment *segment, int vclock, int64_t absolute);

/* A static program takes the process over (static_program.c): per-thread state moves to slots (trace_registry.h). */
void tc_trace_static_program_begins(void);

/*
 * The process image is a Go program (dynamic, from attach; static, from
 * the loader), before any of its code runs. A replay then answers its
 * readings per process, not per thread (docs/trace.md, "Go programs").
 * NULL, or what is wrong.
 */
const char *tc_trace_go_program_begins(struct tc_segment *segment);

void tc_trace_before_fork(void);
void tc_trace_after_fork_in_parent(void);
void tc_trace_after_fork_in_child(void);

#endif

/*
 * Replay (trace_dispatch.h): answering this process's readings from a recorded
 * trace (timectl_trace.h). Readings, wall clock sets and deadlines are
 * tc_trace_replay_* and tc_trace_session_deadline, for the calls and session
 * layers; the rest is for trace_dispatch.c. Implemented in trace_replay.c.
 */
#ifndef TIMECTL_TRACE_REPLAY_H
#define TIMECTL_TRACE_REPLAY_H

#include "timectl_segment.h"

#include <stdint.h>
#include <time.h>

/* Replay: replaces the session's reading in `value` with the recorded one. */
void tc_trace_replay_reading(int call, clockid_t clock, int vclock, struct tc_segment *segment, struct timespec *value);

/* Replay: a wall clock set the calling thread made, checked against the recording (trace_recording.h). */
void tc_trace_replay_wall_set(int call, struct tc_segment *segment);
/*
 * The session-timeline deadline for an absolute deadline on `vclock`. A
 * replayed program computes absolute deadlines from replayed readings,
 * which need not match the session's clocks: the deadline keeps its
 * distance from the process's last replayed reading. Unchanged otherwise.
 */
int64_t tc_trace_session_deadline(struct tc_segment *segment, int vclock, int64_t absolute);


/*
 * Maps the trace at `trace_path` and the claims of the replay's working
 * `directory`, and pairs this process image with a recorded one (the
 * registry joined); NULL, or what is wrong.
 */
const char *tc_replay_open(const char *trace_path, const char *directory);

/* A wait of the calling thread begins and ends: checked against the recording. */
void tc_replay_wait_begin(int kind, int vclock);
void tc_replay_wait_end(void);

/* The main thread's state moves to its slot: a static program takes the process over (trace_registry.h). */
void tc_replay_static_program_begins(void);
/* This image is a Go program: from now on it is replayed per process (trace_replay.c); NULL, or what is wrong. */
const char *tc_replay_go_program_begins(struct tc_segment *segment);
/* After tc_registry_after_fork_in_child: the child is paired with its own recorded image. */
void tc_replay_after_fork_in_child(void);

#endif

/*
 * Replay (trace.h): answering this process's readings from a recorded
 * trace (timectl_trace.h). Readings, wall clock sets and deadlines are
 * trace.h's tc_trace_replay_* and tc_trace_session_deadline; this is the
 * rest, for trace.c. Implemented in trace_replay.c.
 */
#ifndef TIMECTL_TRACE_REPLAY_H
#define TIMECTL_TRACE_REPLAY_H

#include "timectl_segment.h"

#include <stdint.h>

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

/*
 * Record and replay in the shim (SPEC §5): the interposers' side of it.
 * The formats are timectl_trace.h's; trace_dispatch.c hands attach, waits and
 * fork to its parts (trace_registry.c, trace_recording.c, trace_replay.c);
 * trace_mode.h says which of the two a process does; readings and wall
 * clock sets go straight to trace_recording.h and trace_replay.h.
 *
 * A process records when TIMECTL_RECORD names a recording directory, and
 * replays when TIMECTL_REPLAY names a trace (TIMECTL_REPLAY_DIR the
 * replay's working directory). Either way it is attached to a session as
 * usual: recording reads the session's clocks and notes what they said;
 * replay answers each reading from the recording, and runs its waits on the
 * session, which `timectl replay` advances automatically.
 */
#ifndef TIMECTL_TRACE_DISPATCH_H
#define TIMECTL_TRACE_DISPATCH_H

#include "timectl_segment.h"

#include <stdint.h>

/*
 * Called once the process is attached: sets recording or replay up from
 * the environment. Returns NULL, or a phrase saying what is wrong, with
 * the path it concerns in *path.
 */
const char *tc_trace_attach(struct tc_segment *segment, const char **path);

/* A wait of the calling thread begins and ends (recorded, or checked against the recording). */
void tc_trace_wait_begin(int kind, int vclock, int64_t deadline);
void tc_trace_wait_end(struct tc_segment *segment, int vclock, int64_t deadline);

/* A static program takes the process over (attach/static_takeover.c): per-thread state moves to slots (trace_registry.h). */
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

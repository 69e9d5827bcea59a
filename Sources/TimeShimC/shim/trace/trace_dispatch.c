/*
 * Record and replay in the shim (trace_dispatch.h): which of the two a process
 * does, and what both have to do at attach, around waits and at fork. The
 * parts are their own files: the registry of the run's processes and
 * threads (trace_registry.c), recording (trace_recording.c) and replay
 * (trace_replay.c); the formats are timectl_trace.h's.
 */
#define _GNU_SOURCE
#include "trace_dispatch.h"
#include "trace_mode.h"
#include "trace_recording.h"
#include "trace_registry.h"
#include "trace_replay.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

const char *tc_trace_attach(struct tc_segment *segment, const char **path) {
    (void)segment;
    const char *recording = getenv("TIMECTL_RECORD"), *replaying = getenv("TIMECTL_REPLAY");
    if (!recording && !replaying) return NULL;
    const char *directory = recording ? recording : getenv("TIMECTL_REPLAY_DIR");
    *path = recording ? recording : replaying;
    if (recording && replaying) return "is named by both TIMECTL_RECORD and TIMECTL_REPLAY; give one";
    /* Room for the file names the parts add to it. */
    if (!directory || directory[0] != '/' || strlen(directory) >= PATH_MAX - 64)
        return recording ? "is not an absolute path (TIMECTL_RECORD)" : "has no absolute working directory (TIMECTL_REPLAY_DIR)";
    const char *problem = tc_registry_map(directory);
    if (problem) return problem;
    if (tc_registry_join() != 0) return "has no room left in its registry";
    problem = recording ? tc_recording_open(directory) : tc_replay_open(replaying, directory);
    if (problem) return problem;
    tc_trace_mode = recording ? TC_TRACE_RECORDING : TC_TRACE_REPLAYING;
    return NULL;
}

void tc_trace_wait_begin(int kind, int vclock, int64_t deadline) {
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_recording_wait_begin(kind, vclock, deadline);
    else tc_replay_wait_begin(kind, vclock);
}

void tc_trace_wait_end(struct tc_segment *segment, int vclock, int64_t deadline) {
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_recording_wait_end(segment, vclock, deadline);
    else tc_replay_wait_end();
}

void tc_trace_static_program_begins(void) {
    if (tc_trace_mode == TC_TRACE_OFF) return;
    tc_registry_static_program_begins();
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_recording_static_program_begins();
    else tc_replay_static_program_begins();
}

const char *tc_trace_go_program_begins(struct tc_segment *segment) {
    return tc_trace_mode == TC_TRACE_REPLAYING ? tc_replay_go_program_begins(segment) : NULL;
}

void tc_trace_before_fork(void) {
    if (tc_trace_mode == TC_TRACE_OFF) return;
    tc_registry_before_fork();
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_recording_before_fork();
}

void tc_trace_after_fork_in_parent(void) {
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_recording_after_fork_in_parent();
}

void tc_trace_after_fork_in_child(void) {
    if (tc_trace_mode == TC_TRACE_OFF) return;
    tc_registry_after_fork_in_child();
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_recording_after_fork_in_child();
    else tc_replay_after_fork_in_child();
}

/*
 * Recording (trace_dispatch.h): writing what the session told this process into the
 * recording directory's raw files (timectl_trace.h). The readings and wall
 * clock sets are recorded here too (tc_trace_record_*, for the calls
 * layer); the rest is for trace_dispatch.c. Implemented in trace_recording.c.
 */
#ifndef TIMECTL_TRACE_RECORDING_H
#define TIMECTL_TRACE_RECORDING_H

#include "timectl_segment.h"

#include <stdint.h>
#include <time.h>

/* Recording: notes a reading the session gave (`value`). */
void tc_trace_record_reading(int call, clockid_t clock, int vclock, const struct timespec *value);
/*
 * The calling thread set the session's wall clock to `wall` (recorded). In
 * a replay the set is checked against the recording like a reading, and
 * not applied: the replayed readings already show it, and the recorded
 * value becomes the process's last replayed wall time (where a wall-clock
 * deadline computed from it is measured from).
 */
void tc_trace_record_wall_set(int call, int64_t wall);

/* Starts this process image's raw file in `directory` (the registry joined); NULL, or what is wrong. */
const char *tc_recording_open(const char *directory);

/* A wait of the calling thread begins and ends. */
void tc_recording_wait_begin(int kind, int vclock, int64_t deadline);
void tc_recording_wait_end(struct tc_segment *segment, int vclock, int64_t deadline);

/* The main thread's state moves to its slot: a static program takes the process over (trace_registry.h). */
void tc_recording_static_program_begins(void);
void tc_recording_before_fork(void);
void tc_recording_after_fork_in_parent(void);
/* After tc_registry_after_fork_in_child: the child's own raw file. */
void tc_recording_after_fork_in_child(void);

#endif

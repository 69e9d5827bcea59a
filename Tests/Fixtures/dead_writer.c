/*
 * Simulates a writer killed half-way through a verb: takes the session's
 * writer lock, starts a write the way tc_segment_apply does (backup saved,
 * seq odd), scribbles over the current state, and SIGKILLs itself.
 * Usage: dead_writer SEGMENT_PATH
 */
#define _GNU_SOURCE
#include "timectl_segment_io.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dead_writer SEGMENT\n");
        return 2;
    }
    tc_realclock_init();
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    if (tc_segment_open(AT_FDCWD, argv[1], &mapping, &failure) != TC_OK) {
        fprintf(stderr, "dead_writer: cannot open %s: %s\n", argv[1], tc_result_phrase(failure.result));
        return 1;
    }
    struct tc_segment *segment = mapping.segment;
    if (tc_segment_lock(segment, 5000000000LL, &failure) != TC_OK) return 1;
    struct tc_timeline *timeline = &segment->timeline;
    timeline->backup = timeline->current;
    timeline->writer_pid = getpid();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&timeline->seq, timeline->seq + 1, __ATOMIC_SEQ_CST);
    /* Half of a verb: garbage that no reader may ever see. */
    timeline->current.rate = 12345;
    for (int k = 0; k < TC_TRACK_COUNT; k++) timeline->current.offset[k].sec = -42;
    kill(getpid(), SIGKILL);
    return 0;
}

/*
 * A writer that dies or stops half-way through a verb.
 *   dead_writer SEGMENT            takes the writer lock, scribbles over the
 *                                  copy readers are not using (what a verb
 *                                  writes before publishing it), SIGKILLs itself
 *   dead_writer SEGMENT pending    publishes a 5 s tick as a pending verb (the
 *                                  first of a verb's two publications), then
 *                                  SIGKILLs itself before resolving it
 *   dead_writer SEGMENT verbs N    applies N verbs (freeze, rate 2, tick 1 ms,
 *                                  resume) through tc_segment_apply, for a
 *                                  debugger or SIGSTOP to stop it inside them
 */
#define _GNU_SOURCE
#include "timectl_segment_io.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int apply_verbs(struct tc_segment *segment, long count) {
    const struct tc_verb verbs[] = {
        {.kind = TC_VERB_FREEZE},
        {.kind = TC_VERB_SET_RATE, .rate = 2 * TC_RATE_ONE},
        {.kind = TC_VERB_ADVANCE, .value = 1000000},
        {.kind = TC_VERB_SET_RATE, .rate = TC_RATE_ONE},
    };
    struct tc_failure failure = {0};
    for (long n = 0; n < count; n++) {
        if (tc_segment_lock(segment, 5000000000LL, &failure) != TC_OK) return 1;
        int result = tc_segment_apply(segment, &verbs[n % 4], NULL);
        tc_segment_unlock(segment);
        if (result != TC_OK) {
            fprintf(stderr, "dead_writer: verb refused: %s\n", tc_result_phrase(result));
            return 1;
        }
    }
    printf("verbs %ld\n", count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dead_writer SEGMENT [pending | verbs N]\n");
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
    if (argc == 4 && strcmp(argv[2], "verbs") == 0) return apply_verbs(segment, atol(argv[3]));
    if (tc_segment_lock(segment, 5000000000LL, &failure) != TC_OK) return 1;
    struct tc_timeline *timeline = &segment->timeline;
    uint32_t seq = timeline->seq;
    struct tc_published *unused = &timeline->copy[(seq + 1) & 1];
    if (argc == 3 && strcmp(argv[2], "pending") == 0) {
        struct tc_pending_verb *pending = &timeline->pending[(seq + 1) & 1];
        memset(pending, 0, sizeof(*pending));
        pending->anchor = tc_pending_unanchored(seq + 1);
        pending->kind = TC_VERB_ADVANCE;
        pending->value = 5000000000LL;
        unused->state = timeline->copy[seq & 1].state;
        unused->state.rate |= TC_RATE_PENDING;
        unused->check = tc_state_check(&unused->state, pending);
        __atomic_store_n(&timeline->seq, seq + 1, __ATOMIC_SEQ_CST);
    } else {
        /* Half of a verb: garbage that no reader may ever see. */
        unused->state.rate = 12345;
        for (int k = 0; k < TC_TRACK_COUNT; k++) unused->state.offset[k].sec = -42;
    }
    kill(getpid(), SIGKILL);
    return 0;
}

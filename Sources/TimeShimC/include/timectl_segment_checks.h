/*
 * What a segment must satisfy (core/segment_checks.c): the results of the
 * segment's operations and their phrases, the checks of the header and of
 * the published state, and the ranges the other parts of the core check a
 * state and a verb against.
 */
#ifndef TIMECTL_SEGMENT_CHECKS_H
#define TIMECTL_SEGMENT_CHECKS_H

#include "timectl_segment.h"
#include "timectl_timeline.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why an operation failed: a tc_result, and for TC_E_SYSCALL which call and errno. */
struct tc_failure {
    int32_t result;
    int32_t sys_errno;
    const char *syscall;
    uint32_t found_version;   /* TC_E_VERSION: the version in the file */
    uint32_t found_uid;       /* TC_E_NOT_OWNER: the file's owner */
};

/* A short phrase for a result, e.g. "is a symbolic link". */
const char *tc_result_phrase(int result);

/* What header.check holds for `header` (every field but flags and check). */
uint64_t tc_header_check(const struct tc_segment_header *header);
/* What a published copy's check holds; `pending` is read only if the state's rate says it is pending. */
uint32_t tc_state_check(const struct tc_clock_state *state, const struct tc_pending_verb *pending);

/* For the core's other files: records `result` in `failure` (may be NULL) and returns it. */
int tc_segment_fail(struct tc_failure *failure, int result);
/* The same for a failed system call `name` with the kernel's result: TC_E_SYSCALL. */
int tc_segment_fail_syscall(struct tc_failure *failure, const char *name, long kernel_result);
/* Nanoseconds in range, and seconds that convert to int64 nanoseconds (±285 years) with room to add one more. */
int tc_split_valid(struct tc_split split);
/* Whether a verb, a clock state, a pending verb (published at `seq`) keep their ranges. */
int tc_verb_valid(const struct tc_verb *verb);
int tc_state_valid(const struct tc_clock_state *state);
int tc_pending_valid(const struct tc_clock_state *state, const struct tc_pending_verb *pending, uint32_t seq);
/* The verb a pending verb's shared record describes. */
struct tc_verb tc_pending_verb_of(const struct tc_pending_verb *pending);

#ifdef __cplusplus
}
#endif

#endif

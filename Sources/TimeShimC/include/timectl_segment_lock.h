/*
 * The segment's writer lock (core/segment_lock.c).
 */
#ifndef TIMECTL_SEGMENT_LOCK_H
#define TIMECTL_SEGMENT_LOCK_H

#include "timectl_segment.h"
#include "timectl_segment_checks.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_PID_MAX 4194304

/* The writer lock's word for a holder: its pid and the low 32 bits of its start time in clock ticks. */
static inline uint64_t tc_lock_owner(int32_t pid, uint64_t started) {
    return (uint64_t)(uint32_t)started << 32 | (uint32_t)pid;
}

/*
 * Takes the writer lock, waiting at most `timeout_ns` for another holder
 * (TC_E_LOCK_TIMEOUT). A holder that died is replaced; a lock word that
 * names no possible process gives TC_E_CORRUPT.
 */
int tc_segment_lock(struct tc_segment *segment, int64_t timeout_ns, struct tc_failure *failure);
/* The writer lock if it is free at once (TC_OK), else TC_E_LOCK_TIMEOUT: for writers that must never wait. */
int tc_segment_try_lock(struct tc_segment *segment);
void tc_segment_unlock(struct tc_segment *segment);
/* True when the lock word is neither free nor a possible holder. */
int tc_segment_lock_damaged(const struct tc_segment *segment);

/* Marks the segment removed (attached processes keep their mapping). */
void tc_segment_mark_removed(struct tc_segment *segment);

#ifdef __cplusplus
}
#endif

#endif

/*
 * Waiting on the segment's futex words (core/segment_futex.c).
 */
#ifndef TIMECTL_SEGMENT_FUTEX_H
#define TIMECTL_SEGMENT_FUTEX_H

#include "timectl_segment.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Blocks until `*shared_word` (a word of the segment: `generation` or
 * `wait_changes`) leaves `shared_value`, `*local_word` (process-private,
 * may be NULL) leaves `local_value`, `timeout_ns` real ns pass (< 0: a
 * year), or a signal handler runs. Returns 0, ETIMEDOUT or EINTR. Uses
 * futex_waitv (Linux 5.16) to wait on both words at once; without it, a
 * change of the local word is noticed within 20 ms.
 */
int tc_segment_wait_for_change(struct tc_segment *segment, const uint32_t *shared_word, uint32_t shared_value,
                               const uint32_t *local_word, uint32_t local_value, int64_t timeout_ns);

/*
 * Blocks until a thread wakes the process's own futex `word` (private or
 * not, as `word_private` says; not entered if it no longer holds `value`),
 * the segment's `shared_word` leaves `shared_value`, or `timeout_ns` real ns
 * pass. Returns 0 (word woken), 1 (shared word changed) or the kernel's
 * −errno: −EAGAIN (a value had already changed), −ETIMEDOUT, −EINTR, or
 * −ENOSYS without futex_waitv (Linux < 5.16). For raw futex waits on the
 * virtual timeline (the shim's calls/futex.c).
 */
long tc_futex_wait_either(const uint32_t *shared_word, uint32_t shared_value, const uint32_t *word, uint32_t value,
                          int word_private, int64_t timeout_ns);

/* Counts a watcher of `wait_changes` in (1) or out (0), so claims and releases wake it. */
void tc_segment_watch_waits(struct tc_segment *segment, int watching);

#ifdef __cplusplus
}
#endif

#endif

/*
 * The segment as a file (core/segment_file.c): opening and mapping an
 * existing one, refusing anything SPEC §7 says not to trust, creating and
 * formatting a new one. Shared by the shim (which opens and reads) and
 * TimeControlKit (which also creates and writes), so a segment is judged
 * trustworthy by exactly one piece of code. System calls go through
 * tc_raw_syscall: no errno changes, no interposed libc entry points.
 */
#ifndef TIMECTL_SEGMENT_FILE_H
#define TIMECTL_SEGMENT_FILE_H

#include "timectl_segment.h"
#include "timectl_segment_checks.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tc_mapping {
    struct tc_segment *segment;
    uint64_t size;
};

/* Total file size of a segment of this version. */
uint64_t tc_segment_expected_size(void);

/*
 * Opens and maps an existing segment read-write, refusing anything SPEC §7
 * says not to trust. `dirfd` may be AT_FDCWD. On failure returns non-zero
 * and fills `failure`.
 */
int tc_segment_open(int dirfd, const char *path, struct tc_mapping *mapping, struct tc_failure *failure);

/*
 * Checks a mapped segment against the file it came from: every header field
 * and its check, the published state and its check, the writer lock and the
 * scheduler's claim. TC_OK, or the TC_E_* that says why it is not trusted.
 * Run when a process attaches and when timectl opens a segment, never on
 * a clock read.
 */
int tc_segment_validate(const struct tc_segment *segment, uint64_t file_size, uint32_t file_uid);

/*
 * Creates `name` in the directory `dirfd`, atomically: the file appears
 * under its name fully initialised, or not at all. Fails with TC_E_EXISTS
 * if another creator won; the caller then opens theirs. Every clock starts
 * at its real value; with `origin`, the session is pinned (SPEC §2, §11):
 * frozen, the monotonic clocks (MONOTONIC, _RAW, BOOTTIME) at *origin ns
 * and the wall clock at real time until a verb sets it and starts them, TAI
 * TC_PINNED_TAI_OFFSET_NS ahead of the wall clock.
 */
int tc_segment_create(int dirfd, const char *name, const char *file_name, const int64_t *origin,
                      struct tc_mapping *mapping, struct tc_failure *failure);

void tc_segment_unmap(struct tc_mapping *mapping);

/*
 * A file time that tells files written before this call from files written
 * after it: every earlier file time is below it, every later one is not, on
 * file systems with the kernel's multigrain time stamps (segment_file.c).
 * It touches `fd`'s file, whose times change: use the session's own file.
 * 0 where the kernel only stamps coarsely, or on any failure.
 */
int64_t tc_file_time_boundary(int fd);

/* The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */

#ifdef __cplusplus
}
#endif

#endif

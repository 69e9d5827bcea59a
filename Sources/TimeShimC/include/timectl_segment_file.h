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
 * Creates `name` in the directory `dirfd` at real time, atomically: the file
 * appears under its name fully initialised, or not at all. Fails with
 * TC_E_EXISTS if another creator won; the caller then opens theirs.
 */
int tc_segment_create(int dirfd, const char *name, const char *file_name, struct tc_mapping *mapping,
                      struct tc_failure *failure);

void tc_segment_unmap(struct tc_mapping *mapping);

/* The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */

#ifdef __cplusplus
}
#endif

#endif

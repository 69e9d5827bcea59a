/*
 * Opening, validating, creating and writing a segment. Shared by the shim
 * (which opens and reads) and TimeControlKit (which also creates and
 * writes), so a segment is judged trustworthy by exactly one piece of code.
 * System calls go through tc_raw_syscall: no errno changes, no interposed
 * libc entry points.
 */
#ifndef TIMECTL_SEGMENT_IO_H
#define TIMECTL_SEGMENT_IO_H

#include "timectl_segment.h"
#include "timectl_timeline.h"

#include <stdint.h>
#include <sys/types.h>

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

/* The published state's check and ranges only: TC_OK or TC_E_CORRUPT. */
int tc_segment_check_state(const struct tc_segment *segment);

/* What header.check holds for `header` (every field but flags and check). */
uint64_t tc_header_check(const struct tc_segment_header *header);
/* What a published copy's check holds; `pending` is read only if the state's rate says it is pending. */
uint32_t tc_state_check(const struct tc_clock_state *state, const struct tc_pending_verb *pending);

/*
 * Creates `name` in the directory `dirfd` at real time, atomically: the file
 * appears under its name fully initialised, or not at all. Fails with
 * TC_E_EXISTS if another creator won; the caller then opens theirs.
 */
int tc_segment_create(int dirfd, const char *name, const char *file_name, struct tc_mapping *mapping,
                      struct tc_failure *failure);

void tc_segment_unmap(struct tc_mapping *mapping);

/* The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */
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

/*
 * Applies a verb atomically (caller holds the writer lock): readers see the
 * state before or after it, never a mixture, and never wait. Refuses an
 * invalid verb (TC_E_INVALID), one out of range (TC_E_RANGE) or a damaged
 * state (TC_E_CORRUPT) before touching anything. Wakes every waiter on the
 * generation word. On TC_OK `published` holds the new state.
 */
int tc_segment_apply(struct tc_segment *segment, const struct tc_verb *verb, struct tc_clock_state *published);

/* A consistent copy of the current state (a pending verb resolved), for status and the Swift clock. */
void tc_segment_snapshot(const struct tc_segment *segment, struct tc_clock_state *state);

/* Marks the segment removed (attached processes keep their mapping). */
void tc_segment_mark_removed(struct tc_segment *segment);

/* The process table. Registration is lock-free; a full table reclaims dead entries. */
struct tc_proc_slot *tc_segment_procs(const struct tc_segment *segment);
int tc_proc_register(struct tc_segment *segment, int32_t pid, int64_t registered);
void tc_proc_unregister(struct tc_segment *segment, int slot, int32_t pid);
/* Copies every process-table entry in use into out[0…capacity); returns how many. */
uint32_t tc_proc_collect(const struct tc_segment *segment, struct tc_proc_slot *out, uint32_t capacity);
/* Counts a wait that was due when it began, for the process in `slot`. */
void tc_proc_count_immediate_wait(struct tc_segment *segment, int slot);

/*
 * The auto-advance scheduler's claim on the session: at most one at a
 * time. Returns 0 when `pid` (whose process started at `started`, in
 * clock ticks after boot) now owns it as a scheduler of `kind`, or the pid
 * that does — `pid` itself if it already has one. A dead owner's claim is
 * taken over; one whose pid now names another process is the caller's to
 * judge (by scheduler_started) and to release.
 */
int32_t tc_scheduler_claim(struct tc_segment *segment, int32_t pid, uint64_t started, uint32_t kind);
/* Ends `pid`'s claim, if it still holds one. */
void tc_scheduler_release(struct tc_segment *segment, int32_t pid);
/* Counts one step of the owning scheduler, for status. */
void tc_scheduler_count_step(struct tc_segment *segment);

/*
 * The wait table. Claiming and releasing are lock-free; a full table makes
 * tc_wait_claim return −1 (the wait still works, it is only not listed).
 */
static inline uint64_t tc_wait_owner(int32_t pid, int32_t tid) {
    return (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
}
static inline int32_t tc_wait_owner_pid(uint64_t owner) { return (int32_t)(owner >> 32); }
static inline int32_t tc_wait_owner_tid(uint64_t owner) { return (int32_t)(owner & 0xffffffffu); }

/* A wait slot's `descriptors` for a timerfd whose descriptor is `fd` and the shim's duplicate `duplicate`. */
static inline uint64_t tc_wait_descriptors(int32_t fd, int32_t duplicate) {
    return (uint64_t)(uint32_t)(fd + 1) | (uint64_t)(uint32_t)(duplicate + 1) << 32;
}

struct tc_wait_slot *tc_segment_waits(const struct tc_segment *segment);
int tc_wait_claim(struct tc_segment *segment, int32_t pid, int32_t tid, int kind, int vclock, int64_t deadline,
                  int64_t registered);
/* The same for an armed timer, with its `descriptors` (tc_wait_descriptors, or 0). */
int tc_wait_claim_timer(struct tc_segment *segment, int32_t pid, int kind, int vclock, int64_t deadline,
                        int64_t registered, uint64_t descriptors);
void tc_wait_set_deadline(struct tc_segment *segment, int slot, int vclock, int64_t deadline);
/* A timerfd's duplicate moved to another number: its slot says so (readers then never see a stale pair). */
void tc_wait_set_descriptors(struct tc_segment *segment, int slot, uint64_t descriptors);
/*
 * Whether a wait-table entry is a timerfd that its process has closed: its two descriptors (`descriptors`)
 * no longer name one open file (kcmp). 0 when they do, when the entry records none, and when this process may
 * not look (kcmp needs ptrace's read access to the process) or the kernel cannot (no kcmp): then it is kept.
 */
int tc_wait_timerfd_closed(const struct tc_wait_slot *entry);
/* The same test for process `pid`'s timerfd with `descriptors` (the shim asks it of its own). */
int tc_timerfd_descriptors_closed(int32_t pid, uint64_t descriptors);
void tc_wait_release(struct tc_segment *segment, int slot, uint64_t owner);
/* Copies a slot in use into `out`; 0 if the slot is free or changed meanwhile. */
int tc_wait_read(const struct tc_segment *segment, uint32_t slot, struct tc_wait_slot *out);
/* Copies every slot in use into out[0…capacity) in one pass, their slot
   numbers into slots[]; returns how many were copied. */
uint32_t tc_wait_collect(const struct tc_segment *segment, struct tc_wait_slot *out, uint32_t *slots,
                         uint32_t capacity);

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
 * virtual timeline (interpose/syscall_trap.c).
 */
long tc_futex_wait_either(const uint32_t *shared_word, uint32_t shared_value, const uint32_t *word, uint32_t value,
                          int word_private, int64_t timeout_ns);

/* Counts a watcher of `wait_changes` in (1) or out (0), so claims and releases wake it. */
void tc_segment_watch_waits(struct tc_segment *segment, int watching);

#ifdef __cplusplus
}
#endif

#endif

/*
 * The segment's tables (core/segment_tables.c): the process table, the
 * auto-advance scheduler's claim and the wait table.
 */
#ifndef TIMECTL_SEGMENT_TABLES_H
#define TIMECTL_SEGMENT_TABLES_H

#include "timectl_segment.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 64-bit mix of two words (splitmix64's finaliser): lineages, identities and a seeded order are made of it. */
static inline uint64_t tc_mix64(uint64_t a, uint64_t b) {
    uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The lineage the roots of a session's process tree start from. */
#define TC_LINEAGE_ROOTS 0x74696d6563746cULL

/*
 * The process table. Registration is lock-free; a full table reclaims dead
 * entries. A process registering afresh takes its lineage from `parent`'s
 * entry (its parent pid; a root if it has none in the table); the same pid
 * registering again after exec keeps its entry.
 */
struct tc_proc_slot *tc_segment_procs(const struct tc_segment *segment);
int tc_proc_register(struct tc_segment *segment, int32_t pid, int64_t registered, int32_t parent);
/* The lineage of the process in `slot` (0 for none). */
uint64_t tc_proc_lineage(const struct tc_segment *segment, int slot);
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
                  int64_t registered, uint64_t identity);
/* The same for an armed timer, with its `descriptors` (tc_wait_descriptors, or 0). */
int tc_wait_claim_timer(struct tc_segment *segment, int32_t pid, int kind, int vclock, int64_t deadline,
                        int64_t registered, uint64_t descriptors, uint64_t identity);
/*
 * A seeded scheduler's hold (SPEC §11): it holds each wait a step is about
 * to make due (tc_wait_hold: 1 if `owner` still has the slot), and releases
 * them one at a time (tc_wait_release_held, which moves the generation on
 * so that the wait looks again). A held wait that is due keeps waiting.
 */
/* Sets a seeded run's order (before its processes start): `seed` (0: none) and `jitter` (a fraction × 2^32). */
void tc_segment_set_order(struct tc_segment *segment, uint64_t seed, uint64_t jitter);
uint64_t tc_segment_seed(const struct tc_segment *segment);
int tc_wait_held(const struct tc_segment *segment, int slot);
int tc_wait_hold(struct tc_segment *segment, uint32_t slot, uint64_t owner);
void tc_wait_release_held(struct tc_segment *segment, uint32_t slot);
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

#ifdef __cplusplus
}
#endif

#endif

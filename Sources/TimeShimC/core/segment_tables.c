/*
 * The segment's tables (timectl_segment_tables.h): the process table, the
 * scheduler's claim and the wait table.
 */
#define _GNU_SOURCE
#include "timectl_segment_tables.h"
#include "timectl_segment_futex.h"
#include "timectl_timeline.h"
#include "timectl_segment_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct tc_proc_slot *tc_segment_procs(const struct tc_segment *segment) {
    return (struct tc_proc_slot *)((char *)segment + segment->header.proc_offset);
}

/* The lineage of a process `parent` (a pid) started: its ordinal among that parent's children, or among the roots. */
static uint64_t child_lineage(struct tc_segment *segment, int32_t parent) {
    struct tc_proc_slot *slots = tc_segment_procs(segment);
    for (uint32_t i = 0; parent > 0 && i < segment->header.proc_capacity; i++) {
        if (__atomic_load_n(&slots[i].pid, __ATOMIC_ACQUIRE) != parent) continue;
        uint32_t ordinal = __atomic_add_fetch(&slots[i].children, 1, __ATOMIC_ACQ_REL);
        return tc_mix64(__atomic_load_n(&slots[i].lineage, __ATOMIC_ACQUIRE), ordinal);
    }
    return tc_mix64(TC_LINEAGE_ROOTS, __atomic_add_fetch(&segment->roots, 1, __ATOMIC_ACQ_REL));
}

static int claim_free_slot(struct tc_segment *segment, int32_t pid, int64_t registered, int32_t parent) {
    struct tc_proc_slot *slots = tc_segment_procs(segment);
    for (uint32_t i = 0; i < segment->header.proc_capacity; i++) {
        int32_t expected = 0;
        if (__atomic_load_n(&slots[i].pid, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&slots[i].pid, &expected, pid, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&slots[i].children, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&slots[i].lineage, child_lineage(segment, parent), __ATOMIC_RELEASE);
            __atomic_store_n(&slots[i].registered, registered, __ATOMIC_RELEASE);
            return (int)i;
        }
    }
    return -1;
}

int tc_proc_register(struct tc_segment *segment, int32_t pid, int64_t registered, int32_t parent) {
    struct tc_proc_slot *slots = tc_segment_procs(segment);
    uint32_t capacity = segment->header.proc_capacity;
    /* After exec the same pid registers again: keep one entry. */
    for (uint32_t i = 0; i < capacity; i++) {
        if (__atomic_load_n(&slots[i].pid, __ATOMIC_RELAXED) == pid) {
            __atomic_store_n(&slots[i].registered, registered, __ATOMIC_RELEASE);
            return (int)i;
        }
    }
    int slot = claim_free_slot(segment, pid, registered, parent);
    if (slot >= 0) return slot;
    /* Full: free the entries of processes that died without exiting normally. */
    for (uint32_t i = 0; i < capacity; i++) {
        int32_t other = __atomic_load_n(&slots[i].pid, __ATOMIC_RELAXED);
        if (other > 0 && tc_raw_syscall(SYS_kill, other, 0) == -ESRCH)
            __atomic_compare_exchange_n(&slots[i].pid, &other, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
    return claim_free_slot(segment, pid, registered, parent);
}

uint64_t tc_proc_lineage(const struct tc_segment *segment, int slot) {
    if (slot < 0 || (uint32_t)slot >= segment->header.proc_capacity) return 0;
    return __atomic_load_n(&tc_segment_procs(segment)[slot].lineage, __ATOMIC_ACQUIRE);
}

void tc_proc_unregister(struct tc_segment *segment, int slot, int32_t pid) {
    if (slot < 0 || (uint32_t)slot >= segment->header.proc_capacity) return;
    int32_t expected = pid;
    __atomic_compare_exchange_n(&tc_segment_procs(segment)[slot].pid, &expected, 0, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_RELAXED);
}

uint32_t tc_proc_collect(const struct tc_segment *segment, struct tc_proc_slot *out, uint32_t capacity) {
    uint32_t count = 0;
    const struct tc_proc_slot *slots = tc_segment_procs(segment);
    for (uint32_t i = 0; i < segment->header.proc_capacity && count < capacity; i++) {
        int32_t pid = __atomic_load_n(&slots[i].pid, __ATOMIC_ACQUIRE);
        if (pid <= 0) continue;
        out[count].pid = pid;
        out[count].immediate_waits = __atomic_load_n(&slots[i].immediate_waits, __ATOMIC_RELAXED);
        out[count].registered = __atomic_load_n(&slots[i].registered, __ATOMIC_ACQUIRE);
        out[count].lineage = __atomic_load_n(&slots[i].lineage, __ATOMIC_ACQUIRE);
        count++;
    }
    return count;
}

void tc_proc_count_immediate_wait(struct tc_segment *segment, int slot) {
    if (slot < 0 || (uint32_t)slot >= segment->header.proc_capacity) return;
    __atomic_fetch_add(&tc_segment_procs(segment)[slot].immediate_waits, 1, __ATOMIC_RELAXED);
}

/* ---- the scheduler's claim ---- */

int32_t tc_scheduler_claim(struct tc_segment *segment, int32_t pid, uint64_t started, uint32_t kind) {
    for (;;) {
        int32_t owner = __atomic_load_n(&segment->scheduler_pid, __ATOMIC_ACQUIRE);
        /* One scheduler per session, even within one process. */
        if (owner != 0 && (owner == pid || tc_raw_syscall(SYS_kill, owner, 0) != -ESRCH)) return owner;
        if (__atomic_compare_exchange_n(&segment->scheduler_pid, &owner, pid, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&segment->scheduler_steps, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&segment->scheduler_kind, kind, __ATOMIC_RELEASE);
            __atomic_store_n(&segment->scheduler_started, started, __ATOMIC_RELEASE);
            return 0;
        }
    }
}

void tc_scheduler_release(struct tc_segment *segment, int32_t pid) {
    if (__atomic_load_n(&segment->scheduler_pid, __ATOMIC_ACQUIRE) != pid) return;
    /* Cleared first, so that a reader never pairs the next owner's pid with these. */
    __atomic_store_n(&segment->scheduler_started, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&segment->scheduler_kind, TC_SCHEDULER_UNKNOWN, __ATOMIC_RELEASE);
    int32_t expected = pid;
    __atomic_compare_exchange_n(&segment->scheduler_pid, &expected, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void tc_scheduler_count_step(struct tc_segment *segment) {
    __atomic_fetch_add(&segment->scheduler_steps, 1, __ATOMIC_RELAXED);
}

/* ---- the wait table ---- */

/* Tells harnesses waiting for waits (tc_segment_wait_for_change) that the table changed.
   Costs an atomic add, and a system call only while someone watches. */
static void note_wait_change(struct tc_segment *segment) {
    __atomic_fetch_add(&segment->wait_changes, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&segment->wait_watchers, __ATOMIC_ACQUIRE))
        tc_raw_syscall(SYS_futex, &segment->wait_changes, FUTEX_WAKE, INT_MAX, 0, 0, 0);
}

struct tc_wait_slot *tc_segment_waits(const struct tc_segment *segment) {
    return (struct tc_wait_slot *)((char *)segment + segment->header.wait_offset);
}

static int claim(struct tc_segment *segment, int32_t pid, int32_t tid, int kind, int vclock, int64_t deadline,
                 int64_t registered, uint64_t descriptors, uint64_t identity) {
    struct tc_wait_slot *slots = tc_segment_waits(segment);
    uint32_t capacity = segment->header.wait_capacity;
    /* Start where this thread usually lands, so threads rarely contend. */
    uint32_t start = ((uint32_t)tid * 2654435761u) % capacity;
    for (uint32_t n = 0; n < capacity; n++) {
        uint32_t i = (start + n) % capacity;
        uint64_t expected = 0;
        if (__atomic_load_n(&slots[i].owner, __ATOMIC_RELAXED) != 0 ||
            !__atomic_compare_exchange_n(&slots[i].owner, &expected, TC_WAIT_CLAIMING, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&slots[i].kind, kind, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].vclock, vclock, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].deadline, deadline, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].registered, registered, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].descriptors, descriptors, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].identity, identity, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].held, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[i].owner, tc_wait_owner(pid, tid), __ATOMIC_RELEASE);
        __atomic_fetch_or(&segment->wait_map[i / 64], 1ULL << (i % 64), __ATOMIC_SEQ_CST);
        note_wait_change(segment);
        return (int)i;
    }
    return -1;
}

int tc_wait_claim(struct tc_segment *segment, int32_t pid, int32_t tid, int kind, int vclock, int64_t deadline,
                  int64_t registered, uint64_t identity) {
    return claim(segment, pid, tid, kind, vclock, deadline, registered, 0, identity);
}

int tc_wait_claim_timer(struct tc_segment *segment, int32_t pid, int kind, int vclock, int64_t deadline,
                        int64_t registered, uint64_t descriptors, uint64_t identity) {
    return claim(segment, pid, 0, kind, vclock, deadline, registered, descriptors, identity);
}

void tc_segment_set_order(struct tc_segment *segment, uint64_t seed, uint64_t jitter) {
    __atomic_store_n(&segment->jitter, seed ? jitter : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&segment->seed, seed, __ATOMIC_RELEASE);
}

uint64_t tc_segment_seed(const struct tc_segment *segment) { return __atomic_load_n(&segment->seed, __ATOMIC_ACQUIRE); }

int tc_wait_held(const struct tc_segment *segment, int slot) {
    if (slot < 0 || (uint32_t)slot >= segment->header.wait_capacity) return 0;
    return __atomic_load_n(&tc_segment_waits(segment)[slot].held, __ATOMIC_ACQUIRE) != 0;
}

int tc_wait_hold(struct tc_segment *segment, uint32_t slot, uint64_t owner) {
    if (slot >= segment->header.wait_capacity) return 0;
    struct tc_wait_slot *entry = &tc_segment_waits(segment)[slot];
    __atomic_store_n(&entry->held, 1, __ATOMIC_SEQ_CST);
    /* The slot may have been released (and claimed again) meanwhile: then the hold is not this wait's. */
    if (__atomic_load_n(&entry->owner, __ATOMIC_SEQ_CST) == owner) return 1;
    __atomic_store_n(&entry->held, 0, __ATOMIC_RELEASE);
    return 0;
}

void tc_wait_release_held(struct tc_segment *segment, uint32_t slot) {
    if (slot >= segment->header.wait_capacity) return;
    __atomic_store_n(&tc_segment_waits(segment)[slot].held, 0, __ATOMIC_RELEASE);
    /* The held wait looks again when the generation moves, as after a verb (its helper thread too). */
    __atomic_fetch_add(&segment->generation, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &segment->generation, FUTEX_WAKE, INT_MAX, 0, 0, 0);
}

void tc_wait_set_descriptors(struct tc_segment *segment, int slot, uint64_t descriptors) {
    if (slot < 0 || (uint32_t)slot >= segment->header.wait_capacity) return;
    __atomic_store_n(&tc_segment_waits(segment)[slot].descriptors, descriptors, __ATOMIC_RELEASE);
}

#ifndef SYS_kcmp
#define SYS_kcmp 312
#endif
#define TC_KCMP_FILE 0

int tc_timerfd_descriptors_closed(int32_t pid, uint64_t descriptors) {
    if (descriptors == 0) return 0;
    long fd = (long)(uint32_t)descriptors - 1, duplicate = (long)(uint32_t)(descriptors >> 32) - 1;
    long same = tc_raw_syscall(SYS_kcmp, pid, pid, TC_KCMP_FILE, fd, duplicate);
    /* 0: one open file. 1–3: two files (the number now names another). −EBADF: one is not open. */
    return same > 0 || same == -EBADF;
}

int tc_wait_timerfd_closed(const struct tc_wait_slot *entry) {
    return entry->kind == TC_WAIT_TIMERFD && tc_timerfd_descriptors_closed(tc_wait_owner_pid(entry->owner), entry->descriptors);
}

void tc_wait_set_deadline(struct tc_segment *segment, int slot, int vclock, int64_t deadline) {
    if (slot < 0) return;
    struct tc_wait_slot *entry = &tc_segment_waits(segment)[slot];
    __atomic_store_n(&entry->vclock, vclock, __ATOMIC_RELAXED);
    __atomic_store_n(&entry->deadline, deadline, __ATOMIC_RELEASE);
}

void tc_wait_release(struct tc_segment *segment, int slot, uint64_t owner) {
    if (slot < 0 || (uint32_t)slot >= segment->header.wait_capacity) return;
    uint64_t expected = owner;
    if (__atomic_compare_exchange_n(&tc_segment_waits(segment)[slot].owner, &expected, 0, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED)) {
        /* Another thread may claim the slot between these two steps and set the bit
           again; clearing it after that would hide its wait, so re-set if needed. */
        __atomic_fetch_and(&segment->wait_map[slot / 64], ~(1ULL << (slot % 64)), __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&tc_segment_waits(segment)[slot].owner, __ATOMIC_SEQ_CST) != 0)
            __atomic_fetch_or(&segment->wait_map[slot / 64], 1ULL << (slot % 64), __ATOMIC_SEQ_CST);
        note_wait_change(segment);
    }
}

int tc_wait_read(const struct tc_segment *segment, uint32_t slot, struct tc_wait_slot *out) {
    if (slot >= segment->header.wait_capacity) return 0;
    const struct tc_wait_slot *entry = &tc_segment_waits(segment)[slot];
    uint64_t owner = __atomic_load_n(&entry->owner, __ATOMIC_ACQUIRE);
    if (owner == 0 || owner == TC_WAIT_CLAIMING) return 0;
    if (tc_wait_owner_pid(owner) <= 0 || tc_wait_owner_pid(owner) > TC_PID_MAX) return 0;
    out->owner = owner;
    out->kind = __atomic_load_n(&entry->kind, __ATOMIC_RELAXED);
    out->vclock = __atomic_load_n(&entry->vclock, __ATOMIC_RELAXED);
    out->deadline = __atomic_load_n(&entry->deadline, __ATOMIC_ACQUIRE);
    out->registered = __atomic_load_n(&entry->registered, __ATOMIC_RELAXED);
    out->descriptors = __atomic_load_n(&entry->descriptors, __ATOMIC_ACQUIRE);
    out->identity = __atomic_load_n(&entry->identity, __ATOMIC_RELAXED);
    out->held = __atomic_load_n(&entry->held, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&entry->owner, __ATOMIC_ACQUIRE) == owner && tc_vclock_valid(out->vclock) &&
           tc_wait_kind_valid(out->kind);
}

uint32_t tc_wait_collect(const struct tc_segment *segment, struct tc_wait_slot *out, uint32_t *slots,
                         uint32_t capacity) {
    uint32_t count = 0;
    uint32_t words = (segment->header.wait_capacity + 63) / 64;
    for (uint32_t word = 0; word < words && count < capacity; word++) {
        uint64_t bits = __atomic_load_n(&segment->wait_map[word], __ATOMIC_ACQUIRE);
        while (bits && count < capacity) {
            uint32_t i = word * 64 + (uint32_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (tc_wait_read(segment, i, &out[count])) slots[count++] = i;
        }
    }
    return count;
}

/*
 * Segment mapping, validation, creation and the writer protocol.
 * See timectl_segment.h for the layout and its concurrency rules.
 */
#define _GNU_SOURCE
#include "timectl_segment_io.h"
#include "timectl_filetimes.h"

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

#define TC_PROC_OFFSET ((uint32_t)((sizeof(struct tc_segment) + 63) & ~(size_t)63))
#define TC_PROC_SLOTS 1024u
#define TC_WAIT_OFFSET (TC_PROC_OFFSET + TC_PROC_SLOTS * (uint32_t)sizeof(struct tc_proc_slot))
#define TC_WAIT_SLOTS 4096u
#define TC_HISTORY_OFFSET (TC_WAIT_OFFSET + TC_WAIT_SLOTS * (uint32_t)sizeof(struct tc_wait_slot))
/* How long a lock waiter yields before it sleeps; see tc_segment_lock. */
#define LOCK_YIELD_NS 1000000

static int fail(struct tc_failure *failure, int result) {
    if (failure) failure->result = result;
    return result;
}

static int fail_syscall(struct tc_failure *failure, const char *name, long kernel_result) {
    if (failure) {
        failure->result = TC_E_SYSCALL;
        failure->syscall = name;
        failure->sys_errno = (int)-kernel_result;
    }
    return TC_E_SYSCALL;
}

const char *tc_result_phrase(int result) {
    switch (result) {
    case TC_OK: return "ok";
    case TC_E_SYSCALL: return "could not be accessed";
    case TC_E_MISSING: return "does not exist";
    case TC_E_SYMLINK: return "is a symbolic link";
    case TC_E_NOT_REGULAR: return "is not a regular file";
    case TC_E_NOT_OWNER: return "belongs to another user";
    case TC_E_MODE: return "is accessible to other users (must be mode 0600)";
    case TC_E_TRUNCATED: return "is truncated";
    case TC_E_NOT_SEGMENT: return "is not a timectl segment";
    case TC_E_VERSION: return "has another segment layout version";
    case TC_E_CORRUPT: return "is damaged (a header field, the clock state or the writer lock fails its checks)";
    case TC_E_EXISTS: return "already exists";
    case TC_E_RANGE: return "would move a clock outside 1900-01-01..2200-01-01";
    case TC_E_INVALID: return "was given an invalid argument";
    case TC_E_LOCK_TIMEOUT: return "is locked by another writer";
    default: return "failed";
    }
}

uint64_t tc_segment_expected_size(void) {
    uint64_t size = TC_HISTORY_OFFSET + (uint64_t)TC_HISTORY_ENTRIES * sizeof(struct tc_history_entry);
    return (size + 4095) & ~(uint64_t)4095;
}

/* ---- self-checks ---- */

/* A 64-bit mix of `count` words: any change to one word changes the result. */
static uint64_t mix_words(uint64_t hash, const uint64_t *words, size_t count) {
    for (size_t i = 0; i < count; i++) {
        hash ^= words[i];
        hash *= 0x9e3779b97f4a7c15ULL;
        hash ^= hash >> 29;
    }
    return hash;
}

uint64_t tc_header_check(const struct tc_segment_header *header) {
    struct tc_segment_header copy;
    memcpy(&copy, header, sizeof(copy));
    copy.flags = 0;
    copy.check = 0;
    _Static_assert(sizeof(copy) % 8 == 0, "the header is whole words");
    uint64_t words[sizeof(copy) / 8];
    memcpy(words, &copy, sizeof(copy));
    return mix_words(0x54494d4543544c07ULL, words, sizeof(words) / 8);
}

uint32_t tc_state_check(const struct tc_clock_state *state, const struct tc_pending_verb *pending) {
    uint64_t words[7 + 5];
    size_t count = 7;
    memcpy(words, state, sizeof(*state));
    if (state->rate & TC_RATE_PENDING) {
        /* Everything but the anchor, which a reader may store at any time. */
        memcpy(&words[7], pending, 5 * sizeof(uint64_t));
        count += 5;
    }
    uint64_t hash = mix_words(0x7374617465000007ULL, words, count);
    return (uint32_t)(hash ^ (hash >> 32));
}

/* Nanoseconds in range, and seconds that convert to int64 nanoseconds (±285 years) with room to add one more. */
static int split_valid(struct tc_split split) {
    const int64_t limit = 9000000000LL;
    return split.nsec >= 0 && split.nsec < TC_NS_PER_SECOND && split.sec > -limit && split.sec < limit;
}

static int rate_valid(uint64_t rate) { return rate == 0 || (rate >= TC_RATE_MIN && rate <= TC_RATE_MAX); }

/* A verb a writer may publish: the kinds and ranges tc_anchors_apply accepts. */
static int verb_valid(const struct tc_verb *verb) {
    switch (verb->kind) {
    case TC_VERB_FREEZE:
    case TC_VERB_FREEZE_WALL: return verb->wall >= TC_WALL_KEEP && verb->wall <= TC_WALL_RELATIVE;
    case TC_VERB_SET_RATE:
    case TC_VERB_RESUME: return verb->rate >= TC_RATE_MIN && verb->rate <= TC_RATE_MAX;
    case TC_VERB_ADVANCE: return verb->value >= 0;
    case TC_VERB_ADVANCE_TO: return tc_vclock_valid(verb->vclock);
    case TC_VERB_SET_WALL: return verb->wall == TC_WALL_ABSOLUTE || verb->wall == TC_WALL_RELATIVE;
    case TC_VERB_RESET: return 1;
    default: return 0;
    }
}

static struct tc_verb pending_verb(const struct tc_pending_verb *pending) {
    struct tc_verb verb = {
        .kind = __atomic_load_n(&pending->kind, __ATOMIC_RELAXED),
        .wall = __atomic_load_n(&pending->wall, __ATOMIC_RELAXED),
        .value = __atomic_load_n(&pending->value, __ATOMIC_RELAXED),
        .rate = __atomic_load_n(&pending->rate, __ATOMIC_RELAXED),
        .vclock = __atomic_load_n(&pending->vclock, __ATOMIC_RELAXED),
    };
    return verb;
}

/*
 * A state every reader can use: nanoseconds in range, a rate in range,
 * instants inside the supported range (with room for a running clock).
 */
static int state_valid(const struct tc_clock_state *state) {
    /* t0 is a real CLOCK_MONOTONIC reading: after boot, not past now (verbs anchor 1 µs ahead). */
    if (!split_valid(state->t0) || state->t0.sec < 0 ||
        tc_split_to_ns(state->t0) > tc_real_ns(CLOCK_MONOTONIC) + TC_NS_PER_SECOND ||
        !rate_valid(state->rate & ~(TC_RATE_PENDING | TC_RATE_WALL_FROZEN)))
        return 0;
    for (int k = 0; k < TC_TRACK_COUNT; k++) {
        if (!split_valid(state->offset[k])) return 0;
    }
    struct tc_anchors anchors = tc_anchors_unpack(state);
    for (int k = 0; k < TC_TRACK_COUNT; k++)
        if (!tc_instant_in_range(anchors.track[k])) return 0;
    return 1;
}

/*
 * A plausible pending verb, published in the copy that `seq` selects: one a
 * writer could publish, not yet anchored (tc_pending_unanchored(seq)) or
 * anchored at a real time read after its state's t0 — which lies up to
 * TC_ANCHOR_LEAD_NS ahead of the clock — and not after now.
 */
static int pending_valid(const struct tc_clock_state *state, const struct tc_pending_verb *pending, uint32_t seq) {
    struct tc_verb verb = pending_verb(pending);
    if (!verb_valid(&verb)) return 0;
    int64_t anchor = __atomic_load_n(&pending->anchor, __ATOMIC_RELAXED);
    return anchor == tc_pending_unanchored(seq) || (anchor >= tc_split_to_ns(state->t0) - TC_NS_PER_SECOND &&
                                                    anchor <= tc_real_ns(CLOCK_MONOTONIC) + TC_NS_PER_SECOND);
}

/* Copies the published copy that `seq` selects and checks it; TC_OK or TC_E_CORRUPT. */
static int load_published(const struct tc_timeline *timeline, uint32_t seq, struct tc_clock_state *state,
                          struct tc_pending_verb *pending);

int tc_segment_check_state(const struct tc_segment *segment) {
    const struct tc_timeline *timeline = &segment->timeline;
    for (;;) {
        uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
        struct tc_clock_state state;
        struct tc_pending_verb pending;
        int result = load_published(timeline, seq, &state, &pending);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&timeline->seq, __ATOMIC_RELAXED) == seq) return result;
    }
}

int tc_segment_validate(const struct tc_segment *segment, uint64_t file_size, uint32_t file_uid) {
    const struct tc_segment_header *h = &segment->header;
    if (memcmp(h->magic, TC_SEGMENT_MAGIC, sizeof(h->magic)) != 0) return TC_E_NOT_SEGMENT;
    if (h->version != TC_SEGMENT_VERSION) return TC_E_VERSION;
    if (h->header_size != sizeof(struct tc_segment)) return TC_E_CORRUPT;
    if (h->total_size > file_size) return TC_E_TRUNCATED;
    if (h->total_size != file_size) return TC_E_CORRUPT;
    if (h->check != tc_header_check(h)) return TC_E_CORRUPT;
    if (h->owner_uid != file_uid) return TC_E_CORRUPT;
    if (h->flags & ~TC_SEGMENT_FLAG_REMOVED) return TC_E_CORRUPT;
    if (h->proc_offset < sizeof(struct tc_segment) || h->proc_offset % 64 != 0 || h->proc_capacity == 0 ||
        h->proc_capacity > 1u << 20)
        return TC_E_CORRUPT;
    uint64_t proc_end = (uint64_t)h->proc_offset + (uint64_t)h->proc_capacity * sizeof(struct tc_proc_slot);
    if (proc_end > file_size) return TC_E_CORRUPT;
    if (h->wait_offset < proc_end || h->wait_offset % 16 != 0 || h->wait_capacity == 0 ||
        h->wait_capacity > TC_WAIT_MAP_WORDS * 64 ||
        (uint64_t)h->wait_offset + (uint64_t)h->wait_capacity * sizeof(struct tc_wait_slot) > file_size)
        return TC_E_CORRUPT;
    uint64_t wait_end = (uint64_t)h->wait_offset + (uint64_t)h->wait_capacity * sizeof(struct tc_wait_slot);
    if (h->history_offset < wait_end || h->history_offset % 32 != 0 || h->history_capacity == 0 ||
        (h->history_capacity & (h->history_capacity - 1)) != 0 || h->history_capacity > 1u << 20 ||
        (uint64_t)h->history_offset + (uint64_t)h->history_capacity * sizeof(struct tc_history_entry) > file_size)
        return TC_E_CORRUPT;
    if (memchr(h->name, 0, sizeof(h->name)) == NULL) return TC_E_CORRUPT;
    /* Every base an instant in range, so that their differences (the clock offsets) fit. */
    for (int clock = 0; clock < TC_VCLOCK_COUNT; clock++)
        if (h->base[clock] < TC_INSTANT_MIN || h->base[clock] > TC_INSTANT_MAX) return TC_E_CORRUPT;
    for (int clock = 0; clock < TC_VCLOCK_COUNT; clock++) {
        int track_clock = tc_track_of(clock) == TC_TRACK_WALL ? TC_VCLOCK_REALTIME : TC_VCLOCK_MONOTONIC;
        if (!split_valid(h->clock_offset[clock]) ||
            tc_split_to_ns(h->clock_offset[clock]) != h->base[clock] - h->base[track_clock])
            return TC_E_CORRUPT;
    }
    if (tc_segment_check_state(segment) != TC_OK) return TC_E_CORRUPT;
    if (tc_segment_lock_damaged(segment)) return TC_E_CORRUPT;
    int32_t scheduler = __atomic_load_n(&segment->scheduler_pid, __ATOMIC_RELAXED);
    if (scheduler < 0 || scheduler > TC_PID_MAX ||
        __atomic_load_n(&segment->scheduler_kind, __ATOMIC_RELAXED) > TC_SCHEDULER_HARNESS)
        return TC_E_CORRUPT;
    return TC_OK;
}

static int map_fd(int fd, uint64_t size, struct tc_mapping *mapping, struct tc_failure *failure) {
    long address = tc_raw_syscall(SYS_mmap, 0, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (address < 0 && address > -4096) return fail_syscall(failure, "mmap", address);
    mapping->segment = (struct tc_segment *)address;
    mapping->size = size;
    return TC_OK;
}

int tc_segment_open(int dirfd, const char *path, struct tc_mapping *mapping, struct tc_failure *failure) {
    mapping->segment = NULL;
    mapping->size = 0;
    long fd = tc_raw_syscall(SYS_openat, dirfd, path,
                             O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
    if (fd == -ENOENT) return fail(failure, TC_E_MISSING);
    if (fd == -ELOOP) return fail(failure, TC_E_SYMLINK);
    if (fd == -EISDIR || fd == -ENXIO) return fail(failure, TC_E_NOT_REGULAR);
    if (fd < 0) return fail_syscall(failure, "open", fd);

    struct stat st;
    long r = tc_raw_syscall(SYS_fstat, fd, &st);
    int result = TC_OK;
    uint32_t euid = (uint32_t)tc_raw_syscall(SYS_geteuid, 0);
    if (r < 0) result = fail_syscall(failure, "fstat", r);
    else if (!S_ISREG(st.st_mode)) result = fail(failure, TC_E_NOT_REGULAR);
    else if (st.st_uid != euid) {
        result = fail(failure, TC_E_NOT_OWNER);
        if (failure) failure->found_uid = st.st_uid;
    } else if (st.st_mode & 077) result = fail(failure, TC_E_MODE);
    else if ((uint64_t)st.st_size < sizeof(struct tc_segment)) result = fail(failure, TC_E_TRUNCATED);
    else result = map_fd((int)fd, (uint64_t)st.st_size, mapping, failure);
    tc_raw_syscall(SYS_close, fd);
    if (result != TC_OK) return result;

    result = tc_segment_validate(mapping->segment, mapping->size, st.st_uid);
    if (result != TC_OK) {
        if (failure && result == TC_E_VERSION) failure->found_version = mapping->segment->header.version;
        tc_segment_unmap(mapping);
        return fail(failure, result);
    }
    return TC_OK;
}

void tc_segment_unmap(struct tc_mapping *mapping) {
    if (mapping->segment) tc_raw_syscall(SYS_munmap, mapping->segment, mapping->size);
    mapping->segment = NULL;
    mapping->size = 0;
}

static void format_segment(struct tc_segment *segment, uint64_t size, const char *name) {
    struct tc_segment_header *h = &segment->header;
    memcpy(h->magic, TC_SEGMENT_MAGIC, sizeof(h->magic));
    h->version = TC_SEGMENT_VERSION;
    h->header_size = sizeof(struct tc_segment);
    h->total_size = size;
    h->owner_uid = (uint32_t)tc_raw_syscall(SYS_geteuid, 0);
    h->proc_offset = TC_PROC_OFFSET;
    h->proc_capacity = TC_PROC_SLOTS;
    h->wait_offset = TC_WAIT_OFFSET;
    h->wait_capacity = TC_WAIT_SLOTS;
    h->history_offset = TC_HISTORY_OFFSET;
    h->history_capacity = TC_HISTORY_ENTRIES;
    strncpy(h->name, name, sizeof(h->name) - 1);

    /* Read monotonic first: it is the anchor every other clock runs from. */
    int64_t *base = h->base;
    base[TC_VCLOCK_MONOTONIC] = tc_real_ns(CLOCK_MONOTONIC);
    base[TC_VCLOCK_MONOTONIC_RAW] = tc_real_ns(CLOCK_MONOTONIC_RAW);
    base[TC_VCLOCK_BOOTTIME] = tc_real_ns(CLOCK_BOOTTIME);
    base[TC_VCLOCK_REALTIME] = tc_real_ns(CLOCK_REALTIME);
    /* The kernel's TAI offset is whole seconds; reading the two clocks one
       after the other must not add the nanoseconds in between. */
    int64_t tai_offset = tc_real_ns(CLOCK_TAI) - base[TC_VCLOCK_REALTIME];
    tai_offset = (tai_offset + TC_NS_PER_SECOND / 2) / TC_NS_PER_SECOND * TC_NS_PER_SECOND;
    base[TC_VCLOCK_TAI] = base[TC_VCLOCK_REALTIME] + tai_offset;
    h->created_realtime = base[TC_VCLOCK_REALTIME];
    for (int clock = 0; clock < TC_VCLOCK_COUNT; clock++) {
        int track_clock = tc_track_of(clock) == TC_TRACK_WALL ? TC_VCLOCK_REALTIME : TC_VCLOCK_MONOTONIC;
        h->clock_offset[clock] = tc_split_ns(base[clock] - base[track_clock]);
    }

    struct tc_anchors anchors = {.t0 = base[TC_VCLOCK_MONOTONIC], .rate = TC_RATE_ONE};
    anchors.track[TC_TRACK_ELAPSED] = base[TC_VCLOCK_MONOTONIC];
    anchors.track[TC_TRACK_WALL] = base[TC_VCLOCK_REALTIME];
    for (int copy = 0; copy < 2; copy++) {
        tc_anchors_pack(&segment->timeline.copy[copy].state, &anchors);
        segment->timeline.copy[copy].check = tc_state_check(&segment->timeline.copy[copy].state, NULL);
    }
    h->check = tc_header_check(h);
    tc_history_append(segment, h->created_realtime, base[TC_VCLOCK_REALTIME], TC_RATE_ONE);
}

int tc_segment_create(int dirfd, const char *name, const char *file_name, struct tc_mapping *mapping,
                      struct tc_failure *failure) {
    static unsigned counter;
    mapping->segment = NULL;
    mapping->size = 0;
    if (strlen(name) >= TC_SESSION_NAME_MAX) return fail(failure, TC_E_INVALID);
    tc_realclock_init();

    char temporary[PATH_MAX];
    long pid = tc_raw_syscall(SYS_getpid, 0);
    unsigned serial = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    if (snprintf(temporary, sizeof(temporary), ".%s.%ld.%u.creating", file_name, pid, serial) >=
        (int)sizeof(temporary))
        return fail(failure, TC_E_INVALID);

    long fd = tc_raw_syscall(SYS_openat, dirfd, temporary,
                             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return fail_syscall(failure, "open", fd);
    uint64_t size = tc_segment_expected_size();
    int result = TC_OK;
    long r = tc_raw_syscall(SYS_fchmod, fd, 0600);
    if (r < 0) result = fail_syscall(failure, "fchmod", r);
    if (result == TC_OK && (r = tc_raw_syscall(SYS_ftruncate, fd, size)) < 0)
        result = fail_syscall(failure, "ftruncate", r);
    if (result == TC_OK) result = map_fd((int)fd, size, mapping, failure);
    tc_raw_syscall(SYS_close, fd);
    if (result == TC_OK) {
        format_segment(mapping->segment, size, name);
        r = tc_raw_syscall(SYS_linkat, dirfd, temporary, dirfd, file_name, 0);
        if (r == -EEXIST) result = fail(failure, TC_E_EXISTS);
        else if (r < 0) result = fail_syscall(failure, "link", r);
    }
    tc_raw_syscall(SYS_unlinkat, dirfd, temporary, 0);
    if (result != TC_OK) tc_segment_unmap(mapping);
    return result;
}

/* ---- the timeline's latch ---- */

static void load_split(struct tc_split *to, const struct tc_split *from) {
    to->sec = __atomic_load_n(&from->sec, __ATOMIC_RELAXED);
    to->nsec = __atomic_load_n(&from->nsec, __ATOMIC_RELAXED);
}

static void store_split(struct tc_split *to, const struct tc_split *from) {
    __atomic_store_n(&to->sec, from->sec, __ATOMIC_RELAXED);
    __atomic_store_n(&to->nsec, from->nsec, __ATOMIC_RELAXED);
}

static void load_state(struct tc_clock_state *to, const struct tc_clock_state *from) {
    load_split(&to->t0, &from->t0);
    to->rate = __atomic_load_n(&from->rate, __ATOMIC_RELAXED);
    for (int k = 0; k < TC_TRACK_COUNT; k++) load_split(&to->offset[k], &from->offset[k]);
}

static void store_state(struct tc_clock_state *to, const struct tc_clock_state *from) {
    store_split(&to->t0, &from->t0);
    __atomic_store_n(&to->rate, from->rate, __ATOMIC_RELAXED);
    for (int k = 0; k < TC_TRACK_COUNT; k++) store_split(&to->offset[k], &from->offset[k]);
}

static void load_pending(struct tc_pending_verb *to, const struct tc_pending_verb *from) {
    struct tc_verb verb = pending_verb(from);
    to->kind = verb.kind;
    to->wall = verb.wall;
    to->value = verb.value;
    to->rate = verb.rate;
    to->vclock = verb.vclock;
    to->reserved = 0;
    to->real_offset = __atomic_load_n(&from->real_offset, __ATOMIC_RELAXED);
    to->anchor = __atomic_load_n(&from->anchor, __ATOMIC_RELAXED);
}

static int load_published(const struct tc_timeline *timeline, uint32_t seq, struct tc_clock_state *state,
                          struct tc_pending_verb *pending) {
    const struct tc_published *copy = &timeline->copy[seq & 1];
    load_state(state, &copy->state);
    load_pending(pending, &timeline->pending[seq & 1]);
    uint32_t check = __atomic_load_n(&copy->check, __ATOMIC_RELAXED);
    if (check != tc_state_check(state, pending) || !state_valid(state)) return TC_E_CORRUPT;
    if ((state->rate & TC_RATE_PENDING) && !pending_valid(state, pending, seq)) return TC_E_CORRUPT;
    return TC_OK;
}

/*
 * The anchor of the verb pending in the copy that `seq` selects: the real
 * monotonic time it takes effect. The first process to need it stores the
 * real time it read after seeing the verb published, so every reader that
 * read the state before the verb did so before the anchor, and a verb that
 * slows the clock never moves it back, however long its writer was stopped
 * before publishing it. The compare-and-swap expects this publication's
 * unanchored value: a reader held since it read an earlier verb pending in
 * the same slot finds another value and stores nothing (seq has moved, so
 * its read is retried whatever this returns).
 */
static int64_t pending_anchor(struct tc_pending_verb *shared, uint32_t seq, int64_t real_now) {
    int64_t unanchored = tc_pending_unanchored(seq);
    int64_t anchor = __atomic_load_n(&shared->anchor, __ATOMIC_ACQUIRE);
    if (anchor == unanchored &&
        __atomic_compare_exchange_n(&shared->anchor, &anchor, real_now, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return real_now;
    /* Anchored by another process; or, if negative, published again since `seq`. */
    return anchor < 0 ? real_now : anchor;
}

/*
 * The state a pending verb leads to: the verb applied at its anchor, with
 * timectl_timeline.h's arithmetic, exactly as its writer will publish it.
 * A verb that no longer fits the range at that anchor leaves the state as
 * it was (the writer reports it as refused).
 */
static int resolve_pending(const struct tc_segment *segment, const struct tc_clock_state *before,
                           const struct tc_pending_verb *pending, int64_t anchor, struct tc_anchors *out) {
    struct tc_clock_state state = *before;
    state.rate &= ~TC_RATE_PENDING;
    *out = tc_anchors_unpack(&state);
    struct tc_anchors applied = *out;
    struct tc_verb verb = pending_verb(pending);
    struct tc_real_now now = {anchor, anchor + pending->real_offset};
    int result = tc_anchors_apply(&applied, &segment->header, &verb, now);
    if (result == TC_OK) *out = applied;
    return result;
}

/* Reads copy `index` under `seq` into anchors (a pending verb resolved); 0 if seq changed meanwhile. */
static int read_copy(const struct tc_segment *segment, uint32_t seq, struct tc_anchors *anchors, int64_t *real_now) {
    const struct tc_timeline *timeline = &segment->timeline;
    uint32_t index = seq & 1;
    struct tc_clock_state state;
    load_state(&state, &timeline->copy[index].state);
    *real_now = tc_real_ns(CLOCK_MONOTONIC);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (state.rate & TC_RATE_PENDING) {
        struct tc_pending_verb pending;
        load_pending(&pending, &timeline->pending[index]);
        /* Readers do not write into the mapping unless the anchor is unset, once per verb. */
        int64_t anchor = pending_anchor((struct tc_pending_verb *)&timeline->pending[index], seq, *real_now);
        resolve_pending(segment, &state, &pending, anchor, anchors);
    } else {
        *anchors = tc_anchors_unpack(&state);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&timeline->seq, __ATOMIC_RELAXED) == seq;
}

void tc_segment_read_contended(const struct tc_segment *segment, int vclock, struct timespec *out) {
    const struct tc_timeline *timeline = &segment->timeline;
    int track = tc_track_of(vclock);
    for (;;) {
        uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
        const struct tc_clock_state *state = &timeline->copy[seq & 1].state;
        if (!(__atomic_load_n(&state->rate, __ATOMIC_RELAXED) & TC_RATE_PENDING)) {
            if (tc_timeline_try_read(timeline, state, track, seq, out)) break;
            continue;
        }
        struct tc_anchors anchors;
        int64_t real_now;
        if (read_copy(segment, seq, &anchors, &real_now)) {
            *out = tc_timespec_from_ns(tc_anchors_value(&anchors, track, real_now));
            break;
        }
    }
    tc_add_clock_offset(segment, vclock, out);
}

uint64_t tc_segment_rate(const struct tc_segment *segment) {
    struct tc_anchors anchors;
    int64_t real_now;
    while (!read_copy(segment, __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE), &anchors, &real_now)) {
    }
    return anchors.rate;
}

uint64_t tc_segment_clock_rate(const struct tc_segment *segment, int vclock) {
    struct tc_anchors anchors;
    int64_t real_now;
    while (!read_copy(segment, __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE), &anchors, &real_now)) {
    }
    return tc_anchors_track_rate(&anchors, tc_track_of(vclock));
}

void tc_segment_snapshot(const struct tc_segment *segment, struct tc_clock_state *state) {
    struct tc_anchors anchors;
    int64_t real_now;
    while (!read_copy(segment, __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE), &anchors, &real_now)) {
    }
    tc_anchors_pack(state, &anchors);
}

/*
 * Publishes `state` (and the pending verb, if its rate says so) in the copy
 * readers are not using, then moves them to it. Caller holds the writer
 * lock; returns the new seq.
 */
static uint32_t publish(struct tc_timeline *timeline, uint32_t seq, const struct tc_clock_state *state,
                        const struct tc_pending_verb *pending) {
    uint32_t index = (seq + 1) & 1;
    /* Readers of this copy (from before the last publication) must see seq moved if they see any store below. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (pending) {
        struct tc_pending_verb *to = &timeline->pending[index];
        __atomic_store_n(&to->kind, pending->kind, __ATOMIC_RELAXED);
        __atomic_store_n(&to->wall, pending->wall, __ATOMIC_RELAXED);
        __atomic_store_n(&to->value, pending->value, __ATOMIC_RELAXED);
        __atomic_store_n(&to->rate, pending->rate, __ATOMIC_RELAXED);
        __atomic_store_n(&to->vclock, pending->vclock, __ATOMIC_RELAXED);
        __atomic_store_n(&to->real_offset, pending->real_offset, __ATOMIC_RELAXED);
        __atomic_store_n(&to->anchor, tc_pending_unanchored(seq + 1), __ATOMIC_RELAXED);
    }
    store_state(&timeline->copy[index].state, state);
    __atomic_store_n(&timeline->copy[index].check, tc_state_check(state, pending), __ATOMIC_RELAXED);
    __atomic_store_n(&timeline->seq, seq + 1, __ATOMIC_RELEASE);
    /* The real time read next must come after every reader can see the new copy. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return seq + 1;
}

/* Resolves a pending verb left published by its writer (stopped short, or killed): the latch's repair. */
static uint32_t publish_resolved(struct tc_segment *segment, uint32_t seq, const struct tc_clock_state *current,
                                 struct tc_clock_state *resolved, int *verb_result) {
    struct tc_timeline *timeline = &segment->timeline;
    struct tc_pending_verb pending;
    load_pending(&pending, &timeline->pending[seq & 1]);
    int64_t anchor = pending_anchor(&timeline->pending[seq & 1], seq, tc_real_ns(CLOCK_MONOTONIC));
    struct tc_anchors anchors;
    int result = resolve_pending(segment, current, &pending, anchor, &anchors);
    if (verb_result) *verb_result = result;
    tc_anchors_pack(resolved, &anchors);
    seq = publish(timeline, seq, resolved, NULL);
    /* The session's past, for file times: from the verb's real instant on, the wall reads this. */
    if (result == TC_OK)
        tc_history_append(segment, anchors.t0 + pending.real_offset, anchors.track[TC_TRACK_WALL],
                          tc_anchors_track_rate(&anchors, TC_TRACK_WALL));
    return seq;
}

/*
 * Applies a verb in two publications: the verb pending on the old state,
 * then the state it leads to. Checks everything before touching anything: a
 * refused verb leaves the segment as it was.
 */
int tc_segment_apply(struct tc_segment *segment, const struct tc_verb *verb, struct tc_clock_state *published) {
    if (!verb_valid(verb)) return TC_E_INVALID;
    struct tc_timeline *timeline = &segment->timeline;
    uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
    struct tc_clock_state state;
    struct tc_pending_verb left;
    if (load_published(timeline, seq, &state, &left) != TC_OK) return TC_E_CORRUPT;
    if (state.rate & TC_RATE_PENDING) {
        struct tc_clock_state resolved;
        seq = publish_resolved(segment, seq, &state, &resolved, NULL);
        state = resolved;
    }

    struct tc_real_now now = {tc_real_ns(CLOCK_MONOTONIC), tc_real_ns(CLOCK_REALTIME)};
    struct tc_anchors trial = tc_anchors_unpack(&state);
    int result = tc_anchors_apply(&trial, &segment->header, verb, now);
    if (result != TC_OK) return result;

    struct tc_pending_verb pending = {
        .kind = verb->kind, .wall = verb->wall, .value = verb->value, .rate = verb->rate,
        .vclock = verb->vclock, .real_offset = now.realtime - now.monotonic,
    };
    struct tc_clock_state before = state;
    before.rate |= TC_RATE_PENDING;
    seq = publish(timeline, seq, &before, &pending);
    seq = publish_resolved(segment, seq, &before, &state, &result);

    __atomic_fetch_add(&segment->verbs_applied, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&segment->generation, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &segment->generation, FUTEX_WAKE, INT_MAX, 0, 0, 0);
    if (published) *published = state;
    return result;
}

/* ---- the writer lock ---- */

/* The start time of a process in clock ticks after boot (field 22 of /proc/PID/stat); 0 if it is gone. */
static uint64_t process_start_time(int32_t pid) {
    char path[32] = "/proc/", digits[12], buffer[1024];
    int count = 0;
    for (uint32_t rest = (uint32_t)pid; count == 0 || rest; rest /= 10) digits[count++] = (char)('0' + rest % 10);
    size_t at = strlen(path);
    while (count) path[at++] = digits[--count];
    memcpy(path + at, "/stat", 6);
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    long length = tc_raw_syscall(SYS_read, fd, buffer, sizeof(buffer) - 1);
    tc_raw_syscall(SYS_close, fd);
    if (length <= 0) return 0;
    buffer[length] = 0;
    const char *field = strrchr(buffer, ')');
    if (!field) return 0;
    /* Field 2 ends at the last ')'; field 22 is 20 fields further. */
    for (int n = 0; n < 20 && field; n++) field = strchr(field + 1, ' ');
    if (!field) return 0;
    uint64_t ticks = 0;
    for (field++; *field >= '0' && *field <= '9'; field++) ticks = ticks * 10 + (uint64_t)(*field - '0');
    return ticks;
}

static int32_t lock_owner_pid(uint64_t owner) { return (int32_t)(owner & 0xffffffffu); }
static uint32_t lock_owner_started(uint64_t owner) { return (uint32_t)(owner >> 32); }

/* This process as a lock owner; recomputed after fork. */
static uint64_t own_lock_word(void) {
    static uint64_t cached;
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    uint64_t word = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (lock_owner_pid(word) != pid) {
        uint64_t started = process_start_time(pid);
        word = tc_lock_owner(pid, started ? started : 1);
        __atomic_store_n(&cached, word, __ATOMIC_RELAXED);
    }
    return word;
}

/* The holder named by `owner` is gone: its pid is free, or names a process that started at another time. */
static int lock_owner_gone(uint64_t owner) {
    int32_t pid = lock_owner_pid(owner);
    if (tc_raw_syscall(SYS_kill, pid, 0) == -ESRCH) return 1;
    uint64_t started = process_start_time(pid);
    return started != 0 && (uint32_t)started != lock_owner_started(owner);
}

static int lock_owner_plausible(uint64_t owner) {
    int32_t pid = lock_owner_pid(owner);
    /* Start times are clock ticks after boot: at most 1000 a second (CONFIG_HZ). */
    uint64_t uptime_ticks = (uint64_t)tc_real_ns(CLOCK_BOOTTIME) / 1000000 + 1000;
    return pid > 0 && pid <= TC_PID_MAX && lock_owner_started(owner) != 0 &&
           (uptime_ticks > UINT32_MAX || lock_owner_started(owner) <= uptime_ticks);
}

int tc_segment_lock_damaged(const struct tc_segment *segment) {
    uint64_t owner = __atomic_load_n(&segment->writer_lock, __ATOMIC_ACQUIRE);
    return owner != 0 && !lock_owner_plausible(owner);
}

/*
 * A compare-and-swap lock: the lock is held for a verb's few microseconds,
 * and no libc lock is involved (in the shim, pthread's timed locks are the
 * shim's own interposers). Its word names its holder, so a dead holder is
 * replaced and a damaged word is reported.
 *
 * For its first millisecond a waiter yields instead of sleeping: a thread
 * asleep in a real clock_nanosleep looks, to an auto-advance scheduler, like
 * one blocked on something outside time, so a program whose clock set met a
 * verb would let the scheduler step past it. A yielding thread stays
 * runnable. Only a holder kept off its CPU for longer makes it sleep.
 */
int tc_segment_lock(struct tc_segment *segment, int64_t timeout_ns, struct tc_failure *failure) {
    uint64_t self = own_lock_word();
    int64_t started = tc_real_ns(CLOCK_MONOTONIC);
    int64_t deadline = started + timeout_ns;
    for (;;) {
        uint64_t owner = __atomic_load_n(&segment->writer_lock, __ATOMIC_ACQUIRE);
        if (owner == 0 || (lock_owner_plausible(owner) && owner != self && lock_owner_gone(owner))) {
            if (__atomic_compare_exchange_n(&segment->writer_lock, &owner, self, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return TC_OK;
            continue;
        }
        if (!lock_owner_plausible(owner)) return fail(failure, TC_E_CORRUPT);
        int64_t now = tc_real_ns(CLOCK_MONOTONIC);
        if (now >= deadline) return fail(failure, TC_E_LOCK_TIMEOUT);
        if (now - started < LOCK_YIELD_NS) {
            tc_raw_syscall(SYS_sched_yield, 0);
        } else {
            struct timespec pause = {0, 200000};
            tc_raw_syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &pause, 0);
        }
    }
}

/* One attempt, never a wait: for a writer whose verb may as well be skipped when another is under way. */
int tc_segment_try_lock(struct tc_segment *segment) {
    uint64_t owner = __atomic_load_n(&segment->writer_lock, __ATOMIC_ACQUIRE);
    if (owner != 0 && !(lock_owner_plausible(owner) && owner != own_lock_word() && lock_owner_gone(owner)))
        return TC_E_LOCK_TIMEOUT;
    return __atomic_compare_exchange_n(&segment->writer_lock, &owner, own_lock_word(), 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE)
               ? TC_OK
               : TC_E_LOCK_TIMEOUT;
}

void tc_segment_unlock(struct tc_segment *segment) {
    uint64_t self = own_lock_word();
    __atomic_compare_exchange_n(&segment->writer_lock, &self, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void tc_segment_mark_removed(struct tc_segment *segment) {
    __atomic_fetch_or(&segment->header.flags, TC_SEGMENT_FLAG_REMOVED, __ATOMIC_RELEASE);
    __atomic_fetch_add(&segment->generation, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &segment->generation, FUTEX_WAKE, INT_MAX, 0, 0, 0);
}

/* ---- the process table ---- */

struct tc_proc_slot *tc_segment_procs(const struct tc_segment *segment) {
    return (struct tc_proc_slot *)((char *)segment + segment->header.proc_offset);
}

static int claim_free_slot(struct tc_segment *segment, int32_t pid, int64_t registered) {
    struct tc_proc_slot *slots = tc_segment_procs(segment);
    for (uint32_t i = 0; i < segment->header.proc_capacity; i++) {
        int32_t expected = 0;
        if (__atomic_load_n(&slots[i].pid, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&slots[i].pid, &expected, pid, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&slots[i].registered, registered, __ATOMIC_RELEASE);
            return (int)i;
        }
    }
    return -1;
}

int tc_proc_register(struct tc_segment *segment, int32_t pid, int64_t registered) {
    struct tc_proc_slot *slots = tc_segment_procs(segment);
    uint32_t capacity = segment->header.proc_capacity;
    /* After exec the same pid registers again: keep one entry. */
    for (uint32_t i = 0; i < capacity; i++) {
        if (__atomic_load_n(&slots[i].pid, __ATOMIC_RELAXED) == pid) {
            __atomic_store_n(&slots[i].registered, registered, __ATOMIC_RELEASE);
            return (int)i;
        }
    }
    int slot = claim_free_slot(segment, pid, registered);
    if (slot >= 0) return slot;
    /* Full: free the entries of processes that died without exiting normally. */
    for (uint32_t i = 0; i < capacity; i++) {
        int32_t other = __atomic_load_n(&slots[i].pid, __ATOMIC_RELAXED);
        if (other > 0 && tc_raw_syscall(SYS_kill, other, 0) == -ESRCH)
            __atomic_compare_exchange_n(&slots[i].pid, &other, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
    return claim_free_slot(segment, pid, registered);
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
                 int64_t registered, uint64_t descriptors) {
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
        __atomic_store_n(&slots[i].owner, tc_wait_owner(pid, tid), __ATOMIC_RELEASE);
        __atomic_fetch_or(&segment->wait_map[i / 64], 1ULL << (i % 64), __ATOMIC_SEQ_CST);
        note_wait_change(segment);
        return (int)i;
    }
    return -1;
}

int tc_wait_claim(struct tc_segment *segment, int32_t pid, int32_t tid, int kind, int vclock, int64_t deadline,
                  int64_t registered) {
    return claim(segment, pid, tid, kind, vclock, deadline, registered, 0);
}

int tc_wait_claim_timer(struct tc_segment *segment, int32_t pid, int kind, int vclock, int64_t deadline,
                        int64_t registered, uint64_t descriptors) {
    return claim(segment, pid, 0, kind, vclock, deadline, registered, descriptors);
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

/* ---- waiting for the session to change ---- */

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

struct tc_futex_waitv {
    uint64_t value;
    uint64_t address;
    uint32_t flags;
    uint32_t reserved;
};

#define TC_FUTEX2_SIZE_U32 0x02
#define TC_FUTEX2_PRIVATE 128

int tc_segment_wait_for_change(struct tc_segment *segment, const uint32_t *shared_word, uint32_t shared_value,
                               const uint32_t *local_word, uint32_t local_value, int64_t timeout_ns) {
    static int no_waitv;
    const int64_t year = 365LL * 86400 * TC_NS_PER_SECOND;
    int64_t wait_ns = timeout_ns < 0 || timeout_ns > year ? year : timeout_ns;
    struct timespec deadline = tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + wait_ns);
    (void)segment;
    if (local_word && !__atomic_load_n(&no_waitv, __ATOMIC_RELAXED)) {
        struct tc_futex_waitv waiters[2] = {
            {shared_value, (uint64_t)(uintptr_t)shared_word, TC_FUTEX2_SIZE_U32, 0},
            {local_value, (uint64_t)(uintptr_t)local_word, TC_FUTEX2_SIZE_U32 | TC_FUTEX2_PRIVATE, 0},
        };
        long result = tc_raw_syscall(SYS_futex_waitv, waiters, 2, 0, &deadline, CLOCK_MONOTONIC);
        if (result != -ENOSYS) return result == -ETIMEDOUT ? ETIMEDOUT : result == -EINTR ? EINTR : 0;
        __atomic_store_n(&no_waitv, 1, __ATOMIC_RELAXED);
    }
    if (local_word) {
        /* Without futex_waitv a change of the local word is noticed within 20 ms. */
        struct timespec soon = tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + 20 * 1000 * 1000);
        if (soon.tv_sec < deadline.tv_sec || (soon.tv_sec == deadline.tv_sec && soon.tv_nsec < deadline.tv_nsec))
            deadline = soon;
        if (__atomic_load_n(local_word, __ATOMIC_ACQUIRE) != local_value) return 0;
    }
    long result = tc_raw_syscall(SYS_futex, shared_word, FUTEX_WAIT_BITSET, shared_value, &deadline, 0,
                                 FUTEX_BITSET_MATCH_ANY);
    return result == -ETIMEDOUT ? ETIMEDOUT : result == -EINTR ? EINTR : 0;
}

long tc_futex_wait_either(const uint32_t *shared_word, uint32_t shared_value, const uint32_t *word, uint32_t value,
                          int word_private, int64_t timeout_ns) {
    const int64_t year = 365LL * 86400 * TC_NS_PER_SECOND;
    int64_t wait_ns = timeout_ns < 0 || timeout_ns > year ? year : timeout_ns;
    struct timespec deadline = tc_timespec_from_ns(tc_real_ns(CLOCK_MONOTONIC) + wait_ns);
    struct tc_futex_waitv waiters[2] = {
        {value, (uint64_t)(uintptr_t)word, TC_FUTEX2_SIZE_U32 | (word_private ? TC_FUTEX2_PRIVATE : 0), 0},
        {shared_value, (uint64_t)(uintptr_t)shared_word, TC_FUTEX2_SIZE_U32, 0},
    };
    return tc_raw_syscall(SYS_futex_waitv, waiters, 2, 0, &deadline, CLOCK_MONOTONIC);
}

void tc_segment_watch_waits(struct tc_segment *segment, int watching) {
    __atomic_fetch_add(&segment->wait_watchers, watching ? 1u : (uint32_t)-1, __ATOMIC_ACQ_REL);
}

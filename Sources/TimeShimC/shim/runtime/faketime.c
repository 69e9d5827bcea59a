/*
 * A process on libfaketime's settings: its clock's configuration, the
 * reads that need work per call, and its waits' deadlines (faketime.h).
 * libfaketime's arithmetic is restated here as verbs on a segment, so the
 * timeline itself is computed by the core like any session's.
 */
#define _GNU_SOURCE
#include "faketime.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

struct tc_faketime_process tc_faketime = {
    .start_after_ns = -1, .stop_after_ns = -1, .start_after_calls = -1, .stop_after_calls = -1, .reread_every_ns = -1,
};

/* Readings counted for the NUMCALLS conditions (libfaketime's per-process callcounter). */
static int64_t calls;
/* The timestamp file's re-read: one thread at a time, the others read the clock as it stands. */
static int rereading;
static int64_t last_reread = INT64_MIN;
/* FAKETIME's value last applied (libfaketime re-parses only a changed one, except '%'). */
static char applied_text[256];
/* Whether readings step the clock ("i"): the spec in effect says so, kept apart so that a reader never sees it
   half-copied while a re-read replaces the spec. */
static int stepping;

/* ---- the verbs ---- */

static int apply_verb(struct tc_segment *segment, int kind, int wall, int64_t value, uint64_t rate) {
    struct tc_verb verb = {.kind = kind, .wall = wall, .value = value, .rate = rate};
    int result = tc_segment_lock(segment, 5 * TC_NS_PER_SECOND, NULL);
    if (result != TC_OK) return result;
    result = tc_segment_apply(segment, &verb, NULL);
    tc_segment_unlock(segment);
    return result;
}

/* Real ns from the tree's start (its clock segment's creation: libfaketime's shared start time) to `real_monotonic`. */
static int64_t since_tree_start(int64_t real_monotonic) {
    return real_monotonic - tc_faketime.clock->header.base[TC_VCLOCK_MONOTONIC];
}

static int64_t scaled(int64_t real_ns, uint64_t rate) {
    return real_ns < 0 ? -tc_scale(-real_ns, rate) : tc_scale(real_ns, rate);
}

/* The mtime of FAKETIME_FOLLOW_FILE, in ns; 0 if it cannot be read. */
static int follow_file_time(int64_t *instant) {
    struct stat info;
    if (!tc_faketime.follow_file || tc_raw_syscall(SYS_newfstatat, AT_FDCWD, tc_faketime.follow_file, &info, 0) != 0)
        return 0;
    *instant = (int64_t)info.st_mtim.tv_sec * TC_NS_PER_SECOND;
    return 1;
}

void tc_faketime_set_spec(const struct tc_faketime_spec *spec) {
    tc_faketime.spec = *spec;
    int kind = spec->kind;
    __atomic_store_n(&stepping, spec->has_increment && kind != TC_FAKETIME_FROZEN && kind != TC_FAKETIME_MODIFIERS,
                     __ATOMIC_RELEASE);
}

int tc_faketime_apply_spec(const struct tc_faketime_spec *spec, int first) {
    struct tc_segment *clock = tc_faketime.clock;
    int64_t now = tc_real_ns(CLOCK_MONOTONIC);
    int kind = spec->kind;
    int64_t start = spec->instant;
    if (kind == TC_FAKETIME_FOLLOW_FILE && !follow_file_time(&start)) return TC_E_MISSING;
    /* An '@' (and '%') starts where it is read, or with FAKETIME_DONT_RESET where the tree started. */
    int64_t started = tc_faketime.dont_reset ? since_tree_start(now) : 0;
    int64_t wall = 0;
    switch (kind) {
    case TC_FAKETIME_FROZEN: wall = spec->instant; break;
    case TC_FAKETIME_START_AT:
    case TC_FAKETIME_FOLLOW_FILE: wall = start + scaled(started, spec->rate); break;
    case TC_FAKETIME_OFFSET: {
        /* libfaketime: the tree's start plus the offset, running at the rate since then. */
        int64_t since = since_tree_start(now);
        wall = clock->header.created_realtime + spec->offset + scaled(since, spec->rate);
        break;
    }
    default: break;
    }
    int result;
    int stands_still = kind == TC_FAKETIME_FROZEN || (spec->has_increment && kind != TC_FAKETIME_MODIFIERS);
    if (!first && tc_faketime.smooth_rate_changes) {
        /* FAKETIME_XRESET: the clock goes on from where it stands, at the new rate. */
        result = stands_still ? apply_verb(clock, TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0)
                              : apply_verb(clock, TC_VERB_RESUME, TC_WALL_KEEP, 0, spec->rate);
    } else if (kind == TC_FAKETIME_MODIFIERS) {
        result = apply_verb(clock, TC_VERB_RESET, TC_WALL_KEEP, 0, 0);
    } else if (stands_still) {
        result = apply_verb(clock, TC_VERB_FREEZE, TC_WALL_ABSOLUTE, wall, 0);
    } else {
        result = apply_verb(clock, TC_VERB_RESUME, TC_WALL_KEEP, 0, spec->rate);
        if (result == TC_OK) result = apply_verb(clock, TC_VERB_SET_WALL, TC_WALL_ABSOLUTE, wall, 0);
    }
    if (result != TC_OK) return result;
    /* Waits measured apart from a clock that stands still last 1/RATE of their length, as libfaketime's sleeps do. */
    struct tc_segment *waits = tc_faketime.waits;
    if (waits && waits != clock && tc_segment_rate(waits) != spec->rate)
        result = apply_verb(waits, TC_VERB_SET_RATE, TC_WALL_KEEP, 0, spec->rate);
    if (result == TC_OK) tc_faketime_set_spec(spec);
    return result;
}

/* ---- FAKETIME's value from a file, re-read as libfaketime's cache does ---- */

/* libfaketime's rule: the first line longer than one character not starting with ' ', '#' or ';'. */
static int first_setting(const char *path, char *line, size_t capacity) {
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -1;
    char buffer[1024];
    long length = tc_raw_syscall(SYS_read, fd, buffer, sizeof buffer - 1);
    tc_raw_syscall(SYS_close, fd);
    if (length < 0) length = 0;
    buffer[length] = 0;
    for (char *at = buffer; *at;) {
        char *end = strchrnul(at, '\n');
        size_t size = (size_t)(end - at);
        while (size > 0 && (at[size - 1] == '\r')) size--;
        if (size > 1 && at[0] != ' ' && at[0] != '#' && at[0] != ';' && size < capacity) {
            memcpy(line, at, size);
            line[size] = 0;
            return 1;
        }
        at = *end ? end + 1 : end;
    }
    return 0;
}

/* The value the files hold now: 1 with `text`, 0 when no file has a setting line (keep the last), −1 when none opens. */
static int current_text(char *text, size_t capacity) {
    const char *candidates[] = {tc_faketime.timestamp_file, tc_faketime.home_faketimerc, "/etc/faketimerc"};
    for (unsigned i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (!candidates[i] || !*candidates[i]) continue;
        int found = first_setting(candidates[i], text, capacity);
        if (found >= 0) return found;
    }
    return -1;
}

static void copy_text(char *target, size_t capacity, const char *text) {
    size_t length = strnlen(text, capacity - 1);
    memcpy(target, text, length);
    target[length] = 0;
}

const char *tc_faketime_initial_text(char *buffer, size_t capacity) {
    if (tc_faketime.fixed_text) return tc_faketime.fixed_text;
    return current_text(buffer, capacity) > 0 ? buffer : "+0";
}

static void reread(void) {
    if (tc_faketime.reread_every_ns < 0) return;
    int64_t now = tc_real_ns(CLOCK_MONOTONIC);
    int64_t last = __atomic_load_n(&last_reread, __ATOMIC_RELAXED);
    if (last != INT64_MIN && now - last < tc_faketime.reread_every_ns) return;
    int expected = 0;
    if (!__atomic_compare_exchange_n(&rereading, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&last_reread, now, __ATOMIC_RELAXED);
    char text[sizeof applied_text];
    int found = 1;
    if (tc_faketime.fixed_text) copy_text(text, sizeof text, tc_faketime.fixed_text);
    else if ((found = current_text(text, sizeof text)) < 0) copy_text(text, sizeof text, "+0");  /* libfaketime's default */
    if (found != 0 && (strcmp(text, applied_text) != 0 || text[0] == '%')) {
        struct tc_faketime_spec spec;
        /* A value that does not parse (a file caught half-written) leaves the clock as it is. */
        if (!tc_faketime_parse(text, tc_faketime.format, &spec) && tc_faketime_apply_spec(&spec, 0) == TC_OK)
            memcpy(applied_text, text, sizeof applied_text);
    }
    __atomic_store_n(&rereading, 0, __ATOMIC_RELEASE);
}

void tc_faketime_note_applied(const char *text) {
    copy_text(applied_text, sizeof applied_text, text);
    __atomic_store_n(&last_reread, tc_real_ns(CLOCK_MONOTONIC), __ATOMIC_RELAXED);
}

/* ---- reading ---- */

/* Whether the start and stop conditions let the clock be faked now, after `count` readings. */
static int faking_now(int64_t count) {
    const struct tc_faketime_process *p = &tc_faketime;
    if (p->start_after_ns >= 0 || p->stop_after_ns >= 0) {
        int64_t since = since_tree_start(tc_real_ns(CLOCK_MONOTONIC));
        if (p->start_after_ns >= 0 && since < p->start_after_ns) return 0;
        if (p->stop_after_ns >= 0 && since >= p->stop_after_ns) return 0;
    }
    if (p->start_after_calls >= 0 && count < p->start_after_calls) return 0;
    if (p->stop_after_calls >= 0 && count >= p->stop_after_calls) return 0;
    return 1;
}

/* libfaketime's "i": every reading returns the clock, then moves every clock on by the increment, for the whole tree. */
static void read_and_step(int vclock, struct timespec *value) {
    struct tc_segment *clock = tc_faketime.clock;
    if (tc_segment_lock(clock, 5 * TC_NS_PER_SECOND, NULL) != TC_OK) {
        tc_segment_read_into(clock, vclock, value);
        return;
    }
    tc_segment_read_into(clock, vclock, value);
    struct tc_verb verb = {.kind = TC_VERB_ADVANCE, .value = __atomic_load_n(&tc_faketime.spec.increment, __ATOMIC_RELAXED)};
    tc_segment_apply(clock, &verb, NULL);
    tc_segment_unlock(clock);
}

int tc_faketime_read(int vclock, struct timespec *value) {
    if (tc_faketime.monotonic_real && tc_track_of(vclock) == TC_TRACK_ELAPSED) return 0;
    int64_t count = 0;
    if (tc_faketime.start_after_calls >= 0 || tc_faketime.stop_after_calls >= 0)
        count = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    reread();
    if (!faking_now(count)) return 0;
    if (__atomic_load_n(&stepping, __ATOMIC_ACQUIRE)) read_and_step(vclock, value);
    else tc_segment_read_into(tc_faketime.clock, vclock, value);
    return 1;
}

static const clockid_t clock_ids[TC_VCLOCK_COUNT] = {
    [TC_VCLOCK_MONOTONIC] = CLOCK_MONOTONIC, [TC_VCLOCK_MONOTONIC_RAW] = CLOCK_MONOTONIC_RAW,
    [TC_VCLOCK_BOOTTIME] = CLOCK_BOOTTIME,   [TC_VCLOCK_REALTIME] = CLOCK_REALTIME,
    [TC_VCLOCK_TAI] = CLOCK_TAI,
};

/* What the program reads on `vclock` now, without counting a reading or stepping the clock. */
static int64_t seen(int vclock) {
    int faked = !(tc_faketime.monotonic_real && tc_track_of(vclock) == TC_TRACK_ELAPSED) &&
                faking_now(__atomic_load_n(&calls, __ATOMIC_RELAXED));
    if (faked) return tc_segment_read(tc_faketime.clock, vclock);
    return tc_real_ns(clock_ids[vclock]);
}

int64_t tc_faketime_wait_deadline(struct tc_segment *waits, int vclock, int64_t absolute) {
    if (!tc_faketime_active() || tc_faketime.waits == tc_faketime.clock || !tc_vclock_valid(vclock)) return absolute;
    /* How far ahead of what the program reads the deadline lies is how long the wait lasts, from now. */
    int64_t distance = absolute - seen(vclock);
    int64_t now = tc_segment_read(waits, vclock);
    if (distance <= 0) return now;
    return now > INT64_MAX - distance ? INT64_MAX : now + distance;
}

/* ---- file times (FAKE_STAT): every instant through the clock's present line, as libfaketime maps them ---- */

int64_t tc_faketime_file_time(int64_t real) {
    struct tc_segment *clock = tc_faketime.clock;
    int64_t now = tc_segment_read(clock, TC_VCLOCK_REALTIME), distance = real - tc_real_ns(CLOCK_REALTIME);
    int64_t moved = scaled(distance, tc_segment_clock_rate(clock, TC_VCLOCK_REALTIME));
    int64_t result = now + moved;
    return result < TC_INSTANT_MIN ? TC_INSTANT_MIN : result > TC_INSTANT_MAX ? TC_INSTANT_MAX : result;
}

int64_t tc_faketime_file_time_back(int64_t virtual_time) {
    struct tc_segment *clock = tc_faketime.clock;
    uint64_t rate = tc_segment_clock_rate(clock, TC_VCLOCK_REALTIME);
    if (rate == 0) return virtual_time;  /* a clock that stands still shows every file at its instant */
    __int128 distance = (__int128)virtual_time - tc_segment_read(clock, TC_VCLOCK_REALTIME);
    __int128 real = tc_real_ns(CLOCK_REALTIME) + distance * ((__int128)1 << TC_RATE_SHIFT) / (__int128)rate;
    return real < TC_INSTANT_MIN ? TC_INSTANT_MIN : real > TC_INSTANT_MAX ? TC_INSTANT_MAX : (int64_t)real;
}

/* ---- the tree's segment file: removed by the last of its processes to leave ---- */

static const char *tree_path;
static uint64_t tree_device, tree_inode;
static int tree_slot = -1;
/* Who registered: a vfork child shares these variables and must leave them alone. */
static int32_t tree_pid;

static void register_in_tree(void) {
    tree_pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    tree_slot = tc_proc_register(tc_faketime.clock, tree_pid, tc_real_ns(CLOCK_BOOTTIME), (int32_t)tc_raw_syscall(SYS_getppid, 0));
}

void tc_faketime_join_tree(const char *path, uint64_t device, uint64_t inode) {
    tree_path = path;
    tree_device = device;
    tree_inode = inode;
    register_in_tree();
}

int tc_faketime_others_alive(const struct tc_segment *segment, int32_t self) {
    static struct tc_proc_slot slots[1024];
    uint32_t count = tc_proc_collect(segment, slots, sizeof slots / sizeof slots[0]);
    for (uint32_t i = 0; i < count; i++) {
        if (slots[i].pid == self) continue;
        long alive = tc_raw_syscall(SYS_kill, slots[i].pid, 0);
        if (alive == 0 || alive == -EPERM) return 1;
    }
    return 0;
}

void tc_faketime_leave_tree(void) {
    struct tc_segment *clock = tc_faketime.clock;
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    if (!tree_path || !clock || pid != tree_pid) return;
    int slot = __atomic_exchange_n(&tree_slot, -1, __ATOMIC_ACQ_REL);
    if (slot < 0) return;
    tc_proc_unregister(clock, slot, pid);
    if (tc_faketime_others_alive(clock, pid)) return;
    struct stat info;
    if (tc_raw_syscall(SYS_newfstatat, AT_FDCWD, tree_path, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_dev == tree_device &&
        info.st_ino == tree_inode)
        tc_raw_syscall(SYS_unlinkat, AT_FDCWD, tree_path, 0);
}

__attribute__((destructor)) static void leave_tree_at_exit(void) { tc_faketime_leave_tree(); }

void tc_faketime_after_fork_in_child(void) {
    __atomic_store_n(&rereading, 0, __ATOMIC_RELAXED);
    if (tree_slot >= 0) register_in_tree();
}

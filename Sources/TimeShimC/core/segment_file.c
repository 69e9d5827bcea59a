/*
 * The segment as a file (timectl_segment_file.h): opening and mapping it,
 * refusing anything untrustworthy, creating and formatting a new one.
 */
#define _GNU_SOURCE
#include "timectl_segment_file.h"
#include "timectl_segment_checks.h"
#include "timectl_segment_latch.h"
#include "timectl_segment_lock.h"
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

/* musl before 1.2.5 declares no statx: the kernel's header has it. With __GLIBC__ set while it is read, that header
   leaves the S_* macros to libc's <sys/stat.h>, which musl defines with other spellings. */
#if !defined(STATX_TYPE) && !defined(__GLIBC__)
#define __GLIBC__ 2
#include <linux/stat.h>
#undef __GLIBC__
#endif

#define TC_PROC_OFFSET ((uint32_t)((sizeof(struct tc_segment) + 63) & ~(size_t)63))
#define TC_PROC_SLOTS 1024u
#define TC_WAIT_OFFSET (TC_PROC_OFFSET + TC_PROC_SLOTS * (uint32_t)sizeof(struct tc_proc_slot))
#define TC_WAIT_SLOTS 4096u
#define TC_HISTORY_OFFSET (TC_WAIT_OFFSET + TC_WAIT_SLOTS * (uint32_t)sizeof(struct tc_wait_slot))

uint64_t tc_segment_expected_size(void) {
    uint64_t size = TC_HISTORY_OFFSET + (uint64_t)TC_HISTORY_ENTRIES * sizeof(struct tc_history_entry);
    return (size + 4095) & ~(uint64_t)4095;
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
        if (!tc_split_valid(h->clock_offset[clock]) ||
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
    if (address < 0 && address > -4096) return tc_segment_fail_syscall(failure, "mmap", address);
    mapping->segment = (struct tc_segment *)address;
    mapping->size = size;
    return TC_OK;
}

int tc_segment_open(int dirfd, const char *path, struct tc_mapping *mapping, struct tc_failure *failure) {
    mapping->segment = NULL;
    mapping->size = 0;
    long fd = tc_raw_syscall(SYS_openat, dirfd, path,
                             O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
    if (fd == -ENOENT) return tc_segment_fail(failure, TC_E_MISSING);
    if (fd == -ELOOP) return tc_segment_fail(failure, TC_E_SYMLINK);
    if (fd == -EISDIR || fd == -ENXIO) return tc_segment_fail(failure, TC_E_NOT_REGULAR);
    if (fd < 0) return tc_segment_fail_syscall(failure, "open", fd);

    struct stat st;
    long r = tc_raw_syscall(SYS_fstat, fd, &st);
    int result = TC_OK;
    uint32_t euid = (uint32_t)tc_raw_syscall(SYS_geteuid, 0);
    if (r < 0) result = tc_segment_fail_syscall(failure, "fstat", r);
    else if (!S_ISREG(st.st_mode)) result = tc_segment_fail(failure, TC_E_NOT_REGULAR);
    else if (st.st_uid != euid) {
        result = tc_segment_fail(failure, TC_E_NOT_OWNER);
        if (failure) failure->found_uid = st.st_uid;
    } else if (st.st_mode & 077) result = tc_segment_fail(failure, TC_E_MODE);
    else if ((uint64_t)st.st_size < sizeof(struct tc_segment)) result = tc_segment_fail(failure, TC_E_TRUNCATED);
    else result = map_fd((int)fd, (uint64_t)st.st_size, mapping, failure);
    tc_raw_syscall(SYS_close, fd);
    if (result != TC_OK) return result;

    result = tc_segment_validate(mapping->segment, mapping->size, st.st_uid);
    if (result != TC_OK) {
        if (failure && result == TC_E_VERSION) failure->found_version = mapping->segment->header.version;
        tc_segment_unmap(mapping);
        return tc_segment_fail(failure, result);
    }
    return TC_OK;
}

void tc_segment_unmap(struct tc_mapping *mapping) {
    if (mapping->segment) tc_raw_syscall(SYS_munmap, mapping->segment, mapping->size);
    mapping->segment = NULL;
    mapping->size = 0;
}

/*
 * A file time that tells files written before from files written after
 * (timectl_segment_file.h). Since Linux 6.13 ext4, xfs, btrfs and tmpfs
 * have multigrain time stamps: a file is stamped from the coarse clock
 * (a tick, 4 ms here), unless its times were read since its last change and
 * the coarse clock has not moved past them — then from the fine clock, and
 * no file of theirs is stamped earlier than that fine stamp from then on
 * (one floor for all of them). So: read the file's times, touch it, read
 * them again. A stamp from the fine clock is at or after the real time read
 * before the touch: that is the boundary, exact to the nanosecond. A coarse
 * one (the file last changed before this tick) is not, but it leaves the
 * file changed in this tick: the next touch is stamped finely. Where every
 * stamp is coarse (file systems or kernels without multigrain stamps), no
 * boundary.
 */
static int changed_at(int fd, int64_t *ns) {
    struct statx times;
    if (tc_raw_syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_CTIME, &times) != 0 || !(times.stx_mask & STATX_CTIME))
        return 0;
    *ns = (int64_t)times.stx_ctime.tv_sec * TC_NS_PER_SECOND + times.stx_ctime.tv_nsec;
    return 1;
}

int64_t tc_file_time_boundary(int fd) {
    int64_t stamp;
    if (fd < 0 || !changed_at(fd, &stamp)) return 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int64_t before = tc_real_ns(CLOCK_REALTIME);
        if (tc_raw_syscall(SYS_utimensat, fd, 0, 0, 0) != 0 || !changed_at(fd, &stamp)) return 0;
        if (stamp >= before) return stamp;
    }
    return 0;
}

static void format_segment(struct tc_segment *segment, uint64_t size, const char *name, const int64_t *origin,
                           int64_t boundary) {
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
    int64_t real_monotonic = tc_real_ns(CLOCK_MONOTONIC);
    int64_t *base = h->base;
    int64_t tai_offset = TC_PINNED_TAI_OFFSET_NS;
    if (origin) {
        base[TC_VCLOCK_MONOTONIC] = base[TC_VCLOCK_MONOTONIC_RAW] = base[TC_VCLOCK_BOOTTIME] = *origin;
        base[TC_VCLOCK_REALTIME] = tc_real_ns(CLOCK_REALTIME);
    } else {
        base[TC_VCLOCK_MONOTONIC] = real_monotonic;
        base[TC_VCLOCK_MONOTONIC_RAW] = tc_real_ns(CLOCK_MONOTONIC_RAW);
        base[TC_VCLOCK_BOOTTIME] = tc_real_ns(CLOCK_BOOTTIME);
        base[TC_VCLOCK_REALTIME] = tc_real_ns(CLOCK_REALTIME);
        /* The kernel's TAI offset is whole seconds; reading the two clocks one
           after the other must not add the nanoseconds in between. */
        tai_offset = tc_real_ns(CLOCK_TAI) - base[TC_VCLOCK_REALTIME];
        tai_offset = (tai_offset + TC_NS_PER_SECOND / 2) / TC_NS_PER_SECOND * TC_NS_PER_SECOND;
    }
    base[TC_VCLOCK_TAI] = base[TC_VCLOCK_REALTIME] + tai_offset;
    h->created_realtime = boundary ? boundary : base[TC_VCLOCK_REALTIME];
    for (int clock = 0; clock < TC_VCLOCK_COUNT; clock++) {
        int track_clock = tc_track_of(clock) == TC_TRACK_WALL ? TC_VCLOCK_REALTIME : TC_VCLOCK_MONOTONIC;
        h->clock_offset[clock] = tc_split_ns(base[clock] - base[track_clock]);
    }

    /* A pinned session starts frozen at its origin: its clocks start when a verb starts them, not at creation. */
    struct tc_anchors anchors = {.t0 = real_monotonic, .rate = origin ? 0 : TC_RATE_ONE};
    anchors.track[TC_TRACK_ELAPSED] = base[TC_VCLOCK_MONOTONIC];
    anchors.track[TC_TRACK_WALL] = base[TC_VCLOCK_REALTIME];
    for (int copy = 0; copy < 2; copy++) {
        tc_anchors_pack(&segment->timeline.copy[copy].state, &anchors);
        segment->timeline.copy[copy].check = tc_state_check(&segment->timeline.copy[copy].state, NULL);
    }
    h->check = tc_header_check(h);
    tc_history_append(segment, h->created_realtime, base[TC_VCLOCK_REALTIME],
                      anchors.rate | (boundary ? TC_HISTORY_EXACT_START : 0));
}

int tc_segment_create(int dirfd, const char *name, const char *file_name, const int64_t *origin,
                      struct tc_mapping *mapping, struct tc_failure *failure) {
    static unsigned counter;
    mapping->segment = NULL;
    mapping->size = 0;
    if (strlen(name) >= TC_SESSION_NAME_MAX) return tc_segment_fail(failure, TC_E_INVALID);
    if (origin && !tc_instant_in_range(*origin)) return tc_segment_fail(failure, TC_E_INVALID);
    tc_realclock_init();

    char temporary[PATH_MAX];
    long pid = tc_raw_syscall(SYS_getpid, 0);
    unsigned serial = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    if (snprintf(temporary, sizeof(temporary), ".%s.%ld.%u.creating", file_name, pid, serial) >=
        (int)sizeof(temporary))
        return tc_segment_fail(failure, TC_E_INVALID);

    long fd = tc_raw_syscall(SYS_openat, dirfd, temporary,
                             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return tc_segment_fail_syscall(failure, "open", fd);
    uint64_t size = tc_segment_expected_size();
    int result = TC_OK;
    long r = tc_raw_syscall(SYS_fchmod, fd, 0600);
    if (r < 0) result = tc_segment_fail_syscall(failure, "fchmod", r);
    if (result == TC_OK && (r = tc_raw_syscall(SYS_ftruncate, fd, size)) < 0)
        result = tc_segment_fail_syscall(failure, "ftruncate", r);
    if (result == TC_OK) result = map_fd((int)fd, size, mapping, failure);
    int64_t boundary = result == TC_OK ? tc_file_time_boundary((int)fd) : 0;
    tc_raw_syscall(SYS_close, fd);
    if (result == TC_OK) {
        format_segment(mapping->segment, size, name, origin, boundary);
        r = tc_raw_syscall(SYS_linkat, dirfd, temporary, dirfd, file_name, 0);
        if (r == -EEXIST) result = tc_segment_fail(failure, TC_E_EXISTS);
        else if (r < 0) result = tc_segment_fail_syscall(failure, "link", r);
    }
    tc_raw_syscall(SYS_unlinkat, dirfd, temporary, 0);
    if (result != TC_OK) tc_segment_unmap(mapping);
    return result;
}

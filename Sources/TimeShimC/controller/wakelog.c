/*
 * The machine's wake-ups, from the kernel's scheduler tracepoints through
 * perf rings (timectl_wakelog.h). Compiled into TimeControlKit only.
 *
 * One ring per CPU. On each, a CPU-wide perf event on sched:sched_waking
 * writes one sample per wake-up made on that CPU, with the tracepoint's raw
 * fields (who was woken: `pid`; who woke: `common_pid`, the task current
 * when the wake-up was made, or whatever an interrupt interrupted), and a
 * second event on sched:sched_wakeup_new, redirected into the same ring,
 * one per task started. The kernel calls the waking tracepoint in
 * try_to_wake_up() after deciding to wake the task and before making it
 * runnable, holding the task's pi_lock throughout, and a sample's ring head
 * is published before the tracepoint returns: so a record exists before
 * the task it names can run, and a look at the task's wait channel (which
 * takes the same lock) sees it blocked only before the wake-up began.
 */
#define _GNU_SOURCE
#include "timectl_wakelog.h"
#include "timectl_realclock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_fsopen
#define SYS_fsopen 430
#define SYS_fsconfig 431
#define SYS_fsmount 432
#endif
#define FSOPEN_CLOEXEC_FLAG 0x1
#define FSCONFIG_CMD_CREATE_VALUE 6
#define FSMOUNT_CLOEXEC_FLAG 0x1

/* Data pages per CPU (a power of two): 1 MiB, about 20,000 records, what a busy machine makes in a few
   hundred milliseconds on one CPU; a reader that falls behind further loses records, and looks at everything. */
#define RING_PAGES 256
#define MAX_CPUS 1024

struct ring {
    struct perf_event_mmap_page *page;
    const unsigned char *data;
    uint64_t size;
    int waking_fd, started_fd;
};

/* Where the tracepoints' fields lie in a sample's raw data (from their format files). */
struct layout {
    int waking_id, started_id;
    int type_offset, waker_offset, woken_offset;
};

struct tc_wakelog {
    int cpus;
    size_t mapped;
    struct layout layout;
    struct ring rings[];
};

/* A small file's text, NUL-terminated, into `buffer`; −1 when it cannot be read. */
static int read_text(int directory, const char *path, char *buffer, size_t size) {
    int fd = openat(directory, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t total = 0;
    while (total + 1 < size) {
        ssize_t got = read(fd, buffer + total, size - 1 - total);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        total += (size_t)got;
    }
    close(fd);
    buffer[total] = 0;
    return total > 0 ? 0 : -1;
}

/* The offset of the field `name`, `size` bytes wide, in a format file's text
   ("\tfield:pid_t pid;\toffset:24;\tsize:4;..."); −1 when absent or of another size. */
static int field_offset(const char *format, const char *name, int size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s;\toffset:", name);
    const char *found = strstr(format, pattern);
    if (!found) return -1;
    const char *width = strstr(found, "size:");
    if (!width || atoi(width + 5) != size) return -1;
    return atoi(found + strlen(pattern));
}

/* The tracepoints' ids and fields, from tracefs at `directory`. */
static int read_layout(int directory, struct layout *layout) {
    char text[4096];
    if (read_text(directory, "events/sched/sched_waking/id", text, sizeof text) != 0) return -1;
    layout->waking_id = atoi(text);
    if (read_text(directory, "events/sched/sched_wakeup_new/id", text, sizeof text) != 0) return -1;
    layout->started_id = atoi(text);
    int offsets[2][3];
    const char *formats[2] = {"events/sched/sched_waking/format", "events/sched/sched_wakeup_new/format"};
    for (int event = 0; event < 2; event++) {
        if (read_text(directory, formats[event], text, sizeof text) != 0) return -1;
        offsets[event][0] = field_offset(text, "common_type", 2);
        offsets[event][1] = field_offset(text, "common_pid", 4);
        offsets[event][2] = field_offset(text, "pid", 4);
    }
    for (int field = 0; field < 3; field++)
        if (offsets[0][field] < 0 || offsets[0][field] != offsets[1][field]) return -1;
    layout->type_offset = offsets[0][0];
    layout->waker_offset = offsets[0][1];
    layout->woken_offset = offsets[0][2];
    return layout->waking_id > 0 && layout->started_id > 0 ? 0 : -1;
}

/* tracefs where the machine mounts it, else a mount of it that is this process's alone and attached nowhere. */
static int find_layout(struct layout *layout) {
    static const char *const mounted[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
    for (size_t i = 0; i < sizeof mounted / sizeof *mounted; i++) {
        int directory = open(mounted[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (directory < 0) continue;
        int found = read_layout(directory, layout);
        close(directory);
        if (found == 0) return 0;
    }
    int context = (int)syscall(SYS_fsopen, "tracefs", FSOPEN_CLOEXEC_FLAG);
    if (context < 0) return -1;
    int found = -1;
    if (syscall(SYS_fsconfig, context, FSCONFIG_CMD_CREATE_VALUE, NULL, NULL, 0) == 0) {
        int mount = (int)syscall(SYS_fsmount, context, FSMOUNT_CLOEXEC_FLAG, 0);
        if (mount >= 0) {
            found = read_layout(mount, layout);
            close(mount);
        }
    }
    close(context);
    return found;
}

static int open_event(int id, int cpu) {
    struct perf_event_attr attributes;
    memset(&attributes, 0, sizeof attributes);
    attributes.size = sizeof attributes;
    attributes.type = PERF_TYPE_TRACEPOINT;
    attributes.config = (uint64_t)id;
    attributes.sample_period = 1;
    attributes.sample_type = PERF_SAMPLE_RAW;
    /* Never read by poll: no wake-ups of readers. */
    attributes.watermark = 1;
    attributes.wakeup_watermark = RING_PAGES * 4096;
    return (int)syscall(SYS_perf_event_open, &attributes, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/*
 * Closing the last perf event on a tracepoint makes the kernel wait until
 * no CPU can still be in its probe (tracepoint_synchronize_unregister: 30
 * to 80 ms on a shared VM, once per tracepoint), and an open meanwhile waits
 * for that too: every `timectl run` would end that much later, and a run
 * started right after another would begin that much later. So the events
 * are closed last by a grandchild that nobody waits for. It keeps them (and
 * no other descriptor), disabled, until this process has closed its own
 * references (the write end of `done` closes with them), then for LINGER_NS
 * more, so that a run started meanwhile finds the tracepoints still
 * registered and neither its open nor this close waits; then it closes them
 * and exits. Raw system calls only: a child of a multi-threaded process may
 * find libc's locks held. Returns the write end of `done`, or −1 when no
 * grandchild could be made (then this process closes the events itself).
 */
#define LINGER_NS (2 * 1000 * 1000 * 1000LL)

static int close_events_elsewhere(const struct tc_wakelog *log) {
    int done[2];
    if (tc_raw_syscall(SYS_pipe2, done, O_CLOEXEC) < 0) return -1;
    long child = tc_raw_syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (child == 0) {
        if (tc_raw_syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) == 0) {
            /* Every descriptor but the events and `done`: a pipe held here would keep a reader of this process's
               output waiting. */
            int highest = done[0];
            for (int cpu = 0; cpu < log->cpus; cpu++) {
                const struct ring *ring = &log->rings[cpu];
                if (ring->waking_fd > highest) highest = ring->waking_fd;
                if (ring->started_fd > highest) highest = ring->started_fd;
            }
            for (int fd = 0; fd <= highest; fd++) {
                int kept = fd == done[0];
                for (int cpu = 0; cpu < log->cpus && !kept; cpu++)
                    kept = fd == log->rings[cpu].waking_fd || fd == log->rings[cpu].started_fd;
                if (!kept) tc_raw_syscall(SYS_close, fd);
            }
            tc_raw_syscall(SYS_close_range, highest + 1, ~0U, 0);
            for (int cpu = 0; cpu < log->cpus; cpu++) {
                tc_raw_syscall(SYS_ioctl, log->rings[cpu].waking_fd, PERF_EVENT_IOC_DISABLE, 0);
                tc_raw_syscall(SYS_ioctl, log->rings[cpu].started_fd, PERF_EVENT_IOC_DISABLE, 0);
            }
            char byte;
            while (tc_raw_syscall(SYS_read, done[0], &byte, 1) == -EINTR) {}
            struct timespec linger = {LINGER_NS / 1000000000, LINGER_NS % 1000000000};
            while (tc_raw_syscall(SYS_nanosleep, &linger, &linger) == -EINTR) {}
            for (int cpu = 0; cpu < log->cpus; cpu++) {
                tc_raw_syscall(SYS_close, log->rings[cpu].started_fd);
                tc_raw_syscall(SYS_close, log->rings[cpu].waking_fd);
            }
        }
        tc_raw_syscall(SYS_exit_group, 0);
    }
    tc_raw_syscall(SYS_close, done[0]);
    if (child < 0) {
        tc_raw_syscall(SYS_close, done[1]);
        return -1;
    }
    while (tc_raw_syscall(SYS_wait4, child, NULL, __WALL, NULL) == -EINTR) {}
    return done[1];
}

void tc_wakelog_close(struct tc_wakelog *log) {
    if (!log) return;
    for (int cpu = 0; cpu < log->cpus; cpu++)
        if (log->rings[cpu].page) munmap(log->rings[cpu].page, log->mapped);
    int done = log->rings[log->cpus - 1].started_fd >= 0 ? close_events_elsewhere(log) : -1;
    for (int cpu = 0; cpu < log->cpus; cpu++) {
        struct ring *ring = &log->rings[cpu];
        if (ring->started_fd >= 0) close(ring->started_fd);
        if (ring->waking_fd >= 0) close(ring->waking_fd);
    }
    if (done >= 0) close(done);
    free(log);
}

struct tc_wakelog *tc_wakelog_open(void) {
    struct layout layout;
    if (find_layout(&layout) != 0) {
        errno = ENOENT;
        return NULL;
    }
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    if (cpus < 1 || cpus > MAX_CPUS) {
        errno = EINVAL;
        return NULL;
    }
    struct tc_wakelog *log = calloc(1, sizeof *log + (size_t)cpus * sizeof(struct ring));
    if (!log) return NULL;
    log->cpus = (int)cpus;
    log->layout = layout;
    log->mapped = (size_t)(RING_PAGES + 1) * 4096;
    for (int cpu = 0; cpu < log->cpus; cpu++) log->rings[cpu].waking_fd = log->rings[cpu].started_fd = -1;
    /* Every CPU, or none: a CPU left out would wake tasks unseen. */
    for (int cpu = 0; cpu < log->cpus; cpu++) {
        struct ring *ring = &log->rings[cpu];
        ring->waking_fd = open_event(layout.waking_id, cpu);
        if (ring->waking_fd < 0) goto failed;
        void *mapping = mmap(NULL, log->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, ring->waking_fd, 0);
        if (mapping == MAP_FAILED) goto failed;
        ring->page = mapping;
        ring->data = (const unsigned char *)mapping + 4096;
        ring->size = (uint64_t)RING_PAGES * 4096;
        ring->started_fd = open_event(layout.started_id, cpu);
        if (ring->started_fd < 0 || ioctl(ring->started_fd, PERF_EVENT_IOC_SET_OUTPUT, ring->waking_fd) != 0) goto failed;
    }
    return log;
failed:;
    int error = errno;
    tc_wakelog_close(log);
    errno = error;
    return NULL;
}

/* `count` bytes of the ring at `position`, which may wrap round its end. */
static void copy_out(const struct ring *ring, uint64_t position, void *into, size_t count) {
    uint64_t offset = position & (ring->size - 1);
    size_t first = count < ring->size - offset ? count : (size_t)(ring->size - offset);
    memcpy(into, ring->data + offset, first);
    if (first < count) memcpy((unsigned char *)into + first, ring->data, count - first);
}

static int32_t field(const unsigned char *raw, uint32_t raw_size, int offset) {
    int32_t value = 0;
    if (offset >= 0 && (uint32_t)offset + 4 <= raw_size) memcpy(&value, raw + offset, 4);
    return value;
}

static int is_watched(const uint64_t *watched, size_t words, int32_t tid) {
    return tid >= 0 && (size_t)tid / 64 < words && (watched[tid / 64] >> (tid % 64) & 1);
}

struct tc_wakelog_reading tc_wakelog_read(struct tc_wakelog *log, const uint64_t *watched, size_t words, int32_t *woken,
                                          int32_t *starters, int capacity) {
    struct tc_wakelog_reading reading = {0, 0, 0};
    const struct layout *layout = &log->layout;
    for (int cpu = 0; cpu < log->cpus; cpu++) {
        struct ring *ring = &log->rings[cpu];
        uint64_t head = __atomic_load_n(&ring->page->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = ring->page->data_tail;
        while (tail < head) {
            struct perf_event_header header;
            copy_out(ring, tail, &header, sizeof header);
            if (header.size < sizeof header) {
                reading.overflowed = 1;
                break;
            }
            if (header.type != PERF_RECORD_SAMPLE) {
                /* PERF_RECORD_LOST and anything else unexpected: what it stands for is unknown. */
                reading.overflowed = 1;
            } else {
                unsigned char record[256];
                size_t size = header.size < sizeof record ? header.size : sizeof record;
                copy_out(ring, tail, record, size);
                uint32_t raw_size = 0;
                if (size >= sizeof header + 4) memcpy(&raw_size, record + sizeof header, 4);
                const unsigned char *raw = record + sizeof header + 4;
                if (raw_size > size - sizeof header - 4) raw_size = (uint32_t)(size - sizeof header - 4);
                int type = (int)(uint16_t)field(raw, raw_size, layout->type_offset);
                if (type == layout->waking_id) {
                    int32_t tid = field(raw, raw_size, layout->woken_offset);
                    if (!is_watched(watched, words, tid)) {
                    } else if (reading.woken < capacity) {
                        woken[reading.woken++] = tid;
                    } else {
                        reading.overflowed = 1;
                    }
                } else if (type == layout->started_id) {
                    int32_t tid = field(raw, raw_size, layout->waker_offset);
                    if (!is_watched(watched, words, tid)) {
                    } else if (reading.starters < capacity) {
                        starters[reading.starters++] = tid;
                    } else {
                        reading.overflowed = 1;
                    }
                } else {
                    reading.overflowed = 1;
                }
            }
            tail += header.size;
        }
        __atomic_store_n(&ring->page->data_tail, head, __ATOMIC_RELEASE);
    }
    return reading;
}

int tc_wakelog_limit(struct tc_wakelog *log, int32_t lowest, int32_t highest) {
    char woken[96], started[96];
    snprintf(woken, sizeof woken, "pid >= %d && pid <= %d", (int)lowest, (int)highest);
    snprintf(started, sizeof started, "common_pid >= %d && common_pid <= %d", (int)lowest, (int)highest);
    for (int cpu = 0; cpu < log->cpus; cpu++) {
        if (ioctl(log->rings[cpu].waking_fd, PERF_EVENT_IOC_SET_FILTER, woken) != 0) return -1;
        if (ioctl(log->rings[cpu].started_fd, PERF_EVENT_IOC_SET_FILTER, started) != 0) return -1;
    }
    return 0;
}

void tc_wakelog_skip(struct tc_wakelog *log) {
    for (int cpu = 0; cpu < log->cpus; cpu++) {
        struct ring *ring = &log->rings[cpu];
        __atomic_store_n(&ring->page->data_tail, __atomic_load_n(&ring->page->data_head, __ATOMIC_ACQUIRE),
                         __ATOMIC_RELEASE);
    }
}

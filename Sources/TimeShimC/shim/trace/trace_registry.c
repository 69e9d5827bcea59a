/*
 * The registry of a recording or replay: see trace_registry.h, and
 * timectl_trace.h for the file.
 *
 * A process finds its entry (after an exec) or its parent's, and takes the
 * next child ordinal of its parent — in the parent, before the fork, for a
 * fork child, so that a shell's children are numbered in the order it
 * forks them. A process started some other way (posix_spawn, vfork) takes
 * its ordinal when it attaches (replay then pairs it by its arguments:
 * trace_replay.c). Entries are claimed lock-free. Pids are told apart from
 * re-used ones by the process's start time.
 *
 * Threads are numbered in the order their process creates them, which the
 * pthread_create interposer below sees; the shim's own helper thread is not
 * numbered.
 */
#define _GNU_SOURCE
#include "trace_registry.h"
#include "timectl_procfs.h"
#include "trace_mode.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../runtime/threads.h"
#include "../runtime/text.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct tc_registry_header *tc_registry;
struct tc_registry_entry *tc_registry_entries;
uint32_t tc_registry_own_entry = TC_NO_ENTRY;
uint32_t tc_registry_own_image;

static uint32_t threads_numbered;     /* in this image, after the main thread */
static TC_TLS uint32_t fork_ordinal;  /* the child's ordinal, from before_fork to the child */

/* ---- small file helpers (raw system calls: no errno, no interposed entry points) ---- */

static long read_file(const char *path, char *buffer, size_t size) {
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long total = 0;
    for (;;) {
        long n = tc_raw_syscall(SYS_read, fd, buffer + total, size - total);
        if (n <= 0) break;
        total += n;
        if ((size_t)total == size) break;
    }
    tc_raw_syscall(SYS_close, fd);
    return total;
}

void *tc_trace_map_file(const char *path, int writable, uint64_t minimum, uint64_t *size) {
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return NULL;
    struct stat info;
    void *map = NULL;
    if (tc_raw_syscall(SYS_fstat, fd, &info) == 0 && S_ISREG(info.st_mode) && (uint64_t)info.st_size >= minimum &&
        info.st_uid == (uid_t)tc_raw_syscall(SYS_geteuid, 0)) {
        long address = tc_raw_syscall(SYS_mmap, 0, info.st_size, PROT_READ | (writable ? PROT_WRITE : 0),
                                      writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
        if (address > 0 || address < -4095) {
            map = (void *)address;
            *size = (uint64_t)info.st_size;
        }
    }
    tc_raw_syscall(SYS_close, fd);
    return map;
}

uint32_t tc_trace_own_arguments(char *buffer, size_t size) {
    long length = read_file("/proc/self/cmdline", buffer, size);
    return length > 0 ? (uint32_t)length : 0;
}

/* ---- processes ---- */

const char *tc_registry_map(const char *directory) {
    struct tc_text path = {.length = 0};
    tc_text_append(&path, directory);
    tc_text_append(&path, "/" TC_REGISTRY_FILE);
    uint64_t size = 0;
    tc_registry = tc_trace_map_file(path.text, 1, sizeof(struct tc_registry_header), &size);
    if (!tc_registry) return "has no registry the shim can use";
    if (memcmp(tc_registry->magic, TC_REGISTRY_MAGIC, sizeof(tc_registry->magic)) != 0 ||
        tc_registry->version != TC_RECORDING_VERSION ||
        size < sizeof(*tc_registry) + (uint64_t)tc_registry->capacity * sizeof(struct tc_registry_entry))
        return "has a registry of another version, or a damaged one";
    tc_registry_entries = (struct tc_registry_entry *)(tc_registry + 1);
    return NULL;
}

static uint32_t find_entry(int32_t pid, uint64_t ticks) {
    uint32_t used = __atomic_load_n(&tc_registry->next, __ATOMIC_ACQUIRE);
    if (used > tc_registry->capacity) used = tc_registry->capacity;
    for (uint32_t i = used; i-- > 0;)
        if (__atomic_load_n(&tc_registry_entries[i].pid, __ATOMIC_ACQUIRE) == pid &&
            tc_registry_entries[i].start_ticks == ticks)
            return i;
    return TC_NO_ENTRY;
}

static uint32_t claim_entry(int32_t pid, uint32_t parent, uint32_t ordinal, uint64_t ticks) {
    uint32_t index = __atomic_fetch_add(&tc_registry->next, 1, __ATOMIC_ACQ_REL);
    if (index >= tc_registry->capacity) return TC_NO_ENTRY;
    struct tc_registry_entry *entry = &tc_registry_entries[index];
    entry->parent = parent;
    entry->ordinal = ordinal;
    entry->images = 1;
    entry->children = 0;
    entry->replays = 0;
    entry->start_ticks = ticks;
    __atomic_store_n(&entry->pid, pid, __ATOMIC_RELEASE);
    return index;
}

int tc_registry_join(void) {
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    uint64_t ticks = tc_proc_start_ticks(pid, NULL);
    uint32_t found = find_entry(pid, ticks);
    if (found != TC_NO_ENTRY) {
        tc_registry_own_entry = found;
        tc_registry_own_image = __atomic_add_fetch(&tc_registry_entries[found].images, 1, __ATOMIC_ACQ_REL);
        return 0;
    }
    int32_t parent_pid = (int32_t)tc_raw_syscall(SYS_getppid, 0);
    uint32_t parent = find_entry(parent_pid, tc_proc_start_ticks(parent_pid, NULL));
    uint32_t ordinal = parent != TC_NO_ENTRY ? __atomic_add_fetch(&tc_registry_entries[parent].children, 1, __ATOMIC_ACQ_REL)
                                             : __atomic_add_fetch(&tc_registry->roots, 1, __ATOMIC_ACQ_REL);
    tc_registry_own_entry = claim_entry(pid, parent != TC_NO_ENTRY ? parent + 1 : 0, ordinal, ticks);
    tc_registry_own_image = 1;
    return tc_registry_own_entry == TC_NO_ENTRY ? -1 : 0;
}

/* ---- threads ---- */

struct thread_number {
    int numbered;
    uint32_t number;
};

static TC_TLS struct thread_number thread_number;

/* A static program's threads (trace_registry.h): slot i belongs to the thread whose id is slot_tids[i]. */
static int32_t slot_tids[TC_STATIC_TRACE_THREADS];
static struct thread_number slot_numbers[TC_STATIC_TRACE_THREADS];

int tc_trace_threads_in_slots(void) { return tc_static_program_active(); }

int tc_trace_thread_slot(void) {
    int32_t tid = (int32_t)tc_raw_syscall(SYS_gettid, 0);
    uint32_t first = (uint32_t)tid % TC_STATIC_TRACE_THREADS;
    for (uint32_t n = 0; n < TC_STATIC_TRACE_THREADS; n++) {
        uint32_t i = (first + n) % TC_STATIC_TRACE_THREADS;
        int32_t owner = __atomic_load_n(&slot_tids[i], __ATOMIC_ACQUIRE);
        if (owner == tid) return (int)i;
        if (owner != 0) continue;
        /* A new thread. In a fork child that did not exec (the program forked by itself) the recording state
           is the parent's: its events are lost rather than written into the parent's chunks. */
        if ((int32_t)tc_raw_syscall(SYS_getpid, 0) != tc_shim_pid()) return -1;
        int32_t expected = 0;
        if (__atomic_compare_exchange_n(&slot_tids[i], &expected, tid, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return (int)i;
        if (expected == tid) return (int)i;
    }
    return -1;
}

static struct thread_number *own_thread_number(void) {
    if (!tc_trace_threads_in_slots()) return &thread_number;
    int slot = tc_trace_thread_slot();
    return slot >= 0 ? &slot_numbers[slot] : NULL;
}

void tc_registry_static_program_begins(void) {
    int slot = tc_trace_thread_slot();
    if (slot >= 0) slot_numbers[slot] = thread_number;
}

uint32_t tc_trace_thread_number(void) {
    struct thread_number *own = own_thread_number();
    if (!own) return UINT32_MAX;  /* no slot: its events are lost anyway */
    if (__builtin_expect(!own->numbered, 0)) {
        own->number = (int32_t)tc_raw_syscall(SYS_gettid, 0) == tc_shim_pid()
                          ? 0
                          : __atomic_add_fetch(&threads_numbered, 1, __ATOMIC_ACQ_REL);
        own->numbered = 1;
    }
    return own->number;
}

struct thread_start {
    void *(*routine)(void *);
    void *argument;
    uint32_t number;
    int numbered;
    uint32_t ordinal;
    int64_t creep;
};

static void *start_thread(void *argument) {
    struct thread_start start = *(struct thread_start *)argument;
    free(argument);
    if (start.numbered) {
        thread_number.number = start.number;
        thread_number.numbered = 1;
    }
    tc_thread_set_ordinal(start.ordinal);
    tc_spin_set_creep(start.creep);
    return start.routine(start.argument);
}

/* A seeded run orders waits by the ordinals of their threads (runtime/threads.h). */
static int seeded(void) {
    struct tc_segment *segment = tc_shim_segment();
    return segment && __atomic_load_n(&segment->seed, __ATOMIC_RELAXED) != 0;
}

/*
 * Threads are numbered in the order their process creates them (the shim's own helper is not one of them) for
 * a recording and for a seeded run's order (runtime/threads.h), and start with their creator's creep
 * (runtime/starvation.h): a time it read and handed to the new thread is not in the new thread's future. None of
 * this needs anything of a thread created while nothing is traced or seeded and its creator never crept, which
 * then starts as it would without the shim.
 */
static int shim_pthread_create(pthread_t *thread, const pthread_attr_t *attributes, void *(*routine)(void *),
                               void *argument) {
    if (!tc_real.pthread_create) tc_shim_segment();
    if (!tc_real.pthread_create) return EAGAIN;
    int64_t creep = tc_spin_state.creep;
    int ordered = seeded();
    if (tc_trace_mode == TC_TRACE_OFF && creep == 0 && !ordered)
        return tc_real.pthread_create(thread, attributes, routine, argument);
    struct thread_start *start = malloc(sizeof(*start));
    if (!start) return EAGAIN;
    start->routine = routine;
    start->argument = argument;
    start->numbered = tc_trace_mode != TC_TRACE_OFF;
    start->number = start->numbered ? __atomic_add_fetch(&threads_numbered, 1, __ATOMIC_ACQ_REL) : 0;
    start->ordinal = ordered ? tc_thread_next_ordinal() : 0;
    start->creep = creep;
    int result = tc_real.pthread_create(thread, attributes, start_thread, start);
    if (result != 0) free(start);
    return result;
}

TC_EXPORT int pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
    __attribute__((alias("shim_pthread_create")));

/* ---- fork ---- */

void tc_registry_before_fork(void) {
    if (tc_registry_own_entry != TC_NO_ENTRY)
        fork_ordinal = __atomic_add_fetch(&tc_registry_entries[tc_registry_own_entry].children, 1, __ATOMIC_ACQ_REL);
}

void tc_registry_after_fork_in_child(void) {
    uint32_t parent = tc_registry_own_entry;
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    tc_registry_own_entry = claim_entry(pid, parent != TC_NO_ENTRY ? parent + 1 : 0, fork_ordinal, tc_proc_start_ticks(pid, NULL));
    tc_registry_own_image = 1;
    threads_numbered = 0;
    /* The forking thread is the child's main thread. */
    memset(&thread_number, 0, sizeof(thread_number));
    /* A static program's threads in the child are new: the parent's slots are not theirs. */
    if (tc_trace_threads_in_slots()) {
        memset(slot_tids, 0, sizeof(slot_tids));
        memset(slot_numbers, 0, sizeof(slot_numbers));
    }
}

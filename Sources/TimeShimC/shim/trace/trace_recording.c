/*
 * Recording: see trace_recording.h, and timectl_trace.h for the formats.
 *
 * Each event (3–6 bytes) is encoded into the thread's current 64 KiB chunk
 * of the process image's raw file, mapped MAP_SHARED: the page cache holds
 * what was written even if the process is killed, and nothing is ever
 * flushed. Few bytes an event matter: a fresh page costs a few
 * microseconds, most of it the kernel zeroing it. A thread maps a new chunk
 * (one open, fallocate, mmap) every ten thousand events or so.
 */
#define _GNU_SOURCE
#include "trace_recording.h"
#include "trace_registry.h"
#include "../runtime/process.h"
#include "../runtime/spinlock.h"
#include "../runtime/text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static char recording_directory[PATH_MAX];
static struct tc_text raw_path;
static struct tc_raw_header *raw_header;
static uint32_t raw_chunks;
static int grow_lock;

struct recording_thread {
    uint8_t *next, *end;           /* the free part of the thread's chunk */
    uint8_t *payload;              /* where its events begin */
    uint32_t *length;              /* its published length */
    uint32_t sequence;
    int recording;                 /* inside record_event: a signal handler's event is then lost, not interleaved */
    int64_t last[TC_VCLOCKS];      /* the encoder's state (timectl_trace.h) */
};

/* All zero when a thread starts: no chunk yet. */
static TC_TLS struct recording_thread recording_thread;
/* The same for a static program's threads, by slot (trace_registry.h). */
static struct recording_thread slot_recording[TC_STATIC_TRACE_THREADS];

/* The calling thread's state, or NULL when it has none (its events are then lost). */
static inline struct recording_thread *own_recording_state(void) {
    if (__builtin_expect(!tc_trace_threads_in_slots(), 1)) return &recording_thread;
    int slot = tc_trace_thread_slot();
    return slot >= 0 ? &slot_recording[slot] : NULL;
}

/* Makes room for `length` bytes at `offset`; never makes the file shorter (another thread may have grown it further). */
static int grow_raw_file(long fd, uint64_t offset, uint64_t length) {
    long allocated = tc_raw_syscall(SYS_fallocate, fd, 0, (long)offset, (long)length);
    if (allocated == 0) return 0;
    /* Out of space (or anything else): the event is lost. A sparse file would
       map, and then kill the program with SIGBUS on the first write. */
    if (allocated != -EOPNOTSUPP) return -1;
    uint64_t size = offset + length;
    sigset_t saved;
    tc_spin_lock(&grow_lock, &saved);
    struct stat info;
    int result = -1;
    if (tc_raw_syscall(SYS_fstat, fd, &info) == 0)
        result = (uint64_t)info.st_size >= size ? 0 : (int)tc_raw_syscall(SYS_ftruncate, fd, (long)size);
    tc_spin_unlock(&grow_lock, &saved);
    return result;
}

static const char *open_raw_file(void) {
    raw_path.length = 0;
    tc_text_append(&raw_path, recording_directory);
    tc_text_append(&raw_path, "/p");
    tc_text_append_number(&raw_path, tc_registry_own_entry);
    tc_text_append(&raw_path, "-");
    tc_text_append_number(&raw_path, tc_registry_own_image);
    tc_text_append(&raw_path, ".raw");
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, raw_path.text, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                             0600);
    if (fd < 0) return "cannot be written to";
    long address = -1;
    if (grow_raw_file(fd, 0, TC_RAW_HEADER_SIZE) == 0)
        address = tc_raw_syscall(SYS_mmap, 0, TC_RAW_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    tc_raw_syscall(SYS_close, fd);
    if (address < 0 && address > -4096) return "cannot be written to";
    raw_header = (struct tc_raw_header *)address;
    raw_header->version = TC_RECORDING_VERSION;
    raw_header->registry_index = tc_registry_own_entry;
    raw_header->image = tc_registry_own_image;
    raw_header->pid = tc_shim_pid();
    raw_header->argv_length = tc_trace_own_arguments(raw_header->argv, sizeof(raw_header->argv));
    raw_chunks = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(raw_header->magic, TC_RAW_MAGIC, sizeof(raw_header->magic));
    return NULL;
}

const char *tc_recording_open(const char *directory) {
    strcpy(recording_directory, directory);
    return open_raw_file();
}

/* Gives the calling thread a new chunk; 0, or −1 (its event is then lost, and counted). */
static int new_chunk(struct recording_thread *state) {
    if (!raw_header) return -1;
    uint64_t offset = TC_RAW_HEADER_SIZE + (uint64_t)__atomic_fetch_add(&raw_chunks, 1, __ATOMIC_ACQ_REL) * TC_CHUNK_SIZE;
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, raw_path.text, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    long address = -1;
    if (grow_raw_file(fd, offset, TC_CHUNK_SIZE) == 0)
        address = tc_raw_syscall(SYS_mmap, 0, TC_CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (long)offset);
    tc_raw_syscall(SYS_close, fd);
    if (address < 0 && address > -4096) return -1;
    /* The full chunk stays in the file; unmapped, it no longer counts against the process's mappings. */
    if (state->payload) tc_raw_syscall(SYS_munmap, state->payload - sizeof(struct tc_chunk_header), TC_CHUNK_SIZE);
    struct tc_chunk_header *chunk = (struct tc_chunk_header *)address;
    chunk->thread = tc_trace_thread_number();
    chunk->sequence = state->sequence++;
    chunk->length = 0;
    __atomic_store_n(&chunk->magic, TC_CHUNK_MAGIC, __ATOMIC_RELEASE);
    state->payload = state->next = (uint8_t *)(chunk + 1);
    state->end = (uint8_t *)address + TC_CHUNK_SIZE;
    state->length = &chunk->length;
    return 0;
}

__attribute__((always_inline)) static inline void record_event(uint32_t type, uint32_t detail, int32_t clock, int vclock, int64_t value) {
    struct recording_thread *state = own_recording_state();
    if (__builtin_expect(!state || state->recording, 0)) goto lost;
    state->recording = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (__builtin_expect(state->end - state->next < (long)TC_MAX_EVENT_SIZE, 0) && new_chunk(state) != 0) {
        state->recording = 0;
        goto lost;
    }
    struct tc_event event = {type, detail, clock, vclock, value};
    state->next += tc_encode_event(&event, state->last, state->next, (size_t)(state->end - state->next));
    __atomic_store_n(state->length, (uint32_t)(state->next - state->payload), __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    state->recording = 0;
    return;
lost:
    if (raw_header) __atomic_fetch_add(&raw_header->lost_events, 1, __ATOMIC_RELAXED);
}

void tc_trace_record_reading(int call, clockid_t clock, int vclock, const struct timespec *value) {
    record_event(TC_EVENT_READ, (uint32_t)call, clock, vclock, tc_timespec_ns(*value));
}

void tc_trace_record_wall_set(int call, int64_t wall) {
    record_event(TC_EVENT_SET_WALL, (uint32_t)call, TC_VCLOCK_REALTIME, TC_VCLOCK_REALTIME, wall);
}

void tc_recording_wait_begin(int kind, int vclock, int64_t deadline) {
    record_event(TC_EVENT_WAIT_BEGIN, (uint32_t)kind, vclock, vclock, deadline);
}

void tc_recording_wait_end(struct tc_segment *segment, int vclock, int64_t deadline) {
    int64_t now = tc_segment_read(segment, vclock);
    record_event(TC_EVENT_WAIT_END, now >= deadline ? TC_WAIT_REACHED_DEADLINE : TC_WAIT_ENDED_EARLY, vclock, vclock, now);
}

void tc_recording_static_program_begins(void) {
    int slot = tc_trace_thread_slot();
    if (slot >= 0) slot_recording[slot] = recording_thread;
}

void tc_recording_before_fork(void) {
    /* Until each side has its own state again, a reading (another library's
       fork handler, a signal handler) is lost rather than written into the
       parent's chunk by both processes. */
    recording_thread.recording = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void tc_recording_after_fork_in_parent(void) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    recording_thread.recording = 0;
}

void tc_recording_after_fork_in_child(void) {
    grow_lock = 0;  /* another thread may have held it at the fork */
    memset(&recording_thread, 0, sizeof(recording_thread));
    if (tc_trace_threads_in_slots()) memset(slot_recording, 0, sizeof(slot_recording));
    /* Without an entry, or without a file, the child's events are lost, not misfiled. */
    if (tc_registry_own_entry == TC_NO_ENTRY || open_raw_file()) raw_header = NULL;
}

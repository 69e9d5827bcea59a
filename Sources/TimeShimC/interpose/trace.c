/*
 * Record and replay in the shim; see trace.h, and timectl_trace.h for the
 * formats.
 *
 * Recording encodes each event (3–6 bytes) into the thread's current
 * 64 KiB chunk of the process image's raw file, mapped MAP_SHARED: the
 * page cache holds what was written even if the process is killed, and
 * nothing is ever flushed. Few bytes an event matter: a fresh page costs a
 * few microseconds, most of it the kernel zeroing it. A thread maps a new
 * chunk (one open, fallocate, mmap) every ten thousand events or so.
 *
 * Replay maps the trace read-only and gives each thread a decoder over its
 * own stream. A reading takes the next recorded event if it is a reading
 * of the same virtual clock; anything else is a divergence: reported once
 * per thread (to the replay's divergences file), after which the thread
 * reads a clock that continues from the last value replayed, moving as the
 * session moves.
 *
 * Identity comes from the registry (see timectl_trace.h): a process finds
 * its entry (after an exec) or its parent's, and takes the next child
 * ordinal of its parent — in the parent, before the fork, for a fork
 * child, so that a shell's children are numbered in the order it forks
 * them. A process started some other way (posix_spawn, vfork) takes its
 * ordinal when it attaches; so that a replay still pairs processes started
 * at nearly the same time, an image whose arguments differ from the
 * recorded image at its place is paired with an unclaimed sibling that has
 * the same arguments, if there is one.
 */
#define _GNU_SOURCE
#include "trace.h"
#include "real.h"
#include "spinlock.h"
#include "text.h"
#include "waiter.h"
#include "timectl_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NO_ENTRY UINT32_MAX
#define NO_VALUE INT64_MIN

int tc_trace_mode;

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

/* Maps `path` whole; NULL if it cannot be, or is shorter than `minimum`. */
static void *map_file(const char *path, int writable, uint64_t minimum, uint64_t *size) {
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

/* Field 22 of /proc/PID/stat: when the process started, which an exec does not change. */
static uint64_t start_ticks(int32_t pid) {
    struct tc_text path = {.length = 0};
    tc_text_append(&path, "/proc/");
    tc_text_append_number(&path, pid);
    tc_text_append(&path, "/stat");
    char stat[1024];
    long length = read_file(path.text, stat, sizeof(stat) - 1);
    if (length <= 0) return 0;
    stat[length] = 0;
    char *p = strrchr(stat, ')');
    if (!p) return 0;
    int field = 2;
    while (*p && field < 22) {
        if (*p++ == ' ') field++;
    }
    uint64_t ticks = 0;
    while (*p >= '0' && *p <= '9') ticks = ticks * 10 + (uint64_t)(*p++ - '0');
    return ticks;
}

/* This process's arguments, each ending in NUL; returns their length. */
static uint32_t own_arguments(char *buffer, size_t size) {
    long length = read_file("/proc/self/cmdline", buffer, size);
    return length > 0 ? (uint32_t)length : 0;
}

/* ---- the registry ---- */

static struct tc_registry_header *registry;
static struct tc_registry_entry *entries;
static uint32_t own_entry = NO_ENTRY;
static uint32_t own_image;
static uint32_t threads_numbered;     /* in this image, after the main thread */
static TC_TLS uint32_t fork_ordinal;  /* the child's ordinal, from before_fork to the child */

static const char *map_registry(const char *directory) {
    struct tc_text path = {.length = 0};
    tc_text_append(&path, directory);
    tc_text_append(&path, "/" TC_REGISTRY_FILE);
    uint64_t size = 0;
    registry = map_file(path.text, 1, sizeof(struct tc_registry_header), &size);
    if (!registry) return "has no registry the shim can use";
    if (memcmp(registry->magic, TC_REGISTRY_MAGIC, sizeof(registry->magic)) != 0 ||
        registry->version != TC_RECORDING_VERSION ||
        size < sizeof(*registry) + (uint64_t)registry->capacity * sizeof(struct tc_registry_entry))
        return "has a registry of another version, or a damaged one";
    entries = (struct tc_registry_entry *)(registry + 1);
    return NULL;
}

static uint32_t find_entry(int32_t pid, uint64_t ticks) {
    uint32_t used = __atomic_load_n(&registry->next, __ATOMIC_ACQUIRE);
    if (used > registry->capacity) used = registry->capacity;
    for (uint32_t i = used; i-- > 0;)
        if (__atomic_load_n(&entries[i].pid, __ATOMIC_ACQUIRE) == pid && entries[i].start_ticks == ticks) return i;
    return NO_ENTRY;
}

static uint32_t claim_entry(int32_t pid, uint32_t parent, uint32_t ordinal, uint64_t ticks) {
    uint32_t index = __atomic_fetch_add(&registry->next, 1, __ATOMIC_ACQ_REL);
    if (index >= registry->capacity) return NO_ENTRY;
    struct tc_registry_entry *entry = &entries[index];
    entry->parent = parent;
    entry->ordinal = ordinal;
    entry->images = 1;
    entry->children = 0;
    entry->replays = 0;
    entry->start_ticks = ticks;
    __atomic_store_n(&entry->pid, pid, __ATOMIC_RELEASE);
    return index;
}

/* Finds this process's entry, or makes one as a child of its parent's (or as a root). */
static int join_registry(void) {
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    uint64_t ticks = start_ticks(pid);
    uint32_t found = find_entry(pid, ticks);
    if (found != NO_ENTRY) {
        own_entry = found;
        own_image = __atomic_add_fetch(&entries[found].images, 1, __ATOMIC_ACQ_REL);
        return 0;
    }
    int32_t parent_pid = (int32_t)tc_raw_syscall(SYS_getppid, 0);
    uint32_t parent = find_entry(parent_pid, start_ticks(parent_pid));
    uint32_t ordinal = parent != NO_ENTRY ? __atomic_add_fetch(&entries[parent].children, 1, __ATOMIC_ACQ_REL)
                                          : __atomic_add_fetch(&registry->roots, 1, __ATOMIC_ACQ_REL);
    own_entry = claim_entry(pid, parent != NO_ENTRY ? parent + 1 : 0, ordinal, ticks);
    own_image = 1;
    return own_entry == NO_ENTRY ? -1 : 0;
}

/* ---- threads ---- */

struct thread_state {
    int ready;
    int numbered;                  /* `number` was given by pthread_create */
    uint32_t number;
    uint32_t calls;                /* replay: readings and waits so far */
    /* recording */
    uint8_t *next, *end;           /* the free part of the thread's chunk */
    uint8_t *payload;              /* where its events begin */
    uint32_t *length;              /* its published length */
    uint32_t sequence;
    int recording;                 /* inside record_event: a signal handler's event is then lost, not interleaved */
    int64_t last[TC_VCLOCKS];      /* the encoder's state (timectl_trace.h) */
    /* replay */
    int has_stream;
    int diverged;
    struct tc_decoder decoder;
    int64_t anchor_value[TC_VCLOCKS];    /* NO_VALUE: none */
    int64_t anchor_session[TC_VCLOCKS];
};

static TC_TLS struct thread_state thread_state;

static void find_stream(struct thread_state *state);

static struct thread_state *current_thread(void) {
    struct thread_state *state = &thread_state;
    if (__builtin_expect(state->ready, 1)) return state;
    if (!state->numbered)
        state->number = tc_gettid() == tc_shim_pid() ? 0 : __atomic_add_fetch(&threads_numbered, 1, __ATOMIC_ACQ_REL);
    state->next = state->end = state->payload = NULL;
    state->length = NULL;
    state->sequence = 0;
    for (int c = 0; c < TC_VCLOCKS; c++) state->last[c] = 0;
    state->calls = 0;
    state->diverged = 0;
    if (tc_trace_mode == TC_TRACE_REPLAYING) find_stream(state);
    state->ready = 1;
    return state;
}

struct thread_start {
    void *(*routine)(void *);
    void *argument;
    uint32_t number;
};

static void *start_numbered_thread(void *argument) {
    struct thread_start start = *(struct thread_start *)argument;
    free(argument);
    thread_state.number = start.number;
    thread_state.numbered = 1;
    return start.routine(start.argument);
}

/* Threads are numbered in the order their process creates them (the shim's own helper is not one of them). */
static int shim_pthread_create(pthread_t *thread, const pthread_attr_t *attributes, void *(*routine)(void *),
                               void *argument) {
    if (!tc_real.pthread_create) tc_shim_segment();
    if (tc_trace_mode == TC_TRACE_OFF || !tc_real.pthread_create)
        return tc_real.pthread_create ? tc_real.pthread_create(thread, attributes, routine, argument) : EAGAIN;
    struct thread_start *start = malloc(sizeof(*start));
    if (!start) return EAGAIN;
    start->routine = routine;
    start->argument = argument;
    start->number = __atomic_add_fetch(&threads_numbered, 1, __ATOMIC_ACQ_REL);
    int result = tc_real.pthread_create(thread, attributes, start_numbered_thread, start);
    if (result != 0) free(start);
    return result;
}

TC_EXPORT int pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
    __attribute__((alias("shim_pthread_create")));

/* ---- recording ---- */

static char recording_directory[PATH_MAX];
static struct tc_text raw_path;
static struct tc_raw_header *raw_header;
static uint32_t raw_chunks;
static int grow_lock;

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
    tc_text_append_number(&raw_path, own_entry);
    tc_text_append(&raw_path, "-");
    tc_text_append_number(&raw_path, own_image);
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
    raw_header->registry_index = own_entry;
    raw_header->image = own_image;
    raw_header->pid = tc_shim_pid();
    raw_header->argv_length = own_arguments(raw_header->argv, sizeof(raw_header->argv));
    raw_chunks = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(raw_header->magic, TC_RAW_MAGIC, sizeof(raw_header->magic));
    return NULL;
}

/* Gives the calling thread a new chunk; 0, or −1 (its event is then lost, and counted). */
static int new_chunk(struct thread_state *state) {
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
    chunk->thread = state->number;
    chunk->sequence = state->sequence++;
    chunk->length = 0;
    __atomic_store_n(&chunk->magic, TC_CHUNK_MAGIC, __ATOMIC_RELEASE);
    state->payload = state->next = (uint8_t *)(chunk + 1);
    state->end = (uint8_t *)address + TC_CHUNK_SIZE;
    state->length = &chunk->length;
    return 0;
}

__attribute__((always_inline)) static inline void record_event(uint32_t type, uint32_t detail, int32_t clock, int vclock, int64_t value) {
    struct thread_state *state = current_thread();
    if (__builtin_expect(state->recording, 0)) goto lost;
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

/* ---- replay ---- */

static const uint8_t *trace;
static const struct tc_trace_header *trace_header;
static const struct tc_trace_process *trace_processes;
static const struct tc_trace_stream *trace_streams;
static const char *trace_strings;
static const uint8_t *trace_data;
static char replay_directory[PATH_MAX];
static uint8_t *claims;
static int32_t replayed_image = -1;              /* index in the trace's process table */
static int64_t process_last[TC_VCLOCKS];          /* the last value replayed to any thread, per virtual clock */
static int strict;

static void forget_replayed_values(void) {
    for (int c = 0; c < TC_VCLOCKS; c++) __atomic_store_n(&process_last[c], NO_VALUE, __ATOMIC_RELAXED);
}

static int same_text(const char *a, size_t a_length, const char *b, size_t b_length) {
    return a_length == b_length && memcmp(a, b, a_length) == 0;
}

/* The registry entry's place in the tree: the recorded path its process replays, else its parent's path and ordinal. */
static void entry_path(uint32_t index, struct tc_text *path, int depth) {
    if (index >= registry->capacity) {  /* NO_ENTRY: the registry was full */
        tc_text_append(path, "?");
        return;
    }
    const struct tc_registry_entry *entry = &entries[index];
    uint32_t replays = __atomic_load_n(&entry->replays, __ATOMIC_ACQUIRE);
    if (replays && trace_processes && replays <= trace_header->process_count) {
        const struct tc_trace_process *image = &trace_processes[replays - 1];
        char segment[sizeof(path->text)];
        size_t length = image->path_length < sizeof(segment) - 1 ? image->path_length : sizeof(segment) - 1;
        memcpy(segment, trace_strings + image->path_offset, length);
        segment[length] = 0;
        tc_text_append(path, segment);
        return;
    }
    if (entry->parent && entry->parent - 1 < index && depth < 64) {
        entry_path(entry->parent - 1, path, depth + 1);
        tc_text_append(path, ".");
    }
    tc_text_append_number(path, entry->ordinal);
}

static int claim_image(uint32_t index) {
    uint8_t expected = 0;
    return __atomic_compare_exchange_n(&claims[index], &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Pairs this process image with a recorded one: see the comment at the top. */
static void find_recorded_image(void) {
    replayed_image = -1;
    struct tc_text path = {.length = 0};
    entry_path(own_entry, &path, 0);
    char arguments[sizeof(((struct tc_raw_header *)0)->argv)];  /* as much as a recording keeps */
    uint32_t arguments_length = own_arguments(arguments, sizeof(arguments));
    size_t parent_length = path.length;
    while (parent_length > 0 && path.text[parent_length - 1] != '.') parent_length--;
    int32_t at_place = -1, sibling = -1;
    for (uint32_t i = 0; i < trace_header->process_count; i++) {
        const struct tc_trace_process *image = &trace_processes[i];
        if (image->image != own_image || claims[i]) continue;
        const char *recorded_path = trace_strings + image->path_offset;
        int same_arguments = same_text(trace_strings + image->argv_offset, image->argv_length, arguments, arguments_length);
        if (same_text(recorded_path, image->path_length, path.text, path.length)) {
            if (same_arguments && claim_image(i)) {
                replayed_image = (int32_t)i;
                break;
            }
            at_place = (int32_t)i;
        } else if (sibling < 0 && same_arguments && image->path_length > parent_length &&
                   memcmp(recorded_path, path.text, parent_length) == 0 &&
                   memchr(recorded_path + parent_length, '.', image->path_length - parent_length) == NULL) {
            sibling = (int32_t)i;
        }
    }
    if (replayed_image < 0 && sibling >= 0 && claim_image((uint32_t)sibling)) replayed_image = sibling;
    /* The same place with other arguments (a changed command): its readings say how far it matches. */
    if (replayed_image < 0 && at_place >= 0 && claim_image((uint32_t)at_place)) replayed_image = at_place;
    if (replayed_image >= 0) __atomic_store_n(&entries[own_entry].replays, (uint32_t)replayed_image + 1, __ATOMIC_RELEASE);
}

static void find_stream(struct thread_state *state) {
    state->has_stream = 0;
    if (replayed_image < 0) return;
    const struct tc_trace_process *image = &trace_processes[replayed_image];
    uint32_t low = image->first_stream, high = image->first_stream + image->stream_count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (trace_streams[middle].thread < state->number) low = middle + 1;
        else high = middle;
    }
    if (low < image->first_stream + image->stream_count && trace_streams[low].thread == state->number) {
        const struct tc_trace_stream *stream = &trace_streams[low];
        state->decoder.next = trace_data + stream->data_offset;
        state->decoder.end = state->decoder.next + stream->data_length;
        for (int c = 0; c < TC_VCLOCKS; c++) state->decoder.last[c] = 0;
        state->has_stream = 1;
    }
}

/* The value a clock shows a thread whose replay has diverged: it goes on from the anchor as the session moves. */
static int64_t diverged_value(struct thread_state *state, struct tc_segment *segment, int vclock) {
    int64_t now = tc_segment_read(segment, vclock);
    if (state->anchor_value[vclock] == NO_VALUE) return now;
    /* Recorded values are the trace's: wrap rather than overflow (undefined in C). */
    return (int64_t)((uint64_t)state->anchor_value[vclock] + ((uint64_t)now - (uint64_t)state->anchor_session[vclock]));
}

static void report_divergence(struct thread_state *state, uint32_t reason, const struct tc_event *expected,
                              struct tc_event_kind asked) {
    struct tc_divergence record;
    memset(&record, 0, sizeof(record));
    record.magic = TC_DIVERGENCE_MAGIC;
    record.reason = reason;
    record.registry_index = own_entry;
    record.image = own_image;
    record.pid = tc_shim_pid();
    record.trace_process = replayed_image;
    record.thread = state->number;
    record.call = state->calls;
    if (expected) record.expected = (struct tc_event_kind){expected->type, expected->detail, expected->clock};
    record.asked = asked;
    struct tc_text path = {.length = 0};
    entry_path(own_entry, &path, 0);
    memcpy(record.path, path.text, path.length < sizeof(record.path) - 1 ? path.length : sizeof(record.path) - 1);
    own_arguments(record.command, sizeof(record.command) - 1);
    struct tc_text file = {.length = 0};
    tc_text_append(&file, replay_directory);
    tc_text_append(&file, "/" TC_DIVERGENCES_FILE);
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, file.text, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        tc_raw_syscall(SYS_write, fd, &record, sizeof(record));
        tc_raw_syscall(SYS_close, fd);
    }
}

/*
 * The thread asked for `asked` where the recording had something else (or
 * nothing): report it, and from now on answer from a clock that continues
 * where the replay was — from the process's last replayed value on each
 * clock, else from the next value this thread's recording had on it, else
 * from the last value replayed to any process of the run.
 */
static void diverge(struct thread_state *state, struct tc_segment *segment, uint32_t reason,
                    const struct tc_event *expected, struct tc_event_kind asked) {
    state->diverged = 1;
    for (int c = 0; c < TC_VCLOCKS; c++) {
        state->anchor_value[c] = __atomic_load_n(&process_last[c], __ATOMIC_RELAXED);
        state->anchor_session[c] = tc_segment_read(segment, c);
    }
    if (state->has_stream) {
        struct tc_decoder ahead = state->decoder;
        struct tc_event event;
        while (tc_decode_event(&ahead, &event) == 1)
            if (event.type == TC_EVENT_READ && state->anchor_value[event.vclock] == NO_VALUE)
                state->anchor_value[event.vclock] = event.value;
    }
    for (int c = 0; c < TC_VCLOCKS; c++)
        if (state->anchor_value[c] == NO_VALUE)
            state->anchor_value[c] = __atomic_load_n(&registry->last_replayed[c], __ATOMIC_RELAXED);
    report_divergence(state, reason, expected, asked);
    if (strict) tc_raw_syscall(SYS_exit_group, TC_SHIM_DIVERGED_STATUS);
}

/* Takes the next recorded event if `matches` says it is the one asked for; else diverges. Returns 1 if taken. */
static int replay_next(struct thread_state *state, struct tc_segment *segment, struct tc_event_kind asked,
                       int vclock, struct tc_event *event) {
    if (replayed_image < 0) {
        diverge(state, segment, TC_DIVERGED_NO_PROCESS, NULL, asked);
        return 0;
    }
    if (!state->has_stream) {
        /* A thread the recording numbered (the main thread always is) but that read nothing asks past its end. */
        const struct tc_trace_process *image = &trace_processes[replayed_image];
        uint32_t highest = image->stream_count ? trace_streams[image->first_stream + image->stream_count - 1].thread : 0;
        diverge(state, segment, state->number <= highest ? TC_DIVERGED_PAST_END : TC_DIVERGED_NO_THREAD, NULL, asked);
        return 0;
    }
    struct tc_decoder before = state->decoder;
    int decoded = tc_decode_event(&state->decoder, event);
    if (decoded == 1 && event->type == asked.type && event->vclock == vclock &&
        (asked.type != TC_EVENT_WAIT_BEGIN || event->detail == asked.detail))
        return 1;
    state->decoder = before;
    diverge(state, segment, decoded == 1 ? TC_DIVERGED_DIFFERENT : TC_DIVERGED_PAST_END, decoded == 1 ? event : NULL,
            asked);
    return 0;
}

static const char *open_replay(const char *trace_path, const char *directory) {
    uint64_t size = 0;
    trace = map_file(trace_path, 0, 0, &size);
    if (!trace) return "cannot be read";
    /* timectl replay checked the checksum once; every process checks that the layout holds together. */
    if (tc_trace_validate(trace, size, 0, NULL)) return "is not a trace this shim can replay";
    trace_header = (const struct tc_trace_header *)trace;
    trace_processes = (const struct tc_trace_process *)(trace + trace_header->processes_offset);
    trace_streams = (const struct tc_trace_stream *)(trace + trace_header->streams_offset);
    trace_strings = (const char *)(trace + trace_header->strings_offset);
    trace_data = trace + trace_header->data_offset;
    struct tc_text claims_path = {.length = 0};
    tc_text_append(&claims_path, directory);
    tc_text_append(&claims_path, "/" TC_CLAIMS_FILE);
    uint64_t claims_size = 0;
    claims = map_file(claims_path.text, 1, trace_header->process_count, &claims_size);
    if (!claims && trace_header->process_count > 0) return "has no claims file the shim can use";
    return NULL;
}

/* ---- the interposers' side ---- */

const char *tc_trace_attach(struct tc_segment *segment, const char **path) {
    (void)segment;
    const char *recording = getenv("TIMECTL_RECORD"), *replaying = getenv("TIMECTL_REPLAY");
    if (!recording && !replaying) return NULL;
    const char *directory = recording ? recording : getenv("TIMECTL_REPLAY_DIR");
    *path = recording ? recording : replaying;
    if (recording && replaying) return "is named by both TIMECTL_RECORD and TIMECTL_REPLAY; give one";
    if (!directory || directory[0] != '/' || strlen(directory) >= sizeof(recording_directory) - 64)
        return recording ? "is not an absolute path (TIMECTL_RECORD)" : "has no absolute working directory (TIMECTL_REPLAY_DIR)";
    const char *problem = map_registry(directory);
    if (problem) return problem;
    if (join_registry() != 0) return "has no room left in its registry";
    if (recording) {
        strcpy(recording_directory, directory);
        problem = open_raw_file();
        if (problem) return problem;
        tc_trace_mode = TC_TRACE_RECORDING;
    } else {
        strcpy(replay_directory, directory);
        problem = open_replay(replaying, directory);
        if (problem) return problem;
        const char *strictness = getenv("TIMECTL_REPLAY_STRICT");
        strict = strictness && strcmp(strictness, "1") == 0;
        forget_replayed_values();
        find_recorded_image();
        tc_trace_mode = TC_TRACE_REPLAYING;
    }
    return NULL;
}

void tc_trace_record_reading(int call, clockid_t clock, int vclock, const struct timespec *value) {
    record_event(TC_EVENT_READ, (uint32_t)call, clock, vclock, (int64_t)value->tv_sec * TC_NS_PER_SECOND + value->tv_nsec);
}

void tc_trace_replay_reading(int call, clockid_t clock, int vclock, struct tc_segment *segment, struct timespec *value) {
    struct thread_state *state = current_thread();
    state->calls++;
    if (!state->diverged) {
        struct tc_event event;
        struct tc_event_kind asked = {TC_EVENT_READ, (uint32_t)call, clock};
        if (replay_next(state, segment, asked, vclock, &event)) {
            __atomic_store_n(&process_last[vclock], event.value, __ATOMIC_RELAXED);
            __atomic_store_n(&registry->last_replayed[vclock], event.value, __ATOMIC_RELAXED);
            *value = tc_timespec_from_ns(event.value);
            return;
        }
    }
    *value = tc_timespec_from_ns(diverged_value(state, segment, vclock));
}

void tc_trace_record_wall_set(int call, int64_t wall) {
    record_event(TC_EVENT_SET_WALL, (uint32_t)call, TC_VCLOCK_REALTIME, TC_VCLOCK_REALTIME, wall);
}

void tc_trace_replay_wall_set(int call, struct tc_segment *segment) {
    struct thread_state *state = current_thread();
    state->calls++;
    if (state->diverged) return;
    struct tc_event event;
    struct tc_event_kind asked = {TC_EVENT_SET_WALL, (uint32_t)call, TC_VCLOCK_REALTIME};
    if (!replay_next(state, segment, asked, TC_VCLOCK_REALTIME, &event)) return;
    __atomic_store_n(&process_last[TC_VCLOCK_REALTIME], event.value, __ATOMIC_RELAXED);
    __atomic_store_n(&registry->last_replayed[TC_VCLOCK_REALTIME], event.value, __ATOMIC_RELAXED);
}

void tc_trace_wait_begin(int kind, int vclock, int64_t deadline) {
    if (tc_trace_mode == TC_TRACE_RECORDING) {
        record_event(TC_EVENT_WAIT_BEGIN, (uint32_t)kind, vclock, vclock, deadline);
        return;
    }
    struct thread_state *state = current_thread();
    state->calls++;
    if (state->diverged) return;
    struct tc_event event;
    struct tc_event_kind asked = {TC_EVENT_WAIT_BEGIN, (uint32_t)kind, vclock};
    replay_next(state, tc_shim_segment(), asked, vclock, &event);
}

void tc_trace_wait_end(struct tc_segment *segment, int vclock, int64_t deadline) {
    if (tc_trace_mode == TC_TRACE_RECORDING) {
        int64_t now = tc_segment_read(segment, vclock);
        record_event(TC_EVENT_WAIT_END, now >= deadline ? TC_WAIT_REACHED_DEADLINE : TC_WAIT_ENDED_EARLY, vclock, vclock,
                     now);
        return;
    }
    /* The recorded end is passed over: the wait ended as it does now. */
    struct thread_state *state = current_thread();
    if (state->diverged || !state->has_stream) return;
    struct tc_decoder before = state->decoder;
    struct tc_event event;
    if (tc_decode_event(&state->decoder, &event) != 1 || event.type != TC_EVENT_WAIT_END) state->decoder = before;
}

int64_t tc_trace_session_deadline(struct tc_segment *segment, int vclock, int64_t absolute) {
    if (tc_trace_mode != TC_TRACE_REPLAYING) return absolute;
    struct thread_state *state = current_thread();
    int64_t session_now = tc_segment_read(segment, vclock);
    int64_t replayed_now = state->diverged ? diverged_value(state, segment, vclock)
                                           : __atomic_load_n(&process_last[vclock], __ATOMIC_RELAXED);
    if (replayed_now == NO_VALUE || absolute == INT64_MIN || absolute == INT64_MAX) return absolute;
    int64_t distance;
    if (__builtin_sub_overflow(absolute, replayed_now, &distance)) distance = absolute > replayed_now ? INT64_MAX : INT64_MIN;
    if (distance <= 0) return session_now;
    return session_now > INT64_MAX - distance ? INT64_MAX : session_now + distance;
}

void tc_trace_before_fork(void) {
    if (tc_trace_mode == TC_TRACE_OFF) return;
    if (own_entry != NO_ENTRY) fork_ordinal = __atomic_add_fetch(&entries[own_entry].children, 1, __ATOMIC_ACQ_REL);
    /* Until each side has its own state again, a reading (another library's
       fork handler, a signal handler) is lost rather than written into the
       parent's chunk by both processes. */
    thread_state.recording = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void tc_trace_after_fork_in_parent(void) {
    if (tc_trace_mode == TC_TRACE_OFF) return;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    thread_state.recording = 0;
}

void tc_trace_after_fork_in_child(void) {
    if (tc_trace_mode == TC_TRACE_OFF) return;
    uint32_t parent = own_entry;
    int32_t pid = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    own_entry = claim_entry(pid, parent != NO_ENTRY ? parent + 1 : 0, fork_ordinal, start_ticks(pid));
    own_image = 1;
    threads_numbered = 0;
    grow_lock = 0;  /* another thread may have held it at the fork */
    memset(&thread_state, 0, sizeof(thread_state));
    if (own_entry == NO_ENTRY) {
        raw_header = NULL;
        replayed_image = -1;
        return;
    }
    if (tc_trace_mode == TC_TRACE_RECORDING) {
        if (open_raw_file()) raw_header = NULL;  /* the child's events are then lost, not misfiled */
    } else {
        forget_replayed_values();
        find_recorded_image();
    }
}

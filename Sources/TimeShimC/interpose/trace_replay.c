/*
 * Replay: see trace_replay.h, and timectl_trace.h for the formats.
 *
 * The trace is mapped read-only and each thread gets a decoder over its own
 * stream. A reading takes the next recorded event if it is a reading of
 * the same virtual clock; anything else is a divergence: reported once per
 * thread (to the replay's divergences file), after which the thread reads
 * a clock that continues from the last value replayed, moving as the
 * session moves.
 *
 * A process image is paired with the recorded image at its place in the
 * registry's tree (trace_registry.c). A process started by posix_spawn or
 * vfork takes its place when it attaches, so siblings started at nearly
 * the same time may swap places: an image whose arguments differ from the
 * recorded image at its place is paired with an unclaimed sibling that has
 * the same arguments, if there is one.
 */
#define _GNU_SOURCE
#include "trace_replay.h"
#include "real.h"
#include "shim.h"
#include "text.h"
#include "trace.h"
#include "trace_registry.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NO_VALUE INT64_MIN

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

struct replay_thread {
    int ready;
    uint32_t calls;                /* readings and waits so far */
    int has_stream;
    int diverged;
    struct tc_decoder decoder;
    int64_t anchor_value[TC_VCLOCKS];    /* NO_VALUE: none */
    int64_t anchor_session[TC_VCLOCKS];
};

static TC_TLS struct replay_thread replay_thread;
/* The same for a static program's threads, by slot (trace_registry.h). */
static struct replay_thread slot_replay[TC_STATIC_TRACE_THREADS];

static void forget_replayed_values(void) {
    for (int c = 0; c < TC_VCLOCKS; c++) __atomic_store_n(&process_last[c], NO_VALUE, __ATOMIC_RELAXED);
}

static int same_text(const char *a, size_t a_length, const char *b, size_t b_length) {
    return a_length == b_length && memcmp(a, b, a_length) == 0;
}

/* The registry entry's place in the tree: the recorded path its process replays, else its parent's path and ordinal. */
static void entry_path(uint32_t index, struct tc_text *path, int depth) {
    if (index >= tc_registry->capacity) {  /* TC_NO_ENTRY: the registry was full */
        tc_text_append(path, "?");
        return;
    }
    const struct tc_registry_entry *entry = &tc_registry_entries[index];
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
    entry_path(tc_registry_own_entry, &path, 0);
    char arguments[sizeof(((struct tc_raw_header *)0)->argv)];  /* as much as a recording keeps */
    uint32_t arguments_length = tc_trace_own_arguments(arguments, sizeof(arguments));
    size_t parent_length = path.length;
    while (parent_length > 0 && path.text[parent_length - 1] != '.') parent_length--;
    int32_t at_place = -1, sibling = -1;
    for (uint32_t i = 0; i < trace_header->process_count; i++) {
        const struct tc_trace_process *image = &trace_processes[i];
        if (image->image != tc_registry_own_image || claims[i]) continue;
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
    if (replayed_image >= 0)
        __atomic_store_n(&tc_registry_entries[tc_registry_own_entry].replays, (uint32_t)replayed_image + 1, __ATOMIC_RELEASE);
}

static void find_stream(struct replay_thread *state) {
    state->has_stream = 0;
    if (replayed_image < 0) return;
    const struct tc_trace_process *image = &trace_processes[replayed_image];
    uint32_t number = tc_trace_thread_number();
    uint32_t low = image->first_stream, high = image->first_stream + image->stream_count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (trace_streams[middle].thread < number) low = middle + 1;
        else high = middle;
    }
    if (low < image->first_stream + image->stream_count && trace_streams[low].thread == number) {
        const struct tc_trace_stream *stream = &trace_streams[low];
        state->decoder.next = trace_data + stream->data_offset;
        state->decoder.end = state->decoder.next + stream->data_length;
        for (int c = 0; c < TC_VCLOCKS; c++) state->decoder.last[c] = 0;
        state->has_stream = 1;
    }
}

/* The calling thread's state; NULL for a static program's thread that has no slot. */
static struct replay_thread *current_thread(void) {
    struct replay_thread *state = &replay_thread;
    if (__builtin_expect(tc_trace_threads_in_slots(), 0)) {
        int slot = tc_trace_thread_slot();
        if (slot < 0) return NULL;  /* no state: it reads the session (trace_registry.h) */
        state = &slot_replay[slot];
    }
    if (__builtin_expect(state->ready, 1)) return state;
    state->calls = 0;
    state->diverged = 0;
    find_stream(state);
    state->ready = 1;
    return state;
}

/* The value a clock shows a thread whose replay has diverged: it goes on from the anchor as the session moves. */
static int64_t diverged_value(struct replay_thread *state, struct tc_segment *segment, int vclock) {
    int64_t now = tc_segment_read(segment, vclock);
    if (state->anchor_value[vclock] == NO_VALUE) return now;
    /* Recorded values are the trace's: wrap rather than overflow (undefined in C). */
    return (int64_t)((uint64_t)state->anchor_value[vclock] + ((uint64_t)now - (uint64_t)state->anchor_session[vclock]));
}

static void report_divergence(struct replay_thread *state, uint32_t reason, const struct tc_event *expected,
                              struct tc_event_kind asked) {
    struct tc_divergence record;
    memset(&record, 0, sizeof(record));
    record.magic = TC_DIVERGENCE_MAGIC;
    record.reason = reason;
    record.registry_index = tc_registry_own_entry;
    record.image = tc_registry_own_image;
    record.pid = tc_shim_pid();
    record.trace_process = replayed_image;
    record.thread = tc_trace_thread_number();
    record.call = state->calls;
    if (expected) record.expected = (struct tc_event_kind){expected->type, expected->detail, expected->clock};
    record.asked = asked;
    struct tc_text path = {.length = 0};
    entry_path(tc_registry_own_entry, &path, 0);
    memcpy(record.path, path.text, path.length < sizeof(record.path) - 1 ? path.length : sizeof(record.path) - 1);
    tc_trace_own_arguments(record.command, sizeof(record.command) - 1);
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
static void diverge(struct replay_thread *state, struct tc_segment *segment, uint32_t reason,
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
            state->anchor_value[c] = __atomic_load_n(&tc_registry->last_replayed[c], __ATOMIC_RELAXED);
    report_divergence(state, reason, expected, asked);
    if (strict) tc_raw_syscall(SYS_exit_group, TC_SHIM_DIVERGED_STATUS);
}

/* Takes the next recorded event if it is the one asked for; else diverges. Returns 1 if taken. */
static int replay_next(struct replay_thread *state, struct tc_segment *segment, struct tc_event_kind asked,
                       int vclock, struct tc_event *event) {
    if (replayed_image < 0) {
        diverge(state, segment, TC_DIVERGED_NO_PROCESS, NULL, asked);
        return 0;
    }
    if (!state->has_stream) {
        /* A thread the recording numbered (the main thread always is) but that read nothing asks past its end. */
        const struct tc_trace_process *image = &trace_processes[replayed_image];
        uint32_t highest = image->stream_count ? trace_streams[image->first_stream + image->stream_count - 1].thread : 0;
        diverge(state, segment, tc_trace_thread_number() <= highest ? TC_DIVERGED_PAST_END : TC_DIVERGED_NO_THREAD,
                NULL, asked);
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

static const char *map_trace(const char *trace_path, const char *directory) {
    uint64_t size = 0;
    trace = tc_trace_map_file(trace_path, 0, 0, &size);
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
    claims = tc_trace_map_file(claims_path.text, 1, trace_header->process_count, &claims_size);
    if (!claims && trace_header->process_count > 0) return "has no claims file the shim can use";
    return NULL;
}

const char *tc_replay_open(const char *trace_path, const char *directory) {
    strcpy(replay_directory, directory);
    const char *problem = map_trace(trace_path, directory);
    if (problem) return problem;
    const char *strictness = getenv("TIMECTL_REPLAY_STRICT");
    strict = strictness && strcmp(strictness, "1") == 0;
    forget_replayed_values();
    find_recorded_image();
    return NULL;
}

/* ---- what the interposers call (trace.h) ---- */

void tc_trace_replay_reading(int call, clockid_t clock, int vclock, struct tc_segment *segment, struct timespec *value) {
    struct replay_thread *state = current_thread();
    if (!state) return;  /* the session's reading stands */
    state->calls++;
    if (!state->diverged) {
        struct tc_event event;
        struct tc_event_kind asked = {TC_EVENT_READ, (uint32_t)call, clock};
        if (replay_next(state, segment, asked, vclock, &event)) {
            __atomic_store_n(&process_last[vclock], event.value, __ATOMIC_RELAXED);
            __atomic_store_n(&tc_registry->last_replayed[vclock], event.value, __ATOMIC_RELAXED);
            *value = tc_timespec_from_ns(event.value);
            return;
        }
    }
    *value = tc_timespec_from_ns(diverged_value(state, segment, vclock));
}

void tc_trace_replay_wall_set(int call, struct tc_segment *segment) {
    struct replay_thread *state = current_thread();
    if (!state) return;
    state->calls++;
    if (state->diverged) return;
    struct tc_event event;
    struct tc_event_kind asked = {TC_EVENT_SET_WALL, (uint32_t)call, TC_VCLOCK_REALTIME};
    if (!replay_next(state, segment, asked, TC_VCLOCK_REALTIME, &event)) return;
    __atomic_store_n(&process_last[TC_VCLOCK_REALTIME], event.value, __ATOMIC_RELAXED);
    __atomic_store_n(&tc_registry->last_replayed[TC_VCLOCK_REALTIME], event.value, __ATOMIC_RELAXED);
}

void tc_replay_wait_begin(int kind, int vclock) {
    struct replay_thread *state = current_thread();
    if (!state) return;
    state->calls++;
    if (state->diverged) return;
    struct tc_event event;
    struct tc_event_kind asked = {TC_EVENT_WAIT_BEGIN, (uint32_t)kind, vclock};
    replay_next(state, tc_shim_segment(), asked, vclock, &event);
}

void tc_replay_wait_end(void) {
    /* The recorded end is passed over: the wait ended as it does now. */
    struct replay_thread *state = current_thread();
    if (!state || state->diverged || !state->has_stream) return;
    struct tc_decoder before = state->decoder;
    struct tc_event event;
    if (tc_decode_event(&state->decoder, &event) != 1 || event.type != TC_EVENT_WAIT_END) state->decoder = before;
}

int64_t tc_trace_session_deadline(struct tc_segment *segment, int vclock, int64_t absolute) {
    if (tc_trace_mode != TC_TRACE_REPLAYING) return absolute;
    struct replay_thread *state = current_thread();
    if (!state) return absolute;
    int64_t session_now = tc_segment_read(segment, vclock);
    int64_t replayed_now = state->diverged ? diverged_value(state, segment, vclock)
                                           : __atomic_load_n(&process_last[vclock], __ATOMIC_RELAXED);
    if (replayed_now == NO_VALUE || absolute == INT64_MIN || absolute == INT64_MAX) return absolute;
    int64_t distance;
    if (__builtin_sub_overflow(absolute, replayed_now, &distance)) distance = absolute > replayed_now ? INT64_MAX : INT64_MIN;
    if (distance <= 0) return session_now;
    return session_now > INT64_MAX - distance ? INT64_MAX : session_now + distance;
}

void tc_replay_static_program_begins(void) {
    int slot = tc_trace_thread_slot();
    if (slot >= 0) slot_replay[slot] = replay_thread;
}

void tc_replay_after_fork_in_child(void) {
    memset(&replay_thread, 0, sizeof(replay_thread));
    if (tc_registry_own_entry == TC_NO_ENTRY) {
        replayed_image = -1;
        return;
    }
    forget_replayed_values();
    find_recorded_image();
}

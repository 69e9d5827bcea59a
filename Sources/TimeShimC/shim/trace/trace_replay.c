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
 * A Go program is replayed per process instead (see "Go programs" below):
 * Go moves goroutines between OS threads, and its runtime reads the
 * monotonic clock as often as it likes.
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
#include "trace_mode.h"
#include "trace_registry.h"
#include "../runtime/process.h"
#include "../runtime/text.h"

#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/*
 * Go programs. Go's time.Now() reads CLOCK_REALTIME and right after it
 * CLOCK_MONOTONIC, on one OS thread; the runtime's own reads (scheduler,
 * sysmon, timers, time.Since) are single monotonic reads, as many as it
 * likes, and goroutines move between OS threads. So a Go process is
 * replayed as a whole: when its image is paired, the recorded streams are
 * turned into one sequence of *observations* — a wall reading and the
 * monotonic reading right after it in its stream, if there is one —
 * merged across threads in the order of their monotonic values (the
 * session's monotonic clock is the same for every thread). A wall reading
 * on any thread takes the next observation; the same thread's next reading,
 * if monotonic, takes its monotonic half. Every other reading is of a clock
 * that continues from the process's last replayed value, an elapsed clock
 * never showing less than the process was already told. Waits are not
 * compared with the recording: how many there are is the runtime's affair.
 * The sequence takes 16 bytes per recorded wall reading, in an anonymous
 * mapping (a static program's malloc owns the break).
 */
struct go_observation {
    int64_t wall;
    int64_t monotonic;             /* NO_VALUE: no monotonic reading came right after the wall one */
};

static int go_replay;                             /* this image is a Go program, replayed per process */
static struct go_observation *go_observations;
static uint64_t go_observation_count;
static uint64_t go_taken;                         /* wall readings asked for so far: the next observation's index */
static int go_diverged;                           /* reported: a Go process diverges once */
static int64_t go_continuation[TC_VCLOCKS];       /* replayed value − session value, per clock, between observations */
static int64_t go_highest[TC_VCLOCKS];            /* the highest value returned on each elapsed clock */

struct replay_thread {
    int ready;
    uint32_t calls;                /* readings and waits so far */
    int has_stream;
    int diverged;
    struct tc_decoder decoder;
    int64_t continuation[TC_VCLOCKS];    /* after a divergence: replayed value − session value, per clock */
    int64_t pending_monotonic;     /* Go: the monotonic half of the observation the thread just took, or NO_VALUE */
    int64_t last[TC_VCLOCKS];      /* the last value replayed to this thread, per clock, or NO_VALUE */
    /* A reading answered with the clock's last value where the recording had something else: synchronisation
       if a wait comes next (the reading its deadline was worked out from), else the divergence kept here. */
    int tentative;
    uint32_t tentative_call, tentative_reason;
    int tentative_expected;
    struct tc_event expected;
    struct tc_event_kind tentative_asked;
    int tentative_vclock;
    uint64_t unrecorded;           /* the waits it is in, innermost in bit 0: 1 for one the recording did not have */
    uint32_t depth;
};

static TC_TLS struct replay_thread replay_thread;
/* The same for a static program's threads, by slot (trace_registry.h). */
static struct replay_thread slot_replay[TC_STATIC_TRACE_THREADS];

static void forget_replayed_values(void) {
    for (int c = 0; c < TC_VCLOCKS; c++) __atomic_store_n(&process_last[c], NO_VALUE, __ATOMIC_RELAXED);
}

/* A value handed out from the recording: where a clock that continues the replay, in this process or another, goes on from. */
static void note_replayed(int vclock, int64_t value) {
    __atomic_store_n(&process_last[vclock], value, __ATOMIC_RELAXED);
    __atomic_store_n(&tc_registry->last_replayed[vclock], value, __ATOMIC_RELAXED);
}

/*
 * A clock that continues the replay moves as the session moves, a constant
 * distance (its continuation) from the session's clock. Recorded values are
 * the trace's: wrap rather than overflow (undefined in C).
 */
static int64_t continued(int64_t continuation, int64_t session_now) {
    return (int64_t)((uint64_t)session_now + (uint64_t)continuation);
}

static int64_t continuation_from(int64_t value, int64_t session_now) {
    return (int64_t)((uint64_t)value - (uint64_t)session_now);
}

/*
 * Where a clock that continues the replay starts, per clock: from the
 * process's last replayed value on it, else from `upcoming` (the next value
 * the recording has on it, NO_VALUE for none), else from the last value
 * replayed to any process of the run, else with the session.
 */
static void continuations(struct tc_segment *segment, const int64_t upcoming[TC_VCLOCKS], int64_t out[TC_VCLOCKS]) {
    for (int c = 0; c < TC_VCLOCKS; c++) {
        int64_t from = __atomic_load_n(&process_last[c], __ATOMIC_RELAXED);
        if (from == NO_VALUE) from = upcoming[c];
        if (from == NO_VALUE) from = __atomic_load_n(&tc_registry->last_replayed[c], __ATOMIC_RELAXED);
        out[c] = from == NO_VALUE ? 0 : continuation_from(from, tc_segment_read(segment, c));
    }
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
    state->pending_monotonic = NO_VALUE;
    for (int c = 0; c < TC_VCLOCKS; c++) state->last[c] = NO_VALUE;
    state->unrecorded = 0;
    state->depth = 0;
    state->tentative = 0;
    if (!go_replay) find_stream(state);
    state->ready = 1;
    return state;
}

/* The value a clock shows a thread whose replay has diverged: it goes on from where the replay was as the session moves. */
static int64_t diverged_value(struct replay_thread *state, struct tc_segment *segment, int vclock) {
    return continued(state->continuation[vclock], tc_segment_read(segment, vclock));
}

/* Appends a divergence of the calling thread's to the replay's divergences file: its `call`, counted from 1. */
static void report_divergence(uint32_t call, uint32_t reason, const struct tc_event *expected, struct tc_event_kind asked) {
    struct tc_divergence record;
    memset(&record, 0, sizeof(record));
    record.magic = TC_DIVERGENCE_MAGIC;
    record.reason = reason;
    record.registry_index = tc_registry_own_entry;
    record.image = tc_registry_own_image;
    record.pid = tc_shim_pid();
    record.trace_process = replayed_image;
    record.thread = tc_trace_thread_number();
    record.call = call;
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
    int64_t upcoming[TC_VCLOCKS];
    for (int c = 0; c < TC_VCLOCKS; c++) upcoming[c] = NO_VALUE;
    if (state->has_stream) {
        struct tc_decoder ahead = state->decoder;
        struct tc_event event;
        while (tc_decode_event(&ahead, &event) == 1)
            if (event.type == TC_EVENT_READ && upcoming[event.vclock] == NO_VALUE) upcoming[event.vclock] = event.value;
    }
    continuations(segment, upcoming, state->continuation);
    report_divergence(state->calls, reason, expected, asked);
    if (strict) tc_raw_syscall(SYS_exit_group, TC_SHIM_DIVERGED_STATUS);
}

/* ---- Go programs (see the comment with their state above) ---- */

/* A recorded stream, read for its observations in order. */
struct go_cursor {
    struct tc_decoder decoder;
    uint32_t stream;
    int64_t last_monotonic;        /* the stream's latest monotonic reading: where its next observation sits in time */
    struct go_observation next;
};

static void go_cursor_start(struct go_cursor *cursor, uint32_t stream) {
    const struct tc_trace_stream *recorded = &trace_streams[stream];
    memset(cursor, 0, sizeof(*cursor));
    cursor->decoder.next = trace_data + recorded->data_offset;
    cursor->decoder.end = cursor->decoder.next + recorded->data_length;
    cursor->stream = stream;
    cursor->last_monotonic = NO_VALUE;
}

/* Reads the stream's next observation into cursor->next; 0 at its end. */
static int go_cursor_advance(struct go_cursor *cursor) {
    struct tc_event event;
    while (tc_decode_event(&cursor->decoder, &event) == 1) {
        if (event.type != TC_EVENT_READ) continue;
        if (event.vclock == TC_VCLOCK_MONOTONIC) cursor->last_monotonic = event.value;
        if (event.vclock != TC_VCLOCK_REALTIME) continue;
        cursor->next.wall = event.value;
        cursor->next.monotonic = NO_VALUE;
        struct tc_decoder ahead = cursor->decoder;
        if (tc_decode_event(&ahead, &event) == 1 && event.type == TC_EVENT_READ && event.vclock == TC_VCLOCK_MONOTONIC) {
            cursor->decoder = ahead;
            cursor->next.monotonic = cursor->last_monotonic = event.value;
        }
        return 1;
    }
    return 0;
}

/* Merge order: by monotonic time (a lone wall reading sits at its stream's last monotonic one), then stream. */
static int go_cursor_before(const struct go_cursor *a, const struct go_cursor *b) {
    return a->last_monotonic != b->last_monotonic ? a->last_monotonic < b->last_monotonic : a->stream < b->stream;
}

static void go_sift_down(struct go_cursor **heap, uint32_t size, uint32_t at) {
    for (;;) {
        uint32_t first = at, left = 2 * at + 1, right = left + 1;
        if (left < size && go_cursor_before(heap[left], heap[first])) first = left;
        if (right < size && go_cursor_before(heap[right], heap[first])) first = right;
        if (first == at) return;
        struct go_cursor *swapped = heap[at];
        heap[at] = heap[first];
        heap[first] = swapped;
        at = first;
    }
}

static void *map_anonymous(uint64_t size) {
    long address = tc_raw_syscall(SYS_mmap, 0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return address < 0 && address > -4096 ? NULL : (void *)address;
}

/*
 * Builds the process's observations from its recorded image (none if it
 * has no recorded image) and starts its clocks. NULL, or what is wrong.
 */
static const char *go_pair(struct tc_segment *segment) {
    if (go_observations) tc_raw_syscall(SYS_munmap, go_observations, go_observation_count * sizeof(*go_observations));
    go_observations = NULL;
    go_observation_count = 0;
    go_taken = 0;
    go_diverged = 0;
    int64_t upcoming[TC_VCLOCKS];  /* the earliest first reading of each clock among the image's threads */
    for (int c = 0; c < TC_VCLOCKS; c++) upcoming[c] = NO_VALUE;
    const char *problem = NULL;
    const struct tc_trace_process *image = replayed_image >= 0 ? &trace_processes[replayed_image] : NULL;
    uint32_t streams = image ? image->stream_count : 0;
    uint64_t walls = 0;
    for (uint32_t s = 0; s < streams; s++) {
        struct go_cursor cursor;
        go_cursor_start(&cursor, image->first_stream + s);
        int seen[TC_VCLOCKS] = {0};
        struct tc_event event;
        while (tc_decode_event(&cursor.decoder, &event) == 1) {
            if (event.type != TC_EVENT_READ) continue;
            walls += event.vclock == TC_VCLOCK_REALTIME;
            if (!seen[event.vclock] && (upcoming[event.vclock] == NO_VALUE || event.value < upcoming[event.vclock]))
                upcoming[event.vclock] = event.value;
            seen[event.vclock] = 1;
        }
    }
    if (walls > 0) {
        uint64_t cursors_size = (uint64_t)streams * (sizeof(struct go_cursor) + sizeof(struct go_cursor *));
        struct go_cursor *cursors = map_anonymous(cursors_size);
        go_observations = map_anonymous(walls * sizeof(*go_observations));
        if (cursors && go_observations) {
            struct go_cursor **heap = (struct go_cursor **)(cursors + streams);
            uint32_t size = 0;
            for (uint32_t s = 0; s < streams; s++) {
                go_cursor_start(&cursors[s], image->first_stream + s);
                if (go_cursor_advance(&cursors[s])) heap[size++] = &cursors[s];
            }
            for (uint32_t at = size / 2; at-- > 0;) go_sift_down(heap, size, at);
            while (size > 0 && go_observation_count < walls) {
                go_observations[go_observation_count++] = heap[0]->next;
                if (!go_cursor_advance(heap[0])) heap[0] = heap[--size];
                go_sift_down(heap, size, 0);
            }
        } else {
            if (go_observations) tc_raw_syscall(SYS_munmap, go_observations, walls * sizeof(*go_observations));
            go_observations = NULL;
            problem = "cannot be replayed: no memory for its recorded wall clock readings";
        }
        if (cursors) tc_raw_syscall(SYS_munmap, cursors, cursors_size);
    }
    continuations(segment, upcoming, go_continuation);
    for (int c = 0; c < TC_VCLOCKS; c++) __atomic_store_n(&go_highest[c], INT64_MIN, __ATOMIC_RELAXED);
    go_replay = 1;  /* before any of the program's code runs */
    return problem;
}

/* What a Go process's clock shows between observations: it continues the replay, an elapsed one never going back. */
static int64_t go_continued(int vclock, int64_t session_now) {
    int64_t value = continued(__atomic_load_n(&go_continuation[vclock], __ATOMIC_RELAXED), session_now);
    if (tc_track_of(vclock) != TC_TRACK_ELAPSED) return value;
    int64_t highest = __atomic_load_n(&go_highest[vclock], __ATOMIC_RELAXED);
    return value > highest ? value : highest;
}

static void go_returned(int vclock, int64_t value) {
    if (tc_track_of(vclock) != TC_TRACK_ELAPSED) return;
    int64_t highest = __atomic_load_n(&go_highest[vclock], __ATOMIC_RELAXED);
    while (value > highest &&
           !__atomic_compare_exchange_n(&go_highest[vclock], &highest, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* A recorded value was returned: the clock continues from it. */
static void go_replayed(int vclock, int64_t value, int64_t session_now) {
    __atomic_store_n(&go_continuation[vclock], continuation_from(value, session_now), __ATOMIC_RELAXED);
    go_returned(vclock, value);
    note_replayed(vclock, value);
}

/* The process diverged (reported once for it); `number` counts its wall readings, this one included. */
static void go_diverge(uint32_t reason, uint64_t number, int call, clockid_t clock) {
    int expected = 0;
    if (!__atomic_compare_exchange_n(&go_diverged, &expected, 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
    struct tc_event_kind asked = {TC_EVENT_READ, (uint32_t)call, clock};
    report_divergence(number > UINT32_MAX ? UINT32_MAX : (uint32_t)number, reason, NULL, asked);
    if (strict) tc_raw_syscall(SYS_exit_group, TC_SHIM_DIVERGED_STATUS);
}

static void go_replay_reading(int call, clockid_t clock, int vclock, struct timespec *value) {
    int64_t session_now = tc_timespec_ns(*value);
    struct replay_thread *state = current_thread();
    int64_t pending = NO_VALUE;
    if (state) {
        pending = state->pending_monotonic;
        state->pending_monotonic = NO_VALUE;
    }
    if (replayed_image < 0) go_diverge(TC_DIVERGED_NO_PROCESS, 1, call, clock);
    int64_t result;
    if (vclock == TC_VCLOCK_REALTIME) {
        uint64_t index = __atomic_fetch_add(&go_taken, 1, __ATOMIC_RELAXED);
        if (index < go_observation_count) {
            struct go_observation observation = go_observations[index];
            go_replayed(vclock, observation.wall, session_now);
            if (state) state->pending_monotonic = observation.monotonic;
            result = observation.wall;
        } else {
            go_diverge(TC_DIVERGED_GO_PAST_END, index + 1, call, clock);
            result = go_continued(vclock, session_now);
        }
    } else if (vclock == TC_VCLOCK_MONOTONIC && pending != NO_VALUE) {
        go_replayed(vclock, pending, session_now);
        result = pending;
    } else {
        result = go_continued(vclock, session_now);
        go_returned(vclock, result);
    }
    *value = tc_timespec_from_ns(result);
}

/*
 * Synchronisation, not timing: a wait that ended before its deadline (a
 * lock or condition taken before its timeout — Python's GIL waits 5 ms at a
 * time), and a reading that repeats the thread's last value on its clock
 * (the reading such a wait's deadline was worked out from). How many of
 * them a thread makes depends on how the kernel schedules threads, so the
 * recording's are passed over where the thread does not make them now, and
 * the thread's own are answered without the recording (docs/trace.md). The
 * same rule decides what `timectl run --repeat` compares (TraceEvent.timeline).
 */
static int recorded_synchronisation(const struct replay_thread *state, struct tc_decoder *at) {
    struct tc_decoder ahead = *at;
    struct tc_event event;
    if (tc_decode_event(&ahead, &event) != 1) return 0;
    if (event.type == TC_EVENT_READ && state->last[event.vclock] == event.value) {
        *at = ahead;
        return 1;
    }
    if (event.type != TC_EVENT_WAIT_BEGIN) return 0;
    struct tc_event end;
    if (tc_decode_event(&ahead, &end) != 1 || end.type != TC_EVENT_WAIT_END || end.detail == TC_WAIT_REACHED_DEADLINE)
        return 0;
    *at = ahead;
    return 1;
}

static int matches(const struct tc_event *event, struct tc_event_kind asked, int vclock) {
    return event->type == asked.type && event->vclock == vclock &&
           (asked.type != TC_EVENT_WAIT_BEGIN || event->detail == asked.detail);
}

/*
 * The thread's call after a tentative reading decides what it was. A wait:
 * the reading its deadline was worked out from (synchronisation). A reading
 * of the same clock: still undecided. A call the recording has next: an
 * extra reading of a clock that had not moved, between calls the recording
 * has (harmless). Anything else: the thread's divergence, reported at the
 * tentative reading's call.
 */
static void report_tentative(struct replay_thread *state, struct tc_segment *segment) {
    state->tentative = 0;
    uint32_t calls = state->calls;
    state->calls = state->tentative_call;
    diverge(state, segment, state->tentative_reason, state->tentative_expected ? &state->expected : NULL,
            state->tentative_asked);
    state->calls = calls;
}

static void settle_tentative(struct replay_thread *state, struct tc_segment *segment, struct tc_event_kind asked,
                             int vclock) {
    if (!state->tentative || asked.type == TC_EVENT_WAIT_BEGIN) {
        state->tentative = 0;
        return;
    }
    struct tc_decoder ahead = state->decoder;
    struct tc_event next;
    if (tc_decode_event(&ahead, &next) == 1 && matches(&next, asked, vclock)) {
        state->tentative = 0;
        return;
    }
    report_tentative(state, segment);
}

/* A thread that ends after a tentative reading of the wall clock: it was the last thing the thread did, and no
   wait explains it. One of a monotonic clock is passed over: the deadline of a lock or condition taken at once
   as the thread ends (a worker taking Python's GIL to finish), as often as the kernel's scheduling makes it; so
   are the main thread's last readings as its process exits (no key's destructor runs then), an interpreter's
   shutdown reading the clock as its threads' last moments make it. */
static pthread_key_t tentative_key;
static pthread_once_t tentative_key_once = PTHREAD_ONCE_INIT;

static void settle_at_thread_end(void *argument) {
    struct replay_thread *state = argument;
    if (state->tentative && !state->diverged &&
        (state->tentative_vclock == TC_VCLOCK_REALTIME || state->tentative_vclock == TC_VCLOCK_TAI))
        report_tentative(state, tc_shim_segment());
}

static void make_tentative_key(void) { pthread_key_create(&tentative_key, settle_at_thread_end); }

static void watch_thread_end(struct replay_thread *state) {
    if (tc_trace_threads_in_slots()) return;  /* a static program's threads: pthread's keys are not theirs */
    pthread_once(&tentative_key_once, make_tentative_key);
    pthread_setspecific(tentative_key, state);
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
    if (decoded == 1 && matches(event, asked, vclock)) return 1;
    /* The recording's synchronisation the thread does not make now: passed over. */
    struct tc_decoder skipping = before;
    while (recorded_synchronisation(state, &skipping)) {
        struct tc_decoder at = skipping;
        struct tc_event next;
        if (tc_decode_event(&at, &next) == 1 && matches(&next, asked, vclock)) {
            state->decoder = at;
            *event = next;
            return 1;
        }
    }
    state->decoder = before;
    /* The thread's own: a wait the recording does not have (also past its end), and a reading of a
       clock that has not moved for it when a wait follows (the reading that wait's deadline is worked out
       from): answered with the last value, and judged at the thread's next call (settle_tentative). */
    if (asked.type == TC_EVENT_WAIT_BEGIN) return 0;
    if (asked.type == TC_EVENT_READ && state->last[vclock] != NO_VALUE && !state->tentative) {
        state->tentative = 1;
        state->tentative_call = state->calls;
        state->tentative_reason = decoded == 1 ? TC_DIVERGED_DIFFERENT : TC_DIVERGED_PAST_END;
        state->tentative_expected = decoded == 1;
        if (decoded == 1) state->expected = *event;
        state->tentative_asked = asked;
        state->tentative_vclock = vclock;
        watch_thread_end(state);
        event->type = TC_EVENT_READ;
        event->vclock = vclock;
        event->value = state->last[vclock];
        return 1;
    }
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

/* ---- what the interposers call (trace_replay.h) ---- */

void tc_trace_replay_reading(int call, clockid_t clock, int vclock, struct tc_segment *segment, struct timespec *value) {
    if (go_replay) {
        go_replay_reading(call, clock, vclock, value);
        return;
    }
    struct replay_thread *state = current_thread();
    if (!state) return;  /* the session's reading stands */
    state->calls++;
    if (!state->diverged) {
        struct tc_event_kind asked = {TC_EVENT_READ, (uint32_t)call, clock};
        /* Another reading of the clock a tentative reading read: the same answer, still undecided. */
        if (state->tentative && vclock == state->tentative_vclock) {
            *value = tc_timespec_from_ns(state->last[vclock]);
            return;
        }
        settle_tentative(state, segment, asked, vclock);
    }
    if (!state->diverged) {
        struct tc_event event;
        struct tc_event_kind asked = {TC_EVENT_READ, (uint32_t)call, clock};
        if (replay_next(state, segment, asked, vclock, &event)) {
            note_replayed(vclock, event.value);
            state->last[vclock] = event.value;
            *value = tc_timespec_from_ns(event.value);
            return;
        }
    }
    *value = tc_timespec_from_ns(diverged_value(state, segment, vclock));
}

void tc_trace_replay_wall_set(int call, struct tc_segment *segment) {
    /* A Go process's sets are neither compared nor applied: its replayed time.Now() values already show them. */
    if (go_replay) return;
    struct replay_thread *state = current_thread();
    if (!state) return;
    state->calls++;
    struct tc_event event;
    struct tc_event_kind asked = {TC_EVENT_SET_WALL, (uint32_t)call, TC_VCLOCK_REALTIME};
    if (!state->diverged) settle_tentative(state, segment, asked, TC_VCLOCK_REALTIME);
    if (state->diverged) return;
    if (!replay_next(state, segment, asked, TC_VCLOCK_REALTIME, &event)) return;
    note_replayed(TC_VCLOCK_REALTIME, event.value);
}

void tc_replay_wait_begin(int kind, int vclock) {
    if (go_replay) return;
    struct replay_thread *state = current_thread();
    if (!state) return;
    state->calls++;
    state->tentative = 0;  /* the reading a wait's deadline was worked out from */
    int recorded = 0;
    if (!state->diverged) {
        struct tc_event event;
        struct tc_event_kind asked = {TC_EVENT_WAIT_BEGIN, (uint32_t)kind, vclock};
        recorded = replay_next(state, tc_shim_segment(), asked, vclock, &event);
    }
    state->unrecorded = state->unrecorded << 1 | (recorded ? 0 : 1);
    state->depth++;
}

void tc_replay_wait_end(void) {
    /* The recorded end is passed over: the wait ended as it does now. */
    if (go_replay) return;
    struct replay_thread *state = current_thread();
    if (!state) return;
    int recorded = state->depth == 0 || !(state->unrecorded & 1);
    state->unrecorded >>= 1;
    if (state->depth) state->depth--;
    if (!recorded || state->diverged || !state->has_stream) return;
    struct tc_decoder before = state->decoder;
    struct tc_event event;
    if (tc_decode_event(&state->decoder, &event) != 1 || event.type != TC_EVENT_WAIT_END) state->decoder = before;
}

int64_t tc_trace_session_deadline(struct tc_segment *segment, int vclock, int64_t absolute) {
    if (tc_trace_mode != TC_TRACE_REPLAYING) return absolute;
    int64_t session_now = tc_segment_read(segment, vclock), replayed_now;
    if (go_replay) {
        replayed_now = go_continued(vclock, session_now);
    } else {
        struct replay_thread *state = current_thread();
        if (!state) return absolute;
        replayed_now = state->diverged ? diverged_value(state, segment, vclock)
                                       : __atomic_load_n(&process_last[vclock], __ATOMIC_RELAXED);
    }
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

const char *tc_replay_go_program_begins(struct tc_segment *segment) { return go_pair(segment); }

void tc_replay_after_fork_in_child(void) {
    memset(&replay_thread, 0, sizeof(replay_thread));
    if (tc_trace_threads_in_slots()) memset(slot_replay, 0, sizeof(slot_replay));
    replayed_image = -1;
    if (tc_registry_own_entry != TC_NO_ENTRY) {
        forget_replayed_values();
        find_recorded_image();
    }
    /* A Go program forked by C code of its own: the child replays its own recorded image, as a whole (with no
       memory for its observations, its first wall reading diverges). */
    if (go_replay) (void)go_pair(tc_shim_segment());
}

/*
 * Record and replay (SPEC §5): the one definition of
 *
 *  - a recording in progress: a directory holding the process registry
 *    (which process is which, across runs) and one raw file per process
 *    image, which the shim of that process appends events to; and
 *  - the trace file `timectl record` builds from them, and replay reads.
 *
 * docs/trace.md describes both for people. The shim and TimeControlKit
 * compile against this header, and its inline encoder and decoder are the
 * only ones.
 *
 * Identity. A process is named by its place in the process tree: the
 * command timectl started is "1", its second child "1.2", that child's
 * first child "1.2.1" — children numbered in the order their parent made
 * them — and an exec starts a new *image* of the same process (1, 2, …).
 * Threads are numbered in the order their process created them; the main
 * thread is 0. None of this depends on pids, so a replay finds each
 * process's and thread's own readings although every pid differs.
 */
#ifndef TIMECTL_TRACE_H
#define TIMECTL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- events ---- */

enum tc_event_type {
    TC_EVENT_READ = 1,       /* a clock reading the shim returned */
    TC_EVENT_WAIT_BEGIN = 2, /* a thread began a wait with a virtual deadline */
    TC_EVENT_WAIT_END = 3,   /* … and the wait returned */
    TC_EVENT_SET_WALL = 4,   /* the thread set the session's wall clock (trace format 2) */
};

/* Which libc entry point a reading, or a setting of the clock, came through (for people; replay matches on the clock). */
enum tc_call {
    TC_CALL_CLOCK_GETTIME = 1,
    TC_CALL_GETTIMEOFDAY = 2,
    TC_CALL_TIME = 3,
    TC_CALL_TIMESPEC_GET = 4,
    TC_CALL_FTIME = 5,
    TC_CALL_NTP_GETTIME = 6,
    TC_CALL_SYSCALL = 7,     /* syscall(SYS_clock_gettime, …) and friends, syscall(SYS_clock_settime, …) … */
    TC_CALL_CLOCK_SETTIME = 8,
    TC_CALL_SETTIMEOFDAY = 9,
    TC_CALL_STIME = 10,
    TC_CALL_ADJTIMEX = 11,   /* adjtimex, ntp_adjtime */
    TC_CALL_CLOCK_ADJTIME = 12,
    TC_CALL_ADJTIME = 13,
};

/* How a wait ended. */
enum tc_wait_ending {
    TC_WAIT_REACHED_DEADLINE = 1,
    TC_WAIT_ENDED_EARLY = 2,   /* the awaited event, a signal, an error */
};

/* ---- a recording in progress ---- */

#define TC_RECORDING_VERSION 2u
#define TC_REGISTRY_FILE "registry"
#define TC_REGISTRY_MAGIC "TCREGST"          /* 8 bytes with its NUL */
#define TC_REGISTRY_CAPACITY 65536u

/*
 * The registry: one entry per process of the run, claimed by the process
 * itself when its shim attaches (or, for a fork child, in the child right
 * after the fork). Lock-free: `next` hands out entries, `pid` is stored
 * last. A process looking for itself (after an exec) or its parent matches
 * pid and start time, which rules out a pid used again.
 */
struct tc_registry_header {
    char magic[8];
    uint32_t version;
    uint32_t capacity;
    uint32_t next;               /* entries handed out so far */
    uint32_t roots;              /* processes started with no recorded parent so far */
    /* Replay: the last value replayed on each virtual clock, by any process
       (INT64_MIN before the first) — where a diverged process with no
       replayed values of its own continues from. */
    int64_t last_replayed[5];    /* [TC_VCLOCKS] */
};

struct tc_registry_entry {
    int32_t pid;                 /* 0 while being claimed */
    uint32_t parent;             /* index + 1 of the parent's entry, 0 for a root */
    uint32_t ordinal;            /* 1-based, among the parent's children (or among the roots) */
    uint32_t images;             /* images so far: 1, +1 for each exec */
    uint32_t children;           /* children so far: the next child's ordinal − 1 */
    uint32_t replays;            /* replay: index + 1 of the recorded image it replays, 0 for none */
    uint64_t start_ticks;        /* field 22 of /proc/PID/stat: tells a re-used pid apart */
};

/*
 * A raw file, `p<ENTRY>-<IMAGE>.raw`: a 4 KiB header, then 64 KiB chunks.
 * A chunk belongs to one thread: a 16-byte header says which, the chunk's
 * place in that thread's sequence, and how many bytes of it hold events;
 * then the events, encoded exactly as in a trace (see "Encoded events"),
 * the decoder's state carrying on from one chunk of the thread to the
 * next. The shim writes an event, then publishes the chunk's new length
 * with a release store, so a reader (even after the process was killed
 * half-way through an event) sees whole events only. A thread takes a new
 * chunk when fewer than TC_MAX_EVENT_SIZE bytes are left in its own.
 */
#define TC_RAW_MAGIC "TCRAW03"               /* 8 bytes with its NUL */
#define TC_RAW_HEADER_SIZE 4096u
#define TC_CHUNK_SIZE 65536u
#define TC_CHUNK_MAGIC 0x4b4e4843u           /* "CHNK" */
#define TC_MAX_EVENT_SIZE 13u                /* tag, clock, a varint of at most 11 bytes */

struct tc_raw_header {
    char magic[8];
    uint32_t version;
    uint32_t registry_index;     /* the process's registry entry */
    uint32_t image;
    int32_t pid;
    uint32_t argv_length;        /* bytes of `argv`: the arguments, each ending in NUL */
    uint32_t lost_events;        /* events not recorded: no room (the file could not grow), or a
                                    signal handler reading the clock while its thread was recording */
    char argv[TC_RAW_HEADER_SIZE - 32];
};

struct tc_chunk_header {
    uint32_t magic;              /* TC_CHUNK_MAGIC, written last when the chunk is taken */
    uint32_t thread;
    uint32_t sequence;           /* 0, 1, … within the thread */
    uint32_t length;             /* bytes of events after this header, published after each event */
};

_Static_assert(sizeof(struct tc_raw_header) == TC_RAW_HEADER_SIZE, "the raw header is one page");
_Static_assert(sizeof(struct tc_chunk_header) == 16, "a chunk header is 16 bytes");
_Static_assert(sizeof(struct tc_registry_entry) == 32, "registry entries are 32 bytes");
_Static_assert(sizeof(struct tc_registry_header) == 64, "the registry header is 64 bytes");

/*
 * A replay's working directory holds the registry of the replayed run, a
 * claim per recorded process image (TC_CLAIMS_FILE: one byte each, so that
 * an image is replayed by one process only) and the divergences the shims
 * report (TC_DIVERGENCES_FILE: struct tc_divergence records, each appended
 * with one write).
 */
#define TC_CLAIMS_FILE "claims"
#define TC_DIVERGENCES_FILE "divergences"
#define TC_DIVERGENCE_MAGIC 0x56494454u       /* "TDIV" */

enum tc_divergence_reason {
    TC_DIVERGED_DIFFERENT = 1,     /* the thread asked for something else than the next recorded event */
    TC_DIVERGED_PAST_END = 2,      /* the thread asked for more than was recorded */
    TC_DIVERGED_NO_THREAD = 3,     /* the process's recording has no such thread */
    TC_DIVERGED_NO_PROCESS = 4,    /* the recording has no such process */
    TC_DIVERGED_GO_PAST_END = 5,   /* a Go program (replayed per process) asked for more wall readings than were
                                      recorded; `call` counts its wall readings, this one included */
};

/* What a thread asked for, or what was recorded: an event without its value. */
struct tc_event_kind {
    uint32_t type;                 /* enum tc_event_type */
    uint32_t detail;
    int32_t clock;
};

struct tc_divergence {
    uint32_t magic;                /* TC_DIVERGENCE_MAGIC */
    uint32_t reason;               /* enum tc_divergence_reason */
    uint32_t registry_index;       /* the process in the replay's registry */
    uint32_t image;
    int32_t pid;
    int32_t trace_process;         /* the recorded image it replays, −1 for none */
    uint32_t thread;
    uint32_t call;                 /* 1-based: the thread's readings and waits so far, this one included */
    struct tc_event_kind expected; /* TC_DIVERGED_DIFFERENT */
    struct tc_event_kind asked;
    char path[64];                 /* the process's place in the tree ("1.2"), NUL-terminated */
    char command[128];             /* its arguments, each ending in NUL (cut short if long) */
};

_Static_assert(sizeof(struct tc_divergence) == 248, "divergence records are 248 bytes");

/* ---- the trace file ---- */

#define TC_TRACE_MAGIC "TCTRACE"             /* 8 bytes with its NUL */
#define TC_TRACE_VERSION 2u
/* Version 1 is version 2 without SET_WALL events: still read and replayed. */
#define TC_TRACE_OLDEST_VERSION 1u

/*
 * Layout: header, process table, stream table, strings, stream data, each
 * located by the header's offsets. `checksum` is FNV-1a (64-bit) of the
 * whole file with the checksum field read as zero: a truncated or altered
 * file is refused before anything runs.
 */
struct tc_trace_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;        /* sizeof(struct tc_trace_header) */
    uint64_t file_size;
    uint64_t checksum;
    int64_t recorded_at;         /* real CLOCK_REALTIME when the recording began (ns) */
    uint32_t process_count;
    uint32_t stream_count;
    uint64_t processes_offset;   /* struct tc_trace_process[process_count] */
    uint64_t streams_offset;     /* struct tc_trace_stream[stream_count] */
    uint64_t strings_offset;     /* paths and argument lists */
    uint64_t strings_size;
    uint64_t data_offset;        /* encoded event streams */
    uint64_t data_size;
};

/* One process image. Images of one process share its path. */
struct tc_trace_process {
    uint64_t path_offset;        /* into strings: "1.2.1", no NUL */
    uint32_t path_length;
    uint32_t image;              /* 1, 2, … */
    uint64_t argv_offset;        /* into strings: the arguments, each ending in NUL */
    uint32_t argv_length;
    int32_t pid;                 /* when recorded; for people only */
    uint32_t first_stream;       /* its streams are stream_count entries from here */
    uint32_t stream_count;
};

/* The events of one thread of one process image. */
struct tc_trace_stream {
    uint32_t process;            /* index in the process table */
    uint32_t thread;             /* 0 for the main thread, then in creation order */
    uint64_t data_offset;        /* into data */
    uint64_t data_length;
    uint32_t events;
    uint32_t readings;
};

_Static_assert(sizeof(struct tc_trace_header) == 96, "the trace header is 96 bytes");
_Static_assert(sizeof(struct tc_trace_process) == 40, "process entries are 40 bytes");
_Static_assert(sizeof(struct tc_trace_stream) == 32, "stream entries are 32 bytes");

/*
 * Encoded events. Each begins with a tag byte, (type << 4) | detail:
 *
 *   READ        tag, clock id (1 byte), zigzag varint: value − last[its virtual clock]
 *   WAIT_BEGIN  tag, vclock (1 byte),   zigzag varint: deadline − last[vclock]
 *   WAIT_END    tag, vclock (1 byte),   zigzag varint: returned − last[vclock]
 *   SET_WALL    tag, vclock (1 byte),   zigzag varint: the wall time set − last[vclock]
 *
 * `last[c]` is the last READ value on virtual clock c in the same stream
 * (0 before the first); only READs change it. Consecutive readings of one
 * clock differ by little, so a reading takes 3–6 bytes. `detail` is the
 * call (of a READ or SET_WALL), wait kind or ending; the clock id of a READ
 * maps to its virtual clock as tc_vclock_for_clockid() says. SET_WALL (new
 * in format 2; a SET_WALL's vclock is always TC_VCLOCK_REALTIME) holds the
 * wall time the session read right after the set.
 */
#define TC_VCLOCKS 5                         /* TC_VCLOCK_COUNT */

struct tc_event {
    uint32_t type;
    uint32_t detail;
    int32_t clock;               /* clock id (READ) or vclock (waits) */
    int32_t vclock;
    int64_t value;
};

struct tc_decoder {
    const uint8_t *next;
    const uint8_t *end;
    int64_t last[TC_VCLOCKS];
};

/* The virtual clock a recorded clock id stands for, or −1 (see tc_vclock_for_clockid). */
static inline int tc_trace_vclock_of_clock(int32_t clock) {
    switch (clock) {
    case 0: case 5: case 8: return 3;   /* REALTIME, _COARSE, _ALARM */
    case 1: case 6: return 0;           /* MONOTONIC, _COARSE */
    case 4: return 1;                   /* MONOTONIC_RAW */
    case 7: case 9: return 2;           /* BOOTTIME, _ALARM */
    case 11: return 4;                  /* TAI */
    default: return -1;
    }
}

static inline uint64_t tc_zigzag(int64_t value) { return ((uint64_t)value << 1) ^ (uint64_t)(value >> 63); }
static inline int64_t tc_unzigzag(uint64_t value) { return (int64_t)(value >> 1) ^ -(int64_t)(value & 1); }

/* Appends an event to out[0…capacity); returns the bytes written (at most TC_MAX_EVENT_SIZE), 0 if it does not fit or is invalid. */
static inline size_t tc_encode_event(const struct tc_event *event, int64_t last[TC_VCLOCKS], uint8_t *out,
                                     size_t capacity) {
    if (capacity < TC_MAX_EVENT_SIZE || event->vclock < 0 || event->vclock >= TC_VCLOCKS) return 0;
    size_t n = 0;
    out[n++] = (uint8_t)(event->type << 4 | (event->detail & 0x0f));
    out[n++] = (uint8_t)event->clock;
    uint64_t delta = tc_zigzag((int64_t)((uint64_t)event->value - (uint64_t)last[event->vclock]));
    while (delta >= 0x80) {
        out[n++] = (uint8_t)(delta | 0x80);
        delta >>= 7;
    }
    out[n++] = (uint8_t)delta;
    if (event->type == TC_EVENT_READ) last[event->vclock] = event->value;
    return n;
}

/* Decodes the next event; 1 on success, 0 at the end of the stream, −1 if the stream is malformed. */
static inline int tc_decode_event(struct tc_decoder *decoder, struct tc_event *event) {
    const uint8_t *p = decoder->next, *end = decoder->end;
    if (p >= end) return 0;
    if (end - p < 3) return -1;
    uint8_t tag = *p++;
    event->type = tag >> 4;
    event->detail = tag & 0x0f;
    event->clock = *p++;
    if (event->type == TC_EVENT_READ) {
        event->vclock = tc_trace_vclock_of_clock(event->clock);
    } else if (event->type == TC_EVENT_WAIT_BEGIN || event->type == TC_EVENT_WAIT_END ||
               event->type == TC_EVENT_SET_WALL) {
        event->vclock = event->clock < TC_VCLOCKS ? event->clock : -1;
    } else {
        return -1;
    }
    if (event->vclock < 0) return -1;
    uint64_t delta = 0;
    for (int shift = 0;; shift += 7) {
        if (p >= end || shift > 63) return -1;
        uint8_t byte = *p++;
        delta |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) break;
    }
    event->value = (int64_t)((uint64_t)decoder->last[event->vclock] + (uint64_t)tc_unzigzag(delta));
    if (event->type == TC_EVENT_READ) decoder->last[event->vclock] = event->value;
    decoder->next = p;
    return 1;
}

/* FNV-1a, 64-bit: continue `hash` over `length` bytes (start from TC_FNV_OFFSET). */
#define TC_FNV_OFFSET 0xcbf29ce484222325ULL
static inline uint64_t tc_fnv1a(uint64_t hash, const uint8_t *bytes, size_t length) {
    for (size_t i = 0; i < length; i++) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
    return hash;
}

/*
 * Checks a mapped trace: magic, version, sizes, that every table and
 * stream lies inside the file, and (with `verify_checksum`) the checksum.
 * Returns 0, or a short phrase saying what is wrong ("is truncated").
 * `found_version` receives the version in the file.
 */
const char *tc_trace_validate(const uint8_t *file, uint64_t size, int verify_checksum, uint32_t *found_version);

/* The checksum a trace file should carry (its checksum field read as zero). */
uint64_t tc_trace_checksum(const uint8_t *file, uint64_t size);

#ifdef __cplusplus
}
#endif

#endif

/*
 * The session segment: the one definition of its layout.
 *
 * A session is one file (0600, in a 0700 per-user directory) mapped
 * MAP_SHARED by every process of the session: read by the preload shim on
 * each clock read, written by `timectl` and TimeControlKit. docs/segment.md
 * describes it for people; this header is what both sides compile against.
 *
 *   offset 0     struct tc_segment   header, timeline, generation, writer lock
 *   proc_offset  struct tc_proc_slot[proc_capacity]   attached processes
 *   wait_offset  struct tc_wait_slot[wait_capacity]   pending waits and armed timers
 *   history_offset  struct tc_history_entry[history_capacity]   the timeline's past, for file times
 *
 * Versioning: `magic`, `version` and `header_size` must match exactly and
 * `total_size` must equal the file size, or the segment is not trusted
 * (SPEC §7). Any change to this file that moves or reinterprets a field
 * bumps TC_SEGMENT_VERSION. Tables are located through the offsets in the
 * header, so a later version can add tables after the existing ones.
 *
 * Concurrency: every field that changes after creation is accessed with
 * __atomic builtins (never plain loads/stores), which is why no field is
 * declared _Atomic: Swift imports these structs as plain values. For the
 * same reason cache lines are laid out with explicit padding (Swift does
 * not import over-aligned structs); the static assertions below hold it.
 */
#ifndef TIMECTL_SEGMENT_H
#define TIMECTL_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_SEGMENT_MAGIC "TIMECTL"       /* 8 bytes with its NUL */
#define TC_SEGMENT_VERSION 9u
#define TC_SESSION_NAME_MAX 64           /* including the NUL */
#define TC_WAIT_MAP_WORDS 64             /* the wait table has at most 64 × 64 slots */

/* ELF note (name "timectl") that marks a controller executable; see controller.c. */
#define TC_CONTROLLER_NOTE_TYPE 0x54430001u

/*
 * The virtual clocks. A session keeps two tracks — elapsed time (the
 * monotonic clocks) and wall time — and every clock is its track plus a
 * constant fixed when the session is created: no verb moves BOOTTIME
 * against MONOTONIC, or TAI against REALTIME.
 */
enum tc_vclock {
    TC_VCLOCK_MONOTONIC = 0,     /* CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE */
    TC_VCLOCK_MONOTONIC_RAW = 1, /* CLOCK_MONOTONIC_RAW */
    TC_VCLOCK_BOOTTIME = 2,      /* CLOCK_BOOTTIME, CLOCK_BOOTTIME_ALARM */
    TC_VCLOCK_REALTIME = 3,      /* CLOCK_REALTIME, _COARSE, _ALARM; time(), gettimeofday() … */
    TC_VCLOCK_TAI = 4,           /* CLOCK_TAI */
    TC_VCLOCK_COUNT = 5,
};

enum tc_track {
    TC_TRACK_ELAPSED = 0,        /* CLOCK_MONOTONIC */
    TC_TRACK_WALL = 1,           /* CLOCK_REALTIME */
    TC_TRACK_COUNT = 2,
};

/* A time as whole seconds and nanoseconds (0 ≤ nsec < 10^9), fixed width. */
struct tc_split {
    int64_t sec;
    int64_t nsec;
};

/*
 * One published state of the timeline, 56 bytes. Track k reads
 *     t0 + offset[k]                              frozen (rate 0)
 *     real + offset[k]                            rate 1 (real ≥ t0)
 *     t0 + offset[k] + scale(real − t0, rate)     otherwise
 * with `real` the real CLOCK_MONOTONIC; see timectl_timeline.h. Offsets are
 * stored split so that a read at rate 1 is an addition, with no division.
 * The elapsed virtual time E of SPEC §2 is the elapsed track minus
 * header.base[TC_VCLOCK_MONOTONIC].
 */
struct tc_clock_state {
    struct tc_split t0;                  /* real CLOCK_MONOTONIC at the anchor */
    uint64_t rate;                       /* virtual ns per real ns × 2^32; 0 = frozen; | TC_RATE_WALL_FROZEN */
    struct tc_split offset[TC_TRACK_COUNT];
};

/*
 * A published copy of the state, one cache line. `check` is
 * tc_state_check() of the state (and of the pending verb, when the rate
 * carries TC_RATE_PENDING); verbs, status and attaching processes verify it,
 * clock reads do not.
 */
struct tc_published {
    struct tc_clock_state state;
    uint32_t check;
    uint32_t reserved;
};

/*
 * A verb published before it took effect: its state copy is the state
 * before the verb with TC_RATE_PENDING set in `rate`, and the verb takes
 * effect at `anchor`, the real CLOCK_MONOTONIC ns that the first process to
 * read it (a reader or the writer itself) stores with a compare-and-swap
 * from tc_pending_unanchored(seq). See "The timeline" in docs/segment.md
 * for why.
 */
struct tc_pending_verb {
    int32_t kind;                      /* struct tc_verb's fields (timectl_timeline.h) */
    int32_t wall;
    int64_t value;
    uint64_t rate;
    int32_t vclock;
    int32_t reserved;
    int64_t real_offset;               /* real CLOCK_REALTIME − CLOCK_MONOTONIC when the verb was issued */
    int64_t anchor;                    /* tc_pending_unanchored(seq) until the verb took effect; written once */
    /* The file time that tells files written before the verb from files written after it (tc_file_time_boundary),
       or 0 when its writer had none: the real CLOCK_REALTIME at the anchor stands for it. */
    int64_t file_boundary;
    uint8_t padding[8];
};

/*
 * The anchor of a verb pending in the copy that `seq` selects, before any
 * process anchored it: negative, so never a real time, and different for
 * each publication. A process that read the verb pending in the same slot
 * two publications earlier, and was held between reading the real clock
 * and its compare-and-swap, expects that publication's value and cannot
 * anchor this verb at its older time: were it to, a verb that slows the
 * clocks would take effect before reads already made of the state before
 * it, and move them back. (A constant such as 0 could not tell the two
 * publications apart.)
 */
static inline int64_t tc_pending_unanchored(uint32_t seq) { return -1 - (int64_t)seq; }

/*
 * The timeline: a latch (the kernel's seqcount_latch) over two copies.
 * Readers use copy[seq & 1] and retry only if seq changed during the read,
 * never waiting: the writer (holding the writer lock) only ever writes the
 * copy readers are not using, then bumps seq. A verb is published twice:
 * first as a pending verb on the old state (readers compute its effect at
 * the anchor they agree on), then resolved into a plain state with the same
 * values. A writer stopped or killed anywhere leaves a complete copy
 * selected; the next writer resolves a pending one.
 */
struct tc_timeline {
    uint32_t seq;
    uint8_t seq_padding[60];
    struct tc_published copy[2];
    struct tc_pending_verb pending[2];
};

/* In a published rate: the copy holds the state before a pending verb. */
#define TC_RATE_PENDING (1ULL << 63)
/* In a published rate: the wall track stands still (freeze --wall); the
   other bits are the elapsed track's rate. Both flags are tested with one
   mask on the read path, so a running read costs what it did. */
#define TC_RATE_WALL_FROZEN (1ULL << 62)

struct tc_segment_header {
    char magic[8];                     /* TC_SEGMENT_MAGIC */
    uint32_t version;                  /* TC_SEGMENT_VERSION */
    uint32_t header_size;              /* sizeof(struct tc_segment) */
    uint64_t total_size;               /* file size in bytes */
    uint32_t owner_uid;                /* must equal the file's owner */
    uint32_t flags;                    /* TC_SEGMENT_FLAG_* */
    /* Real CLOCK_REALTIME at creation (ns): a file time before it is older than the session. A file time, when the
       session's file could be given one that tells files written before its creation from files written after
       (tc_file_time_boundary); else the clock's reading. */
    int64_t created_realtime;
    /* What each clock read when the session was created (ns): the real clocks, or for a pinned session
       (tc_segment_create's origin) the origin on the monotonic clocks and TC_PINNED_TAI_OFFSET_NS on TAI. */
    int64_t base[TC_VCLOCK_COUNT];
    /* What each clock adds to its track: base[clock] − base[its track's clock]. */
    struct tc_split clock_offset[TC_VCLOCK_COUNT];
    uint32_t proc_offset;              /* byte offset of the process table */
    uint32_t proc_capacity;            /* its number of slots */
    uint32_t wait_offset;              /* byte offset of the wait table */
    uint32_t wait_capacity;            /* its number of slots */
    uint32_t history_offset;           /* byte offset of the history ring (file times) */
    uint32_t history_capacity;         /* its number of entries, a power of two */
    char name[TC_SESSION_NAME_MAX];    /* session name, NUL-terminated */
    /* tc_header_check() of every field above except `flags`: a damaged
       header is refused when a process attaches or timectl opens it. */
    uint64_t check;
};

/* Set (atomically) by `timectl session remove` just before it unlinks the file. */
#define TC_SEGMENT_FLAG_REMOVED 1u

/* A pinned session's TAI − UTC: the offset since 2017-01-01, whatever the host's kernel was told. */
#define TC_PINNED_TAI_OFFSET_NS (37LL * 1000000000LL)

/* What kind of scheduler owns a session. */
enum tc_scheduler_kind {
    TC_SCHEDULER_UNKNOWN = 0,
    TC_SCHEDULER_COMMAND = 1,          /* one command's, ending with it: timectl run --auto-advance, timectl replay */
    TC_SCHEDULER_DAEMON = 2,           /* timectl daemon, until timectl daemon --stop */
    TC_SCHEDULER_HARNESS = 3,          /* TimeSession.startAutoAdvance() in a test process */
};

struct tc_segment {
    struct tc_segment_header header;
    uint8_t header_padding[256 - sizeof(struct tc_segment_header)];
    struct tc_timeline timeline;       /* cache lines 4 to 8 */
    /* Bumped by every verb that changes the timeline; waiters FUTEX_WAIT on it. */
    uint32_t generation;               /* cache line 9 */
    /* Bumped whenever a wait-table slot is claimed or freed; woken (FUTEX_WAKE)
       only while wait_watchers > 0, i.e. while a harness waits for waits or
       a scheduler runs. */
    uint32_t wait_changes;
    uint64_t verbs_applied;            /* count of committed verbs, for status */
    uint32_t wait_watchers;
    /* The auto-advance scheduler that owns the session (timectl run
       --auto-advance, timectl daemon), 0 if none; claimed by compare-and-swap. */
    int32_t scheduler_pid;
    uint64_t scheduler_steps;          /* steps that scheduler has taken */
    /* Its process's start time (field 22 of /proc/PID/stat), written after the
       claim and cleared before the release; 0 while unknown. A pid whose
       process started at another time is not the scheduler: it died, and
       its pid was reused. */
    uint64_t scheduler_started;
    uint32_t scheduler_kind;           /* enum tc_scheduler_kind */
    uint32_t history_reserved;
    /* Entries ever written to the history ring (entry n is at n % capacity); written under the writer lock. */
    uint64_t history_count;
    uint8_t generation_padding[8];
    /* The writer lock (cache line 10): 0 when free, else the holder as
       tc_lock_owner(pid, start time), taken by compare-and-swap. A holder
       that died (its pid gone, or now naming a process that started at
       another time) is replaced by compare-and-swap; a value that names no
       possible process is reported as a damaged segment. */
    uint64_t writer_lock;
    uint8_t lock_padding[56];
    /* A seeded run's order (SPEC §11, cache line 11): written before the run's processes start, read by every
       wait. `seed` 0: waits that fall due together end as the kernel wakes them. Otherwise the scheduler holds
       every wait a step makes due (its slot's `held`) and lets them end one at a time, in an order drawn from
       the seed; and each wait is stretched by up to `jitter` (a fraction × 2^32) of its length, by an amount
       drawn from the seed, the wait's identity and how many waits its thread made before. */
    uint64_t seed;
    uint64_t jitter;
    /* Processes registered with no parent in the table: a root's lineage is its ordinal among them. */
    uint32_t roots;
    uint32_t order_reserved;
    uint8_t order_padding[40];
    /* Which wait-table slots are in use, one bit each (lines 11–18): a
       scheduler scans 64 words, not the whole table. A bit is set after its
       slot is claimed and cleared after it is freed, so it may be briefly
       stale; readers check the slot itself. */
    uint64_t wait_map[TC_WAIT_MAP_WORDS];
};

_Static_assert(sizeof(struct tc_clock_state) == 56, "a state and its check fill a cache line");
_Static_assert(sizeof(struct tc_published) == 64, "a published copy is one cache line");
_Static_assert(sizeof(struct tc_pending_verb) == 64, "a pending verb is one cache line");
_Static_assert(offsetof(struct tc_timeline, copy) == 64, "the copies start a cache line");
_Static_assert(sizeof(struct tc_segment_header) <= 256, "the header fits its 256 bytes");
_Static_assert(offsetof(struct tc_segment, timeline) % 64 == 0, "timeline starts a cache line");
_Static_assert(offsetof(struct tc_segment, generation) % 64 == 0, "generation has its own cache line");
_Static_assert(offsetof(struct tc_segment, writer_lock) % 64 == 0, "the lock has its own cache line");
_Static_assert(offsetof(struct tc_segment, writer_lock) - offsetof(struct tc_segment, generation) == 64,
               "the generation line is one cache line");
_Static_assert(offsetof(struct tc_segment, wait_map) % 64 == 0, "the wait map starts a cache line");
_Static_assert(offsetof(struct tc_segment, seed) % 64 == 0, "the order has its own cache line");
_Static_assert(sizeof(struct tc_segment) % 64 == 0, "tables after the segment start on a cache line");

/*
 * One attached process. A slot is free when pid == 0; the shim claims one
 * with a compare-and-swap at start-up (and in a fork child) and frees it at
 * exit. A process killed without exiting leaves its slot: readers of the
 * table check that the pid still runs and started before `registered`
 * (CLOCK_BOOTTIME ns), which rules out a recycled pid.
 */
struct tc_proc_slot {
    int32_t pid;
    /* Waits (and timer arms) that were already due when they began. A
       program re-arming a 0 s timer in a loop never blocks, so no step of a
       scheduler ever names it; this count does (the loop guard reads it). */
    uint32_t immediate_waits;
    int64_t registered;
    /* Where the process stands in the session's tree, the same in every run of the same program: its parent's
       lineage mixed with its ordinal among the parent's children (children counts them), or a root's ordinal.
       Kept across exec. A wait's identity (struct tc_wait_slot) starts from it. */
    uint64_t lineage;
    uint32_t children;
    uint32_t reserved;
};

/* What a pending wait is, for `status`. */
enum tc_wait_kind {
    TC_WAIT_SLEEP = 1,    /* nanosleep, clock_nanosleep, sleep, usleep */
    TC_WAIT_POLL = 2,     /* poll, ppoll */
    TC_WAIT_SELECT = 3,   /* select, pselect */
    TC_WAIT_EPOLL = 4,    /* epoll_wait, epoll_pwait, epoll_pwait2 */
    TC_WAIT_COND = 5,     /* pthread_cond_timedwait, pthread_cond_clockwait */
    TC_WAIT_SEM = 6,      /* sem_timedwait, sem_clockwait */
    TC_WAIT_MUTEX = 7,    /* pthread_mutex_timedlock, pthread_mutex_clocklock */
    TC_WAIT_TIMERFD = 8,  /* an armed timerfd */
    TC_WAIT_TIMER = 9,    /* an armed POSIX timer (timer_settime) */
    TC_WAIT_ALARM = 10,   /* alarm, setitimer(ITIMER_REAL) */
    TC_WAIT_FUTEX = 11,   /* a raw futex wait with a timeout (syscall() or a trapped call: futex.c) */
    TC_WAIT_MQUEUE = 12,  /* mq_timedreceive, mq_timedsend (semtimedop counts as TC_WAIT_SEM) */
    TC_WAIT_SIGNAL = 13,  /* sigtimedwait */
};

/* Whether a wait-table entry's kind is one of the above (anything else is damage). */
static inline int tc_wait_kind_valid(int kind) { return kind >= TC_WAIT_SLEEP && kind <= TC_WAIT_SIGNAL; }

/* `owner` of a slot being filled in; readers skip it. */
#define TC_WAIT_CLAIMING UINT64_MAX

/*
 * One pending wait, or one armed timer, with its virtual deadline. `owner`
 * is 0 when the slot is free, else pid << 32 | tid (tid 0 for a timer,
 * which belongs to the process). A thread claims a slot with a
 * compare-and-swap 0 → TC_WAIT_CLAIMING, fills it in, then publishes
 * `owner`; it frees it at the end of the wait. Slots of processes that died
 * without freeing them are recognised (and reclaimed) by their pid.
 */
struct tc_wait_slot {
    uint64_t owner;
    int32_t kind;                      /* enum tc_wait_kind */
    int32_t vclock;                    /* enum tc_vclock the deadline is on */
    int64_t deadline;                  /* virtual ns on vclock */
    int64_t registered;                /* real CLOCK_BOOTTIME ns at the claim */
    /* An armed timerfd's: its descriptor in the process and the shim's duplicate of it, each plus one, in the
       low and high halves (tc_wait_descriptors); 0 for every other entry. Readers drop a timerfd whose two
       descriptors no longer name one open file: the process closed it without the shim seeing it. */
    uint64_t descriptors;
    /* The same in every run of the same program: the lineage of the process mixed with the thread's ordinal in
       it (threads numbered in the order the process creates them), or for a timer with the timer's. A seeded
       scheduler orders waits due together by it. */
    uint64_t identity;
    /* Set by a seeded scheduler before the step that makes the wait due; the wait does not end until the
       scheduler clears it (tc_wait_release_held). */
    uint32_t held;
    uint32_t reserved;
    uint64_t padding;
};

/*
 * One interval of the session's past, for file times (SPEC §9): from the
 * real CLOCK_REALTIME `real_start` on (until the next entry's), the virtual
 * wall clock read wall_start + (real − real_start) × wall_rate (fixed
 * point; 0 while the wall stood still). Entry n (counting from 0) lives in
 * slot n % capacity and carries `number` = n + 1, written last (release):
 * a reader that finds another number there skips it (overwritten, or not
 * yet written). Entries are written by verbs, under the writer lock.
 */
struct tc_history_entry {
    uint64_t number;
    int64_t real_start;
    int64_t wall_start;
    uint64_t wall_rate;                /* | TC_HISTORY_EXACT_START */
};

/* In an entry's wall_rate: real_start is a file time that tells files written before the interval from files
   written after it (tc_file_time_boundary), not a reading of CLOCK_REALTIME. */
#define TC_HISTORY_EXACT_START (1ULL << 63)

#ifdef __cplusplus
}
#endif

#endif

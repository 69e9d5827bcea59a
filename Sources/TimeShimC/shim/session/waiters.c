/*
 * Waiters the helper thread wakes, and the helper thread; see waiters.h.
 */
#define _GNU_SOURCE
#include "waiters.h"
#include "../runtime/owned_descriptors.h"
#include "../runtime/process.h"
#include "../runtime/threads.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TC_WAITER_RECORDS 256
#define TC_WAKE_FDS 1024

enum { RECORD_FREE = 0, RECORD_WAITING = 1, RECORD_POKING = 2, RECORD_CLAIMING = 3 };

struct waiter_record {
    int state;
    int wake_fd;              /* fd waiters */
    pthread_cond_t *cond;     /* condition waiters: */
    pthread_mutex_t *mutex;
    int vclock;
    int64_t deadline;
    int slot;                 /* its wait-table slot, which a seeded scheduler may hold */
    uint64_t rate;            /* the rate the waiter's real timeout assumes */
    int woken;                /* the helper broadcast: 1 for a rate change, 2 at the deadline */
    int outer;                /* the thread's record before this one (a wait in a signal handler nests), or −1 */
};

#define WOKEN_FOR_RATE 1
#define WOKEN_AT_DEADLINE 2

static struct waiter_record records[TC_WAITER_RECORDS];
static TC_TLS int thread_record = -1;
static TC_TLS int thread_wake_fd = -1;

/* Every wake eventfd made, so a fork child can close the ones of threads it does not have. */
static int wake_fds[TC_WAKE_FDS];
static pthread_key_t wake_fd_key;
static pthread_once_t wake_fd_key_once = PTHREAD_ONCE_INIT;

static void forget_wake_fd(int fd) {
    for (int i = 0; i < TC_WAKE_FDS; i++) {
        int expected = fd + 1;
        if (__atomic_compare_exchange_n(&wake_fds[i], &expected, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    }
}

static void close_wake_fd_at_thread_exit(void *value) {
    int fd = (int)(intptr_t)value - 1;
    if (!tc_fd_owned(fd)) return;  /* taken over by dup2: not ours to close */
    forget_wake_fd(fd);
    tc_fd_release(fd);
    tc_raw_syscall(SYS_close, fd);
}

void tc_wake_fd_taken(int fd) {
    forget_wake_fd(fd);
    tc_fd_release(fd);
}

static void make_wake_fd_key(void) { pthread_key_create(&wake_fd_key, close_wake_fd_at_thread_exit); }

static int thread_wake_fd_get(void) {
    if (thread_wake_fd >= 0 && tc_fd_owned(thread_wake_fd)) return thread_wake_fd;
    long fd = tc_raw_syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -1;
    if (fd >= TC_OWNED_FD_BITS) {
        /* Beyond what the shim can mark as its own: the wait slices instead. */
        tc_raw_syscall(SYS_close, fd);
        return -1;
    }
    tc_fd_claim((int)fd);
    int remembered = 0;
    for (int i = 0; i < TC_WAKE_FDS && !remembered; i++) {
        int expected = 0;
        remembered = __atomic_compare_exchange_n(&wake_fds[i], &expected, (int)fd + 1, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_RELAXED);
    }
    pthread_once(&wake_fd_key_once, make_wake_fd_key);
    pthread_setspecific(wake_fd_key, (void *)(intptr_t)(fd + 1));
    thread_wake_fd = (int)fd;
    return thread_wake_fd;
}

static int enter(struct waiter_record *fields) {
    /* Starts the helper, and wakes it: for the records alone that is not needed (the helper
       goes through them after each verb, and a waiter enters its record before it looks at
       the time), but without the wake-up a JVM under auto-advance stepped 1.6 times slower
       beside two CPU-bound programs (measured; presumably each wake-up is a point at which
       the kernel can hand a CPU to the scheduler waiting for one). */
    tc_helper_poke();
    for (int i = 0; i < TC_WAITER_RECORDS; i++) {
        int expected = RECORD_FREE;
        if (!__atomic_compare_exchange_n(&records[i].state, &expected, RECORD_CLAIMING, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        /* Field by field: `state` is only ever written atomically. */
        records[i].wake_fd = fields->wake_fd;
        records[i].cond = fields->cond;
        records[i].mutex = fields->mutex;
        records[i].vclock = fields->vclock;
        records[i].deadline = fields->deadline;
        records[i].slot = fields->slot;
        __atomic_store_n(&records[i].rate, fields->rate, __ATOMIC_RELAXED);
        __atomic_store_n(&records[i].woken, 0, __ATOMIC_RELAXED);
        records[i].outer = thread_record;
        __atomic_store_n(&records[i].state, RECORD_WAITING, __ATOMIC_RELEASE);
        thread_record = i;
        return 0;
    }
    return -1;
}

int tc_waiter_enter_fd(void) {
    int fd = thread_wake_fd_get();
    struct waiter_record fields = {.wake_fd = fd, .slot = -1};
    if (fd < 0 || enter(&fields) != 0) return -1;
    return fd;
}

int tc_waiter_enter_cond(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct tc_wait *wait) {
    struct waiter_record fields = {.wake_fd = -1, .cond = cond, .mutex = mutex, .vclock = wait->vclock,
                                   .deadline = wait->deadline, .slot = wait->slot};
    return enter(&fields);
}

void tc_waiter_set_rate(uint64_t rate) {
    if (thread_record >= 0) __atomic_store_n(&records[thread_record].rate, rate, __ATOMIC_RELEASE);
}

int tc_waiter_woken_at_deadline(void) {
    return thread_record >= 0 &&
           __atomic_load_n(&records[thread_record].woken, __ATOMIC_ACQUIRE) == WOKEN_AT_DEADLINE;
}

void tc_waiter_leave(void) {
    int i = thread_record;
    if (i < 0) return;
    int outer = records[i].outer;  /* read while the record is still ours */
    /* Wait out a poke in progress: after this, the helper never touches our fd or condvar. */
    for (;;) {
        int expected = RECORD_WAITING;
        if (__atomic_compare_exchange_n(&records[i].state, &expected, RECORD_FREE, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            break;
        tc_raw_syscall(SYS_sched_yield, 0);
    }
    thread_record = outer;
}

void tc_waiter_leave_cleanup(void *entered) {
    if (*(volatile int *)entered) tc_waiter_leave();
}

void tc_waiter_drain(int wake_fd) {
    uint64_t count;
    if (tc_fd_owned(wake_fd)) tc_raw_syscall(SYS_read, wake_fd, &count, sizeof(count));
}

/*
 * Wakes a condition waiter if a verb made its deadline due or changed the
 * rate its timeout assumes. The broadcast is made holding the waiter's
 * mutex, which the waiter holds from its look at the clock until it blocks:
 * so the broadcast finds it blocked, or it sees the new time. Returns 0 if
 * the mutex was busy (try again soon).
 */
static int wake_condition_waiter(struct tc_segment *segment, struct waiter_record *record) {
    if (record->woken) return 1;
    uint64_t rate = tc_segment_clock_rate(segment, record->vclock);
    int due = tc_segment_read(segment, record->vclock) >= record->deadline && !tc_wait_held(segment, record->slot);
    if (!due && rate == __atomic_load_n(&record->rate, __ATOMIC_ACQUIRE)) return 1;
    if (pthread_mutex_trylock(record->mutex) != 0) return 0;
    __atomic_store_n(&record->woken, due ? WOKEN_AT_DEADLINE : WOKEN_FOR_RATE, __ATOMIC_RELEASE);
    pthread_cond_broadcast(record->cond);
    pthread_mutex_unlock(record->mutex);
    return 1;
}

/* After a verb: every fd waiter's eventfd, the condition waiters it concerns.
   Returns 0 if some condition waiter could not be woken yet. */
static int poke_waiters(struct tc_segment *segment, int fd_waiters_too) {
    static const uint64_t one = 1;
    int done = 1;
    for (int i = 0; i < TC_WAITER_RECORDS; i++) {
        int expected = RECORD_WAITING;
        if (__atomic_load_n(&records[i].state, __ATOMIC_RELAXED) != RECORD_WAITING ||
            !__atomic_compare_exchange_n(&records[i].state, &expected, RECORD_POKING, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        if (records[i].wake_fd >= 0 && fd_waiters_too && tc_fd_owned(records[i].wake_fd))
            tc_raw_syscall(SYS_write, records[i].wake_fd, &one, sizeof(one));
        if (records[i].cond && !wake_condition_waiter(segment, &records[i])) done = 0;
        __atomic_store_n(&records[i].state, RECORD_WAITING, __ATOMIC_RELEASE);
    }
    return done;
}

/* ---- the helper thread ---- */

static int helper_started;
static uint32_t helper_pokes;
static int64_t (*fire_due_timers)(struct tc_segment *segment);

void tc_helper_set_timers(int64_t (*fire_due)(struct tc_segment *segment)) {
    __atomic_store_n(&fire_due_timers, fire_due, __ATOMIC_RELEASE);
}

/* Blocks until a verb, a poke from this process, or `real_ns`. */
static void helper_block(struct tc_segment *segment, uint32_t generation, uint32_t pokes, int64_t real_ns) {
    tc_segment_wait_for_change(segment, &segment->generation, generation, &helper_pokes, pokes, real_ns);
}

static void *helper_main(void *argument) {
    struct tc_segment *segment = tc_shim_segment();
    uint32_t seen_generation = (uint32_t)(uintptr_t)argument;
    int conditions_pending = 0;
    prctl(PR_SET_NAME, "timectl-waker", 0, 0, 0);
    for (;;) {
        uint32_t generation = __atomic_load_n(&segment->generation, __ATOMIC_ACQUIRE);
        uint32_t pokes = __atomic_load_n(&helper_pokes, __ATOMIC_ACQUIRE);
        int moved = generation != seen_generation;
        if (moved || conditions_pending) conditions_pending = !poke_waiters(segment, moved);
        seen_generation = generation;
        int64_t (*fire_due)(struct tc_segment *) = __atomic_load_n(&fire_due_timers, __ATOMIC_ACQUIRE);
        int64_t next = fire_due ? fire_due(segment) : TC_FOREVER;
        /* A condition waiter's mutex was busy: come back for it in a millisecond. */
        if (conditions_pending && next > 1000000) next = 1000000;
        helper_block(segment, generation, pokes, next);
    }
    return NULL;
}

static void start_helper(struct tc_segment *segment) {
    int expected = 0;
    if (!__atomic_compare_exchange_n(&helper_started, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    /* The generation before any wait that needs the helper looked at the session:
       every verb after that gets its waiters poked. */
    uint32_t generation = __atomic_load_n(&segment->generation, __ATOMIC_ACQUIRE);
    if (tc_start_shim_thread(helper_main, (void *)(uintptr_t)generation, 256 * 1024) != 0)
        __atomic_store_n(&helper_started, 0, __ATOMIC_RELEASE);
}

void tc_helper_poke(void) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return;
    if (!__atomic_load_n(&helper_started, __ATOMIC_ACQUIRE)) start_helper(segment);
    __atomic_fetch_add(&helper_pokes, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &helper_pokes, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
}

/* ---- fork ---- */

void tc_waiters_after_fork_in_child(void) {
    helper_started = 0;
    helper_pokes = 0;
    /* The parent's threads, their waits and their wake eventfds are not ours. */
    for (int i = 0; i < TC_WAITER_RECORDS; i++) records[i].state = RECORD_FREE;
    thread_record = -1;
    for (int i = 0; i < TC_WAKE_FDS; i++) {
        if (wake_fds[i]) {
            tc_fd_release(wake_fds[i] - 1);
            tc_raw_syscall(SYS_close, wake_fds[i] - 1);
        }
        wake_fds[i] = 0;
    }
    if (thread_wake_fd >= 0) pthread_setspecific(wake_fd_key, NULL);
    thread_wake_fd = -1;
}

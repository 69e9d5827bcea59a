/*
 * A wait on the virtual timeline: its look at the session, its entry in
 * the segment's wait table, its futex sleep; see wait.h.
 */
#define _GNU_SOURCE
#include "wait.h"
#include "../runtime/faketime.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../runtime/threads.h"
#include "../trace/trace_dispatch.h"
#include "../trace/trace_mode.h"
#include "../trace/trace_replay.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>

struct tc_wait_view tc_wait_look(struct tc_segment *segment, int vclock) {
    struct tc_wait_view view;
    view.generation = __atomic_load_n(&segment->generation, __ATOMIC_ACQUIRE);
    view.now = tc_segment_read(segment, vclock);
    view.rate = tc_segment_clock_rate(segment, vclock);
    return view;
}

int64_t tc_wait_real_remaining(const struct tc_wait_view *view, int64_t deadline) {
    return tc_real_wait_ns(view->now, deadline, view->rate);
}

int64_t tc_wait_remaining(const struct tc_wait_view *view, const struct tc_wait *wait) {
    int64_t real = tc_real_wait_ns(view->now, wait->deadline, view->rate);
    /* Read after the generation (tc_wait_look): a release after this moves it, and the wait looks again. */
    return real == 0 && tc_wait_held(wait->segment, wait->slot) ? TC_FOREVER : real;
}

int64_t tc_wait_deadline_after(struct tc_segment *segment, int vclock, int64_t relative) {
    int64_t now = tc_segment_read(segment, vclock);
    if (relative <= 0) return now;
    return now > INT64_MAX - relative ? INT64_MAX : now + relative;
}

/* Real waits are bounded by a year: far enough to mean "until a verb". */
static int64_t bounded(int64_t real_ns) {
    const int64_t year = 365LL * 86400 * TC_NS_PER_SECOND;
    return real_ns > year ? year : real_ns;
}

struct timespec tc_real_timeout(int64_t real_ns) { return tc_timespec_from_ns(bounded(real_ns)); }

/*
 * A seeded jitter (SPEC §11): the wait stretched by up to `jitter` (a fraction × 2^32) of its length, by an
 * amount drawn from the seed, the wait's identity and how many waits the thread began before it — the same in
 * every run. Real waits overshoot; a program that assumes they do not fails, the same way each time.
 */
static int64_t jittered(const struct tc_segment *segment, uint64_t identity, int64_t now, int64_t deadline) {
    uint64_t jitter = __atomic_load_n(&segment->jitter, __ATOMIC_RELAXED);
    if (jitter == 0 || deadline <= now || deadline == INT64_MAX) return deadline;
    uint64_t seed = __atomic_load_n(&segment->seed, __ATOMIC_RELAXED);
    uint64_t draw = tc_mix64(seed, tc_mix64(identity, tc_thread_count_wait()));
    unsigned __int128 most = ((unsigned __int128)(uint64_t)(deadline - now) * jitter) >> 32;
    int64_t stretch = (int64_t)((most * (draw >> 32)) >> 32);
    return deadline > INT64_MAX - stretch ? INT64_MAX : deadline + stretch;
}

/* tid 0: a timer, with its `key` and `descriptors` (a timerfd's, else 0). */
static void begin(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline,
                  int32_t tid, uint32_t key, uint64_t descriptors) {
    int32_t pid = tc_shim_pid();
    uint64_t lineage = tc_proc_lineage(segment, tc_shim_proc_slot());
    uint64_t identity = tid ? tc_mix64(lineage, tc_thread_ordinal()) : tc_mix64(lineage, 1ULL << 32 | key);
    int64_t now = tc_segment_read(segment, vclock);
    deadline = jittered(segment, identity, now, deadline);
    wait->segment = segment;
    wait->vclock = vclock;
    wait->deadline = deadline;
    wait->owner = tc_wait_owner(pid, tid);
    int64_t registered = tc_real_ns(CLOCK_BOOTTIME);
    wait->slot = tid ? tc_wait_claim(segment, pid, tid, kind, vclock, deadline, registered, identity)
                     : tc_wait_claim_timer(segment, pid, kind, vclock, deadline, registered, descriptors, identity);
    if (deadline <= now) {
        tc_proc_count_immediate_wait(segment, tc_shim_proc_slot());
        if (tid != 0) tc_spin_note_futile_wait();
    } else if (tid != 0) {
        tc_spin_note_blocking_wait();
    }
    /* A thread's own waits are part of its recording; a timer belongs to no thread. */
    if (tid != 0 && tc_trace_mode != TC_TRACE_OFF) tc_trace_wait_begin(kind, vclock, deadline);
}

void tc_wait_begin(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline) {
    begin(wait, segment, kind, vclock, deadline, tc_gettid(), 0, 0);
}

void tc_wait_begin_timer(struct tc_wait *wait, struct tc_segment *segment, int kind, int vclock, int64_t deadline,
                         uint32_t key, uint64_t descriptors) {
    begin(wait, segment, kind, vclock, deadline, 0, key, descriptors);
}

void tc_wait_end(struct tc_wait *wait) {
    tc_wait_release(wait->segment, wait->slot, wait->owner);
    wait->slot = -1;
    if (tc_wait_owner_tid(wait->owner) != 0 && tc_trace_mode != TC_TRACE_OFF)
        tc_trace_wait_end(wait->segment, wait->vclock, wait->deadline);
}

int64_t tc_wait_absolute_deadline(struct tc_segment *segment, int vclock, int64_t absolute) {
    if (tc_trace_mode == TC_TRACE_REPLAYING) return tc_trace_session_deadline(segment, vclock, absolute);
    /* The thread's clocks are its creep ahead of the session's: it is due when its own clock gets there. */
    int64_t creep = tc_own_creep();
    int64_t deadline = absolute < INT64_MIN + creep ? INT64_MIN : absolute - creep;
    return tc_faketime_active() ? tc_faketime_wait_deadline(segment, vclock, deadline) : deadline;
}

void tc_wait_end_cleanup(void *argument) { tc_wait_end((struct tc_wait *)argument); }

int tc_wait_futex(struct tc_segment *segment, uint32_t generation, uint32_t signals_seen, int64_t real_ns) {
    uint32_t *signals = tc_thread_handled_signals();
    /* A cancellation point, as the sleeps it stands for. glibc cancels a
       thread blocked in a system call by signal, and only in asynchronous
       mode, which its own cancellable calls switch to around the call: so
       does this one, around the futex wait and nothing else. */
    int old_type;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old_type);
    int result = tc_segment_wait_for_change(segment, &segment->generation, generation, signals, signals_seen,
                                            bounded(real_ns));
    pthread_setcanceltype(old_type, NULL);
    return result == EINTR || __atomic_load_n(signals, __ATOMIC_RELAXED) != signals_seen ? EINTR : 0;
}

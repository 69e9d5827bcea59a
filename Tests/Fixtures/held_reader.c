/*
 * A reader held between its real-clock read and its anchor, on purpose:
 * the interleaving that let a verb take effect before reads already made
 * of the state before it, so that monotonic clocks went back.
 *   held_reader SEGMENT
 * Hooks the real clock (tc_vdso_clock_gettime) to hold two threads at
 * chosen points of core/segment_latch.c, with no timing involved:
 *   1. the writer publishes verb A (rate 10000) pending and is held before
 *      anchoring it; the reader reads, takes the out-of-line path for the
 *      pending copy, reads the real clock (T1) and is held there, before
 *      its compare-and-swap of A's anchor;
 *   2. the writer anchors A after T1, publishes it resolved; 2 ms later it
 *      reads CLOCK_MONOTONIC (m1, 20 s of virtual time after A's anchor);
 *   3. the writer publishes verb B (rate 1) pending, in the same slot A
 *      was pending in, and is held before anchoring it; the reader goes on
 *      from T1 and ends its read; then the writer resolves B and reads m2.
 * Before the fix the reader stored T1, older than m1's reading, as B's
 * anchor (its compare-and-swap expected 0, which B's fresh slot held
 * again): B took effect at T1, and m2 came out about 20 s below m1.
 * Prints "m1 N", "m2 N" and "back N" (ns; 0 unless m2 < m1) on three
 * lines, and exits 1 if m2 < m1, 0 if not; 3 if the threads did not meet
 * (a 10 s guard at each step).
 */
#define _GNU_SOURCE
#include "timectl_segment_io.h"
#include "timectl_timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { NOBODY, WRITER, READER };
static __thread int role;
static struct tc_segment *segment;
static tc_vdso_clock_gettime_fn real_gettime;
/* Which hold comes next, written before the threads need it, read by the hook. */
static int writer_step;   /* 1: hold A before its anchor; 2: hold B before its anchor */
static int reader_armed;  /* hold the reader at its next clock read of a pending copy */
static sem_t pending_a, reader_holds, reader_release, reader_done;

static void wait_for(sem_t *sem, const char *step) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    while (sem_timedwait(sem, &deadline) != 0) {
        if (errno == EINTR) continue;
        printf("stuck %s\n", step);
        fflush(stdout);
        _exit(3);
    }
}

static int pending_published(void) {
    uint32_t seq = __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE);
    return (__atomic_load_n(&segment->timeline.copy[seq & 1].state.rate, __ATOMIC_RELAXED) & TC_RATE_PENDING) != 0;
}

static int hooked_gettime(clockid_t clock, struct timespec *ts) {
    int result = real_gettime(clock, ts);
    if (clock != CLOCK_MONOTONIC || !pending_published()) return result;
    if (role == READER && __atomic_load_n(&reader_armed, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&reader_armed, 0, __ATOMIC_RELEASE);
        sem_post(&reader_holds);
        wait_for(&reader_release, "reader held at T1");
        return result; /* T1, read before the hold */
    }
    if (role == WRITER && writer_step != 0) {
        int step = writer_step;
        writer_step = 0;
        if (step == 1) {
            sem_post(&pending_a);
            wait_for(&reader_holds, "writer waiting for the reader to hold");
        } else {
            sem_post(&reader_release);
            wait_for(&reader_done, "writer waiting for the reader's read");
        }
        return real_gettime(clock, ts);
    }
    return result;
}

static void *reader(void *arg) {
    (void)arg;
    role = READER;
    wait_for(&pending_a, "reader waiting for A pending");
    __atomic_store_n(&reader_armed, 1, __ATOMIC_RELEASE);
    (void)tc_segment_read(segment, TC_VCLOCK_MONOTONIC);
    sem_post(&reader_done);
    return NULL;
}

static int apply(uint64_t rate, uint32_t kind) {
    struct tc_failure failure = {0};
    struct tc_verb verb = {.kind = kind, .rate = rate};
    if (tc_segment_lock(segment, 5000000000LL, &failure) != TC_OK) return 1;
    int result = tc_segment_apply(segment, &verb, NULL);
    tc_segment_unlock(segment);
    if (result != TC_OK) fprintf(stderr, "held_reader: verb refused: %s\n", tc_result_phrase(result));
    return result != TC_OK;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: held_reader SEGMENT\n");
        return 2;
    }
    tc_realclock_init();
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    if (tc_segment_open(AT_FDCWD, argv[1], &mapping, &failure) != TC_OK) {
        fprintf(stderr, "held_reader: cannot open %s: %s\n", argv[1], tc_result_phrase(failure.result));
        return 2;
    }
    segment = mapping.segment;
    role = WRITER;
    sem_init(&pending_a, 0, 0);
    sem_init(&reader_holds, 0, 0);
    sem_init(&reader_release, 0, 0);
    sem_init(&reader_done, 0, 0);
    if (apply(TC_RATE_ONE, TC_VERB_RESUME)) return 2;
    real_gettime = tc_vdso_clock_gettime;
    __atomic_store_n(&tc_vdso_clock_gettime, hooked_gettime, __ATOMIC_RELEASE);
    pthread_t thread;
    pthread_create(&thread, NULL, reader, NULL);

    writer_step = 1;
    if (apply(TC_RATE_ONE * 10000, TC_VERB_SET_RATE)) return 2;
    usleep(2000);
    int64_t m1 = tc_segment_read(segment, TC_VCLOCK_MONOTONIC);
    writer_step = 2;
    if (apply(TC_RATE_ONE, TC_VERB_SET_RATE)) return 2;
    int64_t m2 = tc_segment_read(segment, TC_VCLOCK_MONOTONIC);
    pthread_join(thread, NULL);
    printf("m1 %lld\nm2 %lld\nback %lld\n", (long long)m1, (long long)m2, (long long)(m2 < m1 ? m1 - m2 : 0));
    return m2 < m1;
}

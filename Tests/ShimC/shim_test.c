/*
 * The shim's own tests, compiled together with the shim's sources (so its
 * interposers replace libc's in this executable) and run under ASan/UBSan
 * and under TSan by scripts/test-shim-sanitizers.sh.
 *
 * The process creates a session segment, then re-executes itself with
 * TIMECTL_SEGMENT set, because the shim attaches when it initialises, and
 * its constructor runs before main.
 */
#define _GNU_SOURCE
#include "timectl_segment_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(condition, ...)                                                   \
    do {                                                                        \
        if (!(condition)) {                                                     \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct tc_segment *segment;

static void apply(int kind, int wall, int64_t value, uint64_t rate) {
    struct tc_verb verb = {.kind = kind, .wall = wall, .value = value, .rate = rate};
    struct tc_failure failure = {0};
    CHECK(tc_segment_lock(segment, 5000000000LL, &failure) == TC_OK, "lock");
    int result = tc_segment_apply(segment, &verb, NULL);
    tc_segment_unlock(segment);
    CHECK(result == TC_OK, "verb %d: %s", kind, tc_result_phrase(result));
}

static void test_frozen_reads(void) {
    const int64_t wall = 1451649600LL * 1000000000LL;
    apply(TC_VERB_FREEZE, TC_WALL_ABSOLUTE, wall, 0);
    CHECK(now_ns(CLOCK_REALTIME) == wall, "frozen wall");
    int64_t monotonic = now_ns(CLOCK_MONOTONIC);
    usleep(1000);
    CHECK(now_ns(CLOCK_MONOTONIC) == monotonic, "frozen monotonic");
    apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 3000000000LL, 0);
    CHECK(now_ns(CLOCK_MONOTONIC) == monotonic + 3000000000LL, "tick moves monotonic");
    CHECK(time(NULL) == 1451649603, "time()");
    struct timeval tv;
    CHECK(gettimeofday(&tv, NULL) == 0 && tv.tv_sec == 1451649603 && tv.tv_usec == 0, "gettimeofday");
    /* libc's headers say nonnull, but the kernel and libc accept NULL: so must the shim. */
    int (*volatile gettimeofday_fn)(struct timeval *, void *) = gettimeofday;
    CHECK(gettimeofday_fn(NULL, NULL) == 0, "gettimeofday accepts NULL");
    struct timespec ts;
    CHECK(syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) == 0 && ts.tv_sec == 1451649603, "syscall()");
    errno = 777;
    CHECK(syscall(SYS_getpid) == getpid(), "syscall passes other numbers through");
    CHECK(errno == 777, "errno untouched");
    CHECK(syscall(SYS_clock_gettime, 99, &ts) == -1 && errno == EINVAL, "bad clock through syscall()");
    errno = 0;
    CHECK(clock_gettime(99, &ts) == -1 && errno == EINVAL, "bad clock id");
    CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0, "CPU clock passes through");
}

static volatile int stop_readers;
static long long reader_violations;

static void *reader(void *unused) {
    (void)unused;
    int64_t last = now_ns(CLOCK_MONOTONIC), last_boot = now_ns(CLOCK_BOOTTIME);
    long long violations = 0;
    while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
        int64_t value = now_ns(CLOCK_MONOTONIC), boot = now_ns(CLOCK_BOOTTIME);
        if (value < last || boot < last_boot) violations++;
        last = value;
        last_boot = boot;
        (void)now_ns(CLOCK_REALTIME);
    }
    __atomic_fetch_add(&reader_violations, violations, __ATOMIC_RELAXED);
    return NULL;
}

/* Threads read while this one applies verbs: monotonic never goes back, and
   under TSan, the seqlock shows no data race. */
static void test_concurrent_verbs(void) {
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) pthread_create(&threads[i], NULL, reader, NULL);
    unsigned seed = 12345;
    for (int i = 0; i < 2000; i++) {
        switch (rand_r(&seed) % 5) {
        case 0: apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0); break;
        case 1: apply(TC_VERB_SET_RATE, TC_WALL_KEEP, 0, TC_RATE_ONE * (1 + rand_r(&seed) % 100)); break;
        case 2: apply(TC_VERB_ADVANCE, TC_WALL_KEEP, rand_r(&seed) % 1000000000, 0); break;
        case 3: apply(TC_VERB_SET_WALL, TC_WALL_RELATIVE, -(int64_t)(rand_r(&seed) % 1000000000), 0); break;
        default: apply(TC_VERB_RESET, TC_WALL_KEEP, 0, 0); break;
        }
    }
    __atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    CHECK(reader_violations == 0, "%lld monotonic violations", reader_violations);
}

static void test_fork_child_stays_attached(void) {
    apply(TC_VERB_FREEZE, TC_WALL_ABSOLUTE, 42LL * 1000000000LL, 0);
    pid_t child = fork();
    if (child == 0) _exit(time(NULL) == 42 ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child reads the session");
}

int main(int argc, char **argv) {
    const char *path = getenv("TIMECTL_SEGMENT");
    if (!path) {
        char directory[] = "/tmp/timectl-shim-test-XXXXXX";
        if (!mkdtemp(directory)) return 2;
        int dirfd = open(directory, O_RDONLY | O_DIRECTORY);
        struct tc_mapping mapping;
        struct tc_failure failure = {0};
        if (tc_segment_create(dirfd, "shimtest", "shimtest.seg", &mapping, &failure) != TC_OK) {
            fprintf(stderr, "cannot create a segment: %s\n", tc_result_phrase(failure.result));
            return 2;
        }
        tc_segment_unmap(&mapping);
        char segment_path[256];
        snprintf(segment_path, sizeof(segment_path), "%s/shimtest.seg", directory);
        setenv("TIMECTL_SEGMENT", segment_path, 1);
        pid_t child = fork();
        if (child == 0) {
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status = 0;
        waitpid(child, &status, 0);
        unlink(segment_path);
        rmdir(directory);
        close(dirfd);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    (void)argc;
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    if (tc_segment_open(AT_FDCWD, path, &mapping, &failure) != TC_OK) return 2;
    segment = mapping.segment;
    test_frozen_reads();
    test_concurrent_verbs();
    test_fork_child_stays_attached();
    tc_segment_unmap(&mapping);
    if (failures) {
        fprintf(stderr, "%d shim test failures\n", failures);
        return 1;
    }
    printf("shim tests passed\n");
    return 0;
}

/*
 * The shim's own tests, compiled together with the shim's sources (so its
 * interposers replace libc's in this executable) and run under ASan/UBSan
 * and under TSan by scripts/test-shim-sanitizers.sh.
 *
 * The process creates a session segment, then re-executes itself with
 * TIMECTL_SEGMENT set, because the shim attaches when it initialises, and
 * its constructor runs before main.
 */
#include "shim_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = getenv("TIMECTL_SEGMENT");
    if (!path) {
        char directory[] = "/tmp/timectl-shim-test-XXXXXX";
        if (!mkdtemp(directory)) return 2;
        int dirfd = open(directory, O_RDONLY | O_DIRECTORY);
        struct tc_mapping mapping;
        struct tc_failure failure = {0};
        if (tc_segment_create(dirfd, "shimtest", "shimtest.seg", NULL, &mapping, &failure) != TC_OK) {
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
        /* The recorded workloads read a running clock, whatever the tests in the child left it at. */
        struct tc_mapping running;
        if (tc_segment_open(AT_FDCWD, segment_path, &running, &failure) == TC_OK) {
            segment = running.segment;
            apply(TC_VERB_RESET, TC_WALL_KEEP, 0, 0);
            tc_segment_unmap(&running);
            segment = NULL;
        }
        test_record_and_replay(argv, directory);
        test_go_replay(argv, directory);
        char cleanup[600];
        snprintf(cleanup, sizeof(cleanup), "rm -rf '%s'", directory);
        if (system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", directory);
        close(dirfd);
        if (failures) fprintf(stderr, "%d record and replay test failures\n", failures);
        return failures ? 1 : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    (void)argc;
    if (getenv("SHIM_TEST_WORKLOAD")) return run_workload();
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    if (tc_segment_open(AT_FDCWD, path, &mapping, &failure) != TC_OK) return 2;
    segment = mapping.segment;
    test_real_wait_conversion();
    test_frozen_reads();
    test_setting_the_clock();
    test_concurrent_verbs();
    test_waits_follow_ticks();
    test_periodic_timerfd();
    /* AddressSanitizer cannot unwind from glibc's cancellation signal handler. */
    if (!getenv("SHIM_TEST_NO_ASYNC_CANCEL")) test_cancelled_waiters_leave_no_entry();
    test_fork_child_stays_attached();
    test_close_all_spares_shim_descriptors();
    test_signal_handlers_look_untouched();
    test_go_notes();
#ifndef __SANITIZE_THREAD__
    /* ThreadSanitizer calls signal handlers when it gets to them (at its next
       intercepted call), not when the kernel delivers the signal: the race
       this test tries is then TSan's, not the shim's. */
    test_signal_right_after_a_verb_interrupts_the_sleep();
#endif
    tc_segment_unmap(&mapping);
    if (failures) {
        fprintf(stderr, "%d shim test failures\n", failures);
        return 1;
    }
    printf("shim tests passed\n");
    return 0;
}

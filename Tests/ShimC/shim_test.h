/* What the shim's C tests share: the checks, the session segment the tests run on, and the
   helpers that move it. The tests run as one program (main.c): see there how. */
#ifndef SHIM_TEST_H
#define SHIM_TEST_H

#define _GNU_SOURCE
#include "timectl_program.h"
#include "timectl_segment_io.h"
#include "timectl_trace.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

extern int failures;

#define CHECK(condition, ...)                                                   \
    do {                                                                        \
        if (!(condition)) {                                                     \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

/* The session the tests run on (opened by main.c). */
extern struct tc_segment *segment;

int64_t now_ns(clockid_t clock);
/* Applies a verb to the session, as a controller would. */
void apply(int kind, int wall, int64_t value, uint64_t rate);
/* A real pause: every sleep function here is the shim's, and virtual. */
void real_pause_ms(long milliseconds);
/* Waits (a real second at most) until `count` waits are listed in the segment. */
int wait_for_waits(int count);
/* How many waits the segment lists now. */
int listed_waits(void);

/* clock_tests.c */
void test_frozen_reads(void);
void test_setting_the_clock(void);
void test_concurrent_verbs(void);
/* wait_tests.c */
void test_waits_follow_ticks(void);
void test_real_wait_conversion(void);
void test_periodic_timerfd(void);
void test_cancelled_waiters_leave_no_entry(void);
void test_close_all_spares_shim_descriptors(void);
void test_fork_child_stays_attached(void);
/* signal_tests.c */
void test_signal_handlers_look_untouched(void);
void test_signal_right_after_a_verb_interrupts_the_sleep(void);
/* trace_tests.c: run in the first process, each in children of its own */
int run_workload(void);
void test_record_and_replay(char **argv, const char *workdir);
void test_go_replay(char **argv, const char *workdir);
/* program_tests.c */
void test_go_notes(void);

#endif

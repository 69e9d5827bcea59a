/*
 * The shim's facts and tools per thread (threads.c): the thread id, the
 * count of signal handlers the thread ran, and starting the shim's own
 * threads.
 */
#ifndef TIMECTL_THREADS_H
#define TIMECTL_THREADS_H

#include <stddef.h>
#include <stdint.h>

/* Thread id, cached per thread. */
int32_t tc_gettid(void);
/* The thread id the calling TCB now serves: a static program's trap borrows a TCB of another thread (attach/static_takeover.c). */
void tc_gettid_adopt(int32_t tid);

/* The calling thread's count of signal handlers run through the shim's trampoline (calls/signals.c counts them). */
uint32_t *tc_thread_handled_signals(void);

/*
 * The calling thread's ordinal in its process: 0 for the main thread (and a
 * fork child's), then 1, 2, … in the order the process creates threads,
 * when the pthread_create interposer (trace/trace_registry.c) numbers them
 * (a seeded run or a recording: the same in every run of the same program).
 */
uint32_t tc_thread_ordinal(void);
/* The next ordinal for a thread this process creates, and the setting of it in the new thread. */
uint32_t tc_thread_next_ordinal(void);
void tc_thread_set_ordinal(uint32_t ordinal);
/* How many waits the calling thread has begun (session/wait.c counts them): a seeded jitter draws from it. */
uint64_t tc_thread_count_wait(void);

/*
 * Starts one of the shim's own threads: detached, with `stack_size` bytes
 * of stack and every signal blocked (a signal meant for the application
 * must never land on it), through libc's own pthread_create (record and
 * replay number only the application's threads). 0, or an error number.
 */
int tc_start_shim_thread(void *(*body)(void *), void *argument, size_t stack_size);

/* In a fork child (attach/attach.c): the cached thread id is the parent's. */
void tc_threads_after_fork_in_child(void);

#endif

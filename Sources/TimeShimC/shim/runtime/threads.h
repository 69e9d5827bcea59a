/*
 * The shim's facts and tools per thread (threads.c): the thread id, the
 * count of signal handlers the thread ran, and starting the shim's own
 * threads.
 */
#ifndef TIMECTL_THREADS_H
#define TIMECTL_THREADS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The one signal the shim's threads take. A crash handler that stops every
 * thread to walk their stacks sends each a signal it does not block: Swift's
 * sends SIGUSR1, else SIGUSR2, else SIGPROF, after reading the thread's
 * SigBlk in /proc, and prints "failed to suspend thread" for a thread that
 * blocks all three. SIGPROF is the one that cannot be meant for a thread of
 * the shim's either: the kernel sends a CPU-time timer's SIGPROF to the
 * thread that was on the CPU (a profiler's sample of where time went), and a
 * SIGPROF sent to the process to the main thread first.
 */
#define TC_SHIM_THREAD_SIGNAL SIGPROF

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
 * of stack and every signal blocked but TC_SHIM_THREAD_SIGNAL (a signal
 * meant for the application must never land on it), through libc's own
 * pthread_create (record and replay number only the application's threads).
 * 0, or an error number.
 */
int tc_start_shim_thread(void *(*body)(void *), void *argument, size_t stack_size);

/* In a fork child (attach/attach.c): the cached thread id is the parent's. */
void tc_threads_after_fork_in_child(void);

#endif

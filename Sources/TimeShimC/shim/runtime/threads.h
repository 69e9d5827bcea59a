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
 * Starts one of the shim's own threads: detached, with `stack_size` bytes
 * of stack and every signal blocked (a signal meant for the application
 * must never land on it), through libc's own pthread_create (record and
 * replay number only the application's threads). 0, or an error number.
 */
int tc_start_shim_thread(void *(*body)(void *), void *argument, size_t stack_size);

/* In a fork child (attach/attach.c): the cached thread id is the parent's. */
void tc_threads_after_fork_in_child(void);

#endif

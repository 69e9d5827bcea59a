/*
 * The shim's facts and tools per thread; see threads.h.
 */
#define _GNU_SOURCE
#include "threads.h"
#include "libc_originals.h"
#include "process.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

static TC_TLS int32_t cached_tid;

int32_t tc_gettid(void) {
    if (!cached_tid) cached_tid = (int32_t)tc_raw_syscall(SYS_gettid, 0);
    return cached_tid;
}

void tc_gettid_adopt(int32_t tid) { cached_tid = tid; }

/* A futex word the waits watch beside the session's generation; calls/signals.c's trampoline adds to it. */
static TC_TLS uint32_t handled_signals;

uint32_t *tc_thread_handled_signals(void) { return &handled_signals; }

static TC_TLS uint32_t thread_ordinal;
static uint32_t threads_created;
static TC_TLS uint64_t waits_begun;

uint32_t tc_thread_ordinal(void) { return thread_ordinal; }

uint32_t tc_thread_next_ordinal(void) { return __atomic_add_fetch(&threads_created, 1, __ATOMIC_ACQ_REL); }

void tc_thread_set_ordinal(uint32_t ordinal) { thread_ordinal = ordinal; }

uint64_t tc_thread_count_wait(void) { return waits_begun++; }

int tc_start_shim_thread(void *(*body)(void *), void *argument, size_t stack_size) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, stack_size);
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_t thread;
    int result = tc_real.pthread_create(&thread, &attributes, body, argument);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&attributes);
    return result;
}

void tc_threads_after_fork_in_child(void) {
    cached_tid = 0;
    /* The forking thread is the child's main thread, and the first of its lineage's. */
    thread_ordinal = 0;
    threads_created = 0;
}

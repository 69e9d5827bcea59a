/*
 * The shim's facts and tools per thread; see threads.h.
 */
#define _GNU_SOURCE
#include "threads.h"
#include "libc_originals.h"
#include "process.h"

#include <linux/futex.h>
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

/* What a new shim thread starts from, on its creator's stack: the creator waits until it is taken. */
struct shim_thread_start {
    void *(*body)(void *);
    void *argument;
    uint32_t started;
};

static void *start_shim_thread(void *raw) {
    struct shim_thread_start *start = raw;
    void *(*body)(void *) = start->body;
    void *argument = start->argument;
    __atomic_store_n(&start->started, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &start->started, FUTEX_WAKE_PRIVATE, 1);
    return body(argument);
}

int tc_start_shim_thread(void *(*body)(void *), void *argument, size_t stack_size) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, stack_size);
    sigset_t all, saved;
    sigfillset(&all);
    sigdelset(&all, TC_SHIM_THREAD_SIGNAL);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_t thread;
    struct shim_thread_start start = {.body = body, .argument = argument, .started = 0};
    int result = tc_real.pthread_create(&thread, &attributes, start_shim_thread, &start);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&attributes);
    /* Until a new thread first runs, libc keeps every signal blocked in it, TC_SHIM_THREAD_SIGNAL too: a
       crash meanwhile (a CPU kept busy elsewhere can hold it back for milliseconds) found it unsuspendable. */
    while (result == 0 && !__atomic_load_n(&start.started, __ATOMIC_ACQUIRE))
        tc_raw_syscall(SYS_futex, &start.started, FUTEX_WAIT_PRIVATE, 0, NULL);
    return result;
}

void tc_threads_after_fork_in_child(void) {
    cached_tid = 0;
    /* The forking thread is the child's main thread, and the first of its lineage's. */
    thread_ordinal = 0;
    threads_created = 0;
}

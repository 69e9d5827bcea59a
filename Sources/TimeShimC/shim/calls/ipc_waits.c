/*
 * Timed waits on System V semaphores, POSIX message queues and signals, on
 * the virtual timeline: semtimedop, mq_timedreceive, mq_timedsend,
 * sigtimedwait (SPEC §3; docs/scheduler.md, "Every blocking call"). The same
 * calls without a timeout (semop, mq_receive, mq_send, sigwaitinfo) wait for
 * their event alone and pass through.
 *
 * Nothing can wake these waits early but their own event (an operation on
 * the semaphore, a message, a signal), so each runs the real call for at
 * most TC_SLICE_NS of real time at once, as sem_timedwait does, and looks
 * at the session between slices: a verb that makes the deadline due ends the
 * wait within a slice. The event always wins: an operation that can proceed
 * now does, whatever the deadline. A signal handled between two slices ends
 * the wait with EINTR, as it would have ended the real call.
 */
#define _GNU_SOURCE
#include "ipc_waits.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/threads.h"
#include "../session/signal_guard.h"
#include "../session/wait.h"

#include <errno.h>
#include <mqueue.h>
#include <signal.h>
#include <string.h>
#include <sys/sem.h>
#include <sys/syscall.h>

/* One real attempt that waits at most `real_ns` (0: only tries): the kernel's result, or −errno. */
typedef long (*attempt_function)(void *call, int64_t real_ns);

/*
 * Waits in slices until `deadline` on `vclock`: the attempt's result, or `timed_out` (a −errno) once the
 * deadline is due and the attempt still cannot proceed. Listed in the wait table as `kind` meanwhile.
 */
static long wait_in_slices(struct tc_segment *segment, int kind, int vclock, int64_t deadline, attempt_function attempt,
                           void *call, long timed_out) {
    struct tc_wait wait;
    struct tc_signal_guard guard;
    volatile long result = timed_out; /* pthread_cleanup_push may use setjmp */
    tc_wait_begin(&wait, segment, kind, vclock, deadline);
    pthread_cleanup_push(tc_wait_end_cleanup, &wait);
    tc_signal_guard_enter(&guard);
    pthread_cleanup_push(tc_signal_guard_leave_cleanup, &guard);
    for (;;) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_real_remaining(&view, deadline);
        uint32_t *signals = tc_thread_handled_signals();
        uint32_t signals_seen = __atomic_load_n(signals, __ATOMIC_RELAXED);
        tc_signal_guard_open(&guard);
        long returned = attempt(call, real < TC_SLICE_NS ? real : TC_SLICE_NS);
        tc_signal_guard_close();
        /* Counted after closing: a handler that ran just before the slice, or on the way out, interrupts the wait too. */
        if (returned == timed_out && __atomic_load_n(signals, __ATOMIC_RELAXED) != signals_seen) returned = -EINTR;
        if (returned != timed_out || real == 0) {
            result = returned;
            break;
        }
    }
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(1);
    return result;
}

static struct timespec relative_timeout(int64_t real_ns) { return tc_timespec_from_ns(real_ns); }

/* An absolute CLOCK_REALTIME deadline `real_ns` from now, as the message queue calls take. */
static struct timespec realtime_deadline(int64_t real_ns) { return tc_timespec_from_ns(tc_real_ns(CLOCK_REALTIME) + real_ns); }

/* The libc result `returned` (−1 and errno on failure) as the kernel's (a value, or −errno). */
static long kernel_form(long returned) { return returned < 0 ? -(long)errno : returned; }

/* libc's form (−1 and errno) of a kernel result, errno untouched on success. */
static long libc_form(long result) {
    if (result >= 0) return result;
    errno = (int)-result;
    return -1;
}

/* ---- semtimedop ---- */

struct semaphore_call {
    int semid;
    struct sembuf *sops;
    size_t nsops;
};

/* libc's semtimedop (a cancellation point) where there is one, else the system call (a static program's). */
static long real_semtimedop(const struct semaphore_call *call, const struct timespec *timeout) {
    if (tc_real.semtimedop) return kernel_form(tc_real.semtimedop(call->semid, call->sops, call->nsops, timeout));
    return tc_raw_syscall(SYS_semtimedop, call->semid, call->sops, call->nsops, timeout);
}

static long semaphore_attempt(void *argument, int64_t real_ns) {
    struct timespec timeout = relative_timeout(real_ns);
    return real_semtimedop(argument, &timeout);
}

static long semtimedop_call(int semid, struct sembuf *sops, size_t nsops, const struct timespec *timeout) {
    struct tc_segment *segment = tc_shim_segment();
    struct semaphore_call call = {semid, sops, nsops};
    if (!segment || !timeout) return real_semtimedop(&call, timeout);
    long now = semaphore_attempt(&call, 0);
    if (now != -EAGAIN) return now;
    if (!tc_timespec_valid(timeout)) return -EINVAL;
    int64_t deadline = tc_wait_deadline_after(segment, TC_VCLOCK_MONOTONIC, tc_timespec_ns_saturating(timeout));
    return wait_in_slices(segment, TC_WAIT_SEM, TC_VCLOCK_MONOTONIC, deadline, semaphore_attempt, &call, -EAGAIN);
}

static int shim_semtimedop(int semid, struct sembuf *sops, size_t nsops, const struct timespec *timeout) {
    return (int)libc_form(semtimedop_call(semid, sops, nsops, timeout));
}

TC_EXPORT int semtimedop(int, struct sembuf *, size_t, const struct timespec *) __attribute__((alias("shim_semtimedop")));

/* ---- message queues ---- */

struct message_call {
    mqd_t queue;
    char *message;
    size_t length;
    unsigned int *priority_out;
    unsigned int priority_in;
    int sending;
};

/* libc's call where there is one, else the system call. */
static long real_message_call(const struct message_call *call, const struct timespec *until) {
    if (call->sending) {
        if (tc_real.mq_timedsend) return kernel_form(tc_real.mq_timedsend(call->queue, call->message, call->length, call->priority_in, until));
        return tc_raw_syscall(SYS_mq_timedsend, call->queue, call->message, call->length, call->priority_in, until);
    }
    if (tc_real.mq_timedreceive)
        return kernel_form(tc_real.mq_timedreceive(call->queue, call->message, call->length, call->priority_out, until));
    return tc_raw_syscall(SYS_mq_timedreceive, call->queue, call->message, call->length, call->priority_out, until);
}

static long message_attempt(void *argument, int64_t real_ns) {
    struct timespec until = realtime_deadline(real_ns);
    return real_message_call(argument, &until);
}

static long message_wait(struct message_call *call, const struct timespec *deadline_at) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || !deadline_at) return real_message_call(call, deadline_at);
    long now = message_attempt(call, 0);
    if (now != -ETIMEDOUT) return now;
    /* As the kernel: an invalid deadline is an error only for a call that would block. */
    if (!tc_deadline_valid(deadline_at)) return -EINVAL;
    int64_t deadline = tc_wait_absolute_deadline(segment, TC_VCLOCK_REALTIME, tc_deadline_ns(deadline_at));
    return wait_in_slices(segment, TC_WAIT_MQUEUE, TC_VCLOCK_REALTIME, deadline, message_attempt, call, -ETIMEDOUT);
}

static ssize_t shim_mq_timedreceive(mqd_t queue, char *message, size_t length, unsigned int *priority,
                                    const struct timespec *deadline) {
    struct message_call call = {queue, message, length, priority, 0, 0};
    return (ssize_t)libc_form(message_wait(&call, deadline));
}

static int shim_mq_timedsend(mqd_t queue, const char *message, size_t length, unsigned int priority,
                             const struct timespec *deadline) {
    struct message_call call = {queue, (char *)message, length, NULL, priority, 1};
    return (int)libc_form(message_wait(&call, deadline));
}

TC_EXPORT ssize_t mq_timedreceive(mqd_t, char *, size_t, unsigned int *, const struct timespec *)
    __attribute__((alias("shim_mq_timedreceive")));
TC_EXPORT int mq_timedsend(mqd_t, const char *, size_t, unsigned int, const struct timespec *)
    __attribute__((alias("shim_mq_timedsend")));

/* ---- sigtimedwait ---- */

struct signal_call {
    const sigset_t *set;
    siginfo_t *info;
};

/* libc's sigtimedwait where there is one, else the system call. */
static long real_sigtimedwait(const struct signal_call *call, const struct timespec *timeout) {
    if (tc_real.sigtimedwait) return kernel_form(tc_real.sigtimedwait(call->set, call->info, timeout));
    return tc_raw_syscall(SYS_rt_sigtimedwait, call->set, call->info, timeout, _NSIG / 8);
}

static long signal_attempt(void *argument, int64_t real_ns) {
    struct timespec timeout = relative_timeout(real_ns);
    return real_sigtimedwait(argument, &timeout);
}

static long sigtimedwait_call(const sigset_t *set, siginfo_t *info, const struct timespec *timeout) {
    struct tc_segment *segment = tc_shim_segment();
    struct signal_call call = {set, info};
    if (!segment || !timeout) return real_sigtimedwait(&call, timeout);
    long now = signal_attempt(&call, 0);
    if (now != -EAGAIN) return now;
    if (!tc_timespec_valid(timeout)) return -EINVAL;
    int64_t deadline = tc_wait_deadline_after(segment, TC_VCLOCK_MONOTONIC, tc_timespec_ns_saturating(timeout));
    return wait_in_slices(segment, TC_WAIT_SIGNAL, TC_VCLOCK_MONOTONIC, deadline, signal_attempt, &call, -EAGAIN);
}

static int shim_sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout) {
    return (int)libc_form(sigtimedwait_call(set, info, timeout));
}

TC_EXPORT int sigtimedwait(const sigset_t *, siginfo_t *, const struct timespec *) __attribute__((alias("shim_sigtimedwait")));

long tc_syscall_ipc_wait(long number, const long *a) {
    switch (number) {
    case SYS_semtimedop: return semtimedop_call((int)a[0], (struct sembuf *)a[1], (size_t)a[2], (const struct timespec *)a[3]);
    case SYS_rt_sigtimedwait: {
        /* The kernel's sigset is 8 bytes, libc's larger: copied, so that libc reads none past the caller's. */
        sigset_t set;
        sigemptyset(&set);
        if (a[0]) memcpy(&set, (const void *)a[0], 8);
        return sigtimedwait_call(a[0] ? &set : NULL, (siginfo_t *)a[1], (const struct timespec *)a[2]);
    }
    case SYS_mq_timedsend: {
        struct message_call call = {(mqd_t)a[0], (char *)a[1], (size_t)a[2], NULL, (unsigned int)a[3], 1};
        return message_wait(&call, (const struct timespec *)a[4]);
    }
    default: {
        struct message_call call = {(mqd_t)a[0], (char *)a[1], (size_t)a[2], (unsigned int *)a[3], 0, 0};
        return message_wait(&call, (const struct timespec *)a[4]);
    }
    }
}

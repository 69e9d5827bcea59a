/*
 * The system-call table; see syscall_table.h. Every handler returns what
 * the kernel would (a value or −errno); libc's convention (−1 and errno)
 * is made only at syscall() itself, the exported entry point.
 */
#define _GNU_SOURCE
#include "syscall_table.h"
#include "clock.h"
#include "descriptor_waits.h"
#include "filetimes.h"
#include "futex.h"
#include "ipc_waits.h"
#include "process_calls.h"
#include "settime.h"
#include "sleep.h"
#include "timers.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>

static long raw(const struct tc_syscall *call) {
    return tc_raw_syscall6(call->number, call->arg[0], call->arg[1], call->arg[2], call->arg[3], call->arg[4],
                           call->arg[5]);
}

/* A kernel sigset_t argument (8 bytes) as libc's sigset_t, or NULL. */
static const sigset_t *libc_mask(long kernel_mask, sigset_t *mask) {
    if (!kernel_mask) return NULL;
    sigemptyset(mask);
    memcpy(mask, (const void *)kernel_mask, 8);
    return mask;
}

/*
 * The bounded exception (docs/go-and-static.md): a raw relative wait of at
 * most this long, made by the Go runtime through the trap, runs on real
 * time. Those are the runtime's own back-offs and retries — runqgrab's
 * 3 µs, sysmon's 20 µs … 10 ms naps, the 100 µs retries of a stop-the-world
 * or a safe-point request that re-preempt until every goroutine has
 * stopped — which would never end on a frozen session. What a program's
 * timers wait for goes through netpoll's epoll_pwait and is always virtual,
 * and so is every wait made through syscall().
 */
#define RUNTIME_BACKOFF_NS (10 * 1000 * 1000LL)

static int runtime_backoff(const struct tc_syscall *call, const struct timespec *relative) {
    return call->go_runtime && relative && relative->tv_sec == 0 && relative->tv_nsec >= 0 &&
           relative->tv_nsec <= RUNTIME_BACKOFF_NS;
}

/* ---- waits ---- */

static long futex_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    const struct timespec *timeout = (const struct timespec *)a[3];
    /* On real time; one that times out beside a running thread on a standing clock creeps it (runtime/starvation.c). */
    if ((a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT && runtime_backoff(call, timeout))
        return tc_runtime_backoff_futex(a[0], a[1], a[2], a[3]);
    return tc_futex((uint32_t *)a[0], (int)a[1], (uint32_t)a[2], timeout, (uint32_t *)a[4], (uint32_t)a[5]);
}

static long ipc_wait_call(const struct tc_syscall *call) { return tc_syscall_ipc_wait(call->number, call->arg); }

static long futex_waitv_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    return tc_futex_waitv((struct futex_waitv *)a[0], (unsigned int)a[1], (unsigned int)a[2],
                          (const struct timespec *)a[3], (clockid_t)a[4]);
}

static long sleep_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    if (call->number == SYS_nanosleep && runtime_backoff(call, (const struct timespec *)a[0])) return raw(call);
    return tc_syscall_sleep(call->number, a[0], a[1], a[2], a[3]);
}

#ifdef SYS_poll
static long poll_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    return tc_poll((struct pollfd *)a[0], (nfds_t)a[1], (int)a[2]);
}
#endif

static long ppoll_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    if (a[3] && a[4] != 8) return -EINVAL;
    sigset_t mask;
    return tc_ppoll((struct pollfd *)a[0], (nfds_t)a[1], (const struct timespec *)a[2], libc_mask(a[3], &mask));
}

#ifdef SYS_select
static long select_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    return tc_select((int)a[0], (fd_set *)a[1], (fd_set *)a[2], (fd_set *)a[3], (struct timeval *)a[4]);
}
#endif

/* pselect6's sixth argument: {const sigset_t *, size_t}. */
static long pselect_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    sigset_t mask;
    long kernel_mask = 0;
    if (a[5]) {
        const long *data = (const long *)a[5];
        if (data[0] && data[1] != 8) return -EINVAL;
        kernel_mask = data[0];
    }
    return tc_pselect6((int)a[0], (fd_set *)a[1], (fd_set *)a[2], (fd_set *)a[3], (struct timespec *)a[4],
                       libc_mask(kernel_mask, &mask));
}

static long epoll_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    long kernel_mask = call->number == SYS_epoll_pwait ? a[4] : 0;
    if (kernel_mask && a[5] != 8) return -EINVAL;
    sigset_t mask;
    return tc_epoll_pwait((int)a[0], (struct epoll_event *)a[1], (int)a[2], (int)a[3], libc_mask(kernel_mask, &mask));
}

static long epoll_pwait2_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    if (a[4] && a[5] != 8) return -EINVAL;
    sigset_t mask;
    return tc_epoll_pwait2((int)a[0], (struct epoll_event *)a[1], (int)a[2], (const struct timespec *)a[3],
                           libc_mask(a[4], &mask));
}

static long timer_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    return tc_timers_syscall(call->number, a[0], a[1], a[2], a[3]);
}

/* ---- clocks ---- */

static long clock_read_call(const struct tc_syscall *call) {
    return tc_clock_syscall(call->number, call->arg[0], call->arg[1]);
}

/* Setting the clock moves the session, never the host (SPEC §2), by settime.c's rules. */
static long settime_call(const struct tc_syscall *call) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return raw(call);
    return tc_syscall_settime(segment, call->number, call->arg[0], call->arg[1]);
}

static long file_times_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    return tc_syscall_file_times(call->number, a[0], a[1], a[2], a[3], a[4]);
}

/* ---- the process ---- */

static long exec_call(const struct tc_syscall *call) { return tc_process_exec(call->number, call->arg); }

/* clone(flags, stack, parent_tid, …): x86-64 puts child_tid before tls, aarch64 (the generic order) after it. */
static long fork_call(const struct tc_syscall *call) {
#if defined(__x86_64__)
    return tc_process_fork(call->number, call->arg[0], call->arg[2], call->arg[3]);
#elif defined(__aarch64__)
    return tc_process_fork(call->number, call->arg[0], call->arg[2], call->arg[4]);
#endif
}

static long sigaction_call(const struct tc_syscall *call) {
    return tc_process_sigaction(call->arg[0], call->arg[1], call->arg[2], call->arg[3]);
}

static long sigprocmask_call(const struct tc_syscall *call) {
    if (!call->context) return raw(call);
    return tc_process_sigprocmask(call->arg[0], call->arg[1], call->arg[2], call->arg[3], (ucontext_t *)call->context);
}

static long readlink_call(const struct tc_syscall *call) {
    const long *a = call->arg;
    return tc_process_readlink(call->number, a[0], a[1], a[2], a[3]);
}

/* ---- the table ---- */

#define BOTH (TC_DOOR_SYSCALL | TC_DOOR_TRAP)

struct entry {
    long (*handler)(const struct tc_syscall *call);
    int doors;
};

/*
 * Why a door is missing:
 *  - clock reads: a trapped program reads the clocks through the vDSO, which
 *    vdso_redirect.c points at the shim; the filter never traps them;
 *  - stat and utime: the filter does not trap them (file times of static and
 *    Go programs are real: docs/go-and-static.md);
 *  - fork and clone: syscall(SYS_fork) in a dynamic program makes a child
 *    without libc's atfork handlers, as it would without timectl (the
 *    child runs on the session's time, unregistered); the trap has libc's
 *    fork make it instead;
 *  - signal dispositions and masks: a dynamic program's go through the
 *    interposed sigaction (signals.c); the trap guards SIGSYS against a
 *    Go or static program's raw ones;
 *  - readlink: only a static program (run through the loader) has another
 *    executable's name to hide.
 */
static const struct entry table[] = {
    /* Waits with a timeout: on the session's timeline. */
    [SYS_futex] = {futex_call, BOTH},
    [SYS_futex_waitv] = {futex_waitv_call, BOTH},
    [SYS_nanosleep] = {sleep_call, BOTH},
    [SYS_clock_nanosleep] = {sleep_call, BOTH},
    [SYS_ppoll] = {ppoll_call, BOTH},
    [SYS_pselect6] = {pselect_call, BOTH},
    [SYS_epoll_pwait] = {epoll_call, BOTH},
    [SYS_epoll_pwait2] = {epoll_pwait2_call, BOTH},
    [SYS_semtimedop] = {ipc_wait_call, BOTH},
    [SYS_mq_timedreceive] = {ipc_wait_call, BOTH},
    [SYS_mq_timedsend] = {ipc_wait_call, BOTH},
    [SYS_rt_sigtimedwait] = {ipc_wait_call, BOTH},
    /* Timers: armed and read on the session's timeline (timers.c). */
    [SYS_timerfd_create] = {timer_call, BOTH},
    [SYS_timerfd_settime] = {timer_call, BOTH},
    [SYS_timerfd_gettime] = {timer_call, BOTH},
    [SYS_timer_create] = {timer_call, BOTH},
    [SYS_timer_settime] = {timer_call, BOTH},
    [SYS_timer_gettime] = {timer_call, BOTH},
    [SYS_timer_getoverrun] = {timer_call, BOTH},
    [SYS_timer_delete] = {timer_call, BOTH},
    [SYS_setitimer] = {timer_call, BOTH},
    [SYS_getitimer] = {timer_call, BOTH},
    /* Clocks. */
    [SYS_clock_gettime] = {clock_read_call, TC_DOOR_SYSCALL},
    [SYS_gettimeofday] = {clock_read_call, TC_DOOR_SYSCALL},
    [SYS_clock_settime] = {settime_call, BOTH},
    [SYS_settimeofday] = {settime_call, BOTH},
    [SYS_adjtimex] = {settime_call, BOTH},
    [SYS_clock_adjtime] = {settime_call, BOTH},
    /* File times (filetimes.c). */
    [SYS_fstat] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_newfstatat] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_statx] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_utimensat] = {file_times_call, TC_DOOR_SYSCALL},
    /* The process (process_calls.c). */
    [SYS_execve] = {exec_call, BOTH},
    [SYS_execveat] = {exec_call, BOTH},
    [SYS_clone] = {fork_call, TC_DOOR_TRAP},
    [SYS_rt_sigaction] = {sigaction_call, TC_DOOR_TRAP},
    [SYS_rt_sigprocmask] = {sigprocmask_call, TC_DOOR_TRAP},
    [SYS_readlinkat] = {readlink_call, TC_DOOR_TRAP},
    /* x86-64 keeps the older calls beside their successors; aarch64 (the generic table) has only the successors,
       which libc's poll, select, alarm, time, stat and fork there are made of. */
#if defined(__x86_64__)
    [SYS_poll] = {poll_call, BOTH},
    [SYS_select] = {select_call, BOTH},
    [SYS_epoll_wait] = {epoll_call, BOTH},
    [SYS_alarm] = {timer_call, BOTH},
    [SYS_time] = {clock_read_call, TC_DOOR_SYSCALL},
    [SYS_stat] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_lstat] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_utimes] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_futimesat] = {file_times_call, TC_DOOR_SYSCALL},
    [SYS_fork] = {fork_call, TC_DOOR_TRAP},
    [SYS_readlink] = {readlink_call, TC_DOOR_TRAP},
#elif defined(__aarch64__)
    /* Nothing of its own: every call above is in the generic table under the same name. */
#endif
};

long tc_syscall_dispatch(const struct tc_syscall *call) {
    unsigned long number = (unsigned long)call->number;
    if (number < sizeof(table) / sizeof(table[0]) && (table[number].doors & call->door))
        return table[number].handler(call);
    return raw(call);
}

/* libc's syscall(): the table's first door, with libc's convention for failures; errno untouched otherwise. */
TC_EXPORT long syscall(long number, ...) {
    va_list args;
    va_start(args, number);
    struct tc_syscall call = {number, {0}, TC_DOOR_SYSCALL, 0, NULL};
    for (int i = 0; i < 6; i++) call.arg[i] = va_arg(args, long);
    va_end(args);
    int saved_errno = errno;
    long result = tc_syscall_dispatch(&call);
    if (result < 0 && result > -4096) {
        errno = (int)-result;
        return -1;
    }
    errno = saved_errno;
    return result;
}

/*
 * Counting the signal handlers each thread runs, so that a virtual wait can
 * tell that it was interrupted (see tc_wait_futex in session/wait.c; the count is runtime/threads.c's).
 *
 * A virtual sleep is a series of futex waits, one after each verb that
 * moves time. A futex wait takes no signal mask, so a signal may arrive in
 * the instants between them, when the thread runs the shim's own code; its
 * handler then runs there, and without this count the sleep would go on
 * and the caller's EINTR be lost. So, in an attached process, sigaction()
 * and signal() install a trampoline in front of every function handler: it
 * adds one to the calling thread's count, then calls the application's
 * handler. The count is a futex word the waits watch beside the session's
 * generation.
 *
 * The application sees nothing of it: queries return its own handler and
 * flags, and the trampoline calls its handler with the arguments the kernel
 * gave (an x86-64 or aarch64 handler that takes one argument ignores the
 * other two, as it does when the kernel calls it). Handlers installed by
 * other means (sigset, a raw system call, before the shim attached) are not
 * counted: a wait then only sees a signal the kernel interrupts it with.
 */
#define _GNU_SOURCE
#include "signals.h"
#include "process_calls.h"
#include "timers.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/spinlock.h"
#include "../runtime/threads.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>

typedef void (*three_argument_handler)(int, siginfo_t *, void *);

/* Per signal, while the trampoline stands in for it: the application's
   handler, and whether it asked for SA_SIGINFO (the trampoline always does). */
static void *application_handlers[NSIG];
static int application_siginfo[NSIG];
static int table_lock;

static void trampoline(int signal, siginfo_t *info, void *context) {
    __atomic_fetch_add(tc_thread_handled_signals(), 1, __ATOMIC_RELAXED);
    if (info && info->si_code == SI_TIMER) tc_timers_signal_taken(signal, info);
    three_argument_handler handler = __atomic_load_n(&application_handlers[signal], __ATOMIC_ACQUIRE);
    if (handler) handler(signal, info, context);
}

/* sigaction serialised with itself (a handler may call sigaction: see spinlock.h). */
static void lock_table(sigset_t *saved) { tc_spin_lock(&table_lock, saved); }

static void unlock_table(const sigset_t *saved) { tc_spin_unlock(&table_lock, saved); }

void tc_signals_after_fork_in_child(void) { __atomic_store_n(&table_lock, 0, __ATOMIC_RELEASE); }

static int real_sigaction(int signal, const struct sigaction *action, struct sigaction *old) {
    if (!tc_real.sigaction) tc_real.sigaction = (__typeof__(tc_real.sigaction))dlsym(RTLD_NEXT, "sigaction");
    return tc_real.sigaction(signal, action, old);
}

static int is_function(const struct sigaction *action) {
    return action->sa_handler != SIG_DFL && action->sa_handler != SIG_IGN;
}

static int shim_sigaction(int signal, const struct sigaction *action, struct sigaction *old) {
    if (!tc_shim_segment() || signal <= 0 || signal >= NSIG) return real_sigaction(signal, action, old);
    struct sigaction without_sigsys;
    if (tc_syscall_trap_active()) {
        /* Trapped system calls (trap/syscall_trap.c) need SIGSYS: never replaced, never blocked in a handler. */
        if (signal == SIGSYS) {
            tc_syscall_trap_record_sigsys(action, old);
            return 0;
        }
        if (action && sigismember(&action->sa_mask, SIGSYS)) {
            without_sigsys = *action;
            sigdelset(&without_sigsys.sa_mask, SIGSYS);
            action = &without_sigsys;
        }
    }
    struct sigaction installed;
    if (action && is_function(action)) {
        installed = *action;
        installed.sa_sigaction = trampoline;
        installed.sa_flags |= SA_SIGINFO;
    }
    sigset_t saved;
    lock_table(&saved);
    void *previous_handler = application_handlers[signal];
    int previous_siginfo = application_siginfo[signal];
    if (action && is_function(action)) {
        /* Published before the trampoline is installed: a delivery in between calls the new handler. */
        __atomic_store_n(&application_handlers[signal], (void *)action->sa_sigaction, __ATOMIC_RELEASE);
        application_siginfo[signal] = action->sa_flags & SA_SIGINFO;
    }
    int result = real_sigaction(signal, action && is_function(action) ? &installed : action, old);
    int saved_errno = errno;
    if (result != 0) {
        __atomic_store_n(&application_handlers[signal], previous_handler, __ATOMIC_RELEASE);
        application_siginfo[signal] = previous_siginfo;
    } else if (old && old->sa_sigaction == trampoline) {
        /* What the application installed; the rest (SA_RESTORER and all) as libc reports it. */
        old->sa_sigaction = (three_argument_handler)previous_handler;
        old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | previous_siginfo;
    }
    unlock_table(&saved);
    errno = saved_errno;
    return result;
}

TC_EXPORT int sigaction(int, const struct sigaction *restrict, struct sigaction *restrict)
    __attribute__((alias("shim_sigaction")));
TC_EXPORT int __sigaction(int, const struct sigaction *, struct sigaction *) __attribute__((alias("shim_sigaction")));

/* signal() and its relatives through sigaction(), with their flags; the signal itself blocked in its handler or not. */
static sighandler_t install_handler(int signal, sighandler_t handler, int flags, int block_itself) {
    if (handler == SIG_ERR || signal <= 0 || signal >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction action, old;
    memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    action.sa_flags = flags;
    sigemptyset(&action.sa_mask);
    if (block_itself) sigaddset(&action.sa_mask, signal);
    if (shim_sigaction(signal, &action, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

/* signal() as glibc has it: BSD semantics (the handler stays, interrupted calls restart). */
static sighandler_t shim_signal(int signal, sighandler_t handler) {
    return install_handler(signal, handler, SA_RESTART, 1);
}

TC_EXPORT sighandler_t signal(int, sighandler_t) __attribute__((alias("shim_signal")));
TC_EXPORT sighandler_t bsd_signal(int, sighandler_t) __attribute__((alias("shim_signal")));
TC_EXPORT sighandler_t ssignal(int, sighandler_t) __attribute__((alias("shim_signal")));

/* sysv_signal(): System V semantics (reset to the default when delivered, not blocked meanwhile). */
static sighandler_t shim_sysv_signal(int signal, sighandler_t handler) {
    return install_handler(signal, handler, SA_RESETHAND | SA_NODEFER, 0);
}

TC_EXPORT sighandler_t sysv_signal(int, sighandler_t) __attribute__((alias("shim_sysv_signal")));
TC_EXPORT sighandler_t __sysv_signal(int, sighandler_t) __attribute__((alias("shim_sysv_signal")));

/*
 * While system calls are trapped (trap/syscall_trap.c), SIGSYS must never be
 * blocked: a trap then kills the process. Masks set through libc lose
 * SIGSYS — cgo starts each thread with every signal blocked, and the
 * runtime's first call on it, which unblocks them, is itself trapped.
 */
static const sigset_t *mask_without_sigsys(int how, const sigset_t *set, sigset_t *copy) {
    if (!set || how == SIG_UNBLOCK || !tc_syscall_trap_active() || !sigismember(set, SIGSYS)) return set;
    *copy = *set;
    sigdelset(copy, SIGSYS);
    return copy;
}

/* Before the shim has resolved libc's functions (a constructor ahead of ours): the system call, as libc makes it. */
static int raw_sigmask(int how, const sigset_t *set, sigset_t *old) {
    return (int)-tc_raw_syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

static int shim_pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
    sigset_t copy;
    set = mask_without_sigsys(how, set, &copy);
    if (!tc_real.pthread_sigmask) return raw_sigmask(how, set, old);
    return tc_real.pthread_sigmask(how, set, old);
}

static int shim_sigprocmask(int how, const sigset_t *set, sigset_t *old) {
    sigset_t copy;
    set = mask_without_sigsys(how, set, &copy);
    if (!tc_real.sigprocmask) {
        int result = raw_sigmask(how, set, old);
        if (result == 0) return 0;
        errno = result;
        return -1;
    }
    return tc_real.sigprocmask(how, set, old);
}

TC_EXPORT int pthread_sigmask(int, const sigset_t *restrict, sigset_t *restrict) __attribute__((alias("shim_pthread_sigmask")));
TC_EXPORT int sigprocmask(int, const sigset_t *restrict, sigset_t *restrict) __attribute__((alias("shim_sigprocmask")));

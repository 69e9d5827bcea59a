/*
 * System calls that change the process, answered for a trapped Go or static program; see process_calls.h.
 *
 * The runtime must not take SIGSYS away or block it (a trap while SIGSYS is blocked kills the process): its
 * rt_sigaction of SIGSYS is recorded, not applied (a SIGSYS that is not the trap's goes to what the program
 * installed: syscall_trap.c), and any mask the program sets, or gives a handler, has SIGSYS taken out.
 */
#define _GNU_SOURCE
#include "process_calls.h"
#include "exec.h"
#include "../runtime/process.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIGSYS_BIT (1ULL << (SIGSYS - 1))

/* What the program believes SIGSYS does (it set it with rt_sigaction while we kept ours). */
static struct tc_kernel_sigaction application_sigsys = {.handler = SIG_DFL};

struct tc_kernel_sigaction tc_process_application_sigsys(void) { return application_sigsys; }

void tc_syscall_trap_record_sigsys(const struct sigaction *action, struct sigaction *old) {
    struct tc_kernel_sigaction previous = application_sigsys;
    if (action) {
        struct tc_kernel_sigaction recorded = {(void *)action->sa_handler, (unsigned long)action->sa_flags,
                                            (void *)action->sa_restorer, 0};
        memcpy(&recorded.mask, &action->sa_mask, sizeof(recorded.mask));
        application_sigsys = recorded;
    }
    if (old) {
        memset(old, 0, sizeof(*old));
        old->sa_handler = (sighandler_t)previous.handler;
        old->sa_flags = (int)previous.flags;
        old->sa_restorer = (void (*)(void))previous.restorer;
        memcpy(&old->sa_mask, &previous.mask, sizeof(previous.mask));
    }
}

/* A static program asking where its executable is (Go's os.Executable, filepath.EvalSymlinks of
   /proc/self/exe) is told its own path, not the loader's. */
long tc_process_readlink(long number, long a1, long a2, long a3, long a4) {
    /* readlinkat(directory, path, buffer, size); x86-64 also has readlink(path, buffer, size). */
    const char *path = (const char *)a2;
    char *buffer = (char *)a3;
    long size = a4;
#ifdef SYS_readlink
    if (number == SYS_readlink) path = (const char *)a1, buffer = (char *)a2, size = a3;
#endif
    const char *executable;
    if (!tc_static_program_names_executable(path) || !tc_static_program_executable(&executable))
        return tc_raw_syscall(number, a1, a2, a3, a4);
    if (size <= 0) return -EINVAL;
    long length = (long)strlen(executable);
    if (length > size) length = size;
    memcpy(buffer, executable, (size_t)length);
    return length;
}

long tc_process_sigaction(long signal, long action, long old_action, long size) {
    if (size != 8) return tc_raw_syscall(SYS_rt_sigaction, signal, action, old_action, size);
    if (signal == SIGSYS) {
        struct tc_kernel_sigaction previous = application_sigsys;
        if (action) application_sigsys = *(const struct tc_kernel_sigaction *)action;
        if (old_action) *(struct tc_kernel_sigaction *)old_action = previous;
        return 0;
    }
    struct tc_kernel_sigaction without_sigsys;
    if (action && (((const struct tc_kernel_sigaction *)action)->mask & SIGSYS_BIT)) {
        without_sigsys = *(const struct tc_kernel_sigaction *)action;
        without_sigsys.mask &= ~SIGSYS_BIT;
        action = (long)&without_sigsys;
    }
    if (tc_static_program_active())
        return tc_static_sigaction(signal, (const struct tc_kernel_sigaction *)action,
                                   (struct tc_kernel_sigaction *)old_action);
    return tc_raw_syscall(SYS_rt_sigaction, signal, action, old_action, size);
}

/*
 * The thread's mask is what rt_sigreturn restores from the signal frame when
 * the handler returns, so the change is made there: a mask set with the
 * system call inside the handler would be undone.
 */
long tc_process_sigprocmask(long how, long set, long old_set, long size, ucontext_t *context) {
    if (size != 8) return -EINVAL;
    uint64_t current, next;
    memcpy(&current, &context->uc_sigmask, sizeof(current));
    next = current;
    if (set) {
        uint64_t requested = *(const uint64_t *)set;
        switch (how) {
        case SIG_BLOCK: next |= requested; break;
        case SIG_UNBLOCK: next &= ~requested; break;
        case SIG_SETMASK: next = requested; break;
        default: return -EINVAL;
        }
        next &= ~(SIGSYS_BIT | (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)));
    }
    if (old_set) *(uint64_t *)old_set = current;
    memcpy(&context->uc_sigmask, &next, sizeof(next));
    return 0;
}

/*
 * A static program's fork (its libc's clone(SIGCHLD | CLONE_CHILD_*TID, stack 0), or fork) is made by the
 * shim's libc instead, as a dynamic program's fork is: its pthread_atfork handlers (attach/attach.c) register the child
 * in the session's process table, take the trace's child ordinal and give the child its own waits, timers and
 * threads (attach/static_takeover.c), and that libc's fork leaves its own thread list and locks right for the child,
 * which starts threads of the shim's. The flags the filter lets through are emulated: the tid words the
 * program's libc asked the kernel to write, and to clear at exit. The child returns through this handler on
 * the same stack, as from the raw call.
 */
long tc_process_fork(long number, long flags, long parent_tid, long child_tid) {
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (number != SYS_clone) return pid;
    if (pid == 0) {
        long tid = tc_raw_syscall(SYS_gettid, 0);
        if (flags & CLONE_CHILD_SETTID) *(int32_t *)child_tid = (int32_t)tid;
        if (flags & CLONE_CHILD_CLEARTID) tc_raw_syscall(SYS_set_tid_address, child_tid);
    } else if (flags & CLONE_PARENT_SETTID) {
        *(int32_t *)parent_tid = pid;
    }
    return pid;
}

/*
 * os/exec starts programs with raw execs: checked as libc's are, so an uncontrollable program is refused
 * rather than started under this filter, which would kill it with SIGSYS at its first wait, and a static
 * one is started through the loader. Stack and raw system calls only (attach/static_takeover.c calls it on the
 * program's own FS).
 */
long tc_process_exec(long number, const long arguments[6]) {
    if (number == SYS_execve)
        return tc_exec_checked(AT_FDCWD, (const char *)arguments[0], (char *const *)arguments[1],
                               (char *const *)arguments[2], 0);
    return tc_exec_checked((int)arguments[0], (const char *)arguments[1], (char *const *)arguments[2],
                           (char *const *)arguments[3], (int)arguments[4]);
}

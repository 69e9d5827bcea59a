/*
 * System calls that change the process — signal dispositions and masks,
 * fork, exec, and the name of its own executable — as a Go or static
 * program makes them raw and the trap catches them (syscall_table.c lists
 * which door reaches each). Each returns what the kernel would: a value or
 * −errno.
 */
#ifndef TIMECTL_PROCESS_CALLS_H
#define TIMECTL_PROCESS_CALLS_H

#include "../runtime/process.h"

#include <signal.h>
#include <sys/ucontext.h>

/* The program's own SIGSYS disposition: what it set while the shim's handler stayed in place. */
struct tc_kernel_sigaction tc_process_application_sigsys(void);
/* sigaction(SIGSYS) through libc (cgo installs Go's handlers that way): recorded, as the raw call is. */
void tc_syscall_trap_record_sigsys(const struct sigaction *action, struct sigaction *old);

/* rt_sigaction: SIGSYS is recorded, not applied; no handler's mask may block SIGSYS. */
long tc_process_sigaction(long signal, long action, long old_action, long size);
/* rt_sigprocmask inside the trap's handler: applied to the mask `context` restores, SIGSYS kept open. */
long tc_process_sigprocmask(long how, long set, long old_set, long size, ucontext_t *context);
/* fork, or clone as libc's fork makes it: made by the shim's libc, so the child is registered. */
long tc_process_fork(long number, long flags, long parent_tid, long child_tid);
/* execve (directory_fd AT_FDCWD, flags 0) and execveat: checked as libc's exec is. Stack and raw calls only. */
long tc_process_exec(long number, const long arguments[6]);
/* readlink and readlinkat: a static program's /proc/self/exe names the program, not the loader. */
long tc_process_readlink(long number, long a1, long a2, long a3, long a4);

#endif

/*
 * Statically linked programs run through timectl-static-loader: the shim's
 * side (static_program.c) and what it shares with the system call trap
 * (syscall_trap.c). See docs/go-and-static.md, "Static programs".
 */
#ifndef TIMECTL_STATIC_PROGRAM_INTERNAL_H
#define TIMECTL_STATIC_PROGRAM_INTERNAL_H

#include "../loader/timectl_static_program.h"

#include <signal.h>
#include <stdint.h>

/* The kernel's struct sigaction for rt_sigaction (a 64-bit mask). */
struct tc_kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

/* Whether this process runs a static program the loader mapped (then its threads' FS is not the shim's libc's). */
int tc_static_program_active(void);
/* The program's path, for a readlink of /proc/self/exe; 0 when no static program runs here. */
int tc_static_program_executable(const char **path);
/* Whether `path` names this process's executable in /proc (/proc/self/exe, /proc/PID/exe, /proc/thread-self/exe,
   /proc/PID/task/TID/exe), which the kernel answers with the loader where it could not be made the program. */
int tc_static_program_names_executable(const char *path);

/* Redirects the vDSO's clock symbols to the reads that use no thread-local state (vdso_redirect.c). */
int tc_vdso_redirect_static(void);

/* The SIGSYS handler for a static program: borrows a TCB of the shim's libc around tc_syscall_trap_handle. */
void tc_static_sigsys_entry(int signal, siginfo_t *info, void *context);
/* A static program's rt_sigaction (not SIGSYS): its handlers run behind a wrapper that puts its FS back. */
long tc_static_sigaction(long signal, const struct tc_kernel_sigaction *action, struct tc_kernel_sigaction *old);

/* In a fork child, from the shim's pthread_atfork handler: lenders, grower and helper of the child's own. */
void tc_static_program_after_fork_in_child(void);

/* In syscall_trap.c. Traps a static program's timed waits made from [text_start, text_end); NULL or a problem. */
const char *tc_syscall_trap_install_static(uintptr_t text_start, uintptr_t text_end, int is_go);
/* Whether a SIGSYS is one of the filter's traps (reads only `info`). */
int tc_syscall_trap_is_ours(const siginfo_t *info);
/* The trap's handler proper, on a TCB of the shim's libc. */
void tc_syscall_trap_handle(int signal, siginfo_t *info, void *context);
/* A trapped execve/execveat, answered without thread-local state (stack and raw system calls only). */
void tc_syscall_trap_exec(const siginfo_t *info, void *context);

#endif

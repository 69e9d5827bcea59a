/*
 * The seccomp trap of Go and static programs (syscall_trap.c): the filter
 * that traps their raw timed waits and the SIGSYS handler that answers
 * them through the system-call table. See docs/go-and-static.md.
 */
#ifndef TIMECTL_SYSCALL_TRAP_H
#define TIMECTL_SYSCALL_TRAP_H

#include <signal.h>
#include <stdint.h>

/* Traps the Go executable's raw timed waits; NULL, or what went wrong (a phrase after the program's name). */
const char *tc_syscall_trap_install(void);
/* In a process that inherited a filter across exec: handles its traps. */
void tc_syscall_trap_adopt(void);
/* Traps a static program's timed waits made from [text_start, text_end), with `handler` as the SIGSYS handler
   (attach/static_takeover.c's, which borrows a TCB around tc_syscall_trap_handle); NULL or a problem. */
const char *tc_syscall_trap_install_static(uintptr_t text_start, uintptr_t text_end, int is_go,
                                          void (*handler)(int, siginfo_t *, void *));
/* Whether a SIGSYS is one of the filter's traps (reads only `info`). */
int tc_syscall_trap_is_ours(const siginfo_t *info);
/* The trap's handler proper, on a TCB of the shim's libc. */
void tc_syscall_trap_handle(int signal, siginfo_t *info, void *context);
/* A trapped execve/execveat, answered without thread-local state (stack and raw system calls only). */
void tc_syscall_trap_exec(const siginfo_t *info, void *context);

#endif

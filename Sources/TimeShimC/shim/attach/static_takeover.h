/*
 * Statically linked programs run through timectl-static-loader: the shim's
 * side (static_takeover.c), which takes the process over for the program
 * the loader mapped. What lower layers need to know of it (whether one
 * runs, its path, its rt_sigaction) is in runtime/process.h. See
 * docs/go-and-static.md, "Static programs".
 */
#ifndef TIMECTL_STATIC_TAKEOVER_H
#define TIMECTL_STATIC_TAKEOVER_H

#include "../../loader/timectl_static_program.h"

#include <signal.h>
#include <stdint.h>

/* The SIGSYS handler for a static program: borrows a TCB of the shim's libc around tc_syscall_trap_handle. */
void tc_static_sigsys_entry(int signal, siginfo_t *info, void *context);
/* In a fork child, from the shim's pthread_atfork handler: lenders, grower and helper of the child's own. */
void tc_static_program_after_fork_in_child(void);

#endif

/*
 * Virtual timers (timers.c): timerfds, POSIX timers, alarm and setitimer.
 * What other files of the shim reach of them.
 */
#ifndef TIMECTL_TIMERS_H
#define TIMECTL_TIMERS_H

#include "timectl_segment.h"

#include <signal.h>
#include <stdint.h>

/* dup2/dup3 is about to replace `fd`, one of the timers' descriptors: moves it to another number; 0 if `fd` is no timer's. */
int tc_timerfd_number_taken(int fd);
/* `fd` is being closed or replaced: if it was a virtual timerfd, the timer goes. */
void tc_timerfd_forget(int fd);

/* For the helper (handed to it by attach/attach.c): fires due virtual timers; returns real ns until the next one, or TC_FOREVER. */
int64_t tc_timers_fire_due(struct tc_segment *segment);
void tc_timers_before_fork(void);
void tc_timers_after_fork_in_parent(void);
void tc_timers_after_fork_in_child(void);
/* For the signal trampoline: a POSIX timer's signal (SI_TIMER) is being handled; sets its si_overrun. */
void tc_timers_signal_taken(int signal, siginfo_t *info);
/* A timer system call (timerfd_*, timer_*, alarm, setitimer, getitimer) with the kernel's arguments, made raw by a
   Go or static program and trapped (trap/syscall_trap.c): run as libc's is here; the kernel's result form. */
long tc_timers_syscall(long number, long a1, long a2, long a3, long a4);

#endif

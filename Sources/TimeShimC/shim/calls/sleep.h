/*
 * Sleeps (sleep.c): what the system-call table reaches of them.
 */
#ifndef TIMECTL_SLEEP_H
#define TIMECTL_SLEEP_H

/* syscall(SYS_nanosleep / SYS_clock_nanosleep, …) with the kernel's arguments: the kernel's result form. */
long tc_syscall_sleep(long number, long a1, long a2, long a3, long a4);

#endif

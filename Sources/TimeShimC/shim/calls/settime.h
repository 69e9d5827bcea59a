/*
 * Setting the wall clock moves the session (settime.c): what other files
 * of the shim reach of it.
 */
#ifndef TIMECTL_SETTIME_H
#define TIMECTL_SETTIME_H

#include "timectl_segment.h"

/*
 * clock_settime, settimeofday, adjtimex or clock_adjtime with the kernel's
 * arguments in an attached process, answered by the session's rules
 * (settime.c): the kernel's result form (a value or −errno). For syscall(2)
 * (syscall_table.c) and for the raw calls of Go and static programs (trap/syscall_trap.c).
 */
long tc_syscall_settime(struct tc_segment *segment, long number, long a1, long a2);

#endif

/*
 * Clock reads (clock.c): the entry points other files of the shim reach —
 * the system-call table's clock numbers, the vDSO redirection's targets,
 * and the session's wall clock for adjtimex's answer.
 */
#ifndef TIMECTL_CLOCK_H
#define TIMECTL_CLOCK_H

#include <sys/time.h>
#include <time.h>

/* clock_gettime, gettimeofday or time with the kernel's arguments; the kernel's result (a value or −errno). */
long tc_clock_syscall(long number, long a1, long a2);

/* The session's wall clock, read (and recorded or replayed) like any reading through `call` (an enum tc_call). */
void tc_read_session_wall(int call, struct timespec *value);

/* The vDSO's conventions (0 or −errno, errno untouched), for programs that call the vDSO themselves (Go). */
int tc_vdso_entry_clock_gettime(clockid_t clock, struct timespec *ts);
int tc_vdso_entry_gettimeofday(struct timeval *tv, void *tz);
time_t tc_vdso_entry_time(time_t *out);
/* The same for a static program run by the loader: no thread-local state. */
int tc_vdso_static_entry_clock_gettime(clockid_t clock, struct timespec *ts);
int tc_vdso_static_entry_gettimeofday(struct timeval *tv, void *tz);
time_t tc_vdso_static_entry_time(time_t *out);

#endif

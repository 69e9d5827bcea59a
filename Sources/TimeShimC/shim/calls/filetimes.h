/*
 * File times that follow the session (filetimes.c): what the system-call
 * table reaches of them.
 */
#ifndef TIMECTL_SHIM_FILETIMES_H
#define TIMECTL_SHIM_FILETIMES_H

/* syscall(2) with a stat or utime number; 0 if `number` is not one (then *result is untouched). */
int tc_syscall_file_times(long number, long a1, long a2, long a3, long a4, long a5, long *result);

#endif

/*
 * File times that follow the session (filetimes.c): what the system-call
 * table reaches of them.
 */
#ifndef TIMECTL_SHIM_FILETIMES_H
#define TIMECTL_SHIM_FILETIMES_H

/* syscall(2) with a stat or utime number, its file times the session's; the kernel's result (−errno).
   Any other number is passed to the kernel as it is. */
long tc_syscall_file_times(long number, long a1, long a2, long a3, long a4, long a5);

#endif

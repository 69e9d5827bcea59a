/*
 * Containment at exec (exec.c): the checked exec that the raw execs of Go
 * and static programs reach too.
 */
#ifndef TIMECTL_EXEC_H
#define TIMECTL_EXEC_H

/*
 * An execve (AT_FDCWD, no flags) or execveat of an attached process, after the
 * containment check of exec.c: a refused program gets −EACCES
 * (its one line written), anything else the kernel's result. Stack and raw
 * system calls only: also called from the SIGSYS handler for a Go
 * program's raw execs (trap/syscall_trap.c).
 */
long tc_exec_checked(int directory_fd, const char *path, char *const argv[], char *const envp[], int flags);

#endif

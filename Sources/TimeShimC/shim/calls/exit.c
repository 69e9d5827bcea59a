/*
 * _exit and _Exit. A process on libfaketime's settings leaves its tree's
 * clock segment first (runtime/faketime.h): the last one out removes the
 * file. exit() leaves through the shim's destructor; dash, among others,
 * ends with _exit, which runs none.
 */
#define _GNU_SOURCE
#include "../runtime/faketime.h"
#include "../runtime/process.h"

#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noreturn)) static void shim_exit(int status) {
    tc_faketime_leave_tree();
    for (;;) tc_raw_syscall(SYS_exit_group, status);
}

TC_EXPORT void _exit(int) __attribute__((alias("shim_exit")));
TC_EXPORT void _Exit(int) __attribute__((alias("shim_exit")));

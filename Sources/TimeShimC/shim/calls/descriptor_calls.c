/*
 * The application's close, dup2 and dup3, which must neither close the
 * descriptors the shim owns (runtime/owned_descriptors.h) nor write over
 * them unnoticed.
 */
#define _GNU_SOURCE
#include "timers.h"
#include "../runtime/libc_originals.h"
#include "../runtime/owned_descriptors.h"
#include "../runtime/process.h"
#include "../session/waiters.h"

#include <sys/syscall.h>

/* dup2/dup3 is about to replace `new_fd`: a virtual timerfd there goes, and a number of the shim's moves away. */
static void replacing(int old_fd, int new_fd) {
    if (old_fd == new_fd) return;
    tc_timerfd_forget(new_fd);
    if (tc_fd_owned(new_fd) && !tc_timerfd_number_taken(new_fd)) tc_wake_fd_taken(new_fd);
}

static int shim_close(int fd) {
    if (tc_fd_owned(fd)) return 0;
    tc_timerfd_forget(fd);
    if (!tc_real.close) return (int)tc_shim_errno_result(tc_raw_syscall(SYS_close, fd));
    return tc_real.close(fd);
}

static int shim_dup2(int old_fd, int new_fd) {
    replacing(old_fd, new_fd);
    return tc_real.dup2(old_fd, new_fd);
}

static int shim_dup3(int old_fd, int new_fd, int flags) {
    replacing(old_fd, new_fd);
    return tc_real.dup3(old_fd, new_fd, flags);
}

TC_EXPORT int close(int) __attribute__((alias("shim_close")));
TC_EXPORT int dup2(int, int) __attribute__((alias("shim_dup2")));
TC_EXPORT int dup3(int, int, int) __attribute__((alias("shim_dup3")));

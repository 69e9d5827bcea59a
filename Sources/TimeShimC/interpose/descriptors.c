/*
 * The descriptors the shim owns (see descriptors.h), and the application's
 * close, dup2 and dup3, which must neither close them nor write over them
 * unnoticed. Numbers at or above TC_OWNED_FD_BITS are not recorded: the
 * shim does not keep such descriptors (waiter.c falls back to slices).
 */
#define _GNU_SOURCE
#include "shim.h"
#include "real.h"
#include "waiter.h"

#include <sys/syscall.h>

static uint64_t owned_fds[TC_OWNED_FD_BITS / 64];

void tc_fd_claim(int fd) {
    if (fd >= 0 && fd < TC_OWNED_FD_BITS) __atomic_fetch_or(&owned_fds[fd / 64], 1ULL << (fd % 64), __ATOMIC_RELEASE);
}

void tc_fd_release(int fd) {
    if (fd >= 0 && fd < TC_OWNED_FD_BITS)
        __atomic_fetch_and(&owned_fds[fd / 64], ~(1ULL << (fd % 64)), __ATOMIC_RELEASE);
}

int tc_fd_owned(int fd) {
    if (fd < 0 || fd >= TC_OWNED_FD_BITS) return 0;
    return (__atomic_load_n(&owned_fds[fd / 64], __ATOMIC_ACQUIRE) >> (fd % 64)) & 1;
}

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

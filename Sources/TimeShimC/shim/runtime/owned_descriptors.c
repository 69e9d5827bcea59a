/*
 * The record of the descriptors the shim owns (see owned_descriptors.h).
 * Numbers at or above TC_OWNED_FD_BITS are not recorded: the shim does not
 * keep such descriptors (session/waiters.c falls back to slices).
 */
#include "owned_descriptors.h"

#include <stdint.h>

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

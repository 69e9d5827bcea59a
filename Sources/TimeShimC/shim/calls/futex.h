/*
 * Raw futex waits on the virtual timeline (SPEC §3): the futex and
 * futex_waitv system calls with a timeout, as a program makes them through
 * libc's syscall() (Rust's std, tokio, the BEAM, libstdc++'s atomic waits)
 * or a Go or static program makes them raw (the trap). Both doors reach
 * these through the system-call table (syscall_table.c). Results are the
 * kernel's: a value, or −errno.
 */
#ifndef TIMECTL_FUTEX_H
#define TIMECTL_FUTEX_H

#include <stdint.h>
#include <time.h>

/* futex(2): word, op, val, timeout (or val2), word2, val3. Untimed and non-waiting operations go to the kernel. */
long tc_futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout, uint32_t *word2,
              uint32_t value3);

struct futex_waitv;
/* futex_waitv(2): an absolute `timeout` on `clock` (CLOCK_MONOTONIC or CLOCK_REALTIME), or NULL. */
long tc_futex_waitv(struct futex_waitv *waiters, unsigned int count, unsigned int flags,
                    const struct timespec *timeout, clockid_t clock);

#endif

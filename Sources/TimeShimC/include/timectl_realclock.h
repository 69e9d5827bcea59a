/*
 * Real clocks and raw system calls, for code that must not go through the
 * (possibly interposed) libc entry points: the shim itself, and timectl when
 * it is started from inside a controlled process with the shim preloaded.
 *
 * Clock reads call the kernel's vDSO directly (found through
 * AT_SYSINFO_EHDR, no dlsym, no allocation), falling back to the raw system
 * call where there is no vDSO. Everything here is async-signal-safe and
 * leaves errno alone.
 */
#ifndef TIMECTL_REALCLOCK_H
#define TIMECTL_REALCLOCK_H

#include <stdint.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

/* futex_waitv (Linux 5.16), which musl 1.2.3's headers predate: 449 on x86-64 and in aarch64's generic table. */
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Resolves the vDSO entry points; idempotent and thread-safe. */
void tc_realclock_init(void);

typedef int (*tc_vdso_clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*tc_vdso_gettimeofday_fn)(struct timeval *, void *);
typedef time_t (*tc_vdso_time_fn)(time_t *);

/* Never NULL after tc_realclock_init(): a vDSO function or a syscall stub. */
extern tc_vdso_clock_gettime_fn tc_vdso_clock_gettime;
extern tc_vdso_gettimeofday_fn tc_vdso_gettimeofday;
extern tc_vdso_time_fn tc_vdso_time;

/* The kernel's answer: 0, or −errno (not −1/errno). */
static inline int tc_real_clock_gettime(clockid_t clock, struct timespec *ts) {
    return __atomic_load_n(&tc_vdso_clock_gettime, __ATOMIC_RELAXED)(clock, ts);
}

/* A real clock in nanoseconds (CLOCK_MONOTONIC etc. never fail). */
static inline int64_t tc_real_ns(clockid_t clock) {
    struct timespec ts;
    if (tc_real_clock_gettime(clock, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A system call without libc: returns the kernel's value (−errno on failure). */
long tc_raw_syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6);

#define tc_raw_syscall(n, ...) tc_raw_syscall_n(n, __VA_ARGS__, 0, 0, 0, 0, 0, 0)
#define tc_raw_syscall_n(n, a, b, c, d, e, f, ...) \
    tc_raw_syscall6((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

#ifdef __cplusplus
}
#endif

#endif

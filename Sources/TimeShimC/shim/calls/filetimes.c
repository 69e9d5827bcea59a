/*
 * File times that follow the session (SPEC §9; the mapping is
 * timectl_filetimes.h). The stat family reports, for instants the session
 * lived through, the virtual time at which they happened; explicit times
 * given to the utime family map back. UTIME_NOW, UTIME_OMIT and NULL keep
 * their meaning: "now" is the kernel's real now, which stat then maps.
 *
 * Every entry point makes its system call itself (glibc's stat calls
 * fstatat64 inside libc, out of reach of interposition, so each public name
 * is wrapped), then maps the times; on x86_64 and aarch64 the kernel's
 * struct stat is glibc's, stat64 included, and musl's. TIMECTL_FILE_TIMES=real turns the
 * mapping off for a process (and what it starts, through the environment),
 * as libfaketime's NO_FAKE_STAT does on its settings.
 */
#define _GNU_SOURCE
#include "filetimes.h"
#include "../runtime/faketime.h"
#include "../runtime/process.h"
#include "timectl_filetimes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <utime.h>

/* musl before 1.2.5 declares no statx: the kernel's header has it. With __GLIBC__ set while it is read, that header
   leaves the S_* macros to libc's <sys/stat.h>, which musl defines with other spellings. */
#if !defined(STATX_TYPE) && !defined(__GLIBC__)
#define __GLIBC__ 2
#include <linux/stat.h>
#undef __GLIBC__
#endif

/* 0 unknown, 1 mapped, 2 real (TIMECTL_FILE_TIMES=real). */
static int file_times_mode;

/* The session whose timeline maps file times, or NULL: unattached, or opted out. */
static struct tc_segment *mapping_segment(void) {
    struct tc_segment *segment = tc_shim_timeline_segment();
    if (!segment || (tc_faketime_active() && tc_faketime.file_times_real)) return NULL;
    int mode = __atomic_load_n(&file_times_mode, __ATOMIC_RELAXED);
    if (mode == 0) {
        const char *setting = getenv("TIMECTL_FILE_TIMES");
        mode = setting && strcmp(setting, "real") == 0 ? 2 : 1;
        __atomic_store_n(&file_times_mode, mode, __ATOMIC_RELAXED);
    }
    return mode == 1 ? segment : NULL;
}

/* How far the kernel's file times may lag CLOCK_REALTIME: a tick, the coarse clock's resolution. */
static int64_t file_time_granularity(void) {
    static int64_t granularity = -1;
    int64_t known = __atomic_load_n(&granularity, __ATOMIC_RELAXED);
    if (known >= 0) return known;
    struct timespec resolution;
    known = tc_raw_syscall(SYS_clock_getres, CLOCK_REALTIME_COARSE, &resolution) == 0
                ? tc_timespec_ns(resolution)
                : 10 * 1000 * 1000;  /* no coarse clock: HZ=100's tick, the longest Linux has */
    __atomic_store_n(&granularity, known, __ATOMIC_RELAXED);
    return known;
}

static void to_virtual(const struct tc_segment *segment, struct timespec *time) {
    int64_t real = tc_timespec_ns(*time);
    if (tc_faketime_active()) *time = tc_timespec_from_ns(tc_faketime_file_time(real));
    else *time = tc_timespec_from_ns(tc_file_time_to_virtual(segment, real, file_time_granularity()));
}

static void stat_to_virtual(const struct tc_segment *segment, struct stat *st) {
    to_virtual(segment, &st->st_atim);
    to_virtual(segment, &st->st_mtim);
    to_virtual(segment, &st->st_ctim);
}

static void statx_time_to_virtual(const struct tc_segment *segment, struct statx_timestamp *time) {
    struct timespec value = {time->tv_sec, time->tv_nsec};
    to_virtual(segment, &value);
    time->tv_sec = value.tv_sec;
    time->tv_nsec = (uint32_t)value.tv_nsec;
}

static void statx_to_virtual(const struct tc_segment *segment, struct statx *st) {
    if (st->stx_mask & STATX_ATIME) statx_time_to_virtual(segment, &st->stx_atime);
    if (st->stx_mask & STATX_MTIME) statx_time_to_virtual(segment, &st->stx_mtime);
    if (st->stx_mask & STATX_CTIME) statx_time_to_virtual(segment, &st->stx_ctime);
    if (st->stx_mask & STATX_BTIME) statx_time_to_virtual(segment, &st->stx_btime);
}

/* ---- the stat family: kernel results (−errno) ---- */

static long kernel_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
    long result = tc_raw_syscall(SYS_newfstatat, dirfd, path, st, flags);
    if (result == 0) {
        struct tc_segment *segment = mapping_segment();
        if (segment) stat_to_virtual(segment, st);
    }
    return result;
}

static long kernel_fstat(int fd, struct stat *st) {
    long result = tc_raw_syscall(SYS_fstat, fd, st);
    if (result == 0) {
        struct tc_segment *segment = mapping_segment();
        if (segment) stat_to_virtual(segment, st);
    }
    return result;
}

static long kernel_statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *st) {
    long result = tc_raw_syscall(SYS_statx, dirfd, path, flags, mask, st);
    if (result == 0) {
        struct tc_segment *segment = mapping_segment();
        if (segment) statx_to_virtual(segment, st);
    }
    return result;
}

static int shim_stat(const char *path, struct stat *st) {
    return (int)tc_shim_errno_result(kernel_fstatat(AT_FDCWD, path, st, 0));
}
static int shim_lstat(const char *path, struct stat *st) {
    return (int)tc_shim_errno_result(kernel_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW));
}
static int shim_fstat(int fd, struct stat *st) { return (int)tc_shim_errno_result(kernel_fstat(fd, st)); }
static int shim_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
    return (int)tc_shim_errno_result(kernel_fstatat(dirfd, path, st, flags));
}
static int shim_statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *st) {
    return (int)tc_shim_errno_result(kernel_statx(dirfd, path, flags, mask, st));
}
/* The __xstat aliases glibc still exports for binaries built before 2.33; the version argument names struct stat. */
static int shim_xstat(int version, const char *path, struct stat *st) {
    (void)version;
    return shim_stat(path, st);
}
static int shim_lxstat(int version, const char *path, struct stat *st) {
    (void)version;
    return shim_lstat(path, st);
}
static int shim_fxstat(int version, int fd, struct stat *st) {
    (void)version;
    return shim_fstat(fd, st);
}
static int shim_fxstatat(int version, int dirfd, const char *path, struct stat *st, int flags) {
    (void)version;
    return shim_fstatat(dirfd, path, st, flags);
}

TC_EXPORT int stat(const char *restrict, struct stat *restrict) __attribute__((alias("shim_stat")));
TC_EXPORT int lstat(const char *restrict, struct stat *restrict) __attribute__((alias("shim_lstat")));
TC_EXPORT int fstat(int, struct stat *) __attribute__((alias("shim_fstat")));
TC_EXPORT int fstatat(int, const char *restrict, struct stat *restrict, int) __attribute__((alias("shim_fstatat")));

/* glibc's large-file names. musl's headers make stat64 a macro for stat: its programs call the names above. */
#ifndef stat64
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64 is struct stat on 64-bit Linux");
static int shim_stat64(const char *path, struct stat64 *st) { return shim_stat(path, (struct stat *)st); }
static int shim_lstat64(const char *path, struct stat64 *st) { return shim_lstat(path, (struct stat *)st); }
static int shim_fstat64(int fd, struct stat64 *st) { return shim_fstat(fd, (struct stat *)st); }
static int shim_fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
    return shim_fstatat(dirfd, path, (struct stat *)st, flags);
}

TC_EXPORT int stat64(const char *restrict, struct stat64 *restrict) __attribute__((alias("shim_stat64")));
TC_EXPORT int lstat64(const char *restrict, struct stat64 *restrict) __attribute__((alias("shim_lstat64")));
TC_EXPORT int fstat64(int, struct stat64 *) __attribute__((alias("shim_fstat64")));
TC_EXPORT int fstatat64(int, const char *restrict, struct stat64 *restrict, int) __attribute__((alias("shim_fstatat64")));
#endif
TC_EXPORT int statx(int, const char *, int, unsigned int, struct statx *) __attribute__((alias("shim_statx")));
TC_EXPORT int __xstat(int, const char *, struct stat *) __attribute__((alias("shim_xstat")));
TC_EXPORT int __xstat64(int, const char *, struct stat *) __attribute__((alias("shim_xstat")));
TC_EXPORT int __lxstat(int, const char *, struct stat *) __attribute__((alias("shim_lxstat")));
TC_EXPORT int __lxstat64(int, const char *, struct stat *) __attribute__((alias("shim_lxstat")));
TC_EXPORT int __fxstat(int, int, struct stat *) __attribute__((alias("shim_fxstat")));
TC_EXPORT int __fxstat64(int, int, struct stat *) __attribute__((alias("shim_fxstat")));
TC_EXPORT int __fxstatat(int, int, const char *, struct stat *, int) __attribute__((alias("shim_fxstatat")));
TC_EXPORT int __fxstatat64(int, int, const char *, struct stat *, int) __attribute__((alias("shim_fxstatat")));

/* ---- the utime family: explicit virtual times map back ---- */

static struct timespec to_real(const struct tc_segment *segment, struct timespec time) {
    if (time.tv_nsec == UTIME_NOW || time.tv_nsec == UTIME_OMIT) return time;
    int64_t virtual_time = tc_timespec_ns(time);
    if (tc_faketime_active()) return tc_timespec_from_ns(tc_faketime_file_time_back(virtual_time));
    return tc_timespec_from_ns(tc_file_time_to_real(segment, virtual_time));
}

/* utimensat(2) with `times` (virtual, or NULL) mapped to real ones; a kernel result. */
static long kernel_utimensat(int dirfd, const char *path, const struct timespec times[2], int flags) {
    struct tc_segment *segment = times ? mapping_segment() : NULL;
    if (!segment) return tc_raw_syscall(SYS_utimensat, dirfd, path, times, flags);
    for (int i = 0; i < 2; i++)
        if (times[i].tv_nsec != UTIME_NOW && times[i].tv_nsec != UTIME_OMIT &&
            (times[i].tv_nsec < 0 || times[i].tv_nsec >= TC_NS_PER_SECOND))
            return -EINVAL;
    struct timespec real[2] = {to_real(segment, times[0]), to_real(segment, times[1])};
    return tc_raw_syscall(SYS_utimensat, dirfd, path, real, flags);
}

/* The same from microsecond timevals (NULL: now). */
static long kernel_utimes(int dirfd, const char *path, const struct timeval times[2], int flags) {
    if (!times) return kernel_utimensat(dirfd, path, NULL, flags);
    struct timespec converted[2];
    for (int i = 0; i < 2; i++) {
        if (times[i].tv_usec < 0 || times[i].tv_usec >= 1000000) return -EINVAL;
        converted[i].tv_sec = times[i].tv_sec;
        converted[i].tv_nsec = times[i].tv_usec * 1000;
    }
    return kernel_utimensat(dirfd, path, converted, flags);
}

static int shim_utimensat(int dirfd, const char *path, const struct timespec times[2], int flags) {
    return (int)tc_shim_errno_result(kernel_utimensat(dirfd, path, times, flags));
}
static int shim_futimens(int fd, const struct timespec times[2]) {
    return (int)tc_shim_errno_result(kernel_utimensat(fd, NULL, times, 0));
}
static int shim_utimes(const char *path, const struct timeval times[2]) {
    return (int)tc_shim_errno_result(kernel_utimes(AT_FDCWD, path, times, 0));
}
static int shim_lutimes(const char *path, const struct timeval times[2]) {
    return (int)tc_shim_errno_result(kernel_utimes(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW));
}
static int shim_futimes(int fd, const struct timeval times[2]) {
    return (int)tc_shim_errno_result(kernel_utimes(fd, NULL, times, 0));
}
static int shim_futimesat(int dirfd, const char *path, const struct timeval times[2]) {
    return (int)tc_shim_errno_result(kernel_utimes(dirfd, path, times, 0));
}
static int shim_utime(const char *path, const struct utimbuf *times) {
    if (!times) return shim_utimes(path, NULL);
    struct timeval converted[2] = {{times->actime, 0}, {times->modtime, 0}};
    return shim_utimes(path, converted);
}

TC_EXPORT int utimensat(int, const char *, const struct timespec[2], int) __attribute__((alias("shim_utimensat")));
TC_EXPORT int futimens(int, const struct timespec[2]) __attribute__((alias("shim_futimens")));
TC_EXPORT int utimes(const char *, const struct timeval[2]) __attribute__((alias("shim_utimes")));
TC_EXPORT int lutimes(const char *, const struct timeval[2]) __attribute__((alias("shim_lutimes")));
TC_EXPORT int futimes(int, const struct timeval[2]) __attribute__((alias("shim_futimes")));
TC_EXPORT int futimesat(int, const char *, const struct timeval[2]) __attribute__((alias("shim_futimesat")));
TC_EXPORT int utime(const char *, const struct utimbuf *) __attribute__((alias("shim_utime")));

long tc_syscall_file_times(long number, long a1, long a2, long a3, long a4, long a5) {
    switch (number) {
#ifdef SYS_stat
    case SYS_stat: return kernel_fstatat(AT_FDCWD, (const char *)a1, (struct stat *)a2, 0);
    case SYS_lstat: return kernel_fstatat(AT_FDCWD, (const char *)a1, (struct stat *)a2, AT_SYMLINK_NOFOLLOW);
#endif
    case SYS_fstat: return kernel_fstat((int)a1, (struct stat *)a2);
    case SYS_newfstatat: return kernel_fstatat((int)a1, (const char *)a2, (struct stat *)a3, (int)a4);
    case SYS_statx: return kernel_statx((int)a1, (const char *)a2, (int)a3, (unsigned int)a4, (struct statx *)a5);
    case SYS_utimensat: return kernel_utimensat((int)a1, (const char *)a2, (const struct timespec *)a3, (int)a4);
#ifdef SYS_utimes
    case SYS_utimes: return kernel_utimes(AT_FDCWD, (const char *)a1, (const struct timeval *)a2, 0);
    case SYS_futimesat: return kernel_utimes((int)a1, (const char *)a2, (const struct timeval *)a3, 0);
#endif
    default: return tc_raw_syscall(number, a1, a2, a3, a4, a5);
    }
}

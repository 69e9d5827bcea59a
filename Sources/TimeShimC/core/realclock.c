/*
 * Real clocks straight from the vDSO, and raw system calls.
 *
 * Why not libc: inside a controlled process libc's clock_gettime is the
 * shim's own, and resolving the original with dlsym may allocate, which can
 * re-enter the shim (libfaketime's start-up deadlocks). The vDSO is an ELF
 * image the kernel maps into every process; its symbol table is found from
 * AT_SYSINFO_EHDR with a few pointer walks.
 */
#define _GNU_SOURCE
#include "timectl_realclock.h"
#include "vdso_image.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>

long tc_raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
    long ret;
#if defined(__x86_64__)
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a1;
    register long x1 __asm__("x1") = a2;
    register long x2 __asm__("x2") = a3;
    register long x3 __asm__("x3") = a4;
    register long x4 __asm__("x4") = a5;
    register long x5 __asm__("x5") = a6;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    ret = x0;
#else
#error "timectl supports x86_64 and aarch64 Linux"
#endif
    return ret;
}

static int syscall_clock_gettime(clockid_t clock, struct timespec *ts) {
    return (int)tc_raw_syscall(SYS_clock_gettime, clock, ts);
}

static int syscall_gettimeofday(struct timeval *tv, void *tz) {
#ifdef SYS_gettimeofday
    return (int)tc_raw_syscall(SYS_gettimeofday, tv, tz);
#else
    if (tz) memset(tz, 0, 2 * sizeof(int));
    if (!tv) return 0;
    struct timespec ts;
    int r = syscall_clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
    return r;
#endif
}

tc_vdso_clock_gettime_fn tc_vdso_clock_gettime = syscall_clock_gettime;
tc_vdso_gettimeofday_fn tc_vdso_gettimeofday = syscall_gettimeofday;

/* time() where the vDSO has none (aarch64), or none was found: CLOCK_REALTIME, through the vDSO when it has that. */
static time_t vdso_time(time_t *out) {
    struct timespec ts = {0, 0};
    __atomic_load_n(&tc_vdso_clock_gettime, __ATOMIC_RELAXED)(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

tc_vdso_time_fn tc_vdso_time = vdso_time;

static void *vdso_symbol(const struct tc_vdso_image *image, const char *name) {
    uint32_t cursor = 0;
    const ElfW(Sym) *sym = tc_vdso_image_function(image, &cursor, name);
    return sym ? (void *)(image->load_bias + sym->st_value) : NULL;
}

void tc_realclock_init(void) {
    static int done;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE)) return;
    struct tc_vdso_image image;
    if (tc_vdso_image_load(&image)) {
#if defined(__x86_64__)
        void *clock_gettime_fn = vdso_symbol(&image, "__vdso_clock_gettime");
        void *gettimeofday_fn = vdso_symbol(&image, "__vdso_gettimeofday");
        void *time_fn = vdso_symbol(&image, "__vdso_time");
#elif defined(__aarch64__)
        /* The arm64 vDSO has no time(): it stays vdso_time below, a CLOCK_REALTIME read through the vDSO. */
        void *clock_gettime_fn = vdso_symbol(&image, "__kernel_clock_gettime");
        void *gettimeofday_fn = vdso_symbol(&image, "__kernel_gettimeofday");
        void *time_fn = NULL;
#endif
        if (clock_gettime_fn)
            __atomic_store_n(&tc_vdso_clock_gettime, (tc_vdso_clock_gettime_fn)clock_gettime_fn, __ATOMIC_RELAXED);
        if (gettimeofday_fn)
            __atomic_store_n(&tc_vdso_gettimeofday, (tc_vdso_gettimeofday_fn)gettimeofday_fn, __ATOMIC_RELAXED);
        if (time_fn)
            __atomic_store_n(&tc_vdso_time, (tc_vdso_time_fn)time_fn, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}

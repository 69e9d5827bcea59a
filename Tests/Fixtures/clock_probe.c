/*
 * Prints what every clock-reading entry point of libc returns, one
 * "NAME VALUE" line each (VALUE in nanoseconds, or "error:ERRNO").
 * The end-to-end tests run it under the shim and compare with the session.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timeb.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

static long long ns(struct timespec ts) { return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec; }

static void clock_line(const char *name, clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) == 0) printf("%s %lld\n", name, ns(ts));
    else printf("%s error:%d\n", name, errno);
}

int main(void) {
    clock_line("CLOCK_REALTIME", CLOCK_REALTIME);
    clock_line("CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE);
    clock_line("CLOCK_REALTIME_ALARM", CLOCK_REALTIME_ALARM);
    clock_line("CLOCK_TAI", CLOCK_TAI);
    clock_line("CLOCK_MONOTONIC", CLOCK_MONOTONIC);
    clock_line("CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE);
    clock_line("CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW);
    clock_line("CLOCK_BOOTTIME", CLOCK_BOOTTIME);
    clock_line("CLOCK_BOOTTIME_ALARM", CLOCK_BOOTTIME_ALARM);
    clock_line("CLOCK_PROCESS_CPUTIME_ID", CLOCK_PROCESS_CPUTIME_ID);
    clock_line("CLOCK_THREAD_CPUTIME_ID", CLOCK_THREAD_CPUTIME_ID);
    clockid_t own_cpu;
    if (clock_getcpuclockid(getpid(), &own_cpu) == 0) clock_line("pid_cpu_clock", own_cpu);
    clock_line("invalid_clock_99", (clockid_t)99);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    printf("gettimeofday %lld\n", (long long)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL);
    printf("time %lld\n", (long long)time(NULL) * 1000000000LL);
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    printf("timespec_get %lld\n", ns(ts));
    struct timeb tb;
    ftime(&tb);
    printf("ftime %lld\n", (long long)tb.time * 1000000000LL + tb.millitm * 1000000LL);
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    printf("syscall_clock_gettime_realtime %lld\n", ns(ts));
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    printf("syscall_clock_gettime_monotonic %lld\n", ns(ts));
    syscall(SYS_gettimeofday, &tv, NULL);
    printf("syscall_gettimeofday %lld\n", (long long)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL);
#ifdef SYS_time /* x86-64's; aarch64 has none */
    printf("syscall_time %lld\n", (long long)syscall(SYS_time, NULL) * 1000000000LL);
#endif
    int (*private_clock_gettime)(clockid_t, struct timespec *) = dlsym(RTLD_DEFAULT, "__clock_gettime");
    if (private_clock_gettime && private_clock_gettime(CLOCK_REALTIME, &ts) == 0)
        printf("__clock_gettime %lld\n", ns(ts));
#ifdef __GLIBC__ /* musl has no ntp_gettime */
    struct ntptimeval ntv;
    struct timex tx = {0};
    int nano = adjtimex(&tx) >= 0 && (tx.status & STA_NANO);
    if (ntp_gettime(&ntv) >= 0)
        printf("ntp_gettime %lld\n", (long long)ntv.time.tv_sec * 1000000000LL + (long long)ntv.time.tv_usec * (nano ? 1 : 1000));
#endif
    /* errno must be untouched by successful reads. */
    errno = 12345;
    clock_gettime(CLOCK_REALTIME, &ts);
    gettimeofday(&tv, NULL);
    time(NULL);
    printf("errno_after_reads %d\n", errno);
    return 0;
}

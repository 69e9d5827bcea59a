/*
 * Sets the wall clock through one entry point, as a controlled program
 * would:
 *
 *   set_clock METHOD SECONDS[.FRACTION]
 *
 * Absolute methods set CLOCK_REALTIME to SECONDS; relative ones (slews,
 * ADJ_SETOFFSET) shift it by SECONDS minus the CLOCK_REALTIME read just
 * before, so either way the clock should read SECONDS afterwards (exactly,
 * on a frozen session). Prints "ok" or "error ERRNO-NAME", then
 * "monotonic BEFORE AFTER" (ns) so that a caller can check that the set
 * left the monotonic clock alone. Methods that check refusals take any
 * SECONDS:
 *
 *   monotonic   clock_settime(CLOCK_MONOTONIC)
 *   read        adjtimex with modes 0: prints "read STATE TIME-SECONDS"
 *   frequency   adjtimex(ADJ_FREQUENCY), NTP state
 *   nano        adjtimex(ADJ_NANO) alone, NTP state
 *   timezone    settimeofday(NULL, tz)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

/* stime is only a compat symbol since glibc 2.31: bind to it as an older program does. A static build
   (-DSET_CLOCK_STATIC: a static libc has no compat symbols) has no stime method; its other methods are
   the program's own raw system calls. */
#if defined(SET_CLOCK_STATIC)
#define stime(when) ((void)(when), errno = ENOSYS, -1)
#elif defined(__x86_64__)
__asm__(".symver stime,stime@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver stime,stime@GLIBC_2.17");
#endif
#if !defined(SET_CLOCK_STATIC)
extern int stime(const time_t *when);
#endif

static long long now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int setoffset(int (*adjust)(struct timex *), long long shift, int nano) {
    struct timex tx;
    memset(&tx, 0, sizeof(tx));
    tx.modes = ADJ_SETOFFSET | (nano ? ADJ_NANO : 0);
    long long unit = nano ? 1000000000LL : 1000000LL, scaled = nano ? shift : shift / 1000;
    tx.time.tv_sec = scaled / unit;
    tx.time.tv_usec = scaled % unit;
    if (tx.time.tv_usec < 0) {
        tx.time.tv_usec += unit;
        tx.time.tv_sec -= 1;
    }
    return adjust(&tx) < 0 ? -1 : 0;
}

static int adjtimex_syscall(struct timex *tx) { return (int)syscall(SYS_adjtimex, tx); }
static int clock_adjtime_realtime(struct timex *tx) { return clock_adjtime(CLOCK_REALTIME, tx); }
static int clock_adjtime_syscall(struct timex *tx) { return (int)syscall(SYS_clock_adjtime, CLOCK_REALTIME, tx); }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: set_clock METHOD SECONDS\n");
        return 2;
    }
    /* Only ever a controlled program: run by hand as root, it would set the host's clock. */
    if (!getenv("TIMECTL_SEGMENT")) {
        fprintf(stderr, "set_clock: not under timectl (no TIMECTL_SEGMENT); refusing to set the host's clock\n");
        return 3;
    }
    const char *method = argv[1];
    long long target = (long long)(strtold(argv[2], NULL) * 1e9L + (argv[2][0] == '-' ? -0.5L : 0.5L));
    struct timespec ts = {(time_t)(target / 1000000000LL), (long)(target % 1000000000LL)};
    struct timeval tv = {ts.tv_sec, ts.tv_nsec / 1000};
    long long monotonic_before = now_ns(CLOCK_MONOTONIC);
    long long shift = target - now_ns(CLOCK_REALTIME);
    int result;
    if (strcmp(method, "clock_settime") == 0) {
        result = clock_settime(CLOCK_REALTIME, &ts);
    } else if (strcmp(method, "settimeofday") == 0) {
        result = settimeofday(&tv, NULL);
    } else if (strcmp(method, "stime") == 0) {
        time_t when = ts.tv_sec;
        result = stime(&when);
    } else if (strcmp(method, "adjtimex") == 0) {
        result = setoffset(adjtimex, shift, 1);
    } else if (strcmp(method, "ntp_adjtime") == 0) {
        result = setoffset(ntp_adjtime, shift, 0);
    } else if (strcmp(method, "clock_adjtime") == 0) {
        result = setoffset(clock_adjtime_realtime, shift, 1);
    } else if (strcmp(method, "adjtime") == 0) {
        struct timeval delta = {(time_t)(shift / 1000000000LL), (long)(shift % 1000000000LL / 1000)}, outstanding;
        result = adjtime(&delta, &outstanding);
        if (result == 0) printf("outstanding %ld.%06ld\n", (long)outstanding.tv_sec, (long)outstanding.tv_usec);
    } else if (strcmp(method, "slew") == 0) {
        struct timex tx;
        memset(&tx, 0, sizeof(tx));
        tx.modes = ADJ_OFFSET | ADJ_NANO;
        tx.offset = (long)shift;
        result = adjtimex(&tx) < 0 ? -1 : 0;
    } else if (strcmp(method, "syscall_clock_settime") == 0) {
        result = (int)syscall(SYS_clock_settime, CLOCK_REALTIME, &ts);
    } else if (strcmp(method, "syscall_settimeofday") == 0) {
        result = (int)syscall(SYS_settimeofday, &tv, NULL);
    } else if (strcmp(method, "syscall_adjtimex") == 0) {
        result = setoffset(adjtimex_syscall, shift, 0);
    } else if (strcmp(method, "syscall_clock_adjtime") == 0) {
        result = setoffset(clock_adjtime_syscall, shift, 1);
    } else if (strcmp(method, "monotonic") == 0) {
        result = clock_settime(CLOCK_MONOTONIC, &ts);
    } else if (strcmp(method, "read") == 0) {
        struct timex tx;
        memset(&tx, 0, sizeof(tx));
        int state = adjtimex(&tx);
        result = state < 0 ? -1 : 0;
        if (state >= 0) printf("read %d %lld\n", state, (long long)tx.time.tv_sec);
    } else if (strcmp(method, "frequency") == 0) {
        struct timex tx;
        memset(&tx, 0, sizeof(tx));
        tx.modes = ADJ_FREQUENCY;
        result = adjtimex(&tx) < 0 ? -1 : 0;
    } else if (strcmp(method, "nano") == 0) {
        struct timex tx;
        memset(&tx, 0, sizeof(tx));
        tx.modes = ADJ_NANO;
        result = adjtimex(&tx) < 0 ? -1 : 0;
    } else if (strcmp(method, "timezone") == 0) {
        struct timezone tz = {-60, 0};
        result = settimeofday(NULL, &tz);
    } else {
        fprintf(stderr, "set_clock: unknown method %s\n", method);
        return 2;
    }
    int error = errno;
    if (result == 0) printf("ok\n");
    else printf("error %s\n", strerrorname_np(error));
    printf("monotonic %lld %lld\n", monotonic_before, now_ns(CLOCK_MONOTONIC));
    return 0;
}

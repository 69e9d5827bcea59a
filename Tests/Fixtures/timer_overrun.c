/*
 * A periodic POSIX timer (first expiry 1 s, period 300 ms) whose signal is
 * blocked for 2 s: Linux delivers it once, with the three expirations it
 * missed (1.3, 1.6, 1.9 s) as its overrun. Prints what the handler saw and
 * when (virtual monotonic ns since the start) the signal was unblocked.
 *   timer_overrun usr1|rt
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static timer_t timer;
static volatile sig_atomic_t deliveries, seen_si_overrun = -1, seen_getoverrun = -1;

static void handler(int signal, siginfo_t *info, void *context) {
    (void)signal, (void)context;
    if (deliveries++ == 0) {
        seen_si_overrun = info->si_overrun;
        seen_getoverrun = timer_getoverrun(timer);
    }
}

static long long monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000LL + now.tv_nsec;
}

int main(int argc, char **argv) {
    int signal = argc > 1 && strcmp(argv[1], "rt") == 0 ? SIGRTMIN : SIGUSR1;
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO;
    sigaction(signal, &action, NULL);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, signal);
    sigprocmask(SIG_BLOCK, &blocked, NULL);

    struct sigevent event;
    memset(&event, 0, sizeof(event));
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = signal;
    if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return perror("timer_create"), 1;
    long long start = monotonic_ns();
    struct itimerspec periodic = {.it_value = {1, 0}, .it_interval = {0, 300000000}};
    if (timer_settime(timer, 0, &periodic, NULL) != 0) return perror("timer_settime"), 1;
    struct timespec two_seconds = {2, 0};
    while (nanosleep(&two_seconds, &two_seconds) != 0) {}
    long long unblocked = monotonic_ns() - start;
    int before = deliveries;
    sigprocmask(SIG_UNBLOCK, &blocked, NULL);
    timer_delete(timer);
    printf("unblocked_at %lld\ndelivered_while_blocked %d\ndeliveries %d\nsi_overrun %d\ntimer_getoverrun %d\n",
           unblocked, before, (int)deliveries, (int)seen_si_overrun, (int)seen_getoverrun);
    return 0;
}

/* Signal handlers: the shim's trampoline is invisible, and a signal right after a verb interrupts a sleep. */
#include "shim_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t plain_calls, siginfo_value, siginfo_code;

static void plain_handler(int signal) {
    (void)signal;
    plain_calls++;
}

static void other_handler(int signal) { (void)signal; }

static void siginfo_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)context;
    siginfo_value = info->si_value.sival_int;
    siginfo_code = info->si_code;
}

void test_signal_handlers_look_untouched(void) {
    struct sigaction action, old;
    memset(&action, 0, sizeof(action));
    action.sa_handler = plain_handler;
    action.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGUSR1, &action, NULL) == 0, "sigaction");
    CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == plain_handler, "a query shows the application's handler");
    CHECK((old.sa_flags & SA_RESTART) && !(old.sa_flags & SA_SIGINFO), "and its flags: 0x%x", old.sa_flags);
    CHECK(raise(SIGUSR1) == 0 && plain_calls == 1, "the handler runs, %d calls", (int)plain_calls);
    CHECK(signal(SIGUSR1, other_handler) == plain_handler, "signal() returns the previous handler");
    CHECK(signal(SIGUSR1, SIG_DFL) == other_handler, "and again");
    CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == SIG_DFL, "the default is the default");
    CHECK(sigaction(0, &action, NULL) == -1 && errno == EINVAL, "bad signals are refused as libc does");
    CHECK(signal(SIGKILL, plain_handler) == SIG_ERR && errno == EINVAL, "SIGKILL cannot be caught");

    memset(&action, 0, sizeof(action));
    action.sa_sigaction = siginfo_handler;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND;
    CHECK(sigaction(SIGUSR2, &action, NULL) == 0, "sigaction with SA_SIGINFO");
    CHECK(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_sigaction == siginfo_handler && (old.sa_flags & SA_SIGINFO),
          "a query shows it");
    union sigval value = {.sival_int = 42};
    CHECK(sigqueue(getpid(), SIGUSR2, value) == 0, "sigqueue");
    /* ThreadSanitizer delivers signals at its next intercepted call (pthread_sigmask is one), not at once. */
    for (int tries = 0; tries < 1000 && siginfo_value != 42; tries++) {
        sigset_t current;
        pthread_sigmask(SIG_SETMASK, NULL, &current);
        real_pause_ms(1);
    }
    CHECK(siginfo_value == 42 && siginfo_code == SI_QUEUE, "the handler gets the siginfo: value %d code %d",
          (int)siginfo_value, (int)siginfo_code);
    CHECK(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == SIG_DFL, "SA_RESETHAND reset it to the default");
}

/* A signal that arrives just as a verb has woken a virtual sleep still ends
   it with EINTR, and the time left is virtual (the race is tried many times). */
struct interrupted_sleep {
    pthread_t thread;
    int result, error;
    struct timespec left;
};

static void *sleep_to_be_interrupted(void *argument) {
    struct interrupted_sleep *self = argument;
    struct timespec request = {100, 0};
    self->result = nanosleep(&request, &self->left);
    self->error = errno;
    return NULL;
}

void test_signal_right_after_a_verb_interrupts_the_sleep(void) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = plain_handler;
    sigaction(SIGUSR1, &action, NULL);
    int lost = 0, wrong = 0;
    for (int round = 0; round < 50; round++) {
        apply(TC_VERB_FREEZE, TC_WALL_KEEP, 0, 0);
        struct interrupted_sleep sleeper = {0};
        pthread_create(&sleeper.thread, NULL, sleep_to_be_interrupted, &sleeper);
        wait_for_waits(1);
        apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 30000000000LL, 0);
        pthread_kill(sleeper.thread, SIGUSR1);
        for (int tries = 0; tries < 200 && listed_waits() > 0; tries++) real_pause_ms(5);
        if (listed_waits() > 0) {
            lost++;
            apply(TC_VERB_ADVANCE, TC_WALL_KEEP, 100000000000LL, 0);
        }
        pthread_join(sleeper.thread, NULL);
        if (!(sleeper.result == -1 && sleeper.error == EINTR && sleeper.left.tv_sec == 70 && sleeper.left.tv_nsec == 0))
            wrong++;
    }
    CHECK(lost == 0, "%d of 50 signals were lost", lost);
    CHECK(wrong == 0, "%d of 50 sleeps did not end with EINTR and 70 s left", wrong);
    signal(SIGUSR1, SIG_DFL);
}

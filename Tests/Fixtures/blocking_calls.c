/*
 * Blocking calls a program makes, one at a time, for the scheduler's table of
 * how each is classified (docs/scheduler.md, "Every blocking call"). Each
 * mode prints the virtual time (CLOCK_MONOTONIC, ms) that passed while the
 * call waited, and what the call returned.
 *
 *   blocking_calls lock KIND FILE HOLD_MS
 *       a child takes a lock on FILE (KIND: flock, fcntl, ofd, lockf), holds it
 *       HOLD_MS (a virtual sleep) and releases it; meanwhile the parent waits
 *       for the same lock with the blocking call
 *   blocking_calls lock-held KIND FILE SLEEP_MS
 *       waits for a lock on FILE that someone else already holds, while a
 *       second thread sleeps SLEEP_MS: "slept" if the sleep ended first
 *   blocking_calls semop|msgrcv|mq_receive|sigwaitinfo|pause HOLD_MS
 *       waits with no timeout for what a child (or, for signals, the parent's
 *       child) does after a virtual sleep of HOLD_MS
 *   blocking_calls semtimedop|mq_timedreceive|mq_timedsend|sigtimedwait TIMEOUT_MS
 *       waits for something that never comes, with a timeout of TIMEOUT_MS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(long ms) {
    struct timespec request = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&request, NULL);
}

static int take_lock(const char *kind, int fd) {
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (strcmp(kind, "flock") == 0) return flock(fd, LOCK_EX);
    if (strcmp(kind, "fcntl") == 0) return fcntl(fd, F_SETLKW, &lock);
    if (strcmp(kind, "ofd") == 0) return fcntl(fd, F_OFD_SETLKW, &lock);
    if (strcmp(kind, "lockf") == 0) return lockf(fd, F_LOCK, 0);
    fprintf(stderr, "blocking_calls: unknown lock kind '%s' (flock, fcntl, ofd or lockf)\n", kind);
    exit(2);
}

static long sleep_ms;
static volatile int slept;

static void *sleeper(void *unused) {
    (void)unused;
    nap(sleep_ms);
    slept = 1;
    return NULL;
}

static void report(int64_t start, const char *what, long result) {
    printf("%lld ms %s %ld %s\n", (long long)(now_ms() - start), what, result, result < 0 ? strerror(errno) : "ok");
}

/* A child that waits `ms` (virtually), does `act`, and exits. */
static pid_t child_after(long ms, void (*act)(void *), void *argument) {
    pid_t child = fork();
    if (child == 0) {
        nap(ms);
        act(argument);
        _exit(0);
    }
    return child;
}

static void post_semaphore(void *id) {
    struct sembuf up = {0, 1, 0};
    semop(*(int *)id, &up, 1);
}

static void send_message(void *id) {
    struct { long type; char text[8]; } message = {1, "hello"};
    msgsnd(*(int *)id, &message, sizeof message.text, 0);
}

static void send_queue(void *queue) { mq_send(*(mqd_t *)queue, "hello", 5, 0); }

static void signal_parent(void *unused) {
    (void)unused;
    kill(getppid(), SIGUSR1);
}

static void on_signal(int signal) { (void)signal; }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: blocking_calls MODE ARGUMENTS... (see the source)\n");
        return 2;
    }
    const char *mode = argv[1];
    long ms = atol(argv[argc - 1]);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "lock") == 0 && argc == 5) {
        int fd = open(argv[3], O_RDWR | O_CREAT, 0600);
        int ready[2];
        if (fd < 0 || pipe(ready) != 0) return 1;
        pid_t child = fork();
        if (child == 0) {
            int own = open(argv[3], O_RDWR);  /* its own open file: an flock or OFD lock is per open file */
            take_lock(argv[2], own);
            write(ready[1], "x", 1);
            nap(ms);
            _exit(0);  /* releases the lock */
        }
        char byte;
        read(ready[0], &byte, 1);
        int64_t start = now_ms();
        report(start, argv[2], take_lock(argv[2], fd));
        waitpid(child, NULL, 0);
        return 0;
    }
    if (strcmp(mode, "lock-held") == 0 && argc == 5) {
        int fd = open(argv[3], O_RDWR);
        if (fd < 0) return 1;
        sleep_ms = ms;
        pthread_t thread;
        pthread_create(&thread, NULL, sleeper, NULL);
        int64_t start = now_ms();
        long result = take_lock(argv[2], fd);
        report(start, slept ? "slept-first" : "locked-first", result);
        return 0;
    }
    int64_t start = now_ms();
    if (strcmp(mode, "semop") == 0 || strcmp(mode, "semtimedop") == 0) {
        int id = semget(IPC_PRIVATE, 1, 0600);
        if (id < 0) return 1;
        struct sembuf down = {0, -1, 0};
        pid_t child = 0;
        long result;
        if (strcmp(mode, "semop") == 0) {
            child = child_after(ms, post_semaphore, &id);
            result = semop(id, &down, 1);
        } else {
            struct timespec timeout = {ms / 1000, (ms % 1000) * 1000000};
            result = semtimedop(id, &down, 1, &timeout);
        }
        report(start, mode, result);
        if (child) waitpid(child, NULL, 0);
        semctl(id, 0, IPC_RMID);
        return 0;
    }
    if (strcmp(mode, "msgrcv") == 0) {
        int id = msgget(IPC_PRIVATE, 0600);
        if (id < 0) return 1;
        pid_t child = child_after(ms, send_message, &id);
        struct { long type; char text[8]; } message;
        report(start, mode, msgrcv(id, &message, sizeof message.text, 0, 0));
        waitpid(child, NULL, 0);
        msgctl(id, IPC_RMID, NULL);
        return 0;
    }
    if (strncmp(mode, "mq_", 3) == 0) {
        char name[64];
        snprintf(name, sizeof name, "/timectl-blocking-%d", getpid());
        struct mq_attr attributes = {.mq_maxmsg = 1, .mq_msgsize = 16};
        mqd_t queue = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attributes);
        if (queue == (mqd_t)-1) return 1;
        mq_unlink(name);
        char buffer[16];
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += ms / 1000;
        deadline.tv_nsec += (ms % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000) deadline.tv_sec++, deadline.tv_nsec -= 1000000000;
        start = now_ms();
        if (strcmp(mode, "mq_receive") == 0) {
            pid_t child = child_after(ms, send_queue, &queue);
            report(start, mode, mq_receive(queue, buffer, sizeof buffer, NULL));
            waitpid(child, NULL, 0);
        } else if (strcmp(mode, "mq_timedreceive") == 0) {
            report(start, mode, mq_timedreceive(queue, buffer, sizeof buffer, NULL, &deadline));
        } else if (strcmp(mode, "mq_timedsend") == 0) {
            mq_send(queue, "full", 4, 0);  /* the queue holds one message: the next send waits */
            report(start, mode, mq_timedsend(queue, "more", 4, 0, &deadline));
        } else {
            return 2;
        }
        return 0;
    }
    if (strcmp(mode, "sigwaitinfo") == 0 || strcmp(mode, "sigtimedwait") == 0 || strcmp(mode, "pause") == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        pid_t child = 0;
        long result;
        if (strcmp(mode, "pause") == 0) {
            signal(SIGUSR1, on_signal);
            child = child_after(ms, signal_parent, NULL);
            result = pause();
        } else if (strcmp(mode, "sigwaitinfo") == 0) {
            sigprocmask(SIG_BLOCK, &set, NULL);
            child = child_after(ms, signal_parent, NULL);
            result = sigwaitinfo(&set, NULL);
        } else {
            sigprocmask(SIG_BLOCK, &set, NULL);
            struct timespec timeout = {ms / 1000, (ms % 1000) * 1000000};
            result = sigtimedwait(&set, NULL, &timeout);
        }
        report(start, mode, result);
        if (child) waitpid(child, NULL, 0);
        return 0;
    }
    fprintf(stderr, "blocking_calls: unknown mode '%s'\n", mode);
    return 2;
}

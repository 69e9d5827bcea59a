/*
 * Workloads for scripts/bench-auto-advance (run under timectl run --auto-advance):
 *   auto_sleeper sleeps N MS        N × nanosleep(MS ms) in one process
 *   auto_sleeper ping-pong N MS     two processes, N rounds: each sleeps MS ms,
 *                                   then hands a byte to the other through a pipe
 *   auto_sleeper sleeps N MS threads|processes K
 *                                   the sleeps, beside K idle threads (or child
 *                                   processes) blocked reading a pipe this program
 *                                   holds, which it closes at the end
 *   auto_sleeper together N MS K    K threads, each N × nanosleep(MS ms): every
 *                                   step makes K waits due together
 * Prints the virtual time it saw pass, in ns, and on standard error the real
 * time the sleeps took ("real NS"), read with the system call itself so that
 * the shim cannot answer it: the cost of the steps alone, without start-up.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* clock_gettime(CLOCK_MONOTONIC) made by the kernel, not through libc (which the shim interposes). */
static int64_t real_now(void) {
    struct timespec ts;
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "0"(228L /* SYS_clock_gettime */), "D"((long)CLOCK_MONOTONIC), "S"(&ts)
                     : "rcx", "r11", "memory");
    (void)result;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nap(long ms) {
    struct timespec request = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&request, NULL);
}

static int idle_pipe[2];

static long together_count, together_ms;

static void *together_sleeper(void *unused) {
    (void)unused;
    for (long i = 0; i < together_count; i++) nap(together_ms);
    return NULL;
}

static void *idle_reader(void *unused) {
    (void)unused;
    char byte;
    while (read(idle_pipe[0], &byte, 1) > 0) {}
    return NULL;
}

int main(int argc, char **argv) {
    int together = argc == 5 && strcmp(argv[1], "together") == 0;
    if (argc != 4 && argc != 6 && !together) {
        fprintf(stderr, "usage: auto_sleeper sleeps|ping-pong N MS [threads|processes K], or together N MS K\n");
        return 2;
    }
    long count = atol(argv[2]), ms = atol(argv[3]);
    long idle = argc == 6 ? atol(argv[5]) : 0;
    int idle_threads = argc == 6 && strcmp(argv[4], "threads") == 0;
    pthread_t *threads = calloc((size_t)idle + 1, sizeof(pthread_t));
    if (idle > 0) {
        if (pipe(idle_pipe) != 0) return 1;
        for (long i = 0; i < idle; i++) {
            if (idle_threads) {
                if (pthread_create(&threads[i], NULL, idle_reader, NULL) != 0) return 1;
            } else if (fork() == 0) {
                close(idle_pipe[1]);
                idle_reader(NULL);
                _exit(0);
            }
        }
    }
    /* One sleep first, untimed: the scheduler has then seen every idle thread once (finding a thread and what it
       waits on is paid once per thread, not per step: bench-auto-advance times the steps). */
    if (idle > 0) nap(ms);
    int64_t start = now(), real_start = real_now();
    if (strcmp(argv[1], "sleeps") == 0) {
        for (long i = 0; i < count; i++) nap(ms);
    } else if (strcmp(argv[1], "ping-pong") == 0) {
        int there[2], back[2];
        if (pipe(there) != 0 || pipe(back) != 0) return 1;
        pid_t child = fork();
        char byte = 0;
        for (long i = 0; i < count; i++) {
            if (child == 0) {
                if (read(there[0], &byte, 1) != 1) _exit(1);
                nap(ms);
                if (write(back[1], &byte, 1) != 1) _exit(1);
            } else {
                nap(ms);
                if (write(there[1], &byte, 1) != 1) return 1;
                if (read(back[0], &byte, 1) != 1) return 1;
            }
        }
        if (child == 0) _exit(0);
        waitpid(child, NULL, 0);
    } else if (together) {
        long sleepers = atol(argv[4]);
        pthread_t *group = calloc((size_t)sleepers + 1, sizeof(pthread_t));
        together_count = count;
        together_ms = ms;
        for (long i = 0; i < sleepers; i++)
            if (pthread_create(&group[i], NULL, together_sleeper, NULL) != 0) return 1;
        for (long i = 0; i < sleepers; i++) pthread_join(group[i], NULL);
        free(group);
    } else {
        fprintf(stderr, "auto_sleeper: unknown workload '%s' (sleeps, ping-pong or together)\n", argv[1]);
        return 2;
    }
    int64_t elapsed = now() - start, real_elapsed = real_now() - real_start;
    if (idle > 0) {
        close(idle_pipe[1]);
        if (idle_threads) {
            for (long i = 0; i < idle; i++) pthread_join(threads[i], NULL);
        } else {
            while (wait(NULL) > 0) {}
        }
    }
    fprintf(stderr, "real %lld\n", (long long)real_elapsed);
    printf("%lld\n", (long long)elapsed);
    return 0;
}

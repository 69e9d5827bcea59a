/*
 * Compiled into TimeControlKit only (see timectl_run.h): finding and ending
 * the processes of one `timectl run`, and the guardian that ends them when
 * timectl itself is killed. Everything here uses raw system calls and the
 * stack only, because the guardian runs it in a child forked from a
 * multi-threaded Swift process, where libc's locks may be held by threads
 * that no longer exist.
 */
#define _GNU_SOURCE
#include "timectl_run.h"
#include "timectl_realclock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int parse_pid(const char *name) {
    int pid = 0;
    if (!*name) return 0;
    for (; *name; name++) {
        if (*name < '0' || *name > '9' || pid > 100000000) return 0;
        pid = pid * 10 + (*name - '0');
    }
    return pid;
}

static unsigned length_of(const char *text) {
    unsigned length = 0;
    while (text[length]) length++;
    return length;
}

/* Opens /proc/PID/`file` read-only; −errno when it cannot. */
static long open_proc_file(int pid, const char *file) {
    char path[48] = "/proc/";
    char digits[12];
    int count = 0;
    do digits[count++] = (char)('0' + pid % 10); while ((pid /= 10) > 0);
    unsigned at = 6;
    while (count > 0) path[at++] = digits[--count];
    path[at++] = '/';
    for (unsigned i = 0; file[i] && at < sizeof path - 1; i++) path[at++] = file[i];
    path[at] = 0;
    return tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
}

/* Whether /proc/PID/environ holds the entry `needle` (NAME=VALUE) exactly. */
static int environment_holds(int pid, const char *needle, unsigned needle_length) {
    long fd = open_proc_file(pid, "environ");
    if (fd < 0) return 0;
    char buffer[4096];
    long matched = 0;  /* bytes of `needle` matched in the current entry; −1: this entry differs */
    int found = 0;
    for (;;) {
        long got = tc_raw_syscall(SYS_read, fd, buffer, sizeof buffer);
        if (got == -EINTR) continue;
        if (got <= 0) break;
        for (long i = 0; i < got && !found; i++) {
            char c = buffer[i];
            if (matched >= 0) {
                if ((unsigned long)matched == needle_length) {
                    if (c == 0) found = 1;
                    matched = -1;
                } else if (c == needle[matched]) {
                    matched++;
                    continue;
                } else {
                    matched = -1;
                }
            }
            if (c == 0) matched = 0;
        }
        if (found) break;
    }
    if ((unsigned long)matched == needle_length) found = 1;  /* the last entry, without its NUL */
    tc_raw_syscall(SYS_close, fd);
    return found;
}

int tc_run_members(const char *token, int32_t excluded, int32_t *pids, int capacity) {
    char needle[160];
    const char *name = TC_RUN_VARIABLE "=";
    unsigned length = 0;
    for (unsigned i = 0; name[i]; i++) needle[length++] = name[i];
    unsigned token_length = length_of(token);
    if (token_length == 0 || length + token_length >= sizeof needle) return 0;
    for (unsigned i = 0; i < token_length; i++) needle[length++] = token[i];
    needle[length] = 0;

    int32_t self = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    long directory = tc_raw_syscall(SYS_openat, AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0) return 0;
    int count = 0;
    char entries[4096] __attribute__((aligned(8)));
    for (;;) {
        long got = tc_raw_syscall(SYS_getdents64, directory, entries, sizeof entries);
        if (got <= 0) break;
        for (long offset = 0; offset < got;) {
            struct linux_dirent64 *entry = (struct linux_dirent64 *)(entries + offset);
            offset += entry->d_reclen;
            int pid = parse_pid(entry->d_name);
            if (pid <= 0 || pid == self || pid == excluded) continue;
            if (!environment_holds(pid, needle, length)) continue;
            if (count < capacity) pids[count] = pid;
            count++;
        }
    }
    tc_raw_syscall(SYS_close, directory);
    return count;
}

/*
 * Whether a process has finished dying: gone, or a zombie. Its environ
 * already reads empty while it is still exiting (its memory is released
 * before it becomes a zombie), so not being a member is not enough.
 */
static int process_has_ended(int32_t pid) {
    long fd = open_proc_file(pid, "stat");
    if (fd < 0) return 1;
    char stat[512];
    long got;
    while ((got = tc_raw_syscall(SYS_read, fd, stat, sizeof stat)) == -EINTR) {}
    tc_raw_syscall(SYS_close, fd);
    if (got <= 0) return 1;
    long close_paren = -1;  /* the command may hold ')': the state follows the last one */
    for (long i = 0; i < got; i++)
        if (stat[i] == ')') close_paren = i;
    if (close_paren < 0 || close_paren + 2 >= got) return 1;
    char state = stat[close_paren + 2];
    return state == 'Z' || state == 'X' || state == 'x';
}

static void pause_5ms(void) {
    struct timespec pause = {0, 5000000};
    tc_raw_syscall(SYS_nanosleep, &pause, NULL);
}

int tc_run_await_end(const int32_t *pids, int count, int rounds) {
    int left = count;
    for (int round = 0; round < rounds; round++) {
        left = 0;
        for (int i = 0; i < count; i++) left += !process_has_ended(pids[i]);
        if (left == 0) return 0;
        pause_5ms();
    }
    return left;
}

int tc_run_kill_all(const char *token, int32_t excluded, int rounds) {
    int32_t pids[256], killed[256];
    int killed_count = 0;
    int left = 0, round = 0;
    for (; round < rounds; round++) {
        left = tc_run_members(token, excluded, pids, 256);
        if (left == 0) break;
        for (int i = 0; i < left && i < 256; i++) {
            tc_raw_syscall(SYS_kill, pids[i], SIGKILL);
            int known = 0;
            for (int k = 0; k < killed_count && !known; k++) known = killed[k] == pids[i];
            if (!known && killed_count < 256) killed[killed_count++] = pids[i];
        }
        pause_5ms();
    }
    if (left > 0) return left;
    return tc_run_await_end(killed, killed_count, rounds - round);
}

static void guard(long read_end, const char *token, const char *segment) {
    uint64_t all = ~(uint64_t)0;
    tc_raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, sizeof all);
    /* Out of timectl's process group: `kill -KILL -PGID` (or `timeout -s KILL`) must leave it to clean up. */
    tc_raw_syscall(SYS_setpgid, 0, 0);
    tc_raw_syscall(SYS_prctl, PR_SET_NAME, "timectl-guard");
    /* Hold nothing of timectl's: a reader of its stdout must see EOF when timectl exits. */
    if (read_end > 0) tc_raw_syscall(SYS_close_range, 0, read_end - 1, 0);
    tc_raw_syscall(SYS_close_range, read_end + 1, ~0U, 0);
    tc_raw_syscall(SYS_chdir, "/");
    char byte;
    long got;
    while ((got = tc_raw_syscall(SYS_read, read_end, &byte, 1)) == -EINTR) {}
    if (got != 1) {
        tc_run_kill_all(token, 0, 400);
        if (segment) tc_raw_syscall(SYS_unlinkat, AT_FDCWD, segment, 0);
    }
    tc_raw_syscall(SYS_exit_group, 0);
}

int tc_run_guardian_start(const char *token, const char *segment, int32_t *guardian) {
    int fds[2];
    long result = tc_raw_syscall(SYS_pipe2, fds, O_CLOEXEC);
    if (result < 0) {
        errno = (int)-result;
        return -1;
    }
    /* A bare fork: no atfork handlers (they may take locks), and the child touches no libc state. */
    long pid = tc_raw_syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        tc_raw_syscall(SYS_close, fds[1]);
        guard(fds[0], token, segment);
    }
    tc_raw_syscall(SYS_close, fds[0]);
    if (pid < 0) {
        tc_raw_syscall(SYS_close, fds[1]);
        errno = (int)-pid;
        return -1;
    }
    *guardian = (int32_t)pid;
    return fds[1];
}

void tc_run_guardian_disarm(int fd) {
    if (fd < 0) return;
    char byte = 1;
    while (tc_raw_syscall(SYS_write, fd, &byte, 1) == -EINTR) {}
    tc_raw_syscall(SYS_close, fd);
}

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
#include <sched.h>
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

/* The number in a /proc/sys file (ns_last_pid, pid_max), or −1. */
static long read_number(const char *path) {
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char text[24];
    long got;
    while ((got = tc_raw_syscall(SYS_read, fd, text, sizeof text - 1)) == -EINTR) {}
    tc_raw_syscall(SYS_close, fd);
    long value = 0;
    if (got <= 0 || text[0] < '0' || text[0] > '9') return -1;
    for (long i = 0; i < got && text[i] >= '0' && text[i] <= '9'; i++) value = value * 10 + (text[i] - '0');
    return value;
}

/* CPUs the machine may ever run (cpu/possible: "0-N" or a list of ranges), read once; at least 1. */
static long possible_cpus(void) {
    static long cached;
    long known = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (known > 0) return known;
    long count = 0;
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char text[256];
        long got;
        while ((got = tc_raw_syscall(SYS_read, fd, text, sizeof text - 1)) == -EINTR) {}
        tc_raw_syscall(SYS_close, fd);
        long low = -1, number = -1;
        for (long i = 0; i <= got; i++) {
            char c = i < got ? text[i] : ',';
            if (c >= '0' && c <= '9') {
                number = (number < 0 ? 0 : number * 10) + (c - '0');
            } else if (c == '-') {
                low = number;
                number = -1;
            } else if (number >= 0) {
                count += low >= 0 && number >= low ? number - low + 1 : 1;
                low = number = -1;
            }
            if (number > 100000) break;
        }
    }
    if (count <= 0) count = 4096; /* unknown: as many as Linux supports on x86-64 */
    __atomic_store_n(&cached, count, __ATOMIC_RELAXED);
    return count;
}

static int64_t monotonic_ns(void) {
    struct timespec now;
    tc_raw_syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Whether `pid` may have been allocated after `first`, pids having been allocated cyclically up to `last`. */
static int allocated_since(int pid, int first, int last) {
    return first <= last ? pid >= first && pid <= last : pid >= first || pid <= last;
}

/* How many pids allocated_since(first, last) covers. */
static long span_since(int first, int last, long pid_max) {
    return first <= last ? last - first + 1 : pid_max - first + last;
}

/* Up to this many pids are looked up one by one rather than by listing /proc. */
#define TC_RUN_PROBED_PIDS 256

static int scan_members(const char *token, int32_t excluded, int first, int last, long pid_max, int32_t *pids,
                        int capacity);

int tc_run_members(const char *token, int32_t excluded, int32_t *pids, int capacity) {
    return scan_members(token, excluded, 0, 0, 0, pids, capacity);
}

/*
 * Every member of a run descends from its command, so each got its pid
 * after the command's (`first`). Linux hands pids out in increasing order,
 * wrapping at pid_max, so while the counter cannot have gone all the way
 * round since then, only pids from `first` up to the last one allocated
 * (ns_last_pid) can be members, and the environment of every older process
 * need not be read (most of the cost of a scan). Going round takes pid_max
 * allocations; each is a clone, which costs any CPU more than a
 * microsecond: the counter cannot have gone round in less than pid_max / CPUs
 * microseconds, and the shortcut is taken only within half of that.
 * Otherwise (or if ns_last_pid cannot be read) every process is looked at.
 * (A process given its pid explicitly — clone3's set_tid, which needs
 * CAP_CHECKPOINT_RESTORE, as CRIU restoring a tree does — can fall outside
 * the range: such a member is found only by a scan of every process.)
 */
int tc_run_members_since(const char *token, int32_t excluded, int32_t first, int64_t since, int32_t *pids, int capacity) {
    long last = read_number("/proc/sys/kernel/ns_last_pid"), pid_max = read_number("/proc/sys/kernel/pid_max");
    int64_t elapsed = monotonic_ns() - since;
    int64_t window = pid_max > 0 ? (int64_t)pid_max * 1000 / possible_cpus() / 2 : 0;
    if (first <= 0 || first >= pid_max || last <= 0 || last >= pid_max || since <= 0 || elapsed < 0 || elapsed >= window)
        return scan_members(token, excluded, 0, 0, 0, pids, capacity);
    return scan_members(token, excluded, first, (int)last, pid_max, pids, capacity);
}

/* The members among every process (first = 0), or among the pids allocated_since(first, last) below pid_max. */
static int scan_members(const char *token, int32_t excluded, int first, int last, long pid_max, int32_t *pids,
                        int capacity) {
    char needle[160];
    const char *name = TC_RUN_VARIABLE "=";
    unsigned length = 0;
    for (unsigned i = 0; name[i]; i++) needle[length++] = name[i];
    unsigned token_length = length_of(token);
    if (token_length == 0 || length + token_length >= sizeof needle) return 0;
    for (unsigned i = 0; i < token_length; i++) needle[length++] = token[i];
    needle[length] = 0;

    int32_t self = (int32_t)tc_raw_syscall(SYS_getpid, 0);
    if (first > 0 && span_since(first, last, pid_max) <= TC_RUN_PROBED_PIDS) {
        /* Few pids: each is looked up, rather than listing /proc (which costs a dentry for every process). */
        int count = 0;
        for (long step = 0, pid = first; step < span_since(first, last, pid_max); step++, pid = pid >= pid_max - 1 ? 1 : pid + 1) {
            if (pid == self || pid == excluded || !environment_holds((int)pid, needle, length)) continue;
            /* /proc/TID of a thread other than the first is there too, but not listed: only processes count. */
            long leader = tc_raw_syscall(SYS_pidfd_open, pid, 0);
            if (leader == -ENOSYS) return scan_members(token, excluded, 0, 0, 0, pids, capacity);
            if (leader < 0) continue;
            tc_raw_syscall(SYS_close, leader);
            if (count < capacity) pids[count] = (int32_t)pid;
            count++;
        }
        return count;
    }
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
            if (first > 0 && !allocated_since(pid, first, last)) continue;
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

/* Instrumented code (sanitizers, fuzzing coverage) reaches thread-local state the guardian's own block lacks. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(hwaddress_sanitizer) || __has_feature(coverage_sanitizer)
#define TC_GUARDIAN_INSTRUMENTED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TC_GUARDIAN_INSTRUMENTED 1
#endif
#if defined(__x86_64__) && !defined(TC_GUARDIAN_INSTRUMENTED)
#define TC_GUARDIAN_SHARES_MEMORY 1
#endif

#ifdef TC_GUARDIAN_SHARES_MEMORY
/*
 * A guardian shares timectl's memory (CLONE_VM) rather than copying it:
 * forking a process of timectl's size costs a tenth of a millisecond, and
 * every page timectl writes afterwards a copy-on-write fault. It then runs
 * on a slot of its own — stack, arguments, and a thread block whose only
 * field read is the stack guard (%fs:0x28) — which timectl leaves alone
 * until the kernel clears `tid` at the guardian's exit. Memory shared with
 * a process that has died stays mapped as long as the guardian runs.
 */
#define TC_GUARDIAN_SLOTS 8
struct guardian_slot {
    int32_t tid;            /* 0: free; −1: being started; else the guardian's, zeroed by the kernel when it exits */
    int32_t read_end;
    uint64_t tcb[8];        /* [0] and [2]: itself, as glibc's; [5]: the stack guard */
    char token[160];
    char segment[4096];
    char stack[64 * 1024] __attribute__((aligned(16)));
};
static struct guardian_slot guardian_slots[TC_GUARDIAN_SLOTS];

static int guardian_main(void *argument) {
    struct guardian_slot *slot = argument;
    guard(slot->read_end, slot->token, slot->segment[0] ? slot->segment : NULL);
    return 0;
}

/* The guardian on a free slot, with pipe `fds`; 0 (and *guardian) or −errno, or 1 when no slot fits: fork then. */
static long start_sharing(const char *token, const char *segment, int fds[2], int32_t *guardian) {
    unsigned token_length = length_of(token), segment_length = segment ? length_of(segment) : 0;
    if (token_length >= sizeof guardian_slots[0].token || segment_length >= sizeof guardian_slots[0].segment) return 1;
    struct guardian_slot *slot = NULL;
    for (int i = 0; i < TC_GUARDIAN_SLOTS && !slot; i++) {
        int32_t free_slot = 0;
        if (__atomic_compare_exchange_n(&guardian_slots[i].tid, &free_slot, -1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            slot = &guardian_slots[i];
    }
    if (!slot) return 1;
    for (unsigned i = 0; i <= token_length; i++) slot->token[i] = token[i];
    for (unsigned i = 0; i < segment_length; i++) slot->segment[i] = segment[i];
    slot->segment[segment_length] = 0;
    slot->read_end = fds[0];
    uint64_t stack_guard;
    __asm__("mov %%fs:0x28, %0" : "=r"(stack_guard));
    for (int i = 0; i < 8; i++) slot->tcb[i] = 0;
    slot->tcb[0] = slot->tcb[2] = (uint64_t)(uintptr_t)slot->tcb;
    slot->tcb[5] = stack_guard;
    /* No signal handler may run in the guardian before it blocks every signal: one would run on shared memory. */
    uint64_t all = ~(uint64_t)0, saved;
    tc_raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &saved, sizeof all);
    int pid = clone(guardian_main, slot->stack + sizeof slot->stack,
                    CLONE_VM | CLONE_SETTLS | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, slot, NULL, slot->tcb,
                    &slot->tid);
    long failure = pid < 0 ? -errno : 0;
    tc_raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved, NULL, sizeof saved);
    if (pid < 0) {
        __atomic_store_n(&slot->tid, 0, __ATOMIC_RELEASE);
        return failure;
    }
    *guardian = pid;
    return 0;
}
#endif

int tc_run_guardian_start(const char *token, const char *segment, int32_t *guardian) {
    int fds[2];
    long result = tc_raw_syscall(SYS_pipe2, fds, O_CLOEXEC);
    if (result < 0) {
        errno = (int)-result;
        return -1;
    }
#ifdef TC_GUARDIAN_SHARES_MEMORY
    long shared = start_sharing(token, segment, fds, guardian);
    if (shared <= 0) {
        tc_raw_syscall(SYS_close, fds[0]);
        if (shared == 0) return fds[1];
        tc_raw_syscall(SYS_close, fds[1]);
        errno = (int)-shared;
        return -1;
    }
#endif
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

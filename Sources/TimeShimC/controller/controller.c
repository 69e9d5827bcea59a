/*
 * Compiled into TimeControlKit only, never into libTimeShim.so.
 *
 * A program that links TimeControlKit (timectl, a Swift test harness)
 * controls sessions. If it is started with the shim preloaded — `timectl
 * tick` run from a script that `timectl run` started — the shim finds this
 * ELF note in the executable and stays out of the way. A note rather than a
 * symbol: SwiftPM does not export an executable's symbols dynamically, but
 * every linker loads SHT_NOTE sections into a PT_NOTE segment the shim can walk.
 */
#define _GNU_SOURCE
#include "timectl_controller.h"
#include "timectl_segment.h"
#include "timectl_realclock.h"

__attribute__((section(".note.timectl.controller"), aligned(4), used))
static const struct {
    unsigned int name_size, desc_size, type;
    char name[8];
    unsigned int desc;
} controller_note = {8, 4, TC_CONTROLLER_NOTE_TYPE, "timectl", 1};

int tc_spawn_file_actions_addchdir(posix_spawn_file_actions_t *actions, const char *directory) {
    return posix_spawn_file_actions_addchdir_np(actions, directory);
}

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

int tc_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int tc_gettid(void) { return (int)tc_raw_syscall(SYS_gettid, 0); }

int tc_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

long tc_proc_pread(int fd, void *buffer, size_t count) {
    return syscall(SYS_pread64, fd, buffer, count, 0L);
}

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include "timectl_realclock.h"

uint32_t *tc_generation_word(struct tc_segment *segment) { return &segment->generation; }

uint32_t *tc_wait_changes_word(struct tc_segment *segment) { return &segment->wait_changes; }

uint32_t tc_word_load(const uint32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

int32_t tc_word_load_i32(const int32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

uint64_t tc_word_load_u64(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

/* The futex calls below, the sleep and the poll are made raw, never through libc's syscall(), nanosleep or poll:
   in a test's own process, which runs with the shim preloaded (TimeControlKitTesting), libc's would be the
   shim's and wait on the session's time, where the library's own pauses and guards must be real. */
void tc_word_poke(uint32_t *word) {
    __atomic_fetch_add(word, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void tc_word_wait(const uint32_t *word, uint32_t value, int64_t timeout_ns) {
    struct timespec timeout = {timeout_ns / 1000000000, timeout_ns % 1000000000};
    tc_raw_syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, timeout_ns < 0 ? NULL : &timeout, NULL, 0);
}

void tc_real_sleep_ns(int64_t nanoseconds) {
    if (nanoseconds <= 0) return;
    struct timespec pause = {nanoseconds / 1000000000, nanoseconds % 1000000000};
    while (tc_raw_syscall(SYS_nanosleep, &pause, &pause) == -EINTR) {}
}

int tc_real_poll(struct pollfd *fds, unsigned long count, int timeout_ms) {
    struct timespec timeout = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};
    long result = tc_raw_syscall(SYS_ppoll, fds, count, timeout_ms < 0 ? NULL : &timeout, NULL, 8);
    if (result < 0) {
        errno = (int)-result;
        return -1;
    }
    return (int)result;
}

#include <sched.h>
#include "timectl_realclock.h"

static int loadavg_fd = -1;

/* Whether every task the kernel has runnable now, system-wide (the caller among them: the fourth field of
   /proc/loadavg), could have one of `usable_cpus` CPUs to itself: then keeping a CPU busy takes it from no
   one. 0 when /proc/loadavg cannot be read. */
static int cpu_to_spare(int usable_cpus) {
    int fd = __atomic_load_n(&loadavg_fd, __ATOMIC_ACQUIRE);
    if (fd < 0) {
        int opened = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
        if (opened < 0) return 0;
        int expected = -1;
        if (__atomic_compare_exchange_n(&loadavg_fd, &expected, opened, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            fd = opened;
        } else {
            close(opened);
            fd = expected;
        }
    }
    /* "0.52 0.58 0.59 3/467 12345": the fourth field counts the runnable tasks, the caller among them. */
    char text[128];
    ssize_t count = pread(fd, text, sizeof text - 1, 0);
    if (count <= 0) return 0;
    text[count] = 0;
    const char *field = text;
    for (int spaces = 0; spaces < 3; field++) {
        if (*field == 0) return 0;
        if (*field == ' ') spaces++;
    }
    long runnable = 0;
    for (; *field >= '0' && *field <= '9'; field++) runnable = runnable * 10 + (*field - '0');
    return *field == '/' && runnable <= usable_cpus;
}

int tc_usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int count = CPU_COUNT(&set);
    return count > 0 ? count : 1;
}

int tc_spin_may_go_on(int usable_cpus, int64_t *crowded_since, int64_t now) {
    if (usable_cpus < 2) return 0;
    if (cpu_to_spare(usable_cpus)) {
        *crowded_since = 0;
        return 1;
    }
    if (*crowded_since == 0) *crowded_since = now;
    return now - *crowded_since < 20000;
}

int tc_words_spin(const uint32_t *word, uint32_t value, const uint32_t *local, uint32_t local_value, int64_t until_ns,
                  int usable_cpus, int64_t *crowded_since) {
    int64_t next_check = tc_real_ns(CLOCK_MONOTONIC) + 10000;
    for (;;) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value) return 1;
        if (local && __atomic_load_n(local, __ATOMIC_ACQUIRE) != local_value) return 1;
        int64_t now = tc_real_ns(CLOCK_MONOTONIC);
        if (now >= until_ns) return 0;
        if (now >= next_check) {
            if (!tc_spin_may_go_on(usable_cpus, crowded_since, now)) return 0;
            next_check = now + 10000;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
}

#include <sys/prctl.h>

int tc_become_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

#include <sys/wait.h>

int tc_child_is_running(int pid) {
    siginfo_t info = {0};
    long result = syscall(SYS_waitid, P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT, NULL);
    return result == 0 && info.si_pid == 0;
}

/*
 * Raw timed waits of Go programs (docs/go-and-static.md). Go's runtime
 * sleeps, waits for timers and polls the network with its own system calls
 * — futex with a timeout (notetsleep), epoll_pwait with a timeout
 * (netpoll), nanosleep (usleep) — never through libc, so interposing libc
 * cannot see them. In a Go program the shim installs a seccomp filter that
 * traps exactly those calls, and only when they are made from the Go
 * executable's own code; a SIGSYS handler then runs them on the virtual
 * timeline with the same machinery as the libc waits (sleep.c, poll.c) and
 * writes the result where the kernel would have.
 *
 * Why seccomp and not Syscall User Dispatch: dispatch traps every system
 * call from outside one address range — writes, reads, clone (which a
 * signal handler cannot re-issue) — while a filter traps only the few that
 * wait with a timeout, so every other call costs nothing more. The price:
 * a filter survives exec. It therefore keys on the instruction pointer
 * lying in the Go executable's text: a program exec'd later calls the
 * kernel from elsewhere (libc) and never matches, and if a process finds an
 * inherited filter the shim still installs the handler (tc_syscall_trap_adopt).
 *
 * The runtime must not take SIGSYS away or block it (a trap while SIGSYS
 * is blocked kills the process): its rt_sigaction and rt_sigprocmask calls
 * are trapped too. rt_sigaction of SIGSYS is recorded, not applied (a
 * SIGSYS that is not ours goes to what the program installed); any mask
 * the program sets, or gives a handler, has SIGSYS taken out.
 *
 * Setting the clock (clock_settime, settimeofday, adjtimex, clock_adjtime) is a raw call too, which as root
 * would move the host's clock: trapped always, and answered by settime.c's rules (the session's clock moves).
 *
 * A wait interrupted by a signal handler (Go's SIGURG preemption) returns
 * EINTR, which the runtime's callers all retry or ignore.
 */
#define _GNU_SOURCE
#include "shim.h"
#include "starvation.h"
#include "static_program.h"
#include "waiter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <link.h>
#include <signal.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#if defined(__x86_64__)

long tc_syscall_sleep(long number, long a1, long a2, long a3, long a4);
int tc_epoll_pwait(int epoll_fd, struct epoll_event *events, int capacity, int timeout_ms, const sigset_t *mask);
int tc_epoll_pwait2(int epoll_fd, struct epoll_event *events, int capacity, const struct timespec *timeout,
                    const sigset_t *mask);
int tc_poll(struct pollfd *fds, nfds_t count, int timeout_ms);
int tc_ppoll(struct pollfd *fds, nfds_t count, const struct timespec *timeout, const sigset_t *mask);
int tc_select(int count, fd_set *read, fd_set *write, fd_set *except, struct timeval *timeout);
/* As the raw pselect6: the time not slept is written back into `timeout`. */
int tc_pselect6(int count, fd_set *read, fd_set *write, fd_set *except, struct timespec *timeout, const sigset_t *mask);

/* SECCOMP_RET_DATA of our traps: si_errno tells our SIGSYS from another filter's. */
#define TRAP_TAG 0x7c1
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1 /* si_code of a SIGSYS raised by SECCOMP_RET_TRAP */
#endif
#define SIGSYS_BIT (1ULL << (SIGSYS - 1))

/* What the program believes SIGSYS does (it set it with rt_sigaction while we kept ours). */
static struct tc_kernel_sigaction application_sigsys = {.handler = SIG_DFL};
/* Whether this process's SIGSYS handler is ours: then the program's SIGSYS is only recorded. */
static int handling_sigsys;
/* A static program run by the loader (static_program.c) is trapped here; whether it is a Go program. */
static int static_program, program_is_go = 1;

int tc_syscall_trap_active(void) { return __atomic_load_n(&handling_sigsys, __ATOMIC_ACQUIRE); }

/* sigaction(SIGSYS) through libc (cgo installs Go's handlers that way): recorded, as the raw call is. */
void tc_syscall_trap_record_sigsys(const struct sigaction *action, struct sigaction *old) {
    struct tc_kernel_sigaction previous = application_sigsys;
    if (action) {
        struct tc_kernel_sigaction recorded = {(void *)action->sa_handler, (unsigned long)action->sa_flags,
                                            (void *)action->sa_restorer, 0};
        memcpy(&recorded.mask, &action->sa_mask, sizeof(recorded.mask));
        application_sigsys = recorded;
    }
    if (old) {
        memset(old, 0, sizeof(*old));
        old->sa_handler = (__sighandler_t)previous.handler;
        old->sa_flags = (int)previous.flags;
        old->sa_restorer = (void (*)(void))previous.restorer;
        memcpy(&old->sa_mask, &previous.mask, sizeof(previous.mask));
    }
}

/* ---- the emulated calls: each returns what the kernel would (a value or −errno) ---- */

/*
 * The bounded exception (docs/go-and-static.md): a raw relative wait of at
 * most this long, made by the Go executable, runs on real time. Those are
 * the runtime's own back-offs and retries — runqgrab's 3 µs, sysmon's
 * 20 µs … 10 ms naps, the 100 µs retries of a stop-the-world or a safe-point
 * request that re-preempt until every goroutine has stopped — which would
 * never end on a frozen session. What a program's timers wait for goes
 * through netpoll's epoll_pwait and is always virtual.
 */
#define RUNTIME_BACKOFF_NS (10 * 1000 * 1000LL)

static int is_backoff(const struct timespec *relative) {
    return program_is_go && relative && relative->tv_sec == 0 && relative->tv_nsec >= 0 && relative->tv_nsec <= RUNTIME_BACKOFF_NS;
}

static long errno_as_kernel(long libc_result) { return libc_result < 0 ? -errno : libc_result; }

static long sleep_call(long number, long a1, long a2, long a3, long a4) {
    return errno_as_kernel(tc_syscall_sleep(number, a1, a2, a3, a4));
}

static long epoll_call(long epoll_fd, long events, long capacity, long timeout_ms, long kernel_mask, long mask_size) {
    sigset_t mask, *mask_pointer = NULL;
    if (kernel_mask) {
        if (mask_size != 8) return -EINVAL;
        sigemptyset(&mask);
        memcpy(&mask, (const void *)kernel_mask, 8);
        mask_pointer = &mask;
    }
    return errno_as_kernel(
        tc_epoll_pwait((int)epoll_fd, (struct epoll_event *)events, (int)capacity, (int)timeout_ms, mask_pointer));
}

/*
 * FUTEX_WAIT (relative timeout on CLOCK_MONOTONIC) and FUTEX_WAIT_BITSET
 * (absolute, CLOCK_MONOTONIC or with FUTEX_CLOCK_REALTIME) on the virtual
 * timeline: real waits on the program's word and the segment's generation
 * at once, until the word is woken or the virtual deadline passes. A wake
 * with a bitset reaches this wait whatever the bitset (a spurious wakeup,
 * which futex callers always allow).
 */
static long futex_wait(const uint32_t *word, int op, uint32_t expected, const struct timespec *timeout) {
    struct tc_segment *segment = tc_shim_segment();
    int command = op & FUTEX_CMD_MASK;
    if (!segment) return tc_raw_syscall(SYS_futex, word, op, expected, timeout, 0, FUTEX_BITSET_MATCH_ANY);
    if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= TC_NS_PER_SECOND) return -EINVAL;
    int64_t ns = timeout->tv_sec > (INT64_MAX - timeout->tv_nsec) / TC_NS_PER_SECOND
                     ? INT64_MAX
                     : (int64_t)timeout->tv_sec * TC_NS_PER_SECOND + timeout->tv_nsec;
    int vclock = command == FUTEX_WAIT_BITSET && (op & FUTEX_CLOCK_REALTIME) ? TC_VCLOCK_REALTIME
                                                                             : TC_VCLOCK_MONOTONIC;
    int64_t deadline = command == FUTEX_WAIT ? tc_wait_deadline_after(segment, vclock, ns)
                                             : tc_wait_absolute_deadline(segment, vclock, ns);
    int word_private = (op & FUTEX_PRIVATE_FLAG) != 0;
    struct tc_wait wait;
    tc_wait_begin(&wait, segment, TC_WAIT_FUTEX, vclock, deadline);
    long result;
    for (int round = 0;; round++) {
        struct tc_wait_view view = tc_wait_look(segment, vclock);
        int64_t real = tc_wait_real_remaining(&view, deadline);
        if (real == 0) {
            result = -ETIMEDOUT;
            break;
        }
        long woken = tc_futex_wait_either(&segment->generation, view.generation, word, expected, word_private, real);
        if (woken == -ENOSYS) {
            /* Linux < 5.16: wait on the word alone, looking at the session between slices. */
            struct timespec slice = tc_real_timeout(real < TC_SLICE_NS ? real : TC_SLICE_NS);
            woken = tc_raw_syscall(SYS_futex, word, word_private ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, expected, &slice);
            if (woken == 0) woken = 0;
            else if (woken == -ETIMEDOUT) woken = 1;
        }
        if (woken == 0) {
            result = 0;
        } else if (woken == 1 || woken == -ETIMEDOUT) {
            continue; /* a verb, or the real time for the remainder passed: look again */
        } else if (woken == -EAGAIN) {
            if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == expected) continue; /* the generation had moved */
            result = round == 0 ? -EAGAIN : 0;
        } else {
            result = woken; /* -EINTR, -EFAULT */
        }
        break;
    }
    tc_wait_end(&wait);
    return result;
}

/* A kernel sigset_t argument (8 bytes) as libc's sigset_t, or NULL. */
static const sigset_t *libc_mask(long kernel_mask, sigset_t *mask) {
    if (!kernel_mask) return NULL;
    sigemptyset(mask);
    memcpy(mask, (const void *)kernel_mask, 8);
    return mask;
}

static long ppoll_call(long fds, long count, long timeout, long kernel_mask, long mask_size) {
    if (kernel_mask && mask_size != 8) return -EINVAL;
    sigset_t mask;
    return errno_as_kernel(tc_ppoll((struct pollfd *)fds, (nfds_t)count, (const struct timespec *)timeout,
                                    libc_mask(kernel_mask, &mask)));
}

/* pselect6's sixth argument: {const sigset_t *, size_t}. */
static long pselect_call(long count, long read, long write, long except, long timeout, long mask_data) {
    sigset_t mask;
    long kernel_mask = 0;
    if (mask_data) {
        const long *data = (const long *)mask_data;
        if (data[0] && data[1] != 8) return -EINVAL;
        kernel_mask = data[0];
    }
    return errno_as_kernel(tc_pselect6((int)count, (fd_set *)read, (fd_set *)write, (fd_set *)except,
                                       (struct timespec *)timeout, libc_mask(kernel_mask, &mask)));
}

static long epoll_pwait2_call(long epoll_fd, long events, long capacity, long timeout, long kernel_mask,
                              long mask_size) {
    if (kernel_mask && mask_size != 8) return -EINVAL;
    sigset_t mask;
    return errno_as_kernel(tc_epoll_pwait2((int)epoll_fd, (struct epoll_event *)events, (int)capacity,
                                           (const struct timespec *)timeout, libc_mask(kernel_mask, &mask)));
}

/*
 * Setting the clock (SPEC §2): the raw call would move the host's clock (as root), so it moves the session, by
 * the same rules as libc's clock_settime and its kin (settime.c); adjtimex reads answer as libc's do.
 */
static long settime_call(long number, long a1, long a2) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_raw_syscall(number, a1, a2);
    return tc_syscall_settime(segment, number, a1, a2);
}

/* A static program asking where its executable is (Go's os.Executable, filepath.EvalSymlinks of
   /proc/self/exe) is told its own path, not the loader's. */
static long readlink_call(long number, long a1, long a2, long a3, long a4) {
    const char *path = (const char *)(number == SYS_readlink ? a1 : a2);
    char *buffer = (char *)(number == SYS_readlink ? a2 : a3);
    long size = number == SYS_readlink ? a3 : a4;
    const char *executable;
    if (!tc_static_program_names_executable(path) || !tc_static_program_executable(&executable))
        return tc_raw_syscall(number, a1, a2, a3, a4);
    if (size <= 0) return -EINVAL;
    long length = (long)strlen(executable);
    if (length > size) length = size;
    memcpy(buffer, executable, (size_t)length);
    return length;
}

static long sigaction_call(long signal, long action, long old_action, long size) {
    if (size != 8) return tc_raw_syscall(SYS_rt_sigaction, signal, action, old_action, size);
    if (signal == SIGSYS) {
        struct tc_kernel_sigaction previous = application_sigsys;
        if (action) application_sigsys = *(const struct tc_kernel_sigaction *)action;
        if (old_action) *(struct tc_kernel_sigaction *)old_action = previous;
        return 0;
    }
    struct tc_kernel_sigaction without_sigsys;
    if (action && (((const struct tc_kernel_sigaction *)action)->mask & SIGSYS_BIT)) {
        without_sigsys = *(const struct tc_kernel_sigaction *)action;
        without_sigsys.mask &= ~SIGSYS_BIT;
        action = (long)&without_sigsys;
    }
    if (static_program)
        return tc_static_sigaction(signal, (const struct tc_kernel_sigaction *)action,
                                   (struct tc_kernel_sigaction *)old_action);
    return tc_raw_syscall(SYS_rt_sigaction, signal, action, old_action, size);
}

/*
 * The thread's mask is what rt_sigreturn restores from the signal frame when
 * the handler returns, so the change is made there: a mask set with the
 * system call inside the handler would be undone.
 */
static long sigprocmask_call(long how, long set, long old_set, long size, ucontext_t *context) {
    if (size != 8) return -EINVAL;
    uint64_t current, next;
    memcpy(&current, &context->uc_sigmask, sizeof(current));
    next = current;
    if (set) {
        uint64_t requested = *(const uint64_t *)set;
        switch (how) {
        case SIG_BLOCK: next |= requested; break;
        case SIG_UNBLOCK: next &= ~requested; break;
        case SIG_SETMASK: next = requested; break;
        default: return -EINVAL;
        }
        next &= ~(SIGSYS_BIT | (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)));
    }
    if (old_set) *(uint64_t *)old_set = current;
    memcpy(&context->uc_sigmask, &next, sizeof(next));
    return 0;
}

/*
 * A static program's fork (its libc's clone(SIGCHLD | CLONE_CHILD_*TID, stack 0), or fork) is made by the
 * shim's libc instead, as a dynamic program's fork is: its pthread_atfork handlers (shim.c) register the child
 * in the session's process table, take the trace's child ordinal and give the child its own waits, timers and
 * threads (static_program.c), and that libc's fork leaves its own thread list and locks right for the child,
 * which starts threads of the shim's. The flags the filter lets through are emulated: the tid words the
 * program's libc asked the kernel to write, and to clear at exit. The child returns through this handler on
 * the same stack, as from the raw call.
 */
static long fork_call(long number, long flags, long parent_tid, long child_tid) {
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (number != SYS_clone) return pid;
    if (pid == 0) {
        long tid = tc_raw_syscall(SYS_gettid, 0);
        if (flags & CLONE_CHILD_SETTID) *(int32_t *)child_tid = (int32_t)tid;
        if (flags & CLONE_CHILD_CLEARTID) tc_raw_syscall(SYS_set_tid_address, child_tid);
    } else if (flags & CLONE_PARENT_SETTID) {
        *(int32_t *)parent_tid = pid;
    }
    return pid;
}

/*
 * os/exec starts programs with raw execs: checked as libc's are, so an uncontrollable program is refused
 * rather than started under this filter, which would kill it with SIGSYS at its first wait, and a static
 * one is started through the loader. Stack and raw system calls only (static_program.c calls it on the
 * program's own FS).
 */
static long exec_call(long number, const greg_t *r) {
    if (number == SYS_execve)
        return tc_exec_checked(AT_FDCWD, (const char *)r[REG_RDI], (char *const *)r[REG_RSI], (char *const *)r[REG_RDX], 0);
    return tc_exec_checked((int)r[REG_RDI], (const char *)r[REG_RSI], (char *const *)r[REG_RDX],
                           (char *const *)r[REG_R10], (int)r[REG_R8]);
}

static long emulate(long number, const greg_t *r, ucontext_t *context) {
    long a1 = r[REG_RDI], a2 = r[REG_RSI], a3 = r[REG_RDX], a4 = r[REG_R10], a5 = r[REG_R8], a6 = r[REG_R9];
    switch (number) {
    case SYS_futex:
        if ((a2 & FUTEX_CMD_MASK) == FUTEX_WAIT && is_backoff((const struct timespec *)a4))
            return tc_runtime_backoff_futex(a1, a2, a3, a4); /* real time; may creep (starvation.c) */
        return futex_wait((const uint32_t *)a1, (int)a2, (uint32_t)a3, (const struct timespec *)a4);
    case SYS_nanosleep:
        if (is_backoff((const struct timespec *)a1)) break;
        return sleep_call(number, a1, a2, a3, a4);
    case SYS_clock_nanosleep: return sleep_call(number, a1, a2, a3, a4);
    case SYS_epoll_wait: return epoll_call(a1, a2, a3, a4, 0, 0);
    case SYS_epoll_pwait: return epoll_call(a1, a2, a3, a4, a5, a6);
    case SYS_poll: return errno_as_kernel(tc_poll((struct pollfd *)a1, (nfds_t)a2, (int)a3));
    case SYS_ppoll: return ppoll_call(a1, a2, a3, a4, a5);
    case SYS_select:
        return errno_as_kernel(tc_select((int)a1, (fd_set *)a2, (fd_set *)a3, (fd_set *)a4, (struct timeval *)a5));
    case SYS_pselect6: return pselect_call(a1, a2, a3, a4, a5, a6);
    case SYS_epoll_pwait2: return epoll_pwait2_call(a1, a2, a3, a4, a5, a6);
    case SYS_readlink:
    case SYS_readlinkat: return readlink_call(number, a1, a2, a3, a4);
    case SYS_rt_sigaction: return sigaction_call(a1, a2, a3, a4);
    case SYS_rt_sigprocmask: return sigprocmask_call(a1, a2, a3, a4, context);
    case SYS_execve:
    case SYS_execveat: return exec_call(number, r);
    case SYS_fork:
    case SYS_clone: return fork_call(number, a1, a3, a4);
    case SYS_clock_settime:
    case SYS_settimeofday:
    case SYS_adjtimex:
    case SYS_clock_adjtime: return settime_call(number, a1, a2);
    case SYS_timerfd_create:
    case SYS_timerfd_settime:
    case SYS_timerfd_gettime:
    case SYS_timer_create:
    case SYS_timer_settime:
    case SYS_timer_gettime:
    case SYS_timer_getoverrun:
    case SYS_timer_delete:
    case SYS_alarm:
    case SYS_setitimer:
    case SYS_getitimer: return tc_timers_syscall(number, a1, a2, a3, a4);
    default: break;
    }
    return tc_raw_syscall6(number, a1, a2, a3, a4, a5, a6);
}

/* A SIGSYS that is not one of our traps goes where the program sent SIGSYS. */
static void forward(int signal, siginfo_t *info, void *context) {
    struct tc_kernel_sigaction action = application_sigsys;
    if (action.handler == SIG_IGN) return;
    if (action.handler == SIG_DFL) {
        struct tc_kernel_sigaction default_action = {.handler = SIG_DFL};
        tc_raw_syscall(SYS_rt_sigaction, SIGSYS, &default_action, NULL, 8);
        tc_raw_syscall(SYS_tgkill, tc_raw_syscall(SYS_getpid, 0), tc_raw_syscall(SYS_gettid, 0), SIGSYS);
        return;
    }
    if (action.flags & SA_SIGINFO) ((void (*)(int, siginfo_t *, void *))action.handler)(signal, info, context);
    else ((void (*)(int))action.handler)(signal);
}

int tc_syscall_trap_is_ours(const siginfo_t *info) { return info->si_code == SYS_SECCOMP && info->si_errno == TRAP_TAG; }

void tc_syscall_trap_exec(const siginfo_t *info, void *context) {
    greg_t *registers = ((ucontext_t *)context)->uc_mcontext.gregs;
    registers[REG_RAX] = exec_call(info->si_syscall, registers);
}

void tc_syscall_trap_handle(int signal, siginfo_t *info, void *context) {
    if (!tc_syscall_trap_is_ours(info)) {
        forward(signal, info, context);
        return;
    }
    int saved_errno = errno;
    ucontext_t *frame = context;
    greg_t *registers = frame->uc_mcontext.gregs;
    registers[REG_RAX] = emulate(info->si_syscall, registers, frame);
    errno = saved_errno;
}

static int install_handler(void (*handler)(int, siginfo_t *, void *)) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = handler;
    /* NODEFER: a wait's own handler may trap again (nested signals during the wait). */
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    if (tc_real.sigaction(SIGSYS, &action, NULL) != 0) return 0;
    __atomic_store_n(&handling_sigsys, 1, __ATOMIC_RELEASE);
    return 1;
}

/* ---- the filter ---- */

#define DATA(field) offsetof(struct seccomp_data, field)
#define ARG_LOW(n) (DATA(args) + 8 * (n))
#define ARG_HIGH(n) (DATA(args) + 8 * (n) + 4)
#define IP_LOW DATA(instruction_pointer)
#define IP_HIGH (DATA(instruction_pointer) + 4)

/* A tiny assembler: jumps name labels, resolved into BPF's relative offsets. */
enum label { NEXT = 0, ALLOW, TRAP, FUTEX, TIMEOUT, EPOLL, SIGMASK, POLL, POINTER2, POINTER3, POINTER4, CLONE, LABELS };

struct step {
    uint16_t code;
    uint32_t k;
    uint8_t when_true, when_false; /* labels; NEXT falls through */
    int8_t defines;                /* the label this instruction carries, or 0 */
};

#define LOAD(offset) {BPF_LD | BPF_W | BPF_ABS, (uint32_t)(offset), NEXT, NEXT, 0}
#define JUMP_IF(op, value, t, f) {BPF_JMP | op | BPF_K, (uint32_t)(value), t, f, 0}
/* At `label` (NEXT: none): trap when 64-bit argument `n` is not 0 (a timeout pointer; NULL waits with no time). */
#define TRAP_IF_ARG_SET(label, n)                                    \
    {BPF_LD | BPF_W | BPF_ABS, ARG_LOW(n), NEXT, NEXT, label},      \
    JUMP_IF(BPF_JEQ, 0, NEXT, TRAP), LOAD(ARG_HIGH(n)), JUMP_IF(BPF_JEQ, 0, ALLOW, TRAP)
/* At `label`: trap when int argument `n`, a timeout in ms, is > 0 (0 polls, a negative one waits with no time). */
#define TRAP_IF_MS_POSITIVE(label, n)                                \
    {BPF_LD | BPF_W | BPF_ABS, ARG_LOW(n), NEXT, NEXT, label},      \
    JUMP_IF(BPF_JEQ, 0, ALLOW, NEXT), JUMP_IF(BPF_JGE, 0x80000000u, ALLOW, TRAP)

/* A number no system call has: the static programs' extra checks compare against it in a Go program's filter. */
#define NO_SYSCALL 0xffffffffu

static int build_filter(uintptr_t text_start, uintptr_t text_end, struct sock_filter *out, size_t capacity) {
    /* Compared in 32-bit halves: the text must not cross (or end on) a 4 GiB boundary. */
    if ((text_start >> 32) != (text_end >> 32)) return 0;
    /* A static C program waits through its own libc's raw calls: poll, select and their kin too. */
    /* And it forks by itself (fork_call). */
    uint32_t only_static[] = {SYS_poll,     SYS_ppoll,      SYS_select, SYS_pselect6, SYS_epoll_pwait2,
                              SYS_readlink, SYS_readlinkat, SYS_fork,   SYS_clone};
    if (!static_program)
        for (size_t i = 0; i < sizeof(only_static) / sizeof(only_static[0]); i++) only_static[i] = NO_SYSCALL;
    const struct step steps[] = {
        LOAD(DATA(arch)),
        JUMP_IF(BPF_JEQ, AUDIT_ARCH_X86_64, NEXT, ALLOW),
        /* Only calls made from the Go executable's own code. */
        LOAD(IP_HIGH),
        JUMP_IF(BPF_JEQ, text_start >> 32, NEXT, ALLOW),
        LOAD(IP_LOW),
        JUMP_IF(BPF_JGE, (uint32_t)text_start, NEXT, ALLOW),
        JUMP_IF(BPF_JGE, (uint32_t)text_end, ALLOW, NEXT),
        LOAD(DATA(nr)),
        JUMP_IF(BPF_JEQ, SYS_futex, FUTEX, NEXT),
        JUMP_IF(BPF_JEQ, SYS_nanosleep, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_clock_nanosleep, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_epoll_wait, EPOLL, NEXT),
        JUMP_IF(BPF_JEQ, SYS_epoll_pwait, EPOLL, NEXT),
        JUMP_IF(BPF_JEQ, SYS_rt_sigaction, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_execve, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_execveat, TRAP, NEXT),
        /* Setting the clock: the session's, never the host's. */
        JUMP_IF(BPF_JEQ, SYS_clock_settime, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_settimeofday, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_adjtimex, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_clock_adjtime, TRAP, NEXT),
        /* Timers that are not waits: run on the session's timeline by timers.c. */
        JUMP_IF(BPF_JEQ, SYS_timerfd_create, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timerfd_settime, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timerfd_gettime, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timer_create, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timer_settime, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timer_gettime, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timer_getoverrun, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_timer_delete, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_alarm, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_setitimer, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_getitimer, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, only_static[0], POLL, NEXT),
        JUMP_IF(BPF_JEQ, only_static[1], POINTER2, NEXT),
        JUMP_IF(BPF_JEQ, only_static[2], POINTER4, NEXT),
        JUMP_IF(BPF_JEQ, only_static[3], POINTER4, NEXT),
        JUMP_IF(BPF_JEQ, only_static[4], POINTER3, NEXT),
        JUMP_IF(BPF_JEQ, only_static[5], TRAP, NEXT),
        JUMP_IF(BPF_JEQ, only_static[6], TRAP, NEXT),
        JUMP_IF(BPF_JEQ, only_static[7], TRAP, NEXT),
        JUMP_IF(BPF_JEQ, only_static[8], CLONE, NEXT),
        JUMP_IF(BPF_JEQ, SYS_rt_sigprocmask, SIGMASK, ALLOW),
        /* futex: only waits that have a timeout. */
        {BPF_LD | BPF_W | BPF_ABS, ARG_LOW(1), NEXT, NEXT, FUTEX},
        {BPF_ALU | BPF_AND | BPF_K, ~(uint32_t)(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME), NEXT, NEXT, 0},
        JUMP_IF(BPF_JEQ, FUTEX_WAIT, TIMEOUT, NEXT),
        JUMP_IF(BPF_JEQ, FUTEX_WAIT_BITSET, TIMEOUT, ALLOW),
        TRAP_IF_ARG_SET(TIMEOUT, 3),
        /* epoll_wait/epoll_pwait, poll: only a timeout > 0. */
        TRAP_IF_MS_POSITIVE(EPOLL, 3),
        TRAP_IF_MS_POSITIVE(POLL, 2),
        /* rt_sigprocmask: only a change (a set given) that could block SIGSYS. */
        {BPF_LD | BPF_W | BPF_ABS, ARG_LOW(0), NEXT, NEXT, SIGMASK},
        JUMP_IF(BPF_JEQ, SIG_UNBLOCK, ALLOW, NEXT),
        TRAP_IF_ARG_SET(NEXT, 1),
        /* ppoll, select, pselect6, epoll_pwait2: only with a timeout (a pointer; NULL waits with no time). */
        TRAP_IF_ARG_SET(POINTER2, 2),
        TRAP_IF_ARG_SET(POINTER3, 3),
        TRAP_IF_ARG_SET(POINTER4, 4),
        /* clone: only a fork, as libc makes it (fork_call): a new process (no CLONE_VM, so never a thread nor a
           vfork), no flags but the tid words, SIGCHLD at exit, and no new stack (the child returns through the
           handler's frame). */
        {BPF_LD | BPF_W | BPF_ABS, ARG_LOW(0), NEXT, NEXT, CLONE},
        {BPF_ALU | BPF_AND | BPF_K, ~(uint32_t)(CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | CLONE_PARENT_SETTID), NEXT, NEXT, 0},
        JUMP_IF(BPF_JEQ, SIGCHLD, NEXT, ALLOW),
        LOAD(ARG_HIGH(0)),
        JUMP_IF(BPF_JEQ, 0, NEXT, ALLOW),
        LOAD(ARG_LOW(1)),
        JUMP_IF(BPF_JEQ, 0, NEXT, ALLOW),
        LOAD(ARG_HIGH(1)),
        JUMP_IF(BPF_JEQ, 0, TRAP, ALLOW),
        {BPF_RET | BPF_K, SECCOMP_RET_ALLOW, NEXT, NEXT, ALLOW},
        {BPF_RET | BPF_K, SECCOMP_RET_TRAP | TRAP_TAG, NEXT, NEXT, TRAP},
    };
    size_t count = sizeof(steps) / sizeof(steps[0]);
    if (count > capacity) return 0;
    size_t where[LABELS] = {0};
    for (size_t i = 0; i < count; i++)
        if (steps[i].defines) where[steps[i].defines] = i;
    for (size_t i = 0; i < count; i++) {
        size_t t = steps[i].when_true == NEXT ? i + 1 : where[steps[i].when_true];
        size_t f = steps[i].when_false == NEXT ? i + 1 : where[steps[i].when_false];
        if (t <= i || f <= i || t - i - 1 > 255 || f - i - 1 > 255) return 0;
        out[i] = (struct sock_filter){steps[i].code, (uint8_t)(t - i - 1), (uint8_t)(f - i - 1), steps[i].k};
    }
    return (int)count;
}

/* The span of the main executable's executable segments (AT_PHDR). */
static int executable_text(uintptr_t *start, uintptr_t *end) {
    unsigned long count;
    uintptr_t bias;
    const ElfW(Phdr) *phdrs = tc_executable_phdrs(&count, &bias);
    *start = UINTPTR_MAX;
    *end = 0;
    for (unsigned long i = 0; i < count; i++) {
        if (phdrs[i].p_type != PT_LOAD || !(phdrs[i].p_flags & PF_X)) continue;
        uintptr_t low = bias + phdrs[i].p_vaddr, high = low + phdrs[i].p_memsz;
        if (low < *start) *start = low;
        if (high > *end) *end = high;
    }
    return *end > *start;
}

/* The code the filter this process installed traps calls from (it survives exec): both 0 when none. */
static uintptr_t filtered_text_start, filtered_text_end;

int tc_syscall_trap_filtered_text(uintptr_t *start, uintptr_t *end) {
    *start = __atomic_load_n(&filtered_text_start, __ATOMIC_ACQUIRE);
    *end = __atomic_load_n(&filtered_text_end, __ATOMIC_ACQUIRE);
    return *end > *start;
}

static const char *install_filter(uintptr_t start, uintptr_t end, void (*handler)(int, siginfo_t *, void *)) {
    struct sock_filter instructions[96];
    int count = build_filter(start, end, instructions, sizeof(instructions) / sizeof(instructions[0]));
    if (count == 0) return "has its code where the system call filter cannot describe it";
    if (!install_handler(handler)) return "could not get a SIGSYS handler";
    struct sock_fprog program = {(unsigned short)count, instructions};
    long result = tc_raw_syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program);
    if (result == -EACCES) {
        /* Without CAP_SYS_ADMIN a filter needs no_new_privs (setuid programs it execs would not gain privileges). */
        tc_raw_syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        result = tc_raw_syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program);
    }
    if (result != 0) return "could not install its system call filter (seccomp)";
    __atomic_store_n(&filtered_text_start, start, __ATOMIC_RELEASE);
    __atomic_store_n(&filtered_text_end, end, __ATOMIC_RELEASE);
    return NULL;
}

const char *tc_syscall_trap_install(void) {
    uintptr_t start, end;
    if (!executable_text(&start, &end)) return "has no executable segment to watch";
    return install_filter(start, end, tc_syscall_trap_handle);
}

const char *tc_syscall_trap_install_static(uintptr_t text_start, uintptr_t text_end, int is_go) {
    static_program = 1;
    program_is_go = is_go;
    return install_filter(text_start, text_end, tc_static_sigsys_entry);
}

void tc_syscall_trap_adopt(void) {
    if (tc_raw_syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) == SECCOMP_MODE_FILTER)
        install_handler(tc_syscall_trap_handle);
}

#else

const char *tc_syscall_trap_install(void) { return "is not supported on this architecture (x86-64 only)"; }
const char *tc_syscall_trap_install_static(uintptr_t text_start, uintptr_t text_end, int is_go) {
    (void)text_start, (void)text_end, (void)is_go;
    return "is not supported on this architecture (x86-64 only)";
}
void tc_syscall_trap_adopt(void) {}
int tc_syscall_trap_active(void) { return 0; }
int tc_syscall_trap_filtered_text(uintptr_t *start, uintptr_t *end) {
    *start = *end = 0;
    return 0;
}
void tc_syscall_trap_record_sigsys(const struct sigaction *action, struct sigaction *old) { (void)action; (void)old; }

#endif

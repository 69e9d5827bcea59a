/*
 * Raw timed waits of Go programs (docs/go-and-static.md). Go's runtime
 * sleeps, waits for timers and polls the network with its own system calls
 * — futex with a timeout (notetsleep), epoll_pwait with a timeout
 * (netpoll), nanosleep (usleep) — never through libc, so interposing libc
 * cannot see them. In a Go program the shim installs a seccomp filter that
 * traps exactly those calls, and only when they are made from the Go
 * executable's own code; a SIGSYS handler then answers them through the
 * system-call table (calls/syscall_table.c), the same one libc's syscall()
 * dispatches through, and writes the result where the kernel would have.
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
 * are trapped too (calls/process_calls.c), and a SIGSYS that is not ours goes to
 * what the program installed.
 *
 * Setting the clock (clock_settime, settimeofday, adjtimex, clock_adjtime) is a raw call too, which as root
 * would move the host's clock: trapped always, and answered by calls/settime.c's rules (the session's clock moves).
 *
 * A wait interrupted by a signal handler (Go's SIGURG preemption) returns
 * EINTR, which the runtime's callers all retry or ignore.
 */
#define _GNU_SOURCE
#include "syscall_trap.h"
#include "../calls/process_calls.h"
#include "../calls/syscall_table.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"

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

#if defined(__x86_64__) || defined(__aarch64__)

/*
 * What differs between the architectures: where a trapped call's arguments
 * and result are in the signal frame, the filter's architecture, and the
 * older system calls that x86-64 keeps beside their successors (aarch64's
 * generic table has only ppoll, pselect6, epoll_pwait, readlinkat and
 * clone; its libc makes poll, select, epoll_wait, readlink and fork of them).
 */
#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#define ARGUMENT_REGISTERS(r) {r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10], r[REG_R8], r[REG_R9]}
#define RESULT_REGISTER(context) (((ucontext_t *)(context))->uc_mcontext.gregs[REG_RAX])
#define REGISTERS(context) ((const long long *)((ucontext_t *)(context))->uc_mcontext.gregs)
#define NR_POLL SYS_poll
#define NR_SELECT SYS_select
#define NR_EPOLL_WAIT SYS_epoll_wait
#define NR_ALARM SYS_alarm
#define NR_READLINK SYS_readlink
#define NR_FORK SYS_fork
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
/* x0–x5 carry the arguments, x8 the number; the result goes back in x0. */
#define ARGUMENT_REGISTERS(r) {(long)r[0], (long)r[1], (long)r[2], (long)r[3], (long)r[4], (long)r[5]}
#define RESULT_REGISTER(context) (((ucontext_t *)(context))->uc_mcontext.regs[0])
#define REGISTERS(context) ((const unsigned long long *)((ucontext_t *)(context))->uc_mcontext.regs)
#define NR_POLL NO_SYSCALL
#define NR_SELECT NO_SYSCALL
#define NR_EPOLL_WAIT NO_SYSCALL
#define NR_ALARM NO_SYSCALL
#define NR_READLINK NO_SYSCALL
#define NR_FORK NO_SYSCALL
#endif

/* A number no system call has: the filter compares against it where an architecture lacks a call. */
#define NO_SYSCALL 0xffffffffu

/* SECCOMP_RET_DATA of our traps: si_errno tells our SIGSYS from another filter's. */
#define TRAP_TAG 0x7c1
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1 /* si_code of a SIGSYS raised by SECCOMP_RET_TRAP */
#endif

/* A static program run by the loader (attach/static_takeover.c) is trapped here; whether it is a Go program. */
static int static_program, program_is_go = 1;

/* A trapped call, with the trap's registers as its arguments. */
static struct tc_syscall trapped(long number, ucontext_t *context) {
    struct tc_syscall call = {number, ARGUMENT_REGISTERS(REGISTERS(context)), TC_DOOR_TRAP, program_is_go, context};
    return call;
}

/* A SIGSYS that is not one of our traps goes where the program sent SIGSYS. */
static void forward(int signal, siginfo_t *info, void *context) {
    struct tc_kernel_sigaction action = tc_process_application_sigsys();
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
    struct tc_syscall call = trapped(info->si_syscall, context);
    RESULT_REGISTER(context) = tc_process_exec(call.number, call.arg);
}

void tc_syscall_trap_handle(int signal, siginfo_t *info, void *context) {
    if (!tc_syscall_trap_is_ours(info)) {
        forward(signal, info, context);
        return;
    }
    int saved_errno = errno;
    struct tc_syscall call = trapped(info->si_syscall, context);
    RESULT_REGISTER(context) = tc_syscall_dispatch(&call);
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
    tc_syscall_trap_note_active();
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

static int build_filter(uintptr_t text_start, uintptr_t text_end, struct sock_filter *out, size_t capacity) {
    /* Compared in 32-bit halves: the text must not cross (or end on) a 4 GiB boundary. */
    if ((text_start >> 32) != (text_end >> 32)) return 0;
    /* A static C program waits through its own libc's raw calls: poll, select and their kin too. */
    /* And it forks by itself (fork_call). */
    /* And it waits on semaphores, message queues and signals with timeouts through raw calls too. */
    /* In the order of their checks below, which name them by index. */
    uint32_t only_static[] = {NR_POLL,        SYS_ppoll,           NR_SELECT,           SYS_pselect6,
                              SYS_epoll_pwait2, NR_READLINK,       SYS_readlinkat,      NR_FORK,
                              SYS_clone,      SYS_semtimedop,      SYS_rt_sigtimedwait, SYS_mq_timedreceive,
                              SYS_mq_timedsend};
    /* In a Go program's filter the static programs' extra checks compare against NO_SYSCALL. */
    if (!static_program)
        for (size_t i = 0; i < sizeof(only_static) / sizeof(only_static[0]); i++) only_static[i] = NO_SYSCALL;
    const struct step steps[] = {
        LOAD(DATA(arch)),
        JUMP_IF(BPF_JEQ, FILTER_ARCH, NEXT, ALLOW),
        /* Only calls made from the Go executable's own code. */
        LOAD(IP_HIGH),
        JUMP_IF(BPF_JEQ, text_start >> 32, NEXT, ALLOW),
        LOAD(IP_LOW),
        JUMP_IF(BPF_JGE, (uint32_t)text_start, NEXT, ALLOW),
        JUMP_IF(BPF_JGE, (uint32_t)text_end, ALLOW, NEXT),
        LOAD(DATA(nr)),
        JUMP_IF(BPF_JEQ, SYS_futex, FUTEX, NEXT),
        JUMP_IF(BPF_JEQ, SYS_futex_waitv, POINTER3, NEXT),
        JUMP_IF(BPF_JEQ, SYS_nanosleep, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, SYS_clock_nanosleep, TRAP, NEXT),
        JUMP_IF(BPF_JEQ, NR_EPOLL_WAIT, EPOLL, NEXT),
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
        JUMP_IF(BPF_JEQ, NR_ALARM, TRAP, NEXT),
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
        JUMP_IF(BPF_JEQ, only_static[9], POINTER3, NEXT),
        JUMP_IF(BPF_JEQ, only_static[10], POINTER2, NEXT),
        JUMP_IF(BPF_JEQ, only_static[11], POINTER4, NEXT),
        JUMP_IF(BPF_JEQ, only_static[12], POINTER4, NEXT),
        JUMP_IF(BPF_JEQ, SYS_rt_sigprocmask, SIGMASK, ALLOW),
        /* futex: only waits that have a timeout. */
        {BPF_LD | BPF_W | BPF_ABS, ARG_LOW(1), NEXT, NEXT, FUTEX},
        {BPF_ALU | BPF_AND | BPF_K, ~(uint32_t)(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME), NEXT, NEXT, 0},
        JUMP_IF(BPF_JEQ, FUTEX_WAIT, TIMEOUT, NEXT),
        JUMP_IF(BPF_JEQ, FUTEX_WAIT_BITSET, TIMEOUT, NEXT),
        JUMP_IF(BPF_JEQ, FUTEX_LOCK_PI, TIMEOUT, NEXT),
        JUMP_IF(BPF_JEQ, FUTEX_LOCK_PI2, TIMEOUT, NEXT),
        JUMP_IF(BPF_JEQ, FUTEX_WAIT_REQUEUE_PI, TIMEOUT, ALLOW),
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
    tc_syscall_trap_note_filtered_text(start, end);
    return NULL;
}

const char *tc_syscall_trap_install(void) {
    uintptr_t start, end;
    if (!executable_text(&start, &end)) return "has no executable segment to watch";
    return install_filter(start, end, tc_syscall_trap_handle);
}

const char *tc_syscall_trap_install_static(uintptr_t text_start, uintptr_t text_end, int is_go,
                                          void (*handler)(int, siginfo_t *, void *)) {
    static_program = 1;
    program_is_go = is_go;
    return install_filter(text_start, text_end, handler);
}

void tc_syscall_trap_adopt(void) {
    if (tc_raw_syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) == SECCOMP_MODE_FILTER)
        install_handler(tc_syscall_trap_handle);
}

#else
#error "timectl supports x86_64 and aarch64 Linux"
#endif

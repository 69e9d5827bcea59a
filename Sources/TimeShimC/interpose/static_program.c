/*
 * Statically linked programs run by timectl-static-loader
 * (loader/static_loader.c; docs/go-and-static.md, "Static programs").
 *
 * The loader is a dynamically linked C program with the shim preloaded: the
 * shim attaches in it as in any process. The loader maps the static
 * program, calls timectl_static_program_prepare below, and jumps to the
 * program's entry point. From then on the process runs the program's code
 * with the program's own libc (or Go's runtime), and the shim is reached in
 * two ways only: the vDSO's clock symbols (redirected, as for Go programs),
 * and SIGSYS for the program's trapped system calls.
 *
 * The difficulty is thread-local storage. The program sets its threads'
 * FS base itself (arch_prctl, or clone with CLONE_SETTLS), so in its
 * threads FS is not a TCB of the shim's libc: errno, the shim's __thread
 * variables, pthread_* calls would all read and write the program's memory.
 * So:
 *  - the vDSO entries for static programs use no thread-local state at all
 *    (clock.c, tc_vdso_static_entry_*: loads and arithmetic); recording and
 *    replay keep their per-thread state in slots keyed by thread id
 *    (trace_registry.h), in the vDSO entries and the trapped calls alike;
 *  - the SIGSYS handler borrows a TCB of the shim's libc for the length of
 *    one trapped call: each belongs to a thread the shim started while the
 *    loader ran ("lenders", which then block for ever with every signal
 *    blocked, so their TCBs are never in use by them), its FS base is
 *    swapped in (wrfsbase when the kernel allows it, else arch_prctl) and
 *    the program's put back before the handler returns. The lenders are
 *    started before the program runs: the loader's libc must never move the
 *    program break once the program's malloc owns it;
 *  - a program's signal handler must not run on a borrowed TCB (Go's
 *    handlers find the goroutine through FS). The program's rt_sigaction
 *    calls are trapped, and every handler it installs runs behind a wrapper
 *    that, when the signal arrives inside a trapped call, puts the
 *    program's FS back around the handler. The wrapper also counts the
 *    handler for the interrupted wait (signals.c), so the wait ends with
 *    EINTR as it would have, and tells timers.c that a virtual POSIX
 *    timer's signal was taken (its overrun).
 *  - an exec needs no TCB (tc_exec_checked uses the stack and raw system
 *    calls), and must not take one: in a vfork child that shares the
 *    program's memory, a TCB taken before a successful exec would never be
 *    given back.
 */
#define _GNU_SOURCE
#include "shim.h"
#include "static_program.h"
#include "trace.h"
#include "waiter.h"
#include "timectl_program_support.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>

#if defined(__x86_64__)

#include <asm/prctl.h>

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

/* Code that runs on the program's FS must not read the stack protector's canary through it. */
#if defined(__has_attribute)
#if __has_attribute(no_stack_protector)
#define TC_FOREIGN_FS __attribute__((no_stack_protector, noinline))
#endif
#endif
#ifndef TC_FOREIGN_FS
#define TC_FOREIGN_FS __attribute__((noinline))
#endif

/* How many trapped calls can be in progress at once; one more waits for one of them to end. */
#define LENDERS 16

struct lender {
    uintptr_t tcb;          /* the lender thread's FS base */
    uintptr_t program_fs;   /* while borrowed: the borrowing thread's own FS base */
    int busy;
};

static struct lender lenders[LENDERS];
static int lender_count;
static uint32_t lenders_returned;  /* futex word: bumped each time a TCB is given back */
static uint32_t lenders_ready;     /* futex word: lenders that have published their TCB */
static uint32_t lenders_park;      /* futex word the lenders block on, never woken */
static int fsgsbase;
static int active;
static char program_path[4096];

int tc_static_program_active(void) { return __atomic_load_n(&active, __ATOMIC_ACQUIRE); }

__attribute__((always_inline)) static inline uintptr_t fs_base(void) {
    uintptr_t value;
    if (fsgsbase) {
        __asm__ volatile("rdfsbase %0" : "=r"(value));
    } else {
        value = 0;
        tc_raw_syscall(SYS_arch_prctl, ARCH_GET_FS, &value);
    }
    return value;
}

__attribute__((always_inline)) static inline void set_fs_base(uintptr_t value) {
    if (fsgsbase) __asm__ volatile("wrfsbase %0" : : "r"(value) : "memory");
    else tc_raw_syscall(SYS_arch_prctl, ARCH_SET_FS, value);
}

static void *lend(void *argument) {
    struct lender *lender = argument;
    uintptr_t tcb;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tcb));  /* the TCB's self pointer: its FS base */
    prctl(PR_SET_NAME, "timectl-tls", 0, 0, 0);
    __atomic_store_n(&lender->tcb, tcb, __ATOMIC_RELEASE);
    __atomic_fetch_add(&lenders_ready, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &lenders_ready, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
    for (;;) tc_raw_syscall(SYS_futex, &lenders_park, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
    return NULL;
}

static int start_lenders(void) {
    int started = 0;
    while (started < LENDERS && tc_start_shim_thread(lend, &lenders[started], 64 * 1024) == 0) started++;
    uint32_t ready;
    while ((ready = __atomic_load_n(&lenders_ready, __ATOMIC_ACQUIRE)) < (uint32_t)started)
        tc_raw_syscall(SYS_futex, &lenders_ready, FUTEX_WAIT_PRIVATE, ready, 0, 0, 0);
    lender_count = started;
    return started;
}

TC_FOREIGN_FS static struct lender *borrow(void) {
    for (;;) {
        uint32_t returned = __atomic_load_n(&lenders_returned, __ATOMIC_ACQUIRE);
        for (int i = 0; i < lender_count; i++) {
            int expected = 0;
            if (__atomic_load_n(&lenders[i].busy, __ATOMIC_RELAXED) == 0 &&
                __atomic_compare_exchange_n(&lenders[i].busy, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return &lenders[i];
        }
        tc_raw_syscall(SYS_futex, &lenders_returned, FUTEX_WAIT_PRIVATE, returned, 0, 0, 0);
    }
}

TC_FOREIGN_FS static void give_back(struct lender *lender) {
    __atomic_store_n(&lender->busy, 0, __ATOMIC_RELEASE);
    __atomic_fetch_add(&lenders_returned, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &lenders_returned, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
}

/* The borrowed TCB this thread runs on now, or NULL when FS is the program's. */
TC_FOREIGN_FS static struct lender *borrowed_now(void) {
    uintptr_t fs = fs_base();
    for (int i = 0; i < lender_count; i++)
        if (__atomic_load_n(&lenders[i].busy, __ATOMIC_ACQUIRE) && lenders[i].tcb == fs) return &lenders[i];
    return NULL;
}

/* On a borrowed TCB (called through a function pointer: nothing of it may be computed before the swap). */
__attribute__((noinline)) static void handle_on_own_tls(int signal, siginfo_t *info, void *context, int32_t tid) {
    tc_gettid_adopt(tid);
    tc_syscall_trap_handle(signal, info, context);
}

static void (*volatile handle_on_own_tls_pointer)(int, siginfo_t *, void *, int32_t) = handle_on_own_tls;

TC_FOREIGN_FS void tc_static_sigsys_entry(int signal, siginfo_t *info, void *context) {
    if (!tc_syscall_trap_is_ours(info)) {
        tc_syscall_trap_handle(signal, info, context);  /* forwarded to the program's SIGSYS: no TLS on that path */
        return;
    }
    if (info->si_syscall == SYS_execve || info->si_syscall == SYS_execveat) {
        tc_syscall_trap_exec(info, context);
        return;
    }
    uintptr_t program_fs = fs_base();
    int32_t tid = (int32_t)tc_raw_syscall(SYS_gettid, 0);
    struct lender *lender = borrow();
    lender->program_fs = program_fs;
    set_fs_base(lender->tcb);
    handle_on_own_tls_pointer(signal, info, context, tid);
    set_fs_base(program_fs);
    give_back(lender);
}

/* ---- the program's signal handlers ---- */

/* What the program installed, per signal, while the wrapper stands in for it. */
static void *program_handlers[65];

TC_FOREIGN_FS static void count_handled_signal(void) {
    uint32_t *(*volatile counter)(void) = tc_thread_handled_signals;
    __atomic_fetch_add(counter(), 1, __ATOMIC_RELAXED);
}

/* A virtual POSIX timer's signal carries the expirations coalesced into it (timers.c; raw system calls and the
   timer table only, so it runs on any FS). */
TC_FOREIGN_FS static void timer_signal_taken(int signal, siginfo_t *info) {
    void (*volatile taken)(int, siginfo_t *) = tc_timers_signal_taken;
    taken(signal, info);
}

TC_FOREIGN_FS static void program_signal(int signal, siginfo_t *info, void *context) {
    void *handler = signal > 0 && signal < 65 ? __atomic_load_n(&program_handlers[signal], __ATOMIC_ACQUIRE) : NULL;
    struct lender *lender = borrowed_now();
    if (info && info->si_code == SI_TIMER) timer_signal_taken(signal, info);
    if (lender) {
        count_handled_signal();  /* on the borrowed TCB: the trapped wait it interrupts sees it */
        set_fs_base(lender->program_fs);
    }
    if (handler && handler != (void *)SIG_DFL && handler != (void *)SIG_IGN)
        ((void (*)(int, siginfo_t *, void *))handler)(signal, info, context);
    if (lender) set_fs_base(lender->tcb);
}

long tc_static_sigaction(long signal, const struct tc_kernel_sigaction *action, struct tc_kernel_sigaction *old) {
    if (signal <= 0 || signal >= 65) return tc_raw_syscall(SYS_rt_sigaction, signal, action, old, 8);
    struct tc_kernel_sigaction installed, previous;
    int wrapped = action && action->handler != (void *)SIG_DFL && action->handler != (void *)SIG_IGN;
    void *previous_handler = __atomic_load_n(&program_handlers[signal], __ATOMIC_ACQUIRE);
    if (wrapped) {
        installed = *action;
        installed.handler = (void *)program_signal;
        installed.flags |= SA_SIGINFO;
        /* Published first: a delivery in between calls the new handler. Only function handlers are written here:
           a vfork child (Go's os/exec) shares this table and only resets handlers to SIG_DFL. */
        __atomic_store_n(&program_handlers[signal], action->handler, __ATOMIC_RELEASE);
    }
    long result = tc_raw_syscall(SYS_rt_sigaction, signal, wrapped ? &installed : action, &previous, 8);
    if (result != 0) {
        if (wrapped) __atomic_store_n(&program_handlers[signal], previous_handler, __ATOMIC_RELEASE);
        return result;
    }
    if (old) {
        *old = previous;
        if (previous.handler == (void *)program_signal) old->handler = previous_handler;
    }
    return 0;
}

int tc_static_program_executable(const char **path) {
    if (!tc_static_program_active()) return 0;
    *path = program_path;
    return 1;
}

/* ---- taking the program in ---- */

TC_EXPORT const char *timectl_static_program_prepare(const struct timectl_static_program *program, int *attached) {
    struct tc_segment *segment = tc_shim_segment();
    *attached = segment != NULL;
    if (!segment) return NULL;
    size_t length = strlen(program->path);
    if (length >= sizeof program_path) return "its path is too long";
    memcpy(program_path, program->path, length + 1);
    fsgsbase = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) != 0;
    if (!tc_vdso_redirect_static()) return "its vDSO clock reads could not be redirected";
    if (start_lenders() == 0) return "the shim could not start its threads";
    /* The helper thread that wakes waits on descriptors after each verb: started now, not at the first such wait. */
    tc_helper_poke();
    /* From now on the trace's per-thread state is kept by thread id (trace_registry.h); this thread's moves. */
    tc_trace_static_program_begins();
    if (program->is_go) {
        const char *problem = tc_trace_go_program_begins(segment);
        if (problem) return problem;
    }
    __atomic_store_n(&active, 1, __ATOMIC_RELEASE);
    return tc_syscall_trap_install_static(program->text_start, program->text_end, program->is_go);
}

#else

int tc_static_program_active(void) { return 0; }
int tc_static_program_executable(const char **path) { (void)path; return 0; }

TC_EXPORT const char *timectl_static_program_prepare(const struct timectl_static_program *program, int *attached) {
    (void)program;
    *attached = tc_shim_segment() != NULL;
    return "statically linked programs are controlled on x86-64 only";
}

#endif

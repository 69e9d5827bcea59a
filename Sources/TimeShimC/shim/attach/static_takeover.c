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
 * thread pointer itself (x86-64's FS base: arch_prctl; aarch64's TPIDR_EL0:
 * msr; or clone with CLONE_SETTLS), so in its threads FS (below, for
 * either) is not a TCB of the shim's libc: errno, the shim's __thread
 * variables, pthread_* calls would all read and write the program's memory.
 * So:
 *  - the vDSO entries for static programs use no thread-local state at all
 *    (calls/clock.c, tc_vdso_static_entry_*: loads and arithmetic); recording and
 *    replay keep their per-thread state in slots keyed by thread id
 *    (trace_registry.h), in the vDSO entries and the trapped calls alike;
 *  - the SIGSYS handler borrows a TCB of the shim's libc for the length of
 *    one trapped call: each belongs to a thread the shim started while the
 *    loader ran ("lenders", which then block for ever with every signal
 *    blocked, so their TCBs are never in use by them), its thread pointer
 *    is swapped in (wrfsbase when the kernel allows it, else arch_prctl;
 *    msr on aarch64) and
 *    the program's put back before the handler returns. 16 are started
 *    before the program runs, and more on demand by a thread of the shim's
 *    (the grower) whenever every one is borrowed: starting a thread
 *    allocates, which may, because the loader's malloc never moves the
 *    program break that the program's malloc owns (loader/loader_malloc.c);
 *  - a program's signal handler must not run on a borrowed TCB (Go's
 *    handlers find the goroutine through FS). The program's rt_sigaction
 *    calls are trapped, and every handler it installs runs behind a wrapper
 *    that, when the signal arrives inside a trapped call, puts the
 *    program's FS back around the handler. The wrapper also counts the
 *    handler for the interrupted wait (calls/signals.c), so the wait ends with
 *    EINTR as it would have, and tells calls/timers.c that a virtual POSIX
 *    timer's signal was taken (its overrun).
 *  - an exec needs no TCB (tc_exec_checked uses the stack and raw system
 *    calls), and must not take one: in a vfork child that shares the
 *    program's memory, a TCB taken before a successful exec would never be
 *    given back.
 */
#define _GNU_SOURCE
#include "static_takeover.h"
#include "vdso_redirect.h"
#include "../calls/exec.h"
#include "../calls/timers.h"
#include "../runtime/process.h"
#include "../runtime/text.h"
#include "../runtime/threads.h"
#include "../session/waiters.h"
#include "../trace/trace_dispatch.h"
#include "../trap/syscall_trap.h"
#include "timectl_program_support.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>

#if defined(__x86_64__) || defined(__aarch64__)

/*
 * The thread pointer, which says where a thread's TCB is: x86-64's FS base,
 * read and written with rdfsbase/wrfsbase where the kernel allows them
 * (else arch_prctl); aarch64's TPIDR_EL0, which user code reads and writes
 * itself (mrs/msr), and which points at the TCB (glibc's tcbhead_t).
 */
#if defined(__x86_64__)

#include <asm/prctl.h>

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

static int fsgsbase;

static void thread_pointer_init(void) { fsgsbase = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) != 0; }

__attribute__((always_inline)) static inline uintptr_t thread_pointer(void) {
    uintptr_t value;
    if (fsgsbase) {
        __asm__ volatile("rdfsbase %0" : "=r"(value));
    } else {
        value = 0;
        tc_raw_syscall(SYS_arch_prctl, ARCH_GET_FS, &value);
    }
    return value;
}

__attribute__((always_inline)) static inline void set_thread_pointer(uintptr_t value) {
    if (fsgsbase) __asm__ volatile("wrfsbase %0" : : "r"(value) : "memory");
    else tc_raw_syscall(SYS_arch_prctl, ARCH_SET_FS, value);
}

/* A thread's own TCB, as its thread pointer names it: the TCB's self pointer. */
__attribute__((always_inline)) static inline uintptr_t own_tcb(void) {
    uintptr_t tcb;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tcb));
    return tcb;
}

#elif defined(__aarch64__)

static void thread_pointer_init(void) {}

__attribute__((always_inline)) static inline uintptr_t thread_pointer(void) {
    uintptr_t value;
    __asm__ volatile("mrs %0, tpidr_el0" : "=r"(value));
    return value;
}

__attribute__((always_inline)) static inline void set_thread_pointer(uintptr_t value) {
    __asm__ volatile("msr tpidr_el0, %0" : : "r"(value) : "memory");
}

__attribute__((always_inline)) static inline uintptr_t own_tcb(void) { return thread_pointer(); }

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

/*
 * The lenders. 16 are started before the program runs; when a trapped call finds every one borrowed, it asks
 * the grower (a thread of the shim's, with a TCB of its own that is never lent) for more and waits for one. The
 * grower starts them with pthread_create like any thread of the shim's: the loader's malloc never moves the
 * program break (loader/loader_malloc.c), so that is allowed while the program runs. The table is one mapping,
 * reserved for LENDERS_MAX and filled in order: a lender's entry is published by lender_count and then never
 * moves, so a borrower scans it without a lock.
 */
#define LENDERS_AT_START 16
#define LENDERS_MAX 32768
/* Lenders added at most at a time: the pool doubles until then. */
#define LENDERS_GROWTH_MAX 256

struct lender {
    uintptr_t tcb;          /* the lender thread's FS base */
    uintptr_t program_fs;   /* while borrowed: the borrowing thread's own FS base */
    int busy;
};

static struct lender *lenders;
static int lender_count;           /* entries published, in order */
static uint32_t lenders_returned;  /* futex word: bumped each time a TCB is given back or lenders are added */
static uint32_t lenders_ready;     /* futex word: lenders that have published their TCB */
static uint32_t lenders_park;      /* futex word the lenders block on, never woken */
static uint32_t lenders_wanted;    /* futex word the grower waits on: bumped by a borrower that found none free */

static void *lend(void *argument) {
    struct lender *lender = argument;
    uintptr_t tcb = own_tcb();
    prctl(PR_SET_NAME, "timectl-tls", 0, 0, 0);
    __atomic_store_n(&lender->tcb, tcb, __ATOMIC_RELEASE);
    __atomic_fetch_add(&lenders_ready, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &lenders_ready, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
    for (;;) tc_raw_syscall(SYS_futex, &lenders_park, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
    return NULL;
}

/* Starts up to `wanted` more lenders and publishes those that started; how many. Only one thread at a time
   calls it: the loader's before the program runs, then the grower. */
static int add_lenders(int wanted) {
    int first = __atomic_load_n(&lender_count, __ATOMIC_RELAXED);
    if (wanted > LENDERS_MAX - first) wanted = LENDERS_MAX - first;
    int started = 0;
    while (started < wanted && tc_start_shim_thread(lend, &lenders[first + started], 64 * 1024) == 0) started++;
    uint32_t ready;
    while ((ready = __atomic_load_n(&lenders_ready, __ATOMIC_ACQUIRE)) < (uint32_t)(first + started))
        tc_raw_syscall(SYS_futex, &lenders_ready, FUTEX_WAIT_PRIVATE, ready, 0, 0, 0);
    __atomic_store_n(&lender_count, first + started, __ATOMIC_RELEASE);
    return started;
}

static int all_lent(void) {
    int count = __atomic_load_n(&lender_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < count; i++)
        if (!__atomic_load_n(&lenders[i].busy, __ATOMIC_RELAXED)) return 0;
    return 1;
}

/* The grower: more lenders whenever a borrower found none. */
static void *grow(void *argument) {
    (void)argument;
    prctl(PR_SET_NAME, "timectl-tls", 0, 0, 0);
    uint32_t seen = 0;
    int reported = 0;
    for (;;) {
        uint32_t wanted = __atomic_load_n(&lenders_wanted, __ATOMIC_ACQUIRE);
        if (wanted == seen) {
            tc_raw_syscall(SYS_futex, &lenders_wanted, FUTEX_WAIT_PRIVATE, seen, 0, 0, 0);
            continue;
        }
        seen = wanted;
        int count = __atomic_load_n(&lender_count, __ATOMIC_RELAXED);
        /* One given back meanwhile woke one borrower, which may not be the only one waiting: every borrower
           looks again, and asks again if it still finds none. */
        int needed = all_lent();
        if (!needed || add_lenders(count < LENDERS_GROWTH_MAX ? count : LENDERS_GROWTH_MAX) > 0) {
            __atomic_fetch_add(&lenders_returned, 1, __ATOMIC_RELEASE);
            tc_raw_syscall(SYS_futex, &lenders_returned, FUTEX_WAKE_PRIVATE, INT32_MAX, 0, 0, 0);
        } else if (!reported) {
            /* The borrowers then wait for a TCB to be given back, unlisted: say so once. */
            reported = 1;
            struct tc_text line;
            tc_message_begin(&line);
            tc_text_append(&line, "warning: cannot start another thread for the program's timed waits (");
            tc_text_append_number(&line, count);
            tc_text_append(&line, " are in use); more waits at once are not listed until one ends\n");
            tc_raw_syscall(SYS_write, 2, line.text, line.length);
        }
    }
    return NULL;
}

static int start_lenders(void) {
    void *table = mmap(NULL, LENDERS_MAX * sizeof(struct lender), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED) return 0;
    lenders = table;
    if (add_lenders(LENDERS_AT_START) == 0) return 0;
    return tc_start_shim_thread(grow, NULL, 64 * 1024) == 0;
}

TC_FOREIGN_FS static struct lender *borrow(void) {
    for (;;) {
        uint32_t returned = __atomic_load_n(&lenders_returned, __ATOMIC_ACQUIRE);
        int count = __atomic_load_n(&lender_count, __ATOMIC_ACQUIRE);
        for (int i = 0; i < count; i++) {
            int expected = 0;
            if (__atomic_load_n(&lenders[i].busy, __ATOMIC_RELAXED) == 0 &&
                __atomic_compare_exchange_n(&lenders[i].busy, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return &lenders[i];
        }
        __atomic_fetch_add(&lenders_wanted, 1, __ATOMIC_RELEASE);
        tc_raw_syscall(SYS_futex, &lenders_wanted, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
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
    uintptr_t fs = thread_pointer();
    int count = __atomic_load_n(&lender_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < count; i++)
        if (__atomic_load_n(&lenders[i].busy, __ATOMIC_ACQUIRE) && lenders[i].tcb == fs) return &lenders[i];
    return NULL;
}

/* On a borrowed TCB (called through a function pointer: nothing of it may be computed before the swap). */
__attribute__((noinline)) static void handle_on_own_tls(int signal, siginfo_t *info, void *context, int32_t tid) {
    tc_gettid_adopt(tid);
    tc_syscall_trap_handle(signal, info, context);
}

static void (*volatile handle_on_own_tls_pointer)(int, siginfo_t *, void *, int32_t) = handle_on_own_tls;

TC_FOREIGN_FS static int is_fork(long number) {
#ifdef SYS_fork
    if (number == SYS_fork) return 1;  /* x86-64's; aarch64 forks with clone only */
#endif
    return number == SYS_clone;
}

TC_FOREIGN_FS void tc_static_sigsys_entry(int signal, siginfo_t *info, void *context) {
    if (!tc_syscall_trap_is_ours(info)) {
        tc_syscall_trap_handle(signal, info, context);  /* forwarded to the program's SIGSYS: no TLS on that path */
        return;
    }
    if (info->si_syscall == SYS_execve || info->si_syscall == SYS_execveat) {
        tc_syscall_trap_exec(info, context);
        return;
    }
    uintptr_t program_fs = thread_pointer();
    int32_t tid = (int32_t)tc_raw_syscall(SYS_gettid, 0);
    struct lender *lender = borrow();
    lender->program_fs = program_fs;
    set_thread_pointer(lender->tcb);
    handle_on_own_tls_pointer(signal, info, context, tid);
    /* A fork child has a table of its own, in which this TCB moved (tc_static_program_after_fork_in_child). */
    if (is_fork(info->si_syscall)) lender = borrowed_now();
    set_thread_pointer(program_fs);
    if (lender) give_back(lender);
}

/*
 * In a fork child (fork_call in calls/syscall_table.c, from the pthread_atfork handler in attach/attach.c), on the TCB the forking
 * thread borrowed. The parent's lenders and grower are not in the child, and the shim's libc has reclaimed their
 * threads' stacks, TCBs included: the child's table holds only the TCB in use, which no thread of the child's
 * runs on, so it is lent like any other, and a grower of the child's own adds lenders as the child's threads
 * need them (the parent's 16 at start would cost every fork that then execs 16 threads).
 */
void tc_static_program_after_fork_in_child(void) {
    struct lender *own = borrowed_now();
    int count = __atomic_load_n(&lender_count, __ATOMIC_RELAXED);
    struct lender kept = own ? *own : (struct lender){0};
    memset(lenders, 0, (size_t)count * sizeof(struct lender));
    lenders[0] = kept;
    lender_count = own ? 1 : 0;
    lenders_ready = own ? 1 : 0;
    lenders_wanted = 0;
    lenders_returned = 0;
    if (!own || tc_start_shim_thread(grow, NULL, 64 * 1024) != 0) {
        /* Without a grower, a trapped wait would wait for a TCB for ever: say so rather than hang. */
        struct tc_text line;
        tc_message_begin(&line);
        tc_text_append(&line, "cannot start the shim's thread in a fork child; exiting\n");
        tc_raw_syscall(SYS_write, 2, line.text, line.length);
        tc_raw_syscall(SYS_exit_group, TC_SHIM_REFUSAL_STATUS);
    }
    /* The helper that wakes waits on descriptors after each verb, started now as in the parent. */
    tc_helper_poke();
}

/* ---- the program's signal handlers ---- */

/* What the program installed, per signal, while the wrapper stands in for it. */
static void *program_handlers[65];

TC_FOREIGN_FS static void count_handled_signal(void) {
    uint32_t *(*volatile counter)(void) = tc_thread_handled_signals;
    __atomic_fetch_add(counter(), 1, __ATOMIC_RELAXED);
}

/* A virtual POSIX timer's signal carries the expirations coalesced into it (calls/timers.c; raw system calls and the
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
        set_thread_pointer(lender->program_fs);
    }
    if (handler && handler != (void *)SIG_DFL && handler != (void *)SIG_IGN)
        ((void (*)(int, siginfo_t *, void *))handler)(signal, info, context);
    if (lender) set_thread_pointer(lender->tcb);
}

/* A static program's rt_sigaction (not SIGSYS): its handlers run behind a wrapper that puts its FS back. Handed to
   the calls layer through runtime/process.h (tc_static_sigaction). */
static long program_sigaction(long signal, const struct tc_kernel_sigaction *action, struct tc_kernel_sigaction *old) {
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

/* ---- taking the program in ---- */

TC_EXPORT const char *timectl_static_program_prepare(const struct timectl_static_program *program, int *attached) {
    struct tc_segment *segment = tc_shim_segment();
    *attached = segment != NULL;
    if (!segment) return NULL;
    if (strlen(program->path) >= TC_STATIC_PROGRAM_PATH_MAX) return "its path is too long";
    thread_pointer_init();
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
    tc_static_program_taken_in(program->path, program_sigaction);
    return tc_syscall_trap_install_static(program->text_start, program->text_end, program->is_go,
                                          tc_static_sigsys_entry);
}

#else
#error "timectl supports x86_64 and aarch64 Linux"
#endif

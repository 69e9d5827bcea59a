/*
 * Attachment: finding the session segment named by TIMECTL_SEGMENT, or
 * with none, libfaketime's settings (faketime_env.c), or deciding that
 * this process runs on real time.
 *
 * The first interposed call can arrive before this library's constructor
 * (another library's constructor reading the clock) or from inside the
 * work of initialising (a system call that reads the clock, a signal
 * handler). Initialisation therefore runs on the first call from whichever
 * thread gets there, uses only raw system calls and no allocation, and a
 * call that re-enters it from the initialising thread gets the real clock
 * instead of deadlocking.
 */
#define _GNU_SOURCE
#include "faketime_env.h"
#include "static_takeover.h"
#include "vdso_redirect.h"
#include "../calls/dispatch.h"
#include "../calls/signals.h"
#include "../calls/timers.h"
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "../runtime/text.h"
#include "../runtime/threads.h"
#include "../session/waiters.h"
#include "../trace/trace_dispatch.h"
#include "../trace/trace_mode.h"
#include "../trap/syscall_trap.h"
#include "timectl_program.h"
#include "timectl_program_support.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int32_t initialising_tid;
/* The segment while attach() runs; published in tc_shim_attached_segment when done. */
static struct tc_segment *attaching_segment;
/* What plain clock reads read once attached (tc_shim_read_segment): the same, or another on libfaketime's
   settings, or NULL when every read needs work of its own. */
static struct tc_segment *attaching_read_segment;

/* ---- one-line messages ---- */

static void write_line(struct tc_text *line) {
    tc_text_append(line, "\n");
    tc_raw_syscall(SYS_write, 2, line->text, line->length);
}

/* ---- what the main executable is, from its ELF notes (AT_PHDR) ---- */

/* Whether one of the main executable's PT_NOTE segments passes `test` (timectl_program.h's note predicates). */
static int executable_notes(int (*test)(const void *notes, uint64_t size, uint64_t alignment)) {
    unsigned long count;
    uintptr_t bias;
    const ElfW(Phdr) *phdrs = tc_executable_phdrs(&count, &bias);
    for (unsigned long i = 0; i < count; i++)
        if (phdrs[i].p_type == PT_NOTE && test((const void *)(bias + phdrs[i].p_vaddr), phdrs[i].p_memsz, phdrs[i].p_align))
            return 1;
    return 0;
}

static int notes_mark_controller(const void *notes, uint64_t size, uint64_t alignment) {
    return tc_notes_include(notes, size, alignment, "timectl", TC_CONTROLLER_NOTE_TYPE);
}

/* Controllers are never controlled (see controller/controller.c). */
static int executable_is_controller(void) { return executable_notes(notes_mark_controller); }

/* Reads a decimal number up to `end` (a ':' or the string's end); 0 when there is none or it overflows. */
static int read_decimal(const char **text, char end, uint64_t *value) {
    const char *at = *text;
    uint64_t result = 0;
    if (*at < '0' || *at > '9') return 0;
    for (; *at >= '0' && *at <= '9'; at++) {
        if (result > (UINT64_MAX - 9) / 10) return 0;
        result = result * 10 + (uint64_t)(*at - '0');
    }
    if (*at != end) return 0;
    *text = end ? at + 1 : at;
    *value = result;
    return 1;
}

/*
 * The one exception: a test program (it links TimeControlKit, so it carries
 * the note) that TimeControlKitTesting's trait starts again to run one test
 * on that test's session. The trait names the program's file in
 * TIMECTL_TEST_PROGRAM as "DEVICE:INODE"; only a process running that very
 * file is controlled, so that timectl or another controller that the test
 * starts, which inherits the variable, stays on real time, while the test
 * program started again by the test itself (an exit test) is on the session too.
 */
static int executable_is_test_program(void) {
    const char *marker = getenv("TIMECTL_TEST_PROGRAM");
    uint64_t device, inode;
    if (!marker || !read_decimal(&marker, ':', &device) || !read_decimal(&marker, 0, &inode)) return 0;
    struct stat info;
    if (tc_raw_syscall(SYS_newfstatat, AT_FDCWD, "/proc/self/exe", &info, 0) != 0) return 0;
    return (uint64_t)info.st_dev == device && (uint64_t)info.st_ino == inode;
}

/*
 * A Go program: the same test tc_program_inspect makes on the file before
 * an exec, here on this process's own notes in memory, at no cost in I/O at
 * every start.
 */
static int executable_is_go(void) { return executable_notes(tc_notes_mark_go_program); }

/* ---- attaching ---- */

static int64_t boottime_now(void) { return tc_real_ns(CLOCK_BOOTTIME); }

static void register_this_process(void) {
    tc_shim_set_pid((int32_t)tc_raw_syscall(SYS_getpid, 0));
    tc_shim_set_proc_slot(tc_proc_register(attaching_segment, tc_shim_pid(), boottime_now(),
                                           (int32_t)tc_raw_syscall(SYS_getppid, 0)));
}

static int attached(void) { return __atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE) == TC_SHIM_ATTACHED; }

static void before_fork(void) {
    if (!attached()) return;
    tc_trace_before_fork();
    tc_timers_before_fork();
}

static void after_fork_in_parent(void) {
    if (!attached()) return;
    tc_timers_after_fork_in_parent();
    tc_trace_after_fork_in_parent();
}

static void after_fork_in_child(void) {
    if (!attached()) return;
    register_this_process();
    tc_signals_after_fork_in_child();
    /* Before the waiters' part, which unblocks signals: a handler's reading then records into the child's own file. */
    tc_trace_after_fork_in_child();
    tc_threads_after_fork_in_child();
    tc_waiters_after_fork_in_child();
    tc_timers_after_fork_in_child();
    tc_dispatch_after_fork_in_child();
    if (tc_static_program_active()) tc_static_program_after_fork_in_child();
}

__attribute__((destructor)) static void detach_at_exit(void) {
    if (__atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE) != TC_SHIM_ATTACHED) return;
    tc_proc_unregister(attaching_segment, tc_shim_proc_slot(), tc_shim_pid());
}

/*
 * SPEC §7: a segment we cannot trust is never silently replaced by real
 * time. Exit with a distinct status unless the user opted into real time.
 */
/* An errno's name (ENOENT) where libc has strerrorname_np (glibc), else its message (musl). */
static const char *error_name(int error) {
#ifdef __GLIBC__
    const char *name = strerrorname_np(error);
    return name ? name : "error";
#else
    return strerror(error);
#endif
}

static void refuse_as(const char *subject, const char *path, const char *problem, const struct tc_failure *failure) {
    const char *policy = getenv("TIMECTL_ON_ERROR");
    int fall_back = policy && strcmp(policy, "realtime") == 0;
    struct tc_text line;
    tc_message_begin(&line);
    tc_text_append(&line, subject);
    tc_text_append(&line, " ");
    tc_text_append(&line, path);
    tc_text_append(&line, " ");
    if (failure && failure->result == TC_E_VERSION) {
        tc_text_append(&line, "has segment layout version ");
        tc_text_append_number(&line, failure->found_version);
        tc_text_append(&line, ", this shim reads version ");
        tc_text_append_number(&line, TC_SEGMENT_VERSION);
    } else {
        tc_text_append(&line, problem);
    }
    if (failure && failure->result == TC_E_SYSCALL) {
        tc_text_append(&line, " (");
        tc_text_append(&line, failure->syscall);
        tc_text_append(&line, ": ");
        tc_text_append(&line, error_name(failure->sys_errno));
        tc_text_append(&line, ")");
    }
    if (fall_back) {
        tc_text_append(&line, "; running on real time (TIMECTL_ON_ERROR=realtime)");
        write_line(&line);
        return;
    }
    tc_text_append(&line, "; refusing to run on real time (set TIMECTL_ON_ERROR=realtime to allow it)");
    write_line(&line);
    tc_raw_syscall(SYS_exit_group, TC_SHIM_REFUSAL_STATUS);
}

static void refuse(const char *path, const char *problem, const struct tc_failure *failure) {
    refuse_as("session segment", path, problem, failure);
}

/* A recording or replay that cannot be set up is refused like a segment: no silent run unrecorded. */
static void refuse_trace(const char *path, const char *problem) {
    refuse_as(getenv("TIMECTL_RECORD") ? "recording" : "trace", path ? path : "(unnamed)", problem, NULL);
}

/* What every attached process needs once its segment is known: Go's redirection and trap, the timers' helper, fork. */
static int attach_program(void) {
    if (executable_is_go()) {
        /* Go reads the vDSO and waits with raw system calls: both must reach the shim before the runtime starts. */
        const char *problem = NULL;
        if (!tc_shim_controls_go()) problem = "is a Go program, which timectl controls on x86-64 and aarch64 only";
        else if (!tc_vdso_redirect()) problem = "is a Go program and its vDSO clock reads could not be redirected";
        else problem = tc_syscall_trap_install();
        /* A replay answers a Go program per process, not per thread: set up before its first reading. */
        if (!problem) problem = tc_trace_go_program_begins(attaching_segment);
        if (problem) {
            refuse_as("program", program_invocation_name ? program_invocation_name : "(unknown)", problem, NULL);
            tc_proc_unregister(attaching_segment, tc_shim_proc_slot(), tc_shim_pid());
            return TC_SHIM_REAL;
        }
    } else {
        tc_syscall_trap_adopt();
    }
    /* The helper thread (session/waiters.c) fires the process's virtual timers, which live above it. */
    tc_helper_set_timers(tc_timers_fire_due);
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    return TC_SHIM_ATTACHED;
}

/* No session named: libfaketime's variables, if any, put the process on a clock of theirs (faketime_env.c). */
static int attach_on_faketime_settings(void) {
    if (executable_is_controller() && !executable_is_test_program()) return TC_SHIM_REAL;
    if (tc_faketime_attach(&attaching_segment, &attaching_read_segment) != TC_FAKETIME_ATTACH) return TC_SHIM_REAL;
    register_this_process();
    return attach_program();
}

static int attach(void) {
    /*
     * A sanitizer's preinit function (ASan's, TSan's __*san_init in the
     * executable's .preinit_array) runs before libc has set up environ, and
     * reaches the shim through sigaction, pthread or clock calls. The
     * environment cannot be read yet: stay on real time for those calls and
     * decide at the next one (the shim's constructor, at the latest).
     */
    if (!__atomic_load_n(&environ, __ATOMIC_RELAXED)) return TC_SHIM_UNINITIALISED;
    const char *path = getenv("TIMECTL_SEGMENT");
    /* A session wins over libfaketime's variables. */
    if (!path) return attach_on_faketime_settings();
    if (executable_is_controller() && !executable_is_test_program()) return TC_SHIM_REAL;
    if (!*path) {
        refuse("(TIMECTL_SEGMENT)", "is empty", NULL);
        return TC_SHIM_REAL;
    }
    if (path[0] != '/') {
        refuse(path, "is not an absolute path", NULL);
        return TC_SHIM_REAL;
    }
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    if (tc_segment_open(AT_FDCWD, path, &mapping, &failure) != TC_OK) {
        refuse(path, tc_result_phrase(failure.result), &failure);
        return TC_SHIM_REAL;
    }
    attaching_segment = mapping.segment;
    attaching_read_segment = mapping.segment;
    register_this_process();
    const char *trace_path = NULL;
    const char *trace_problem = tc_trace_attach(attaching_segment, &trace_path);
    if (trace_problem) {
        refuse_trace(trace_path, trace_problem);
        tc_proc_unregister(attaching_segment, tc_shim_proc_slot(), tc_shim_pid());
        return TC_SHIM_REAL;
    }
    return attach_program();
}

struct tc_segment *tc_shim_initialise(void) {
    int32_t tid = (int32_t)tc_raw_syscall(SYS_gettid, 0);
    int expected = TC_SHIM_UNINITIALISED;
    if (__atomic_compare_exchange_n(&tc_shim_state, &expected, TC_SHIM_INITIALISING, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&initialising_tid, tid, __ATOMIC_RELAXED);
        int saved_errno = errno;
        tc_realclock_init();
        tc_real_resolve();
        int state = attach();
        errno = saved_errno;
        if (state == TC_SHIM_ATTACHED) {
            __atomic_store_n(&tc_shim_attached_segment, attaching_segment, __ATOMIC_RELEASE);
            if (tc_trace_mode == TC_TRACE_OFF) __atomic_store_n(&tc_shim_read_segment, attaching_read_segment, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&tc_shim_state, state, __ATOMIC_RELEASE);
        return state == TC_SHIM_ATTACHED ? attaching_segment : NULL;
    }
    /* Re-entered from our own initialisation (or a signal handler on it): real time. */
    if (__atomic_load_n(&initialising_tid, __ATOMIC_RELAXED) == tid) return NULL;
    while ((expected = __atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE)) == TC_SHIM_INITIALISING)
        tc_raw_syscall(SYS_sched_yield, 0);
    return expected == TC_SHIM_ATTACHED ? attaching_segment : NULL;
}

__attribute__((constructor)) static void initialise_at_load(void) { tc_shim_segment(); }

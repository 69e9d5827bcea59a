/*
 * Facts about this process that every layer of the shim reads: whether it
 * is attached and to which segment, its pid and process-table slot,
 * libc's errno convention, one-line messages, its main executable's
 * program headers, whether a static program took it over and whether the
 * seccomp trap is in place (process.c). Lower layers read these; the
 * layers above set them (attach/, trap/). Not part of TimeControlKit.
 */
#ifndef TIMECTL_SHIM_H
#define TIMECTL_SHIM_H

#include "timectl_segment_io.h"
#include "timectl_timeline.h"
#include "timectl_trace.h"

#include <link.h>

#define TC_EXPORT __attribute__((visibility("default")))
#define TC_LIKELY(x) __builtin_expect(!!(x), 1)
/* Thread-local state at a fixed offset from the thread pointer: no __tls_get_addr call (which may allocate) on any path. */
#define TC_TLS __thread __attribute__((tls_model("initial-exec")))

/* Exit status of a process whose segment cannot be trusted (SPEC §7). */
#define TC_SHIM_REFUSAL_STATUS 120

enum tc_shim_state {
    TC_SHIM_UNINITIALISED = 0,
    TC_SHIM_INITIALISING = 1,
    TC_SHIM_REAL = 2,      /* not attached: every call is the real one */
    TC_SHIM_ATTACHED = 3,
};

extern int tc_shim_state;
extern struct tc_segment *tc_shim_attached_segment;
/* The same segment, published only when clock reads need nothing but it (not while recording or replaying). */
extern struct tc_segment *tc_shim_read_segment;

/*
 * The shim's one upward call (docs/architecture.md): the first call of any
 * interposer, before the process is attached, attaches it. Defined by
 * attach/attach.c; declared here, not included, so that this layer needs
 * nothing above it. A direct call, off the read path (one load decides).
 */
struct tc_segment *tc_shim_initialise(void);

/* This process's pid (kept current across fork). */
int32_t tc_shim_pid(void);
/* This process's slot in the segment's process table, or −1. */
int tc_shim_proc_slot(void);
/* Set by attach/attach.c when it registers this process (and again in a fork child): the pid first. */
void tc_shim_set_pid(int32_t pid);
void tc_shim_set_proc_slot(int slot);

/* The session segment, or NULL when this process runs on real time. */
static inline struct tc_segment *tc_shim_segment(void) {
    /* Published (release) only once attached, so one load decides the common case. */
    struct tc_segment *segment = __atomic_load_n(&tc_shim_attached_segment, __ATOMIC_ACQUIRE);
    if (TC_LIKELY(segment != NULL)) return segment;
    if (__atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE) == TC_SHIM_REAL) return NULL;
    return tc_shim_initialise();
}

/* libc's convention for a kernel result: −1 and errno, or the value. */
long tc_shim_errno_result(long kernel_result);
/* The other way, for the system-call table: `libc_result` (−1 and errno on failure) as the kernel gives it
   (−errno), with errno put back to `saved_errno`, as a system call leaves it. Inside the shim, results
   travel in the kernel's convention; libc's is made only at the functions it exports. */
long tc_shim_kernel_result(long libc_result, int saved_errno);

/* The main executable's program headers (AT_PHDR; none if absent) and its load bias. */
const ElfW(Phdr) *tc_executable_phdrs(unsigned long *count, uintptr_t *bias);

struct tc_text;
/* Starts a one-line message of this process's, "timectl: NAME[PID]: " (text.h). */
void tc_message_begin(struct tc_text *line);

/* The kernel's struct sigaction for rt_sigaction (a 64-bit mask). */
struct tc_kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

/*
 * A statically linked program the loader mapped (attach/static_takeover.c)
 * runs in this process: its path, and its rt_sigaction, which the calls
 * layer must route through the wrapper static_takeover.c keeps (handed
 * down here, as the helper thread is handed the timers). Set once, before
 * the program runs.
 */
typedef long (*tc_static_sigaction_function)(long signal, const struct tc_kernel_sigaction *action,
                                             struct tc_kernel_sigaction *old);
/* The longest path, with its NUL, tc_static_program_taken_in keeps (the caller checks). */
#define TC_STATIC_PROGRAM_PATH_MAX 4096
void tc_static_program_taken_in(const char *path, tc_static_sigaction_function sigaction);
/* Whether this process runs a static program the loader mapped (then its threads' FS is not the shim's libc's). */
int tc_static_program_active(void);
/* The program's path, for a readlink of /proc/self/exe; 0 when no static program runs here. */
int tc_static_program_executable(const char **path);
/* Whether `path` names this process's executable in /proc (/proc/self/exe, /proc/PID/exe, /proc/thread-self/exe,
   /proc/PID/task/TID/exe), which the kernel answers with the loader where it could not be made the program. */
int tc_static_program_names_executable(const char *path);
/* The static program's rt_sigaction (not SIGSYS), through its wrapper; only while tc_static_program_active(). */
long tc_static_sigaction(long signal, const struct tc_kernel_sigaction *action, struct tc_kernel_sigaction *old);

/* Set by trap/syscall_trap.c: the shim's SIGSYS handler is in place. */
void tc_syscall_trap_note_active(void);
/* Whether the shim's SIGSYS handler is in place (the program's SIGSYS is then recorded, never installed). */
int tc_syscall_trap_active(void);
/* Set by trap/syscall_trap.c when it installs a filter: the span of code whose calls it traps. */
void tc_syscall_trap_note_filtered_text(uintptr_t start, uintptr_t end);
/* The span of code whose calls the filter this process installed traps, in this process and every image it
   execs (a filter cannot be removed); 0 when this process installed none. Reads two words: exec-safe. */
int tc_syscall_trap_filtered_text(uintptr_t *start, uintptr_t *end);

#endif

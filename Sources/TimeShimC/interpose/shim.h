/*
 * The preload shim's internal interface: its attachment state and the
 * helpers the interposers share. Not part of TimeControlKit.
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

struct tc_segment *tc_shim_initialise(void);

/* This process's pid (kept current across fork). */
int32_t tc_shim_pid(void);
/* This process's slot in the segment's process table, or −1. */
int tc_shim_proc_slot(void);

/* The session segment, or NULL when this process runs on real time. */
static inline struct tc_segment *tc_shim_segment(void) {
    /* Published (release) only once attached, so one load decides the common case. */
    struct tc_segment *segment = __atomic_load_n(&tc_shim_attached_segment, __ATOMIC_ACQUIRE);
    if (TC_LIKELY(segment != NULL)) return segment;
    if (__atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE) == TC_SHIM_REAL) return NULL;
    return tc_shim_initialise();
}

/* Go programs (vdso_redirect.c, syscall_trap.c): 1 when the vDSO's clock symbols now lead into the shim. */
int tc_vdso_redirect(void);
/* Traps the Go executable's raw timed waits; NULL, or what went wrong (a phrase after the program's name). */
const char *tc_syscall_trap_install(void);
/* In a process that inherited a filter across exec: handles its traps. */
void tc_syscall_trap_adopt(void);
/* The span of code whose calls the filter this process installed traps, in this process and every image it
   execs (a filter cannot be removed); 0 when this process installed none. Reads two words: exec-safe. */
int tc_syscall_trap_filtered_text(uintptr_t *start, uintptr_t *end);
/* Whether the shim's SIGSYS handler is in place (the program's SIGSYS is then recorded, never installed). */
int tc_syscall_trap_active(void);

/* libc's convention for a kernel result: −1 and errno, or the value. */
long tc_shim_errno_result(long kernel_result);

/*
 * clock_settime, settimeofday, adjtimex or clock_adjtime with the kernel's
 * arguments in an attached process, answered by the session's rules
 * (settime.c): the kernel's result form (a value or −errno). For syscall(2)
 * (clock.c) and for the raw calls of Go and static programs (syscall_trap.c).
 */
long tc_syscall_settime(struct tc_segment *segment, long number, long a1, long a2);

/*
 * An execve (AT_FDCWD, no flags) or execveat of an attached process, after the
 * containment check of interpose/exec.c: a refused program gets −EACCES
 * (its one line written), anything else the kernel's result. Stack and raw
 * system calls only: also called from the SIGSYS handler for a Go
 * program's raw execs (syscall_trap.c).
 */
long tc_exec_checked(int directory_fd, const char *path, char *const argv[], char *const envp[], int flags);

/* The main executable's program headers (AT_PHDR; none if absent) and its load bias. */
const ElfW(Phdr) *tc_executable_phdrs(unsigned long *count, uintptr_t *bias);

struct tc_text;
/* Starts a one-line message of this process's, "timectl: NAME[PID]: " (text.h). */
void tc_message_begin(struct tc_text *line);

#endif

/*
 * Facts about this process (see process.h). Each is set by the layer that
 * learns it — attaching, the static-program takeover, the trap — and read
 * by any layer below that one, which therefore needs no include of it.
 */
#define _GNU_SOURCE
#include "process.h"
#include "text.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>

int tc_shim_state = TC_SHIM_UNINITIALISED;
struct tc_segment *tc_shim_attached_segment;
struct tc_segment *tc_shim_read_segment;

static int32_t process_id;
static int process_slot = -1;

int32_t tc_shim_pid(void) { return process_id; }

int tc_shim_proc_slot(void) { return process_slot; }

void tc_shim_set_pid(int32_t pid) { process_id = pid; }

void tc_shim_set_proc_slot(int slot) { process_slot = slot; }

long tc_shim_errno_result(long kernel_result) {
    if (kernel_result < 0 && kernel_result > -4096) {
        errno = (int)-kernel_result;
        return -1;
    }
    return kernel_result;
}

long tc_shim_kernel_result(long libc_result, int saved_errno) {
    long kernel_result = libc_result < 0 ? -errno : libc_result;
    errno = saved_errno;
    return kernel_result;
}

/* ---- one-line messages ---- */

void tc_message_begin(struct tc_text *line) {
    line->length = 0;
    line->text[0] = 0;
    tc_text_append(line, "timectl: ");
    tc_text_append(line, program_invocation_short_name ? program_invocation_short_name : "process");
    tc_text_append(line, "[");
    tc_text_append_number(line, tc_raw_syscall(SYS_getpid, 0));
    tc_text_append(line, "]: ");
}

/* ---- the main executable (AT_PHDR) ---- */

const ElfW(Phdr) *tc_executable_phdrs(unsigned long *count, uintptr_t *bias) {
    const ElfW(Phdr) *phdrs = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    *count = phdrs ? getauxval(AT_PHNUM) : 0;
    *bias = 0;
    for (unsigned long i = 0; i < *count; i++)
        if (phdrs[i].p_type == PT_PHDR) *bias = (uintptr_t)phdrs - phdrs[i].p_vaddr;
    return phdrs;
}

/* ---- a static program run by timectl-static-loader ---- */

static int static_program_active;
static char static_program_path[TC_STATIC_PROGRAM_PATH_MAX];
static tc_static_sigaction_function static_program_sigaction;

void tc_static_program_taken_in(const char *path, tc_static_sigaction_function sigaction) {
    size_t length = strlen(path);
    if (length >= sizeof static_program_path) length = sizeof static_program_path - 1;
    memcpy(static_program_path, path, length);
    static_program_path[length] = 0;
    static_program_sigaction = sigaction;
    __atomic_store_n(&static_program_active, 1, __ATOMIC_RELEASE);
}

int tc_static_program_active(void) { return __atomic_load_n(&static_program_active, __ATOMIC_ACQUIRE); }

int tc_static_program_executable(const char **path) {
    if (!tc_static_program_active()) return 0;
    *path = static_program_path;
    return 1;
}

/* Skips a decimal number at *text; its value, or −1 if there is none. */
static long skip_number(const char **text) {
    long value = 0;
    const char *at = *text;
    if (*at < '0' || *at > '9') return -1;
    while (*at >= '0' && *at <= '9' && value < (1L << 40)) value = value * 10 + (*at++ - '0');
    *text = at;
    return value;
}

int tc_static_program_names_executable(const char *path) {
    if (!tc_static_program_active() || strncmp(path, "/proc/", 6) != 0) return 0;
    const char *at = path + 6;
    long pid = tc_raw_syscall(SYS_getpid, 0);
    if (strncmp(at, "thread-self/", 12) == 0) return strcmp(at + 12, "exe") == 0;
    if (strncmp(at, "self/", 5) == 0) at += 5;
    else if (skip_number(&at) == pid && *at == '/') at++;
    else return 0;
    if (strncmp(at, "task/", 5) == 0) {
        at += 5;
        long tid = skip_number(&at);
        /* A thread of this process's (signal 0 only checks). */
        if (tid <= 0 || *at != '/' || tc_raw_syscall(SYS_tgkill, pid, tid, 0) != 0) return 0;
        at++;
    }
    return strcmp(at, "exe") == 0;
}

long tc_static_sigaction(long signal, const struct tc_kernel_sigaction *action, struct tc_kernel_sigaction *old) {
    return static_program_sigaction(signal, action, old);
}

/* ---- the seccomp trap ---- */

/* Whether this process's SIGSYS handler is ours: then the program's SIGSYS is only recorded. */
static int handling_sigsys;
/* The code the filter this process installed traps calls from (it survives exec): both 0 when none. */
static uintptr_t filtered_text_start, filtered_text_end;

void tc_syscall_trap_note_active(void) { __atomic_store_n(&handling_sigsys, 1, __ATOMIC_RELEASE); }

int tc_syscall_trap_active(void) { return __atomic_load_n(&handling_sigsys, __ATOMIC_ACQUIRE); }

void tc_syscall_trap_note_filtered_text(uintptr_t start, uintptr_t end) {
    __atomic_store_n(&filtered_text_start, start, __ATOMIC_RELEASE);
    __atomic_store_n(&filtered_text_end, end, __ATOMIC_RELEASE);
}

int tc_syscall_trap_filtered_text(uintptr_t *start, uintptr_t *end) {
    *start = __atomic_load_n(&filtered_text_start, __ATOMIC_ACQUIRE);
    *end = __atomic_load_n(&filtered_text_end, __ATOMIC_ACQUIRE);
    return *end > *start;
}

/*
 * The one place that decides what kind of program an exec would start,
 * and so whether the shim can control it (SPEC §4). `timectl run` asks
 * before starting its command; the shim asks at every execve, execveat,
 * fexecve, exec*p and posix_spawn* of an attached process.
 *
 * Raw system calls and the caller's stack only (no allocation, no errno,
 * no locks): the shim calls it between vfork and exec.
 */
#ifndef TIMECTL_PROGRAM_H
#define TIMECTL_PROGRAM_H

#include <stdint.h>

enum tc_program_kind {
    TC_PROGRAM_CONTROLLABLE = 0,  /* a dynamically linked program of this machine's kind */
    TC_PROGRAM_NOT_INSPECTED,     /* missing, unreadable, not ELF and no #!: the exec decides */
    TC_PROGRAM_STATIC,            /* no dynamic loader: LD_PRELOAD cannot reach it */
    TC_PROGRAM_GO,                /* carries Go's build id: the runtime reads clocks and waits without libc */
    TC_PROGRAM_GO_WITHOUT_CGO,    /* dynamically linked Go without cgo's runtime: its threads' TLS is Go's own */
    TC_PROGRAM_SETID,             /* setuid/setgid to another user or group: secure execution drops LD_PRELOAD */
    TC_PROGRAM_FOREIGN,           /* 32-bit, big-endian or another machine: the shim cannot load */
    TC_PROGRAM_FILE_CAPABILITIES, /* file capabilities, for a user other than root: secure execution drops LD_PRELOAD */
    TC_PROGRAM_SECURE_EXECUTION,  /* started with effective ids unlike the real ones: secure execution, likewise */
};

#define TC_PROGRAM_MAX_NEEDED 16

/*
 * The shim's builds, one per C library, side by side in one directory: a
 * program is preloaded the one its dynamic loader can load (SPEC §12).
 */
#define TC_SHIM_FILE_NAME "libTimeShim.so"
#define TC_SHIM_MUSL_FILE_NAME "libTimeShim-musl.so"

struct tc_program {
    enum tc_program_kind kind;
    /* What the file itself is, whoever starts it: `kind` without secure execution (SETID, FILE_CAPABILITIES,
       SECURE_EXECUTION), which only an exec by this process would bring. */
    enum tc_program_kind elf_kind;
    /* The file the kind was decided on: the program, or the interpreter its #! line names. */
    char decided_on[256];
    /* The sanitizer runtime among its DT_NEEDED ("libasan.so.8"), else empty: it must be preloaded first. */
    char sanitizer_runtime[64];
    /* Whether it is the dynamic loader itself (DT_SONAME ld-linux…), run as a command: it honours LD_PRELOAD. */
    int is_dynamic_loader;
    /* Whether musl's dynamic loader starts it (PT_INTERP's file name begins ld-musl-): it needs the musl shim. */
    int is_musl;
    /* PT_INTERP, the dynamic loader that starts it (cut at 255 bytes); empty when it has none. */
    char interpreter[256];
    /* Whether its dynamic symbols name pthread_create: a Go program's sign of cgo's runtime. */
    int imports_pthread_create;
    /* Whether it carries Go's build id (whatever its kind): its runtime makes system calls from its own code. */
    int is_go;
    /* The span of its executable segments when it is loaded at fixed addresses (ET_EXEC); both 0 otherwise. */
    uint64_t fixed_text_start, fixed_text_end;
    /* DT_NEEDED entries (the first TC_PROGRAM_MAX_NEEDED, each cut at 63 bytes). */
    int needed_count;
    char needed[TC_PROGRAM_MAX_NEEDED][64];
};

/*
 * Inspects the program at `path` (relative to `directory_fd`, AT_FDCWD for
 * the working directory; AT_EMPTY_PATH semantics when `path` is "" — then
 * `directory_fd` is the program itself), following #! lines to their
 * interpreter up to 4 levels, as the kernel does. Fills `program`.
 */
void tc_program_inspect(int directory_fd, const char *path, struct tc_program *program);

/* Why a kind cannot be controlled, as a phrase ("statically linked"); NULL for the others. */
const char *tc_program_problem(enum tc_program_kind kind);

#define TC_NOTE_ANY_TYPE UINT32_MAX

/*
 * Whether the bytes of one PT_NOTE segment (`size` of them; `alignment` its
 * p_align) hold a note whose owner is `owner` and whose type is `type`
 * (TC_NOTE_ANY_TYPE: any). Reads nothing outside the bytes, whatever they say.
 */
int tc_notes_include(const void *notes, uint64_t size, uint64_t alignment, const char *owner, uint32_t type);

/*
 * Whether a PT_NOTE segment's bytes mark a Go program: a note owned by "Go"
 * (the Go linker's build id, .note.go.buildid). The one test of it:
 * tc_program_inspect applies it to a program's file before an exec, the
 * shim to its own process's notes in memory when it attaches.
 */
int tc_notes_mark_go_program(const void *notes, uint64_t size, uint64_t alignment);

#endif

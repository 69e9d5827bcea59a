/*
 * Containment at exec (SPEC §4): an attached process that starts a program
 * the shim cannot control — setuid to another user, another
 * machine's — gets the exec refused with one line on stderr, instead of a
 * child that silently runs on real time. A statically linked program is
 * started through timectl-static-loader instead (through_loader below).
 * The kind of program is decided by tc_program_inspect, the same code
 * `timectl run` uses.
 *
 * The check applies when the new image would be attached (its environment
 * names a segment, or holds libfaketime's variables). TIMECTL_ALLOW_UNCONTROLLED=1 in that environment lets
 * the program run on real time, with a warning. A refused exec fails with
 * EACCES, as for a file without execute permission: shells print
 * "Permission denied" and exit 126. (ENOEXEC would make a shell run the
 * binary as a shell script.) A program linked with a sanitizer runtime gets
 * that runtime put first in its LD_PRELOAD, and one that musl's loader
 * starts gets the musl build of the shim in place of the glibc one (and
 * the other way round), from the same directory (fit_preload).
 *
 * glibc's exec*p and execl* call its internal __execve, which no preload
 * can interpose, so each public exec function is written here over the
 * checked execve, searching PATH as glibc does. posix_spawn* clone and
 * exec inside glibc: the program is checked before calling the real one.
 * system() and popen() start /bin/sh, whose own execs are checked.
 *
 * Everything on the exec path uses the stack and raw system calls only:
 * it may run in a vfork child.
 */
#define _GNU_SOURCE
#include "exec.h"
#include "../runtime/process.h"
#include "../runtime/text.h"
#include "timectl_faketime.h"
#include "timectl_program.h"
#include "timectl_program_support.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>


static const char *environment_value(char *const envp[], const char *name) {
    if (!envp) return NULL;
    size_t length = strlen(name);
    for (char *const *entry = envp; *entry; entry++)
        if (strncmp(*entry, name, length) == 0 && (*entry)[length] == '=') return *entry + length + 1;
    return NULL;
}

static size_t count_entries(char *const envp[]) {
    size_t count = 0;
    if (envp)
        while (envp[count]) count++;
    return count;
}

static void append(char *target, size_t capacity, size_t *length, const char *text) {
    while (*text && *length + 1 < capacity) target[(*length)++] = *text++;
    target[*length] = 0;
}

/*
 * The entry of an LD_PRELOAD value that names a build of the shim (an
 * absolute path ending in /libTimeShim.so or /libTimeShim-musl.so; the
 * last, if several do), its length, and whether it is the musl build.
 */
static const char *shim_entry(const char *preload, size_t *entry_length, int *musl) {
    static const size_t glibc_length = sizeof TC_SHIM_FILE_NAME, musl_length = sizeof TC_SHIM_MUSL_FILE_NAME;
    const char *found = NULL;
    for (const char *entry = preload; entry && *entry;) {
        size_t length = strcspn(entry, ": ");
        if (entry[0] == '/' && length >= glibc_length && entry[length - glibc_length] == '/' &&
            strncmp(entry + length - glibc_length + 1, TC_SHIM_FILE_NAME, glibc_length - 1) == 0)
            found = entry, *entry_length = length, *musl = 0;
        if (entry[0] == '/' && length >= musl_length && entry[length - musl_length] == '/' &&
            strncmp(entry + length - musl_length + 1, TC_SHIM_MUSL_FILE_NAME, musl_length - 1) == 0)
            found = entry, *entry_length = length, *musl = 1;
        entry += length;
        entry += strspn(entry, ": ");
    }
    return found;
}

/* The length of the directory part (through the '/') of a shim entry. */
static size_t shim_directory_length(size_t entry_length, int musl) {
    return entry_length - (musl ? sizeof TC_SHIM_MUSL_FILE_NAME : sizeof TC_SHIM_FILE_NAME) + 1;
}

static void append_bytes(char *target, size_t capacity, size_t *length, const char *text, size_t count) {
    for (size_t i = 0; i < count && *length + 1 < capacity; i++) target[(*length)++] = text[i];
    target[*length] = 0;
}

/*
 * The new image's LD_PRELOAD, fitted to its program (SPEC §12):
 *  - the build of the shim its C library can load: musl's loader cannot
 *    load the glibc build (it fails on glibc's symbols, strerrorname_np,
 *    __register_atfork…), nor glibc's the musl one (which needs musl's
 *    libc.so), so the entry is swapped for its sibling in the same
 *    directory (`musl`: the program needs the musl build). With `drop`,
 *    the entry is left out instead (a program let run on real time);
 *  - a sanitizer runtime (ASan, TSan, UBSan) the program is linked with,
 *    first: ASan refuses to start otherwise, and its interceptors then
 *    reach the shim as the "real" functions.
 * `*use` becomes envp when nothing changes, else `adjusted` (room for the
 * entries and one more), a copy of envp whose LD_PRELOAD is written into
 * `preload`. Returns NULL, or why no build of the shim fits the program.
 */
static const char *fit_preload(int musl, int drop, const char *runtime, char *const envp[], char **adjusted,
                               char *preload, size_t preload_capacity, char *const **use) {
    *use = envp;
    const char *current = environment_value(envp, "LD_PRELOAD");
    size_t entry_length = 0;
    int entry_musl = 0;
    const char *entry = shim_entry(current, &entry_length, &entry_musl);
    char replacement[PATH_MAX];
    replacement[0] = 0;
    int swap = entry && (drop || entry_musl != musl);
    if (swap && !drop) {
        size_t directory = shim_directory_length(entry_length, entry_musl);
        const char *name = musl ? TC_SHIM_MUSL_FILE_NAME : TC_SHIM_FILE_NAME;
        if (directory + strlen(name) + 1 > sizeof replacement) return "too long a path to its build of the shim";
        memcpy(replacement, entry, directory);
        memcpy(replacement + directory, name, strlen(name) + 1);
        if (tc_raw_syscall(SYS_faccessat, AT_FDCWD, replacement, R_OK) != 0)
            return musl ? "linked with musl, and no build of the shim for musl (" TC_SHIM_MUSL_FILE_NAME
                          ") is beside the one its LD_PRELOAD names"
                        : "linked with glibc, and no build of the shim for glibc (" TC_SHIM_FILE_NAME
                          ") is beside the one its LD_PRELOAD names";
    }
    size_t runtime_length = runtime ? strlen(runtime) : 0;
    int runtime_first = runtime && !(current && strncmp(current, runtime, runtime_length) == 0 &&
                                     (current[runtime_length] == ':' || current[runtime_length] == ' ' ||
                                      current[runtime_length] == 0));
    if (!swap && !runtime_first) return NULL;
    size_t length = 0;
    int first = 1;
    append(preload, preload_capacity, &length, "LD_PRELOAD=");
    if (runtime_first) {
        append(preload, preload_capacity, &length, runtime);
        first = 0;
    }
    for (const char *at = current; at && *at;) {
        size_t part = strcspn(at, ": ");
        int replaced_here = swap && at == entry;
        const char *text = replaced_here ? replacement : at;
        size_t count = replaced_here ? strlen(replacement) : part;
        if (count) {
            if (!first) append(preload, preload_capacity, &length, ":");
            append_bytes(preload, preload_capacity, &length, text, count);
            first = 0;
        }
        at += part;
        at += strspn(at, ": ");
    }
    if (length + 1 >= preload_capacity) return NULL;  /* too long to rewrite: the loader's own message will say so */
    size_t count = 0, replaced = 0;
    for (size_t i = 0; envp && envp[i]; i++) {
        if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) {
            if (replaced++) continue;
            adjusted[count++] = preload;
        } else {
            adjusted[count++] = envp[i];
        }
    }
    if (!replaced) adjusted[count++] = preload;
    adjusted[count] = NULL;
    *use = adjusted;
    return NULL;
}

/*
 * A statically linked program runs through timectl-static-loader, which
 * lives next to the libTimeShim.so the new image's LD_PRELOAD names (the
 * loader loads the shim from there, as any attached program does). Writes
 * the loader's path into `loader` and its argv — loader, PROGRAM, then the
 * program's argv — into `loader_argv` (room for argv's entries and 3 more);
 * returns NULL, or why the loader cannot be used.
 */
static const char *through_loader(int directory_fd, const char *path, char *const argv[], char *const envp[],
                                  char *loader, char **loader_argv) {
    if (!tc_shim_controls_static()) return NULL;  /* the kind's own phrase says it */
    if (directory_fd != AT_FDCWD || !*path)
        return "statically linked, and started from a descriptor, which timectl-static-loader cannot open";
    size_t shim_length = 0;
    int musl = 0;
    const char *shim = shim_entry(environment_value(envp, "LD_PRELOAD"), &shim_length, &musl);
    size_t directory_length = shim ? shim_directory_length(shim_length, musl) : 0;
    if (!shim || directory_length + sizeof "timectl-static-loader" > PATH_MAX)
        return "statically linked, and no libTimeShim.so in its LD_PRELOAD shows where timectl-static-loader is";
    memcpy(loader, shim, directory_length);
    memcpy(loader + directory_length, "timectl-static-loader", sizeof "timectl-static-loader");
    if (tc_raw_syscall(SYS_faccessat, AT_FDCWD, loader, X_OK) != 0)
        return "statically linked, and timectl-static-loader is missing beside libTimeShim.so";
    size_t count = 0;
    loader_argv[0] = loader;
    loader_argv[1] = (char *)path;
    for (; argv && argv[count]; count++) loader_argv[count + 2] = argv[count];
    if (count == 0) loader_argv[2 + count++] = (char *)path;  /* the loader needs an ARGV0 */
    loader_argv[count + 2] = NULL;
    return NULL;
}

/* TIMECTL_ALLOW_UNCONTROLLED=1 in the new image's environment: a refusal becomes a warning. */
static int allowed_uncontrolled(char *const envp[]) {
    const char *allow = environment_value(envp, "TIMECTL_ALLOW_UNCONTROLLED");
    return allow && strcmp(allow, "1") == 0;
}

/*
 * An image started without the session (its environment names no segment)
 * by a process whose filter traps calls from a span of code keeps the
 * filter. A static or Go program loaded at fixed addresses in that span
 * makes its timed waits from there, and, with no shim to take the trap, its
 * first one kills it (SIGSYS) without a word: refused instead, with one
 * line, unless TIMECTL_ALLOW_UNCONTROLLED=1. 0 to go ahead, −1 if refused.
 */
static int check_unattached_exec(int directory_fd, const char *path, char *const envp[]) {
    uintptr_t start, end;
    if (!tc_syscall_trap_filtered_text(&start, &end)) return 0;
    struct tc_program program;
    tc_program_inspect(directory_fd, path, &program);
    if ((program.kind != TC_PROGRAM_STATIC && !program.is_go) || program.fixed_text_end <= start ||
        program.fixed_text_start >= end)
        return 0;
    int allowed = allowed_uncontrolled(envp);
    struct tc_text line;
    tc_message_begin(&line);
    tc_text_append(&line, allowed ? "warning: starting " : "refusing to exec ");
    tc_text_append(&line, *path ? path : "(descriptor)");
    tc_text_append(&line, ": started without the session (no TIMECTL_SEGMENT in its environment), it keeps this"
                          " process's system call filter, which traps timed waits made where its code lies: the first"
                          " would kill it (SIGSYS)");
    tc_text_append(&line, allowed ? " (TIMECTL_ALLOW_UNCONTROLLED=1)\n"
                                  : "; keep TIMECTL_SEGMENT in its environment (or set TIMECTL_ALLOW_UNCONTROLLED=1 to"
                                    " start it anyway)\n");
    line.text[line.length - 1] = '\n';  /* a path too long for the line cuts it short, not its end */
    tc_raw_syscall(SYS_write, 2, line.text, line.length);
    return allowed ? 0 : -1;
}

/*
 * Decides an exec of an attached process: 0 to go ahead with *exec_path,
 * *exec_argv and *use (its environment), −1 if it is refused (the line is
 * written).
 */
static int prepare_exec(int directory_fd, const char *path, char *const argv[], char *const envp[], char **adjusted,
                        char *preload, size_t preload_capacity, char *loader, char **loader_argv,
                        const char **exec_path, char *const **exec_argv, char *const **use) {
    /* A static program re-running itself: /proc/self/exe may name the loader, which needs to be told what to run. */
    const char *own_executable;
    if (directory_fd == AT_FDCWD && tc_static_program_names_executable(path) && tc_static_program_executable(&own_executable))
        path = own_executable;
    *use = envp;
    *exec_path = path;
    *exec_argv = argv;
    /* A session, or libfaketime's variables: the new image will be on a timeline. */
    if (!tc_environment_controls_time(envp)) return check_unattached_exec(directory_fd, path, envp);
    struct tc_program program;
    tc_program_inspect(directory_fd, path, &program);
    const char *problem = tc_program_problem(program.kind);
    if (program.kind == TC_PROGRAM_STATIC && strcmp(program.decided_on, path) == 0) {
        const char *loader_problem = through_loader(directory_fd, path, argv, envp, loader, loader_argv);
        if (loader_problem) {
            problem = loader_problem;
        } else if (tc_shim_controls_static()) {
            /* The kernel would refuse a program it may not execute: so does this, before the loader runs. */
            if (tc_raw_syscall(SYS_faccessat, AT_FDCWD, path, X_OK) != 0) return -2;
            *exec_path = loader;
            *exec_argv = loader_argv;
            /* The loader is a glibc program, whatever C library the static program was linked with. */
            problem = fit_preload(0, 0, NULL, envp, adjusted, preload, preload_capacity, use);
            if (!problem) return 0;
            *exec_path = path;
            *exec_argv = argv;
        }
    }
    if (!problem) {
        problem = fit_preload(program.is_musl, 0, program.sanitizer_runtime[0] ? program.sanitizer_runtime : NULL, envp,
                              adjusted, preload, preload_capacity, use);
        if (!problem) return 0;
    }
    int allowed = allowed_uncontrolled(envp);
    /* Let run on real time: without a shim its loader cannot load. */
    if (allowed && program.kind == TC_PROGRAM_CONTROLLABLE)
        fit_preload(program.is_musl, 1, NULL, envp, adjusted, preload, preload_capacity, use);
    struct tc_text line;
    tc_message_begin(&line);
    tc_text_append(&line, allowed ? "warning: " : "refusing to exec ");
    tc_text_append(&line, *path ? path : "(descriptor)");
    tc_text_append(&line, allowed ? " runs on real time: " : ": ");
    if (strcmp(program.decided_on, path) != 0) {
        tc_text_append(&line, "its interpreter ");
        tc_text_append(&line, program.decided_on);
        tc_text_append(&line, " is ");
    }
    tc_text_append(&line, problem);
    tc_text_append(&line, allowed ? " (TIMECTL_ALLOW_UNCONTROLLED=1)\n"
                                  : "; it would run on real time (set TIMECTL_ALLOW_UNCONTROLLED=1 to run it so, with a warning)\n");
    tc_raw_syscall(SYS_write, 2, line.text, line.length);
    return allowed ? 0 : -1;
}

/*
 * Declares `exec_path`, `exec_argv` and `use`: what an exec of (directory_fd,
 * path) with argv and envp is to run — a static program runs through the
 * loader — or runs `on_refusal`. Stack only.
 */
#define PREPARE_EXEC(directory_fd, path, argv, envp, exec_path, exec_argv, use, on_refusal)                          \
    char *adjusted_[count_entries(envp) + 2];                                                                        \
    char preload_[4096];                                                                                             \
    char loader_[PATH_MAX];                                                                                          \
    char *loader_argv_[count_entries(argv) + 4];                                                                     \
    const char *exec_path;                                                                                           \
    char *const *exec_argv;                                                                                          \
    char *const *use;                                                                                                \
    if (prepare_exec(directory_fd, path, argv, envp, adjusted_, preload_, sizeof preload_, loader_, loader_argv_,   \
                     &exec_path, &exec_argv, &use) != 0)                                                             \
    on_refusal

static int refused(void) {
    errno = EACCES;
    return -1;
}

long tc_exec_checked(int directory_fd, const char *path, char *const argv[], char *const envp[], int flags) {
    PREPARE_EXEC(directory_fd, (flags & AT_EMPTY_PATH) && !*path ? "" : path, argv, envp, exec_path, exec_argv, use,
                 return -EACCES);
    if (exec_argv != argv) return tc_raw_syscall(SYS_execve, exec_path, exec_argv, use);
    if (directory_fd == AT_FDCWD && !flags) return tc_raw_syscall(SYS_execve, exec_path, argv, use);
    return tc_raw_syscall(SYS_execveat, directory_fd, path, argv, use, flags);
}

TC_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    return (int)tc_shim_errno_result(tc_exec_checked(AT_FDCWD, path, argv, envp, 0));
}

TC_EXPORT int execveat(int directory_fd, const char *path, char *const argv[], char *const envp[], int flags) {
    return (int)tc_shim_errno_result(tc_exec_checked(directory_fd, path, argv, envp, flags));
}

TC_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    PREPARE_EXEC(fd, "", argv, envp, exec_path, exec_argv, use, return refused());
    (void)exec_path, (void)exec_argv;  /* a static program from a descriptor is refused, never loaded */
    return (int)tc_shim_errno_result(tc_raw_syscall(SYS_execveat, fd, "", argv, use, AT_EMPTY_PATH));
}

TC_EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

/* A file the kernel would not run (no #!, not ELF) is a shell script, as glibc's exec*p treat it. */
static void execute_as_script(const char *path, char *const argv[], char *const envp[]) {
    int count = 0;
    while (argv[count]) count++;
    char *script_argv[count + 3];
    script_argv[0] = (char *)"/bin/sh";
    script_argv[1] = (char *)path;
    for (int i = 1; i < count; i++) script_argv[i + 1] = argv[i];
    script_argv[count > 0 ? count + 1 : 2] = NULL;
    execve("/bin/sh", script_argv, envp);
}

/*
 * The search of glibc's exec*p functions: each entry of $PATH (else
 * /bin:/usr/bin) in turn, an empty entry meaning the current directory,
 * joined with FILE. Entries too long to join are skipped.
 */
struct path_search {
    const char *next;   /* the rest of the search path; NULL when done */
    const char *file;
    size_t file_length;
};

static struct path_search path_search(const char *file, size_t file_length) {
    const char *path = getenv("PATH");
    return (struct path_search){.next = path ? path : "/bin:/usr/bin", .file = file, .file_length = file_length};
}

/* The next directory/FILE into candidate; 0 when the search path is used up. */
static int next_candidate(struct path_search *search, char candidate[PATH_MAX]) {
    while (search->next) {
        const char *directory = search->next;
        const char *end = strchrnul(directory, ':');
        search->next = *end ? end + 1 : NULL;
        size_t length = (size_t)(end - directory);
        if (length + search->file_length + 2 > PATH_MAX) continue;
        size_t at = 0;
        if (length) {
            memcpy(candidate, directory, length);
            candidate[length] = '/';
            at = length + 1;
        }
        memcpy(candidate + at, search->file, search->file_length + 1);
        return 1;
    }
    return 0;
}

TC_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    if (!*file) {
        errno = ENOENT;
        return -1;
    }
    if (strchr(file, '/')) {
        execve(file, argv, envp);
        if (errno == ENOEXEC) execute_as_script(file, argv, envp);
        return -1;
    }
    size_t file_length = strnlen(file, NAME_MAX + 1);
    if (file_length > NAME_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int saw_eacces = 0;
    struct path_search search = path_search(file, file_length);
    char candidate[PATH_MAX];
    while (next_candidate(&search, candidate)) {
        execve(candidate, argv, envp);
        switch (errno) {
        case EACCES: saw_eacces = 1; break;
        case ENOEXEC: execute_as_script(candidate, argv, envp); break;
        case ENOENT: case ESTALE: case ENOTDIR: case ENODEV: case ETIMEDOUT: break;
        default: return -1;
        }
    }
    errno = saw_eacces ? EACCES : ENOENT;
    return -1;
}

TC_EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

/* The execl* family: the variable arguments, collected into an argv on the stack. */
#define COLLECT_ARGUMENTS(first, after)                                   \
    int count = 1;                                                        \
    va_list counting;                                                     \
    va_start(counting, first);                                            \
    while (va_arg(counting, char *)) count++;                             \
    va_end(counting);                                                     \
    char *argv[count + 1];                                                \
    argv[0] = (char *)first;                                              \
    va_list arguments;                                                    \
    va_start(arguments, first);                                           \
    for (int i = 1; i <= count; i++) argv[i] = va_arg(arguments, char *); \
    after;                                                                \
    va_end(arguments)

TC_EXPORT int execl(const char *path, const char *arg, ...) {
    COLLECT_ARGUMENTS(arg, (void)0);
    return execve(path, argv, environ);
}

TC_EXPORT int execlp(const char *file, const char *arg, ...) {
    COLLECT_ARGUMENTS(arg, (void)0);
    return execvpe(file, argv, environ);
}

TC_EXPORT int execle(const char *path, const char *arg, ...) {
    char *const *envp;
    COLLECT_ARGUMENTS(arg, envp = va_arg(arguments, char *const *));
    return execve(path, argv, envp);
}

/* ---- posix_spawn: checked here, then glibc's own ---- */

typedef int spawn_function(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                           char *const[], char *const[]);

static spawn_function *real_spawn(const char *name, spawn_function **cache) {
    spawn_function *function = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!function) {
        function = (spawn_function *)dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, function, __ATOMIC_RELEASE);
    }
    return function;
}

TC_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                          const posix_spawnattr_t *attributes, char *const argv[], char *const envp[]) {
    static spawn_function *real;
    PREPARE_EXEC(AT_FDCWD, path, argv, envp, exec_path, exec_argv, use, return EACCES);
    spawn_function *function = real_spawn("posix_spawn", &real);
    return function ? function(pid, exec_path, actions, attributes, exec_argv, use) : ENOSYS;
}

TC_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                           const posix_spawnattr_t *attributes, char *const argv[], char *const envp[]) {
    static spawn_function *real;
    /* The program glibc would start: FILE itself, or the first executable regular file on the caller's PATH. */
    char candidate[PATH_MAX];
    const char *program = file;
    if (!strchr(file, '/') && *file) {
        program = "";  /* not found: nothing to inspect, glibc fails with ENOENT */
        struct path_search search = path_search(file, strlen(file));
        while (next_candidate(&search, candidate)) {
            if (tc_raw_syscall(SYS_faccessat, AT_FDCWD, candidate, X_OK) == 0) {
                program = candidate;
                break;
            }
        }
    }
    PREPARE_EXEC(AT_FDCWD, program, argv, envp, exec_path, exec_argv, use, return EACCES);
    if (exec_argv != argv) {  /* through the loader, named by its full path */
        static spawn_function *real_plain;
        spawn_function *function = real_spawn("posix_spawn", &real_plain);
        return function ? function(pid, exec_path, actions, attributes, exec_argv, use) : ENOSYS;
    }
    spawn_function *function = real_spawn("posix_spawnp", &real);
    return function ? function(pid, file, actions, attributes, argv, use) : ENOSYS;
}

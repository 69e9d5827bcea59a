/*
 * Attaching on libfaketime's settings (faketime_env.h; for people:
 * docs/from-libfaketime.md).
 *
 * The clock's segment is made with the core's own functions and set with
 * its verbs (runtime/faketime.c), so its arithmetic is a session's. It is
 * shared by the process tree, as libfaketime shares its start time and
 * its "i" counter through /dev/shm, except where libfaketime restarts the
 * clock in every process ('@' and '%' without FAKETIME_DONT_RESET): then
 * each process image makes its own, unlinked at once (a fork child shares
 * its parent's mapping, as it shares libfaketime's memory). A shared one
 * lives in the session directory as faketime-PID-N.faketime, named to the
 * tree through TIMECTL_FAKETIME_SEGMENT in the environment (libfaketime's
 * FAKETIME_SHARED), and is removed by the last process of the tree to
 * exit; one left by a tree that was killed is removed by the next tree
 * that makes one, a minute on.
 */
#define _GNU_SOURCE
#include "faketime_env.h"
#include "../runtime/faketime.h"
#include "../runtime/process.h"
#include "../runtime/text.h"
#include "timectl_faketime.h"
#include "timectl_session_directory.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PATH_CAPACITY 4096
#define SHARED_SUFFIX ".faketime"

static char shared_path[PATH_CAPACITY];
static char home_faketimerc[PATH_CAPACITY];
/* What set the tree's clock up (FAKETIME's value and the variables that shape it), in the file's name: a program
   given other settings inside the tree (a nested FAKETIME=… command) starts a clock of its own. */
static uint64_t settings_hash;
static char text_read[256];

/* ---- refusing ---- */

__attribute__((noreturn)) static void refuse(const char *first, const char *second, const char *third) {
    struct tc_text line;
    tc_message_begin(&line);
    tc_text_append(&line, first);
    if (second) tc_text_append(&line, second);
    if (third) tc_text_append(&line, third);
    tc_text_append(&line, "; refusing to run\n");
    line.text[line.length - 1] = '\n';  /* a line cut short still ends */
    tc_raw_syscall(SYS_write, 2, line.text, line.length);
    tc_raw_syscall(SYS_exit_group, TC_SHIM_REFUSAL_STATUS);
    __builtin_unreachable();
}

/* One line per refused setting: the first found ends the process. */
static void refuse_unsupported(void) {
    for (size_t i = 0; i < tc_faketime_variable_count; i++) {
        const struct tc_faketime_variable *variable = &tc_faketime_variables[i];
        const char *value = getenv(variable->name);
        if (!value || variable->handling != TC_FAKETIME_REFUSED) continue;
        if (variable->refused_value && strcmp(value, variable->refused_value) != 0) continue;
        refuse(variable->name, " is libfaketime's, and timectl does not implement it: ", variable->instead);
    }
    if (getenv("FAKETIME_SKIP_CMDS") && getenv("FAKETIME_ONLY_CMDS"))
        refuse("FAKETIME_SKIP_CMDS and FAKETIME_ONLY_CMDS are both set: libfaketime accepts one or the other", NULL,
               NULL);
}

/* ---- settings ---- */

/* A whole number of `name` (libfaketime's atol), or `otherwise` when it is unset. */
static int64_t whole_number(const char *name, int64_t otherwise) {
    const char *value = getenv(name);
    if (!value) return otherwise;
    const char *at = value;
    int negative = *at == '-';
    if (*at == '-' || *at == '+') at++;
    int64_t result = 0;
    if (*at < '0' || *at > '9') refuse(name, " is not a whole number: ", value);
    for (; *at >= '0' && *at <= '9'; at++)
        if ((result = result * 10 + (*at - '0')) > (int64_t)1 << 40) refuse(name, " is too large: ", value);
    if (*at) refuse(name, " is not a whole number: ", value);
    return negative ? -result : result;
}

/* Whether a comma-separated list of commands names this program (libfaketime compares __progname). */
static int names_this_program(const char *list) {
    const char *self = program_invocation_short_name ? program_invocation_short_name : "";
    size_t length = strlen(self);
    for (const char *at = list; *at;) {
        const char *end = strchrnul(at, ',');
        if ((size_t)(end - at) == length && length && strncmp(at, self, length) == 0) return 1;
        at = *end ? end + 1 : end;
    }
    return 0;
}

static int command_skipped(void) {
    const char *skip = getenv("FAKETIME_SKIP_CMDS"), *only = getenv("FAKETIME_ONLY_CMDS");
    return (skip && names_this_program(skip)) || (only && !names_this_program(only));
}

/* Whether a libfaketime flag is "1" (FAKETIME_DONT_FAKE_MONOTONIC, its older name, FAKETIME_NO_CACHE). */
static int flag_is_one(const char *name) {
    const char *value = getenv(name);
    return value && strcmp(value, "1") == 0;
}

static void read_settings(void) {
    struct tc_faketime_process *p = &tc_faketime;
    const char *monotonic = getenv("FAKETIME_DONT_FAKE_MONOTONIC");
    if (!monotonic) monotonic = getenv("DONT_FAKE_MONOTONIC");
    p->monotonic_real = monotonic && strcmp(monotonic, "1") == 0;
    p->file_times_real = getenv("NO_FAKE_STAT") != NULL;
    p->dont_reset = getenv("FAKETIME_DONT_RESET") != NULL;
    p->smooth_rate_changes = getenv("FAKETIME_XRESET") != NULL;
    int64_t seconds = whole_number("FAKETIME_START_AFTER_SECONDS", -1);
    p->start_after_ns = seconds < 0 ? -1 : seconds * TC_NS_PER_SECOND;
    seconds = whole_number("FAKETIME_STOP_AFTER_SECONDS", -1);
    p->stop_after_ns = seconds < 0 ? -1 : seconds * TC_NS_PER_SECOND;
    p->start_after_calls = whole_number("FAKETIME_START_AFTER_NUMCALLS", -1);
    p->stop_after_calls = whole_number("FAKETIME_STOP_AFTER_NUMCALLS", -1);
    if (p->start_after_calls < 0) p->start_after_calls = -1;
    if (p->stop_after_calls < 0) p->stop_after_calls = -1;
    p->format = getenv("FAKETIME_FMT");
    p->follow_file = getenv("FAKETIME_FOLLOW_FILE");
    p->fixed_text = getenv("FAKETIME");
    p->timestamp_file = getenv("FAKETIME_TIMESTAMP_FILE");
    const char *home = getenv("HOME");
    if (home && strlen(home) + sizeof "/.faketimerc" <= sizeof home_faketimerc) {
        strcpy(home_faketimerc, home);
        strcat(home_faketimerc, "/.faketimerc");
        p->home_faketimerc = home_faketimerc;
    }
    /* libfaketime's cache: FAKETIME itself is read once (but a '%' re-reads its file's time); a file every 10 s. */
    int64_t cache = whole_number("FAKETIME_CACHE_DURATION", 10);
    p->reread_every_ns = flag_is_one("FAKETIME_NO_CACHE") || cache <= 0 ? 0 : cache * TC_NS_PER_SECOND;
    const char *text = tc_faketime_initial_text(text_read, sizeof text_read);
    struct tc_faketime_spec spec;
    const char *problem = tc_faketime_parse(text, p->format, &spec);
    if (problem) {
        struct tc_text detail = {.length = 0};
        tc_text_append(&detail, p->fixed_text ? "FAKETIME '" : "the setting '");
        tc_text_append(&detail, text);
        tc_text_append(&detail, "' ");
        tc_text_append(&detail, problem);
        refuse(detail.text, strstr(problem, "date format") ? " " : NULL,
               strstr(problem, "date format") ? (p->format ? p->format : "'%Y-%m-%d %T' (FAKETIME_FMT)") : NULL);
    }
    tc_faketime_set_spec(&spec);
    if (p->spec.kind == TC_FAKETIME_FOLLOW_FILE) {
        struct stat info;
        if (!p->follow_file) refuse("FAKETIME '%' needs FAKETIME_FOLLOW_FILE, the file whose time it starts at", NULL, NULL);
        if (tc_raw_syscall(SYS_newfstatat, AT_FDCWD, p->follow_file, &info, 0) != 0)
            refuse("FAKETIME_FOLLOW_FILE ", p->follow_file, " cannot be read");
    }
    if (p->fixed_text && p->spec.kind != TC_FAKETIME_FOLLOW_FILE) p->reread_every_ns = -1;
    tc_faketime_note_applied(text);
    const char *shaping[] = {text, p->format, p->timestamp_file, p->follow_file, p->dont_reset ? "reset" : NULL};
    settings_hash = 0xcbf29ce484222325ULL;  /* FNV-1a */
    for (unsigned i = 0; i < sizeof shaping / sizeof shaping[0]; i++)
        for (const char *at = shaping[i] ? shaping[i] : ""; ; at++) {
            settings_hash = (settings_hash ^ (unsigned char)*at) * 0x100000001b3ULL;
            if (!*at) break;
        }
}

/* ---- the directory and the segments ---- */

/* The session directory, opened; created 0700 if missing. */
static long open_session_directory(char *path, size_t capacity) {
    if (!tc_session_directory(getenv("TIMECTL_DIR"), getenv("XDG_RUNTIME_DIR"), (uint32_t)tc_raw_syscall(SYS_geteuid, 0),
                              path, capacity))
        refuse("the session directory's path is too long: $TIMECTL_DIR or $XDG_RUNTIME_DIR", NULL, NULL);
    tc_raw_syscall(SYS_mkdirat, AT_FDCWD, path, 0700);
    return tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* A directory that only this user can write, or the process refuses (as a session's would be refused). */
static void check_directory(long fd, const char *path) {
    struct stat info;
    if (fd < 0) refuse("cannot open the directory ", path, " for libfaketime's settings' clock");
    if (tc_raw_syscall(SYS_fstat, fd, &info) != 0 || info.st_uid != (uid_t)tc_raw_syscall(SYS_geteuid, 0) ||
        (info.st_mode & 077))
        refuse("the directory ", path, " is not private to this user (owner and mode 0700): refusing its clock");
}

static int64_t boottime_now(void) { return tc_real_ns(CLOCK_BOOTTIME); }

/* A file name unique to this process image: PREFIX-PID-BOOTTIME. */
static void unique_name(struct tc_text *name, const char *prefix, const char *suffix) {
    name->length = 0;
    name->text[0] = 0;
    tc_text_append(name, prefix);
    tc_text_append_number(name, tc_raw_syscall(SYS_getpid, 0));
    tc_text_append(name, "-");
    tc_text_append_number(name, boottime_now());
    tc_text_append(name, suffix);
}

/* The end of a tree's file name: -HASH.faketime, the hash of the settings that made it, in hex. */
static void settings_suffix(struct tc_text *suffix) {
    static const char digits[] = "0123456789abcdef";
    suffix->length = 0;
    suffix->text[0] = 0;
    tc_text_append(suffix, "-");
    for (int shift = 60; shift >= 0; shift -= 4) {
        char digit[2] = {digits[(settings_hash >> shift) & 15], 0};
        tc_text_append(suffix, digit);
    }
    tc_text_append(suffix, SHARED_SUFFIX);
}

static void refuse_segment(const char *path, const struct tc_failure *failure) {
    struct tc_text reason = {.length = 0};
    tc_text_append(&reason, " ");
    tc_text_append(&reason, tc_result_phrase(failure->result));
    refuse("the clock segment ", path, reason.text);
}

/* A segment of this process image's own: made at real time and unlinked at once. */
static struct tc_segment *private_segment(void) {
    char directory[PATH_CAPACITY];
    long fd = open_session_directory(directory, sizeof directory);
    check_directory(fd, directory);
    struct tc_text name;
    unique_name(&name, "faketime-", ".private");
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    int result = tc_segment_create((int)fd, "faketime", name.text, NULL, &mapping, &failure);
    tc_raw_syscall(SYS_unlinkat, fd, name.text, 0);
    tc_raw_syscall(SYS_close, fd);
    if (result != TC_OK) refuse("cannot make a clock segment in ", directory, NULL);
    return mapping.segment;
}

/* Removes the shared segments no live process is registered in: left by a tree that was killed. */
static void remove_stale(long directory_fd) {
    char buffer[4096] __attribute__((aligned(8)));
    for (;;) {
        long length = tc_raw_syscall(SYS_getdents64, directory_fd, buffer, sizeof buffer);
        if (length <= 0) break;
        for (long at = 0; at < length;) {
            struct dirent64 *entry = (struct dirent64 *)(buffer + at);
            at += entry->d_reclen;
            size_t size = strlen(entry->d_name);
            if (strncmp(entry->d_name, "faketime-", 9) != 0 || size < sizeof SHARED_SUFFIX ||
                strcmp(entry->d_name + size - (sizeof SHARED_SUFFIX - 1), SHARED_SUFFIX) != 0)
                continue;
            struct tc_mapping mapping;
            if (tc_segment_open((int)directory_fd, entry->d_name, &mapping, NULL) != TC_OK) continue;
            /* Every process registers before the file has its name (shared_segment), or just after it opens it. */
            if (!tc_faketime_others_alive(mapping.segment, 0)) tc_raw_syscall(SYS_unlinkat, directory_fd, entry->d_name, 0);
            tc_segment_unmap(&mapping);
        }
    }
}

/* Joins the tree: registered in its segment, which the last process to leave removes (only that file). */
static void note_shared(long directory_fd, const char *name, struct tc_segment *segment) {
    struct stat info;
    if (tc_raw_syscall(SYS_newfstatat, directory_fd, name, &info, AT_SYMLINK_NOFOLLOW) != 0) info.st_ino = 0;
    tc_faketime.clock = segment;
    tc_faketime_join_tree(shared_path, info.st_dev, info.st_ino);
}

/*
 * The tree's segment at `directory`/`name`: opened, or made, set to the
 * spec and only then linked under its name, so that a process that opens
 * it finds the clock set. Two making it at once: one link wins, the other
 * opens it.
 */
static struct tc_segment *shared_segment(long directory_fd, const char *directory, const char *name) {
    struct tc_mapping mapping;
    struct tc_failure failure = {0};
    for (int attempt = 0; attempt < 3; attempt++) {
        int result = tc_segment_open((int)directory_fd, name, &mapping, &failure);
        if (result == TC_OK) {
            note_shared(directory_fd, name, mapping.segment);
            return mapping.segment;
        }
        if (result != TC_E_MISSING) refuse_segment(shared_path, &failure);
        struct tc_text temporary;
        unique_name(&temporary, ".faketime-", ".configuring");
        if (tc_segment_create((int)directory_fd, "faketime", temporary.text, NULL, &mapping, &failure) != TC_OK)
            refuse("cannot make a clock segment in ", directory, NULL);
        tc_faketime.clock = mapping.segment;
        result = tc_faketime_apply_spec(&tc_faketime.spec, 1);
        if (result != TC_OK) {
            tc_raw_syscall(SYS_unlinkat, directory_fd, temporary.text, 0);
            refuse("the clock libfaketime's settings ask for is out of range: ", tc_result_phrase(result), NULL);
        }
        /* Registered before the name exists: a tree starting meanwhile never finds it unused and removes it. */
        note_shared(directory_fd, temporary.text, mapping.segment);
        long linked = tc_raw_syscall(SYS_linkat, directory_fd, temporary.text, directory_fd, name, 0);
        tc_raw_syscall(SYS_unlinkat, directory_fd, temporary.text, 0);
        if (linked == 0) return mapping.segment;
        tc_faketime_leave_tree();
        tc_faketime.clock = NULL;
        tc_segment_unmap(&mapping);
        if (linked != -EEXIST) refuse("cannot link the clock segment ", shared_path, NULL);
    }
    refuse("cannot open or make the clock segment ", shared_path, NULL);
}

/* The tree's segment: the one TIMECTL_FAKETIME_SEGMENT names, made with these settings; or a new one (then named
   to the tree). */
static struct tc_segment *tree_segment(void) {
    const char *named = getenv(TC_FAKETIME_SEGMENT_VARIABLE);
    char directory[PATH_CAPACITY];
    long fd;
    const char *name;
    struct tc_text suffix;
    settings_suffix(&suffix);
    size_t named_length = named ? strlen(named) : 0;
    if (named && named[0] == '/' && named_length < sizeof shared_path && named_length > suffix.length &&
        strcmp(named + named_length - suffix.length, suffix.text) == 0) {
        strcpy(shared_path, named);
        char *slash = strrchr(shared_path, '/');
        size_t length = (size_t)(slash - shared_path);
        memcpy(directory, shared_path, length);
        directory[length ? length : 1] = 0;
        if (!length) directory[0] = '/';
        name = slash + 1;
        fd = tc_raw_syscall(SYS_openat, AT_FDCWD, directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        check_directory(fd, directory);
    } else {
        fd = open_session_directory(directory, sizeof directory);
        check_directory(fd, directory);
        remove_stale(fd);
        struct tc_text file;
        unique_name(&file, "faketime-", suffix.text);
        if (strlen(directory) + 1 + file.length >= sizeof shared_path) refuse("the session directory's path is too long: ", directory, NULL);
        strcpy(shared_path, directory);
        strcat(shared_path, "/");
        strcat(shared_path, file.text);
        name = strrchr(shared_path, '/') + 1;
    }
    struct tc_segment *segment = shared_segment(fd, directory, name);
    tc_raw_syscall(SYS_close, fd);
    return segment;
}

/*
 * Names the tree's segment to this process's children: TIMECTL_FAKETIME_SEGMENT
 * in `environ`, in an array of its own (mmap, not malloc: this may run
 * inside malloc), as libfaketime sets FAKETIME_SHARED.
 */
static void export_tree_segment(void) {
    const char *current = getenv(TC_FAKETIME_SEGMENT_VARIABLE);
    if (current && strcmp(current, shared_path) == 0) return;
    size_t count = 0;
    while (environ[count]) count++;
    size_t entry_length = sizeof TC_FAKETIME_SEGMENT_VARIABLE + strlen(shared_path) + 1;
    size_t size = (count + 2) * sizeof(char *) + entry_length;
    long address = tc_raw_syscall(SYS_mmap, 0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address < 0 && address > -4096) return;  /* children then make their own, as libfaketime's would */
    char **entries = (char **)address;
    char *entry = (char *)(entries + count + 2);
    strcpy(entry, TC_FAKETIME_SEGMENT_VARIABLE "=");
    strcat(entry, shared_path);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], TC_FAKETIME_SEGMENT_VARIABLE "=", sizeof TC_FAKETIME_SEGMENT_VARIABLE) != 0)
            entries[kept++] = environ[i];
    entries[kept++] = entry;
    entries[kept] = NULL;
    __atomic_store_n(&environ, entries, __ATOMIC_RELEASE);
}

/* ---- fork ---- */

static void after_fork_in_child(void) { tc_faketime_after_fork_in_child(); }

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

/* ---- attaching ---- */

/* Whether the clock reads what the spec says only with work on every reading. */
static int needs_per_call_reads(const struct tc_faketime_process *p) {
    int steps = p->spec.has_increment && p->spec.kind != TC_FAKETIME_FROZEN && p->spec.kind != TC_FAKETIME_MODIFIERS;
    return steps || p->start_after_ns >= 0 || p->stop_after_ns >= 0 || p->start_after_calls >= 0 ||
           p->stop_after_calls >= 0 || p->reread_every_ns >= 0 || p->monotonic_real;
}

int tc_faketime_attach(struct tc_segment **waits, struct tc_segment **reads) {
    if (!tc_environment_asks_faketime(environ)) return TC_FAKETIME_NOT_ASKED;
    refuse_unsupported();
    read_settings();
    struct tc_faketime_process *p = &tc_faketime;
    int restarts = (p->spec.kind == TC_FAKETIME_START_AT || p->spec.kind == TC_FAKETIME_FOLLOW_FILE) &&
                   !p->dont_reset && !p->spec.has_increment;
    int skipped = command_skipped();
    if (restarts) {
        /* A skipped program keeps no clock of its own: nothing of it is shared. */
        if (skipped) return TC_FAKETIME_SKIPPED;
        p->clock = private_segment();
        int result = tc_faketime_apply_spec(&p->spec, 1);
        if (result != TC_OK) refuse("the clock libfaketime's settings ask for is out of range: ", tc_result_phrase(result), NULL);
    } else {
        p->clock = tree_segment();
        export_tree_segment();
    }
    p->per_call = needs_per_call_reads(p);
    int stands_still = p->spec.kind == TC_FAKETIME_FROZEN || p->spec.kind == TC_FAKETIME_MODIFIERS ||
                       (p->spec.has_increment && p->per_call);
    int separate_waits = p->per_call || stands_still;
    static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;
    pthread_once(&fork_handler, install_fork_handler);
    if (skipped) return TC_FAKETIME_SKIPPED;
    p->waits = p->clock;
    if (separate_waits) {
        p->waits = private_segment();
        if (p->spec.rate != TC_RATE_ONE) {
            struct tc_verb verb = {.kind = TC_VERB_SET_RATE, .rate = p->spec.rate};
            if (tc_segment_lock(p->waits, TC_NS_PER_SECOND, NULL) == TC_OK) {
                tc_segment_apply(p->waits, &verb, NULL);
                tc_segment_unlock(p->waits);
            }
        }
    }
    __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
    *waits = p->waits;
    *reads = p->per_call ? NULL : p->clock;
    return TC_FAKETIME_ATTACH;
}

/*
 * What kind of program an exec would start (timectl_program.h). Reads only
 * the ELF headers it needs, with pread on the caller's stack.
 */
#define _GNU_SOURCE
#include "timectl_program.h"
#include "timectl_program_support.h"
#include "timectl_realclock.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#endif

#define MAX_SCRIPT_DEPTH 4
#define MAX_LOADS 16
#define MAX_NOTES 8

static void copy_text(char *target, unsigned capacity, const char *source, unsigned length) {
    unsigned i = 0;
    for (; i + 1 < capacity && i < length && source[i]; i++) target[i] = source[i];
    target[i] = 0;
}

static int starts_with(const char *text, const char *prefix) {
    for (; *prefix; text++, prefix++)
        if (*text != *prefix) return 0;
    return 1;
}

static long read_at(int fd, void *buffer, unsigned long size, uint64_t offset) {
    long got;
    while ((got = tc_raw_syscall(SYS_pread64, fd, buffer, size, offset)) == -EINTR) {}
    return got < 0 ? 0 : got;
}

static uint16_t u16(const unsigned char *at) { return (uint16_t)(at[0] | at[1] << 8); }
static uint32_t u32(const unsigned char *at) { return (uint32_t)u16(at) | (uint32_t)u16(at + 2) << 16; }
static uint64_t u64(const unsigned char *at) { return (uint64_t)u32(at) | (uint64_t)u32(at + 4) << 32; }

const char *tc_program_problem(enum tc_program_kind kind) {
    switch (kind) {
    case TC_PROGRAM_STATIC: return "statically linked, so LD_PRELOAD cannot load the shim into it";
    case TC_PROGRAM_GO: return "a Go program, and Go reads clocks and waits without libc where the shim cannot see it";
    case TC_PROGRAM_GO_WITHOUT_CGO:
        return "a Go program linked dynamically without cgo (-buildmode=pie or -linkmode=external), whose threads the shim "
               "cannot enter; build it with CGO_ENABLED=0 (run through the loader) or with cgo";
    case TC_PROGRAM_SETID: return "setuid/setgid to another user or group, and the kernel drops LD_PRELOAD for it";
    case TC_PROGRAM_FILE_CAPABILITIES:
        return "given capabilities by its file (getcap lists them), so the kernel starts it for a user other than root in "
               "secure-execution mode, which drops LD_PRELOAD";
    case TC_PROGRAM_SECURE_EXECUTION:
        return "started by a process whose effective user or group is not its real one, so the kernel starts it in "
               "secure-execution mode, which drops LD_PRELOAD";
    case TC_PROGRAM_FOREIGN: return "not a 64-bit program of this machine's kind, so the shim cannot load into it";
    default: return 0;
    }
}

static uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) & ~(alignment - 1); }

int tc_notes_include(const void *notes, uint64_t size, uint64_t alignment, const char *owner, uint32_t type) {
    const unsigned char *bytes = notes;
    /* As glibc's loader reads PT_NOTE: 8-byte notes (.note.gnu.property) where the segment says so, else 4. */
    if (alignment != 8) alignment = 4;
    uint64_t owner_length = 0;
    while (owner[owner_length]) owner_length++;
    for (uint64_t at = 0; size >= 12 && at <= size - 12;) {
        uint32_t name_size = u32(bytes + at), desc_size = u32(bytes + at + 4), note_type = u32(bytes + at + 8);
        const unsigned char *name = bytes + at + 12;
        if (name_size > size - at - 12) return 0;
        /* The owner's name, NUL-terminated, and nothing but NULs after it ("Go\0" or the Go linker's "Go\0\0"). */
        int owned = name_size > owner_length && (type == TC_NOTE_ANY_TYPE || note_type == type);
        for (uint64_t i = 0; owned && i < name_size; i++) owned = name[i] == (i < owner_length ? (unsigned char)owner[i] : 0);
        if (owned) return 1;
        at = align_up(align_up(at + 12 + name_size, alignment) + desc_size, alignment);
    }
    return 0;
}

int tc_notes_mark_go_program(const void *notes, uint64_t size, uint64_t alignment) {
    return tc_notes_include(notes, size, alignment, "Go", TC_NOTE_ANY_TYPE);
}

/* Whether the PT_NOTE segment at `offset` in the file marks a Go program (its first 4 KiB are read). */
static int file_notes_mark_go_program(int fd, uint64_t offset, uint64_t size, uint64_t alignment) {
    unsigned char notes[4096];
    long length = read_at(fd, notes, size < sizeof notes ? size : sizeof notes, offset);
    return tc_notes_mark_go_program(notes, (uint64_t)length, alignment);
}

/* PT_INTERP's path, and whether it is musl's loader (/lib/ld-musl-x86_64.so.1): by its file name, as musl installs it. */
static void read_interpreter(int fd, uint64_t offset, uint64_t size, struct tc_program *program) {
    char path[sizeof program->interpreter];
    long got = read_at(fd, path, size < sizeof path - 1 ? size : sizeof path - 1, offset);
    path[got] = 0;
    copy_text(program->interpreter, sizeof program->interpreter, path, sizeof path);
    const char *name = path;
    for (const char *at = path; *at; at++)
        if (*at == '/') name = at + 1;
    program->is_musl = starts_with(name, "ld-musl-");
}

static int is_sanitizer_runtime(const char *name, int *weak) {
    static const char *const primary[] = {"libasan.so", "libtsan.so", "libhwasan.so", "liblsan.so",
                                          "libclang_rt.asan", "libclang_rt.tsan", "libclang_rt.hwasan",
                                          "libclang_rt.lsan", 0};
    for (int i = 0; primary[i]; i++)
        if (starts_with(name, primary[i])) return (*weak = 0, 1);
    if (starts_with(name, "libubsan.so") || starts_with(name, "libclang_rt.ubsan")) return (*weak = 1, 1);
    return 0;
}

/*
 * Whether the string table of `size` bytes at `offset` names `wanted` (at most 31 bytes): as one of its
 * strings or the end of one, since the linker lets a name share the tail of a longer one
 * ("pthread_create" inside "_cgo_try_pthread_create").
 */
static int strings_name(int fd, uint64_t offset, uint64_t size, const char *wanted) {
    unsigned length = 0;
    while (wanted[length]) length++;
    if (length == 0 || length > 31) return 0;
    unsigned char chunk[4096], last[32];  /* `last`: the current string's latest bytes, as a ring */
    unsigned run = 0;                     /* bytes since the last NUL */
    for (uint64_t at = 0; at < size && at < (1u << 24); at += sizeof chunk) {
        long got = read_at(fd, chunk, size - at < sizeof chunk ? size - at : sizeof chunk, offset + at);
        if (got <= 0) return 0;
        for (long i = 0; i < got; i++) {
            if (chunk[i] != 0) {
                last[run++ % sizeof last] = chunk[i];
                continue;
            }
            int ends_with = run >= length;
            for (unsigned k = 0; ends_with && k < length; k++)
                ends_with = last[(run - length + k) % sizeof last] == (unsigned char)wanted[k];
            if (ends_with) return 1;
            run = 0;
        }
    }
    return 0;
}

/* DT_NEEDED names, through DT_STRTAB mapped back to a file offset by the PT_LOADs. */
static void read_needed(int fd, uint64_t dynamic_offset, uint64_t dynamic_size, const uint64_t loads[][3],
                        int load_count, struct tc_program *program) {
    uint64_t needed[TC_PROGRAM_MAX_NEEDED];
    int count = 0;
    uint64_t string_table = 0, string_table_size = 0, soname = 0;
    int has_soname = 0;
    unsigned char entries[4096];
    int done = 0;
    for (uint64_t at = 0; at < dynamic_size && !done; at += sizeof entries) {
        uint64_t want = dynamic_size - at < sizeof entries ? dynamic_size - at : sizeof entries;
        long got = read_at(fd, entries, want, dynamic_offset + at);
        if (got < 16) break;
        for (long i = 0; i + 16 <= got; i += 16) {
            uint64_t tag = u64(entries + i), value = u64(entries + i + 8);
            if (tag == DT_NULL) { done = 1; break; }
            if (tag == DT_NEEDED && count < TC_PROGRAM_MAX_NEEDED) needed[count++] = value;
            if (tag == DT_STRTAB) string_table = value;
            if (tag == DT_STRSZ) string_table_size = value;
            if (tag == DT_SONAME) soname = value, has_soname = 1;
        }
    }
    if (!string_table) return;
    uint64_t table_offset = 0;
    int found = 0;
    for (int i = 0; i < load_count && !found; i++)
        if (string_table >= loads[i][0] && string_table < loads[i][0] + loads[i][2]) {
            table_offset = string_table - loads[i][0] + loads[i][1];
            found = 1;
        }
    if (!found) return;
    if (has_soname) {
        char name[64];
        long got = read_at(fd, name, sizeof name - 1, table_offset + soname);
        name[got] = 0;
        /* The dynamic loader run as a command (`ld-linux-x86-64.so.2 ./program`) loads LD_PRELOAD as usual. */
        program->is_dynamic_loader = starts_with(name, "ld-linux");
    }
    program->imports_pthread_create = strings_name(fd, table_offset, string_table_size, "pthread_create");
    int weak_sanitizer = 0;
    for (int i = 0; i < count; i++) {
        char name[64];
        long got = read_at(fd, name, sizeof name - 1, table_offset + needed[i]);
        name[got] = 0;
        copy_text(program->needed[program->needed_count++], 64, name, sizeof name);
        int weak;
        if (is_sanitizer_runtime(name, &weak) && (!program->sanitizer_runtime[0] || (weak_sanitizer && !weak))) {
            copy_text(program->sanitizer_runtime, sizeof program->sanitizer_runtime, name, sizeof name);
            weak_sanitizer = weak;
        }
    }
}

static enum tc_program_kind inspect_elf(int fd, const unsigned char *header, long length, struct tc_program *program) {
    if (length < 64 || header[EI_CLASS] != ELFCLASS64 || header[EI_DATA] != ELFDATA2LSB) return TC_PROGRAM_FOREIGN;
#ifdef NATIVE_MACHINE
    if (u16(header + 0x12) != NATIVE_MACHINE) return TC_PROGRAM_FOREIGN;
#endif
    uint64_t table = u64(header + 0x20);
    unsigned entry_size = u16(header + 0x36), entries = u16(header + 0x38);
    if (entry_size < sizeof(Elf64_Phdr)) return TC_PROGRAM_NOT_INSPECTED;
    int has_interpreter = 0, is_go = 0, load_count = 0, fixed = u16(header + 0x10) == ET_EXEC;
    uint64_t text_start = UINT64_MAX, text_end = 0;
    uint64_t loads[MAX_LOADS][3];  /* vaddr, offset, file size */
    uint64_t dynamic_offset = 0, dynamic_size = 0;
    unsigned char headers[4096];
    unsigned per_read = sizeof headers / entry_size;
    for (unsigned first = 0; first < entries; first += per_read) {
        unsigned count = entries - first < per_read ? entries - first : per_read;
        long got = read_at(fd, headers, (unsigned long)count * entry_size, table + (uint64_t)first * entry_size);
        for (unsigned i = 0; i < count && (long)((i + 1) * entry_size) <= got; i++) {
            const unsigned char *phdr = headers + i * entry_size;
            uint32_t type = u32(phdr);
            uint64_t offset = u64(phdr + 8), vaddr = u64(phdr + 16), file_size = u64(phdr + 32), align = u64(phdr + 48);
            if (type == PT_LOAD && (u32(phdr + 4) & PF_X)) {
                uint64_t memory_size = u64(phdr + 40);
                if (vaddr < text_start) text_start = vaddr;
                if (vaddr + memory_size > text_end) text_end = vaddr + memory_size;
            }
            if (type == PT_INTERP) {
                has_interpreter = 1;
                read_interpreter(fd, offset, file_size, program);
            }
            if (type == PT_DYNAMIC) dynamic_offset = offset, dynamic_size = file_size;
            if (type == PT_LOAD && load_count < MAX_LOADS) {
                loads[load_count][0] = vaddr, loads[load_count][1] = offset, loads[load_count][2] = file_size;
                load_count++;
            }
            if (type == PT_NOTE && !is_go) is_go = file_notes_mark_go_program(fd, offset, file_size, align);
        }
    }
    if (dynamic_size) read_needed(fd, dynamic_offset, dynamic_size, (const uint64_t(*)[3])loads, load_count, program);
    program->is_go = is_go;
    if (fixed && text_end > text_start) program->fixed_text_start = text_start, program->fixed_text_end = text_end;
    if (!has_interpreter && !program->is_dynamic_loader) return TC_PROGRAM_STATIC;
    /* A dynamically linked Go program loads the shim, which then catches its vDSO reads and raw waits. */
    if (is_go && !tc_shim_controls_go()) return TC_PROGRAM_GO;
    /* Without cgo's runtime (which starts threads with pthread_create) Go sets each thread's FS itself, and the
       shim's trap handler, which needs libc's thread-local state, has none to run on. */
    if (is_go && !program->imports_pthread_create) return TC_PROGRAM_GO_WITHOUT_CGO;
    return TC_PROGRAM_CONTROLLABLE;
}

/* Whether the file open at `fd` is on a file system mounted nosuid, where the kernel ignores set-ID bits and file
   capabilities. */
static int on_nosuid_mount(int fd) {
    struct statfs mount;
    return tc_raw_syscall(SYS_fstatfs, fd, &mount) == 0 && (mount.f_flags & ST_NOSUID);
}

/* Whether the file's capabilities (security.capability) make the kernel start it in secure-execution mode for a
   process whose real user is not root: the effective flag, or a capability its permitted set would gain. */
static int capabilities_secure(int fd) {
    struct vfs_ns_cap_data data;
    long length = tc_raw_syscall(SYS_fgetxattr, fd, "security.capability", &data, sizeof data);
    if (length < (long)XATTR_CAPS_SZ_1) return 0;
    uint32_t magic = data.magic_etc, revision = magic & VFS_CAP_REVISION_MASK;
    /* The kernel shows a user namespace its own root's capabilities as revision 2 (or 3 with root id 0);
       those of another namespace's root do not apply here. */
    if (revision == VFS_CAP_REVISION_3 && (length < (long)XATTR_CAPS_SZ_3 || data.rootid != 0)) return 0;
    if (revision != VFS_CAP_REVISION_1 && revision != VFS_CAP_REVISION_2 && revision != VFS_CAP_REVISION_3) return 0;
    if (magic & VFS_CAP_FLAGS_EFFECTIVE) return 1;
    int words = revision == VFS_CAP_REVISION_1 ? 1 : 2;
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct own[2] = {{0, 0, 0}, {0, 0, 0}};
    tc_raw_syscall(SYS_capget, &header, own);
    /* The new permitted set: the file's permitted ones within the bounding set, and its inheritable ones within ours. */
    for (int word = 0; word < words; word++) {
        if (data.data[word].inheritable & own[word].inheritable) return 1;
        for (int bit = 0; bit < 32; bit++)
            if ((data.data[word].permitted >> bit & 1) && tc_raw_syscall(SYS_prctl, PR_CAPBSET_READ, word * 32 + bit) == 1)
                return 1;
    }
    return 0;
}

/*
 * Whether the kernel would start the ELF file open at `fd` in secure-execution
 * mode (AT_SECURE) for this process, in which the dynamic loader ignores
 * LD_PRELOAD; the kind that says why, else TC_PROGRAM_CONTROLLABLE. The
 * kernel's rule (cap_bprm_creds_from_file, security/commoncap.c): the new
 * effective user or group differs from the old effective one or from the
 * real one (set-user-ID; set-group-ID, which counts only with group execute;
 * neither counts on a nosuid mount or under no_new_privs), or, for a real
 * user other than root, the file's capabilities. A security module
 * (SELinux, AppArmor) changing domain at exec may ask for it as well: that
 * is not seen here.
 */
static enum tc_program_kind secure_execution(int fd, const struct stat *info) {
    uid_t real_uid, effective_uid, saved_uid;
    gid_t real_gid, effective_gid, saved_gid;
    tc_raw_syscall(SYS_getresuid, &real_uid, &effective_uid, &saved_uid);
    tc_raw_syscall(SYS_getresgid, &real_gid, &effective_gid, &saved_gid);
    if (effective_uid != real_uid || effective_gid != real_gid) return TC_PROGRAM_SECURE_EXECUTION;
    int setuid = (info->st_mode & S_ISUID) != 0, setgid = (info->st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP);
    if (((setuid && info->st_uid != effective_uid) || (setgid && info->st_gid != effective_gid)) && !on_nosuid_mount(fd) &&
        tc_raw_syscall(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return TC_PROGRAM_SETID;
    if (real_uid != 0 && capabilities_secure(fd) && !on_nosuid_mount(fd)) return TC_PROGRAM_FILE_CAPABILITIES;
    return TC_PROGRAM_CONTROLLABLE;
}

void tc_program_inspect(int directory_fd, const char *path, struct tc_program *program) {
    program->kind = program->elf_kind = TC_PROGRAM_NOT_INSPECTED;
    program->sanitizer_runtime[0] = 0;
    program->needed_count = 0;
    program->is_dynamic_loader = 0;
    program->is_musl = 0;
    program->interpreter[0] = 0;
    program->imports_pthread_create = 0;
    program->is_go = 0;
    program->fixed_text_start = program->fixed_text_end = 0;
    copy_text(program->decided_on, sizeof program->decided_on, path, ~0u);
    char interpreter[256];
    for (int depth = 0; depth <= MAX_SCRIPT_DEPTH; depth++) {
        long fd;
        int owned = 1;
        if (path[0] == 0) {
            fd = directory_fd;
            owned = 0;
        } else {
            fd = tc_raw_syscall(SYS_openat, directory_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (fd < 0) return;
        }
        struct stat info;
        unsigned char header[256];
        long length = 0;
        if (tc_raw_syscall(SYS_fstat, fd, &info) == 0 && S_ISREG(info.st_mode))
            length = read_at((int)fd, header, sizeof header, 0);
        enum tc_program_kind kind = TC_PROGRAM_NOT_INSPECTED;
        int script = length >= 2 && header[0] == '#' && header[1] == '!';
        if (!script && length >= 4 && header[0] == 0x7F && header[1] == 'E' && header[2] == 'L' && header[3] == 'F') {
            kind = program->elf_kind = inspect_elf((int)fd, header, length, program);
            enum tc_program_kind secure = secure_execution((int)fd, &info);
            if (secure != TC_PROGRAM_CONTROLLABLE) kind = secure;
        }
        if (owned) tc_raw_syscall(SYS_close, fd);
        if (!script) {
            program->kind = kind;
            return;
        }
        /* "#!" [blanks] interpreter [blanks argument] */
        long at = 2;
        while (at < length && (header[at] == ' ' || header[at] == '\t')) at++;
        long start = at;
        while (at < length && header[at] != ' ' && header[at] != '\t' && header[at] != '\n' && header[at] != 0) at++;
        if (at == start) return;
        copy_text(interpreter, sizeof interpreter, (const char *)header + start, (unsigned)(at - start));
        copy_text(program->decided_on, sizeof program->decided_on, interpreter, ~0u);
        path = interpreter;
        directory_fd = AT_FDCWD;
    }
}

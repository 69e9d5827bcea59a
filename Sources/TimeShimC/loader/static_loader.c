/*
 * timectl-static-loader: runs a statically linked program on the session's
 * timeline (docs/go-and-static.md, "Static programs").
 *
 *   timectl-static-loader PROGRAM ARGV0 [ARGUMENT...]
 *
 * A static program has no dynamic loader, so LD_PRELOAD cannot put the shim
 * into it. This small dynamically linked program is started instead, with
 * the shim in LD_PRELOAD as any attached process; the shim attaches to the
 * session in it. It then maps PROGRAM's PT_LOAD segments itself (ET_EXEC at
 * their fixed addresses, a static PIE at a base mmap chooses), asks the
 * shim to take the program in (timectl_static_program_prepare: the vDSO's
 * clock symbols redirected, the program's raw timed waits trapped), builds
 * a fresh initial stack (ARGV0 and the arguments, this process's
 * environment, its auxiliary vector with the program's AT_PHDR, AT_PHNUM,
 * AT_ENTRY, AT_EXECFN and AT_BASE 0) and jumps to the program's entry
 * point. The loader's own code and libc stay mapped, unused but for the
 * shim: nothing of theirs may move the program break once the program runs,
 * which is why the loader has a malloc of its own (loader_malloc.c).
 *
 * Not attached (no session, nor libfaketime's variables, in the environment), the loader simply execs
 * PROGRAM. Errors are one line on stderr and exit status 126 (cannot run)
 * or 127 (not found), as a shell reports them.
 */
#define _GNU_SOURCE
#include "timectl_static_program.h"
#include "timectl_faketime.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <linux/capability.h>
#include <linux/prctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_PHDRS 64

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#define NATIVE_MACHINE_NAME "x86-64"
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#define NATIVE_MACHINE_NAME "aarch64"
#endif

static const char *program_path;

__attribute__((noreturn)) static void fail(int status, const char *problem, int error) {
    if (error)
        fprintf(stderr, "timectl: cannot run %s: %s (%s)\n", program_path, problem, strerror(error));
    else
        fprintf(stderr, "timectl: cannot run %s: %s\n", program_path, problem);
    exit(status);
}

static uintptr_t page_down(uintptr_t value, uintptr_t page) { return value & ~(page - 1); }
static uintptr_t page_up(uintptr_t value, uintptr_t page) { return (value + page - 1) & ~(page - 1); }

static int protection(uint32_t flags) {
    return (flags & PF_R ? PROT_READ : 0) | (flags & PF_W ? PROT_WRITE : 0) | (flags & PF_X ? PROT_EXEC : 0);
}

static void read_exactly(int fd, void *buffer, size_t size, off_t offset) {
    ssize_t got = pread(fd, buffer, size, offset);
    if (got < 0) fail(126, "cannot read it", errno);
    if ((size_t)got != size) fail(126, "its ELF headers are cut short", 0);
}

struct loaded {
    uintptr_t bias;
    uintptr_t entry;
    uintptr_t phdr;            /* the program headers in memory (AT_PHDR) */
    unsigned phnum;
    uintptr_t text_start, text_end;
};

/*
 * Reserves the program's whole span first (so that its segments never land
 * on the loader's mappings, and a static PIE's segments keep their
 * distances), then maps each PT_LOAD over it.
 */
static void map_program(int fd, const Elf64_Ehdr *header, const Elf64_Phdr *phdrs, struct loaded *out) {
    uintptr_t page = (uintptr_t)getauxval(AT_PAGESZ);
    if (!page) page = 4096;
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (unsigned i = 0; i < header->e_phnum; i++) {
        if (phdrs[i].p_type != PT_LOAD) continue;
        if (phdrs[i].p_memsz < phdrs[i].p_filesz) fail(126, "a segment is smaller in memory than in the file", 0);
        if (page_down(phdrs[i].p_vaddr, page) < low) low = page_down(phdrs[i].p_vaddr, page);
        if (page_up(phdrs[i].p_vaddr + phdrs[i].p_memsz, page) > high) high = page_up(phdrs[i].p_vaddr + phdrs[i].p_memsz, page);
    }
    if (high <= low) fail(126, "it has nothing to load", 0);
    size_t span = high - low;
    void *reserved;
    if (header->e_type == ET_EXEC) {
        reserved = mmap((void *)low, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (reserved == MAP_FAILED)
            fail(126, errno == EEXIST ? "its fixed addresses are taken in the loader's process" : "cannot reserve its addresses", errno == EEXIST ? 0 : errno);
        out->bias = 0;
    } else {
        /* The system call filter compares the program's code addresses in 32-bit halves: keep them in one 4 GiB block. */
        reserved = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (reserved == MAP_FAILED) fail(126, "cannot reserve room for it", errno);
        if (((uintptr_t)reserved >> 32) != (((uintptr_t)reserved + span) >> 32)) {
            munmap(reserved, span);
            uintptr_t hint = page_up((uintptr_t)reserved + span, (uintptr_t)1 << 32);
            reserved = mmap((void *)hint, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (reserved == MAP_FAILED) fail(126, "cannot reserve room for it", errno);
        }
        out->bias = (uintptr_t)reserved - low;
    }

    out->phdr = 0;
    out->text_start = UINTPTR_MAX;
    out->text_end = 0;
    for (unsigned i = 0; i < header->e_phnum; i++) {
        const Elf64_Phdr *segment = &phdrs[i];
        if (segment->p_type == PT_PHDR) out->phdr = out->bias + segment->p_vaddr;
        if (segment->p_type != PT_LOAD) continue;
        uintptr_t start = out->bias + segment->p_vaddr;
        uintptr_t map_start = page_down(start, page);
        uintptr_t file_end = start + segment->p_filesz;
        uintptr_t memory_end = start + segment->p_memsz;
        int prot = protection(segment->p_flags);
        if (segment->p_filesz) {
            if ((segment->p_offset & (page - 1)) != (segment->p_vaddr & (page - 1)))
                fail(126, "a segment is not aligned as the kernel maps it", 0);
            /* Writable while its tail past the file is cleared: that part of the last page is the bss's start. */
            int first_prot = memory_end > file_end ? prot | PROT_WRITE : prot;
            void *mapped = mmap((void *)map_start, file_end - map_start, first_prot, MAP_PRIVATE | MAP_FIXED, fd,
                                (off_t)page_down(segment->p_offset, page));
            if (mapped == MAP_FAILED) fail(126, "cannot map it", errno);
            if (memory_end > file_end) {
                uintptr_t page_end = page_up(file_end, page);
                memset((void *)file_end, 0, (page_end < memory_end ? page_end : memory_end) - file_end);
                if (first_prot != prot) mprotect((void *)map_start, page_end - map_start, prot);
            }
        }
        uintptr_t anonymous_start = segment->p_filesz ? page_up(file_end, page) : map_start;
        uintptr_t anonymous_end = page_up(memory_end, page);
        if (anonymous_end > anonymous_start &&
            mmap((void *)anonymous_start, anonymous_end - anonymous_start, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                 -1, 0) == MAP_FAILED)
            fail(126, "cannot map its zero-filled memory", errno);
        /* The headers as the kernel finds them when there is no PT_PHDR: inside the segment that maps offset e_phoff. */
        if (!out->phdr && header->e_phoff >= segment->p_offset &&
            header->e_phoff + (uint64_t)header->e_phnum * sizeof(Elf64_Phdr) <= segment->p_offset + segment->p_filesz)
            out->phdr = start + (header->e_phoff - segment->p_offset);
        if (segment->p_flags & PF_X) {
            if (start < out->text_start) out->text_start = start;
            if (memory_end > out->text_end) out->text_end = memory_end;
        }
    }
    if (!out->phdr) fail(126, "its program headers are not in any loaded segment", 0);
    if (out->text_end <= out->text_start) fail(126, "it has no executable segment", 0);
    out->phnum = header->e_phnum;
    out->entry = out->bias + header->e_entry;
}

/*
 * Sets the stack pointer and jumps, as the kernel starts a program: the
 * ABI's "function to register with atexit" (x86-64's rdx, aarch64's x0)
 * none, and the frame pointer (rbp; x29, with the link register x30) 0,
 * which ends a backtrace.
 */
__attribute__((noreturn)) static void enter(uintptr_t stack, uintptr_t entry) {
#if defined(__x86_64__)
    __asm__ volatile("mov %0, %%rsp\n\t"
                     "xor %%edx, %%edx\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "jmp *%1\n\t"
                     :
                     : "r"(stack), "r"(entry)
                     : "memory");
#elif defined(__aarch64__)
    __asm__ volatile("mov sp, %0\n\t"
                     "mov x0, #0\n\t"
                     "mov x29, #0\n\t"
                     "mov x30, #0\n\t"
                     "br %1\n\t"
                     :
                     : "r"(stack), "r"(entry)
                     : "memory");
#else
#error "timectl supports x86_64 and aarch64 Linux"
#endif
    __builtin_unreachable();
}

/* ---- what /proc shows: the program's command line and, where permitted, its executable ---- */

/* The kernel's record of this process's layout (/proc/self/stat fields 26–28 and 45–51), as PR_SET_MM_MAP takes it. */
static int read_layout(struct prctl_mm_map *layout) {
    char text[4096];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t length = read(fd, text, sizeof text - 1);
    close(fd);
    if (length <= 0) return 0;
    text[length] = 0;
    char *field = strrchr(text, ')');
    if (!field) return 0;
    unsigned long long values[53] = {0};
    int number = 2;  /* the command's field; the next is 3 */
    for (char *at = field + 1; *at && number < 52;) {
        while (*at == ' ') at++;
        if (!*at) break;
        values[++number] = strtoull(at, NULL, 10);  /* the state, field 3, is a letter: 0 */
        while (*at && *at != ' ') at++;
    }
    if (number < 51) return 0;
    memset(layout, 0, sizeof *layout);
    layout->start_code = values[26], layout->end_code = values[27], layout->start_stack = values[28];
    layout->start_data = values[45], layout->end_data = values[46], layout->start_brk = values[47];
    layout->arg_start = values[48], layout->arg_end = values[49], layout->env_start = values[50];
    layout->env_end = values[51];
    layout->brk = (uint64_t)syscall(SYS_brk, 0);  /* the break as the kernel has it: asking moves nothing */
    layout->exe_fd = (uint32_t)-1;
    return 1;
}

/* Whether PR_SET_MM_MAP may change /proc/PID/exe: CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE. */
static int may_set_executable(void) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) != 0) return 0;
    return (data[0].effective >> CAP_SYS_ADMIN & 1) || (data[1].effective >> (CAP_CHECKPOINT_RESTORE - 32) & 1);
}

/*
 * The kernel lets /proc/PID/exe name another file only once nothing maps
 * the old one (EBUSY). The loader's image must stay where it is (the
 * dynamic loader's tables, the shim's calls into this malloc): each of its
 * mappings is replaced, in one mremap, by an anonymous copy with the same
 * contents and protection. Another thread could only run or read it, which
 * the swap does not disturb. 1 when nothing maps the loader's file any more.
 */
static int move_own_image_to_anonymous_memory(void) {
    /* The mappings of the file /proc/self/exe names, by the path both show (on overlayfs, maps gives the
       underlying file's device and inode, stat the overlay's). */
    char own[PATH_MAX];
    ssize_t own_length = readlink("/proc/self/exe", own, sizeof own - 1);
    if (own_length <= 0) return 0;
    own[own_length] = 0;
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps) return 0;
    struct { uintptr_t start, end; int protection; } ranges[32];
    int count = 0, complete = 1;
    char line[PATH_MAX + 128];
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char permissions[5];
        int path_at = 0;
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %*u %n", &start, &end, permissions, &path_at) != 3 || !path_at ||
            strcmp(line + path_at, own) != 0)
            continue;
        if (count == 32 || permissions[0] != 'r') complete = 0;
        else
            ranges[count++] = (typeof(ranges[0])){start, end,
                                                  (permissions[1] == 'w' ? PROT_WRITE : 0) | PROT_READ |
                                                      (permissions[2] == 'x' ? PROT_EXEC : 0)};
    }
    fclose(maps);
    for (int i = 0; i < count; i++) {
        size_t length = ranges[i].end - ranges[i].start;
        void *copy = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy == MAP_FAILED) return 0;
        memcpy(copy, (void *)ranges[i].start, length);
        if (mprotect(copy, length, ranges[i].protection) != 0 ||
            mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)ranges[i].start) == MAP_FAILED) {
            munmap(copy, length);
            return 0;
        }
    }
    return complete && count > 0;
}

/*
 * /proc/PID/cmdline (and ps) show the arguments area the kernel recorded at
 * exec: the loader's path, PROGRAM, then the program's argv. The program's
 * strings are moved to the start of that area, as setproctitle moves its
 * title, and `argv` (the loader's) is pointed at them; PR_SET_MM_MAP,
 * which an unprivileged process may call (CONFIG_CHECKPOINT_RESTORE), then
 * ends the area after them, and gives the kernel the program's auxiliary
 * vector (/proc/PID/auxv) and, when `executable` is a descriptor of it,
 * the program as /proc/PID/exe. Where that is refused, the area keeps its
 * length and ends in NULs. 1 if /proc/PID/exe now names the program.
 */
static int show_program(char **argv, int argc, const Elf64_auxv_t *auxv, size_t aux_count, int executable) {
    struct prctl_mm_map layout;
    if (argc < 3 || !read_layout(&layout)) return 0;
    uintptr_t first = (uintptr_t)argv[2];
    if ((uintptr_t)argv[0] != layout.arg_start || first <= layout.arg_start || first >= layout.arg_end) return 0;
    size_t length = layout.arg_end - first, shift = first - layout.arg_start;
    memmove((void *)layout.arg_start, (void *)first, length);
    memset((void *)(layout.arg_start + length), 0, shift);
    for (int i = 2; i < argc; i++) argv[i] -= shift;
    layout.arg_end = layout.arg_start + length;
    layout.auxv = (__u64 *)(uintptr_t)auxv;
    layout.auxv_size = (uint32_t)((aux_count + 1) * sizeof *auxv);
    layout.exe_fd = executable >= 0 ? (uint32_t)executable : (uint32_t)-1;
    if (prctl(PR_SET_MM, PR_SET_MM_MAP, &layout, sizeof layout, 0) == 0) return executable >= 0;
    if (executable < 0) return 0;
    layout.exe_fd = (uint32_t)-1;
    prctl(PR_SET_MM, PR_SET_MM_MAP, &layout, sizeof layout, 0);
    return 0;
}

static void run_unattached(char **argv, char **envp) {
    execve(program_path, argv + 2, envp);
    fail(errno == ENOENT ? 127 : 126, "exec failed", errno);
}

int main(int argc, char **argv, char **envp) {
    if (argc < 3) {
        fprintf(stderr, "usage: timectl-static-loader PROGRAM ARGV0 [ARGUMENT...]\n"
                        "(timectl starts statically linked programs through it; it is not meant to be run by hand)\n");
        return 2;
    }
    program_path = argv[1];
    timectl_static_program_prepare_function *prepare =
        (timectl_static_program_prepare_function *)dlsym(RTLD_DEFAULT, TIMECTL_STATIC_PROGRAM_PREPARE);
    if (!prepare) {
        /* No shim: nothing to attach to, and nothing here would change the program's time. */
        if (!tc_environment_controls_time(envp)) run_unattached(argv, envp);
        fail(126, "the loader runs without libTimeShim.so in LD_PRELOAD", 0);
    }
    int fd = open(program_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(errno == ENOENT ? 127 : 126, "cannot open it", errno);
    if (faccessat(AT_FDCWD, program_path, X_OK, AT_EACCESS) != 0) fail(126, "it is not executable", errno);
    Elf64_Ehdr header;
    read_exactly(fd, &header, sizeof header, 0);
    if (memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_machine != NATIVE_MACHINE || (header.e_type != ET_EXEC && header.e_type != ET_DYN) ||
        header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 || header.e_phnum > MAX_PHDRS)
        fail(126, "not a 64-bit " NATIVE_MACHINE_NAME " ELF executable", 0);
    Elf64_Phdr phdrs[MAX_PHDRS];
    read_exactly(fd, phdrs, header.e_phnum * sizeof(Elf64_Phdr), (off_t)header.e_phoff);
    int is_go = 0;
    for (unsigned i = 0; i < header.e_phnum; i++) {
        /* Dynamically linked after all: the kernel and its dynamic loader run it, LD_PRELOAD and all. */
        if (phdrs[i].p_type == PT_INTERP) run_unattached(argv, envp);
        if (phdrs[i].p_type == PT_NOTE && phdrs[i].p_filesz >= 16 && phdrs[i].p_filesz <= 4096) {
            unsigned char notes[4096];
            read_exactly(fd, notes, phdrs[i].p_filesz, (off_t)phdrs[i].p_offset);
            for (uint64_t at = 0; at + 12 <= phdrs[i].p_filesz;) {
                uint32_t name_size, desc_size;
                memcpy(&name_size, notes + at, 4);
                memcpy(&desc_size, notes + at + 4, 4);
                if (name_size == 4 && at + 16 <= phdrs[i].p_filesz && memcmp(notes + at + 12, "Go\0", 3) == 0) is_go = 1;
                at += 12 + (((uint64_t)name_size + 3) & ~3ull) + (((uint64_t)desc_size + 3) & ~3ull);
            }
        }
    }

    struct loaded loaded;
    map_program(fd, &header, phdrs, &loaded);
    /* Kept open to become /proc/PID/exe, where that is permitted (show_program). */
    int executable = tc_environment_controls_time(envp) && may_set_executable() && move_own_image_to_anonymous_memory() ? fd : -1;
    if (executable < 0) close(fd);

    char resolved[PATH_MAX];
    struct timectl_static_program program = {
        .text_start = loaded.text_start,
        .text_end = loaded.text_end,
        .is_go = is_go,
        .path = realpath(program_path, resolved) ? resolved : program_path,
    };
    int attached = 1;
    const char *problem = prepare(&program, &attached);
    if (!attached) run_unattached(argv, envp);
    if (problem) fail(126, problem, 0);

    /* The process's name as ps shows it: the program's, not the loader's. */
    const char *base = strrchr(program_path, '/');
    prctl(PR_SET_NAME, base ? base + 1 : program_path, 0, 0, 0);

    /* The initial stack: argc, argv, envp and the auxiliary vector (which follows envp's NULL), adjusted, and
       above them the program's path for AT_EXECFN (the loader's arguments are about to be overwritten). */
    char **environment_end = envp;
    while (*environment_end) environment_end++;
    Elf64_auxv_t *auxv = (Elf64_auxv_t *)(environment_end + 1);
    size_t aux_count = 0;
    while (auxv[aux_count].a_type != AT_NULL) aux_count++;
    size_t arguments = (size_t)argc - 2, environment = (size_t)(environment_end - envp);
    size_t words = 1 + arguments + 1 + environment + 1 + 2 * (aux_count + 1);
    size_t path_size = strlen(program_path) + 1;
    /* Below this function's frame, on the process's own stack (which grows as it is written): 64 KiB of margin. */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    char *execfn = (char *)(here - 65536 - path_size);
    memcpy(execfn, program_path, path_size);
    uintptr_t *stack = (uintptr_t *)((((uintptr_t)execfn - words * sizeof(uintptr_t)) & ~(uintptr_t)15));
    uintptr_t *vector = stack + 1 + arguments + 1 + environment + 1;
    Elf64_auxv_t *program_auxv = (Elf64_auxv_t *)vector;
    for (size_t i = 0; i <= aux_count; i++) {
        uint64_t type = auxv[i].a_type, value = auxv[i].a_un.a_val;
        switch (type) {
        case AT_PHDR: value = loaded.phdr; break;
        case AT_PHNUM: value = loaded.phnum; break;
        case AT_ENTRY: value = loaded.entry; break;
        case AT_BASE: value = 0; break;
        case AT_EXECFN: value = (uintptr_t)execfn; break;
        default: break;
        }
        *vector++ = type;
        *vector++ = value;
    }
    show_program(argv, argc, program_auxv, aux_count, executable);
    if (executable >= 0) close(executable);
    /* The name the shim's messages give this process (libc's, which the shim runs on): the program's. */
    program_invocation_name = argv[2];
    const char *short_name = strrchr(argv[2], '/');
    program_invocation_short_name = short_name ? (char *)short_name + 1 : argv[2];
    uintptr_t *at = stack;
    *at++ = arguments;
    for (size_t i = 0; i < arguments; i++) *at++ = (uintptr_t)argv[2 + i];
    *at++ = 0;
    for (size_t i = 0; i < environment; i++) *at++ = (uintptr_t)envp[i];
    *at++ = 0;
    enter((uintptr_t)stack, loaded.entry);
}

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
 * Not attached (no session in the environment), the loader simply execs
 * PROGRAM. Errors are one line on stderr and exit status 126 (cannot run)
 * or 127 (not found), as a shell reports them.
 */
#define _GNU_SOURCE
#include "timectl_static_program.h"

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
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_PHDRS 64

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

/* Sets the stack pointer and jumps: rdx is the ABI's "function to register with atexit", none here. */
__attribute__((noreturn)) static void enter(uintptr_t stack, uintptr_t entry) {
#if defined(__x86_64__)
    __asm__ volatile("mov %0, %%rsp\n\t"
                     "xor %%edx, %%edx\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "jmp *%1\n\t"
                     :
                     : "r"(stack), "r"(entry)
                     : "memory");
#endif
    __builtin_unreachable();
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
#if !defined(__x86_64__)
    run_unattached(argv, envp);
#endif
    timectl_static_program_prepare_function *prepare =
        (timectl_static_program_prepare_function *)dlsym(RTLD_DEFAULT, TIMECTL_STATIC_PROGRAM_PREPARE);
    if (!prepare) {
        /* No shim: nothing to attach to, and nothing here would change the program's time. */
        if (!getenv("TIMECTL_SEGMENT")) run_unattached(argv, envp);
        fail(126, "the loader runs without libTimeShim.so in LD_PRELOAD", 0);
    }
    int fd = open(program_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(errno == ENOENT ? 127 : 126, "cannot open it", errno);
    if (faccessat(AT_FDCWD, program_path, X_OK, AT_EACCESS) != 0) fail(126, "it is not executable", errno);
    Elf64_Ehdr header;
    read_exactly(fd, &header, sizeof header, 0);
    if (memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_machine != EM_X86_64 || (header.e_type != ET_EXEC && header.e_type != ET_DYN) ||
        header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 || header.e_phnum > MAX_PHDRS)
        fail(126, "not a 64-bit x86-64 ELF executable", 0);
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
    close(fd);

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

    /* The initial stack: argc, argv, envp and the auxiliary vector (which follows envp's NULL), adjusted. */
    char **environment_end = envp;
    while (*environment_end) environment_end++;
    Elf64_auxv_t *auxv = (Elf64_auxv_t *)(environment_end + 1);
    size_t aux_count = 0;
    while (auxv[aux_count].a_type != AT_NULL) aux_count++;
    size_t arguments = (size_t)argc - 2, environment = (size_t)(environment_end - envp);
    size_t words = 1 + arguments + 1 + environment + 1 + 2 * (aux_count + 1);
    /* Below this function's frame, on the process's own stack (which grows as it is written): 64 KiB of margin. */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t *stack = (uintptr_t *)(((here - 65536 - words * sizeof(uintptr_t)) & ~(uintptr_t)15));
    uintptr_t *at = stack;
    *at++ = arguments;
    for (size_t i = 0; i < arguments; i++) *at++ = (uintptr_t)argv[2 + i];
    *at++ = 0;
    for (size_t i = 0; i < environment; i++) *at++ = (uintptr_t)envp[i];
    *at++ = 0;
    for (size_t i = 0; i <= aux_count; i++) {
        uint64_t type = auxv[i].a_type, value = auxv[i].a_un.a_val;
        switch (type) {
        case AT_PHDR: value = loaded.phdr; break;
        case AT_PHNUM: value = loaded.phnum; break;
        case AT_ENTRY: value = loaded.entry; break;
        case AT_BASE: value = 0; break;
        case AT_EXECFN: value = (uintptr_t)program_path; break;
        default: break;
        }
        *at++ = type;
        *at++ = value;
    }
    enter((uintptr_t)stack, loaded.entry);
}

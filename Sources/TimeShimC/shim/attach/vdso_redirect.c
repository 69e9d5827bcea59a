/*
 * Programs that read the clock through the vDSO themselves (Go: the runtime
 * finds __vdso_clock_gettime — __kernel_clock_gettime on aarch64 — in the
 * vDSO's symbol table from AT_SYSINFO_EHDR and calls it, never libc) are
 * sent to the shim's reads by rewriting the vDSO's symbol table in this
 * process's copy of it.
 *
 * Why the symbol table and not the code: the shim's own real-clock reads
 * (core/realclock.c, resolved before this runs) and libc's (resolved at start)
 * must keep calling the kernel's original functions — that is the ~30 ns
 * running read. A jump written over the functions' first bytes would send
 * them back into the shim; copying the functions elsewhere does not work,
 * as they address the vvar pages relative to their own position. So the
 * code stays as it is and only the symbols a later lookup finds change:
 * each redirected symbol's st_value names a small stub, written into the
 * unused tail of the vDSO's last page (past the ELF file the kernel maps,
 * inside the same executable mapping), which jumps to the shim's entry
 * point with an absolute indirect jump (x86-64: no register clobbered;
 * aarch64: x16, which a call may clobber). st_value is an offset in the
 * image, so the stub must live inside it.
 *
 * The [vdso] mapping cannot be made writable here (mprotect fails with
 * EINVAL on 6.x kernels), but a write through /proc/self/mem succeeds: the
 * kernel copies the page for this process (copy-on-write). A fork child
 * inherits the copy; an exec gets a fresh vDSO and a fresh shim.
 *
 * Only raw system calls and no libc lookup: the same code can run in a
 * static program once a launcher has mapped the shim into it.
 */
#define _GNU_SOURCE
#include "vdso_redirect.h"
#include "../calls/clock.h"
#include "../../core/vdso_image.h"
#include "../runtime/process.h"

#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>

#if defined(__x86_64__)

/* jmp *0(%rip); .quad target; int3 int3 */
#define STUB_SIZE 16
static void write_stub(unsigned char stub[STUB_SIZE], uintptr_t target) {
    static const unsigned char jump[6] = {0xff, 0x25, 0, 0, 0, 0};
    memcpy(stub, jump, sizeof jump);
    memcpy(stub + 6, &target, sizeof(target));
    memset(stub + 14, 0xcc, 2);
}

/* The kernel's names and the plain aliases its vDSO also exports. */
static const char *const names[][2] = {
    {"__vdso_clock_gettime", "clock_gettime"},
    {"__vdso_gettimeofday", "gettimeofday"},
    {"__vdso_time", "time"},
};

#elif defined(__aarch64__)

/*
 * bti c; ldr x16, #12; br x16; nop; .quad target. The landing pad first: where the CPU has BTI, the kernel maps
 * the vDSO as guarded pages, and a caller reaches the symbol with an indirect call (Go: BLR). x16 is the
 * intra-procedure-call scratch register, which a call may clobber. Instructions are little-endian words.
 */
#define STUB_SIZE 24
static void write_stub(unsigned char stub[STUB_SIZE], uintptr_t target) {
    static const uint32_t code[4] = {0xd503245f, 0x58000070, 0xd61f0200, 0xd503201f};
    memcpy(stub, code, sizeof code);
    memcpy(stub + 16, &target, sizeof(target));
}

/* The arm64 vDSO has no time() and no plain aliases. */
static const char *const names[][2] = {
    {"__kernel_clock_gettime", NULL},
    {"__kernel_gettimeofday", NULL},
    {NULL, NULL},
};

#endif

#define PAGE_SIZE_MIN 4096
#define STUB_SLOT ((STUB_SIZE + 15) & ~15)

static int write_process_memory(int mem_fd, uintptr_t address, const void *bytes, size_t length) {
    long written = tc_raw_syscall(SYS_pwrite64, mem_fd, bytes, length, address);
    return written == (long)length;
}

static int redirect_to(void *const targets[3]) {
    struct tc_vdso_image image;
    if (!tc_vdso_image_load(&image)) return 0;
    uintptr_t stubs = (image.base + image.file_size + STUB_SLOT - 1) & ~(uintptr_t)(STUB_SLOT - 1);
    uintptr_t page_end = (image.base + image.file_size + PAGE_SIZE_MIN - 1) & ~(uintptr_t)(PAGE_SIZE_MIN - 1);
    if (stubs + 3 * STUB_SLOT > page_end) return 0;

    int mem_fd = (int)tc_raw_syscall(SYS_openat, AT_FDCWD, "/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (mem_fd < 0) return 0;
    int done = 1;
    for (int i = 0; i < 3 && done; i++) {
        if (!names[i][0]) continue;
        unsigned char stub[STUB_SIZE];
        write_stub(stub, (uintptr_t)targets[i]);
        uintptr_t stub_address = stubs + (uintptr_t)i * STUB_SLOT;
        done = write_process_memory(mem_fd, stub_address, stub, sizeof(stub));
        ElfW(Addr) value = stub_address - image.load_bias;
        for (int n = 0; n < 2 && done && names[i][n]; n++) {
            uint32_t cursor = 0;
            const ElfW(Sym) *sym;
            while (done && (sym = tc_vdso_image_function(&image, &cursor, names[i][n])) != NULL)
                done = write_process_memory(mem_fd, (uintptr_t)&sym->st_value, &value, sizeof(value));
        }
    }
    tc_raw_syscall(SYS_close, mem_fd);
    return done;
}

int tc_vdso_redirect(void) {
    void *const targets[] = {(void *)tc_vdso_entry_clock_gettime, (void *)tc_vdso_entry_gettimeofday,
                             (void *)tc_vdso_entry_time};
    return redirect_to(targets);
}

/* A static program's threads have their own thread pointer: its entries use no thread-local state (attach/static_takeover.c). */
int tc_vdso_redirect_static(void) {
    void *const targets[] = {(void *)tc_vdso_static_entry_clock_gettime, (void *)tc_vdso_static_entry_gettimeofday,
                             (void *)tc_vdso_static_entry_time};
    return redirect_to(targets);
}

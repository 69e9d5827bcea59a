/*
 * The malloc of timectl-static-loader's process: every block is a mapping
 * of its own, and nothing ever moves the program break.
 *
 * Once the loader has jumped into a static program, the break is the
 * program's: its libc's malloc extends it with brk and keeps the value it
 * last set. The loader's libc (which the shim runs on) must then never
 * call brk, or each would extend or cut the other's heap. glibc's malloc
 * does so in its main arena, which serves the main thread, and any thread
 * once the arena limit (MALLOC_ARENA_MAX, 8 per core) is reached or a
 * thread's own arena cannot grow. The shim starts threads after the
 * program runs (more TLS lenders when many waits are trapped at once,
 * static_program.c; SIGEV_THREAD timer threads), and starting a thread
 * allocates (its DTV, with calloc). So the loader defines malloc itself:
 * the dynamic loader binds libc's, ld.so's and the shim's calls to the
 * executable's definition first, as for any program that replaces malloc.
 *
 * Costs do not matter here: the loader's process allocates a handful of
 * blocks at start-up and one per thread the shim starts. Thread-safe
 * because the kernel is; no locks. System calls are made directly, so that
 * nothing here depends on the order in which the loader's relocations are
 * done.
 */
#define _GNU_SOURCE
#include "timectl_realclock.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>


#define PAGE 4096
#define MINIMUM_ALIGNMENT 16

/* Right before every block: where its mapping is, and how much of it the caller may use. */
struct block {
    void *mapping;
    size_t mapping_length;
    size_t usable;
    size_t unused;
};

_Static_assert(sizeof(struct block) % MINIMUM_ALIGNMENT == 0, "blocks stay aligned after their header");

static struct block *header_of(void *pointer) { return (struct block *)pointer - 1; }

static void *allocate(size_t size, size_t alignment) {
    if (alignment < MINIMUM_ALIGNMENT) alignment = MINIMUM_ALIGNMENT;
    if (alignment & (alignment - 1)) {
        errno = EINVAL;
        return NULL;
    }
    size_t slack = sizeof(struct block) + alignment - MINIMUM_ALIGNMENT;
    if (size > SIZE_MAX / 2 - slack - PAGE) {
        errno = ENOMEM;
        return NULL;
    }
    size_t length = (size + slack + PAGE - 1) & ~(size_t)(PAGE - 1);
    long mapping = tc_raw_syscall6(SYS_mmap, 0, (long)length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping < 0 && mapping > -4096) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t start = ((uintptr_t)mapping + sizeof(struct block) + alignment - 1) & ~(uintptr_t)(alignment - 1);
    struct block *header = header_of((void *)start);
    header->mapping = (void *)mapping;
    header->mapping_length = length;
    header->usable = (uintptr_t)mapping + length - start;
    return (void *)start;
}

void *malloc(size_t size) { return allocate(size, MINIMUM_ALIGNMENT); }

void free(void *pointer) {
    if (!pointer) return;
    struct block *header = header_of(pointer);
    tc_raw_syscall6(SYS_munmap, (long)header->mapping, (long)header->mapping_length, 0, 0, 0, 0);
}

/* Fresh anonymous mappings are zero-filled. */
void *calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return allocate(count * size, MINIMUM_ALIGNMENT);
}

void *realloc(void *pointer, size_t size) {
    if (!pointer) return malloc(size);
    if (size == 0) {
        free(pointer);
        return NULL;
    }
    size_t usable = header_of(pointer)->usable;
    if (size <= usable) return pointer;
    void *moved = malloc(size);
    if (!moved) return NULL;
    memcpy(moved, pointer, usable);
    free(pointer);
    return moved;
}

void *reallocarray(void *pointer, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(pointer, count * size);
}

void *memalign(size_t alignment, size_t size) { return allocate(size, alignment); }

void *aligned_alloc(size_t alignment, size_t size) { return allocate(size, alignment); }

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1))) return EINVAL;
    int saved = errno;
    void *pointer = allocate(size, alignment);
    errno = saved;
    if (!pointer) return ENOMEM;
    *result = pointer;
    return 0;
}

void *valloc(size_t size) { return allocate(size, PAGE); }

void *pvalloc(size_t size) { return allocate((size + PAGE - 1) & ~(size_t)(PAGE - 1), PAGE); }

size_t malloc_usable_size(void *pointer) { return pointer ? header_of(pointer)->usable : 0; }

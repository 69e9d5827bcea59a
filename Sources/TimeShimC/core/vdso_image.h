/*
 * The kernel's vDSO as an ELF image in this process's memory, found through
 * AT_SYSINFO_EHDR with no libc symbol lookup and no allocation
 * (vdso_image.c). realclock.c resolves the real clock functions from it; the
 * shim's vDSO redirection (shim/attach/vdso_redirect.c) rewrites its symbol
 * table. Private to the C code.
 */
#ifndef TIMECTL_VDSO_IMAGE_H
#define TIMECTL_VDSO_IMAGE_H

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

struct tc_vdso_image {
    uintptr_t base;        /* where the kernel mapped it (AT_SYSINFO_EHDR) */
    uintptr_t load_bias;   /* added to a symbol's st_value gives its address */
    const ElfW(Sym) *symbols;
    const char *strings;
    uint32_t symbol_count;
    size_t file_size;      /* bytes of ELF file; the mapping runs on to the next page boundary */
};

/* 1 when this process has a vDSO and its dynamic symbol table was found, else 0. */
int tc_vdso_image_load(struct tc_vdso_image *image);

/* The next defined function symbol called `name` at or after *cursor (which moves past it), or NULL. */
const ElfW(Sym) *tc_vdso_image_function(const struct tc_vdso_image *image, uint32_t *cursor, const char *name);

#endif

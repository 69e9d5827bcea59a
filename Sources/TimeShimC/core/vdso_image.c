/*
 * The kernel's vDSO as an ELF image (see vdso_image.h).
 */
#define _GNU_SOURCE
#include "vdso_image.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>

/* Number of symbols from a GNU hash table: one past the highest chained index. */
static uint32_t gnu_hash_symbol_count(const uint32_t *table) {
    uint32_t nbuckets = table[0], symoffset = table[1], bloom_size = table[2];
    const uint32_t *buckets = table + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chains = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; i++)
        if (buckets[i] > last) last = buckets[i];
    if (last < symoffset) return symoffset;
    while (!(chains[last - symoffset] & 1)) last++;
    return last + 1;
}

int tc_vdso_image_load(struct tc_vdso_image *image) {
    uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (!base) return 0;
    const ElfW(Ehdr) *ehdr = (const ElfW(Ehdr) *)base;
    if (memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0) return 0;
    const ElfW(Phdr) *phdrs = (const ElfW(Phdr) *)(base + ehdr->e_phoff);
    const ElfW(Dyn) *dynamic = NULL;
    int have_bias = 0;
    for (int i = 0; i < ehdr->e_phnum; i++) {
        if (phdrs[i].p_type == PT_LOAD && !have_bias) {
            image->load_bias = base + phdrs[i].p_offset - phdrs[i].p_vaddr;
            have_bias = 1;
        } else if (phdrs[i].p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn) *)(base + phdrs[i].p_offset);
        }
    }
    if (!have_bias || !dynamic) return 0;
    image->base = base;
    /* The image is the whole ELF file, section headers last; the kernel maps it padded to whole pages. */
    uintptr_t end = ehdr->e_shoff + (uintptr_t)ehdr->e_shnum * ehdr->e_shentsize;
    for (int i = 0; i < ehdr->e_phnum; i++)
        if (phdrs[i].p_offset + phdrs[i].p_filesz > end) end = phdrs[i].p_offset + phdrs[i].p_filesz;
    image->file_size = end;
    const uint32_t *sysv_hash = NULL, *gnu_hash = NULL;
    image->symbols = NULL;
    image->strings = NULL;
    for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; d++) {
        uintptr_t address = image->load_bias + d->d_un.d_ptr;
        switch (d->d_tag) {
        case DT_SYMTAB: image->symbols = (const ElfW(Sym) *)address; break;
        case DT_STRTAB: image->strings = (const char *)address; break;
        case DT_HASH: sysv_hash = (const uint32_t *)address; break;
        case DT_GNU_HASH: gnu_hash = (const uint32_t *)address; break;
        default: break;
        }
    }
    if (!image->symbols || !image->strings) return 0;
    if (sysv_hash) image->symbol_count = sysv_hash[1];
    else if (gnu_hash) image->symbol_count = gnu_hash_symbol_count(gnu_hash);
    else return 0;
    return 1;
}

const ElfW(Sym) *tc_vdso_image_function(const struct tc_vdso_image *image, uint32_t *cursor, const char *name) {
    for (uint32_t i = *cursor; i < image->symbol_count; i++) {
        const ElfW(Sym) *sym = &image->symbols[i];
        if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || sym->st_shndx == SHN_UNDEF) continue;
        if (strcmp(image->strings + sym->st_name, name) == 0) {
            *cursor = i + 1;
            return sym;
        }
    }
    *cursor = image->symbol_count;
    return NULL;
}

/*
 * elf_lookup.c - see elf_lookup.h.
 */
#include "elf_lookup.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

struct function_search {
    const char *name;
    uint32_t hash;
    uintptr_t skip_start, skip_end;
    void *found;
};

static uint32_t gnu_symbol_hash(const char *name)
{
    uint32_t hash = 5381;
    for (; *name; name++)
        hash = hash * 33 + (unsigned char)*name;
    return hash;
}

/* glibc stores the dynamic section's addresses relocated, except where it
 * cannot write them (the vDSO): then they are still relative. */
static uintptr_t dynamic_address(uintptr_t value, uintptr_t bias)
{
    return value && value < bias ? value + bias : value;
}

#if __SIZEOF_POINTER__ == 8
#define SYMBOL_TYPE(info) ELF64_ST_TYPE(info)
#else
#define SYMBOL_TYPE(info) ELF32_ST_TYPE(info)
#endif

static void *function_in_gnu_hash(const uint32_t *table, const ElfW(Sym) *symbols, const char *strings,
                                  uintptr_t bias, const struct function_search *search)
{
    uint32_t bucket_count = table[0], first_symbol = table[1], bloom_words = table[2], bloom_shift = table[3];
    if (!bucket_count || !bloom_words)
        return NULL;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(table + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_words);
    const uint32_t *chain = buckets + bucket_count;
    const unsigned word_bits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(search->hash / word_bits) % bloom_words];
    ElfW(Addr) mask = ((ElfW(Addr))1 << (search->hash % word_bits)) |
                      ((ElfW(Addr))1 << ((search->hash >> bloom_shift) % word_bits));
    if ((word & mask) != mask)
        return NULL;
    for (uint32_t index = buckets[search->hash % bucket_count]; index >= first_symbol; index++) {
        uint32_t chained = chain[index - first_symbol];
        const ElfW(Sym) *symbol = &symbols[index];
        if ((chained | 1) == (search->hash | 1) && symbol->st_shndx != SHN_UNDEF && symbol->st_value &&
            SYMBOL_TYPE(symbol->st_info) == STT_FUNC && strcmp(strings + symbol->st_name, search->name) == 0)
            return (void *)(bias + symbol->st_value);
        if (chained & 1)
            break;
    }
    return NULL;
}

static int search_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct function_search *search = data;
    const ElfW(Dyn) *dynamic = NULL;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *phdr = &info->dlpi_phdr[i];
        if (phdr->p_type == PT_DYNAMIC)
            dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + phdr->p_vaddr);
        else if (phdr->p_type == PT_LOAD && info->dlpi_addr + phdr->p_vaddr >= search->skip_start &&
                 info->dlpi_addr + phdr->p_vaddr < search->skip_end)
            return 0;
    }
    uintptr_t symbols = 0, strings = 0, hash_table = 0;
    for (; dynamic && dynamic->d_tag != DT_NULL; dynamic++) {
        if (dynamic->d_tag == DT_SYMTAB)
            symbols = dynamic_address(dynamic->d_un.d_ptr, info->dlpi_addr);
        else if (dynamic->d_tag == DT_STRTAB)
            strings = dynamic_address(dynamic->d_un.d_ptr, info->dlpi_addr);
        else if (dynamic->d_tag == DT_GNU_HASH)
            hash_table = dynamic_address(dynamic->d_un.d_ptr, info->dlpi_addr);
    }
    if (symbols && strings && hash_table)
        search->found = function_in_gnu_hash((const uint32_t *)hash_table, (const ElfW(Sym) *)symbols,
                                             (const char *)strings, info->dlpi_addr, search);
    return search->found != NULL; /* non-zero stops the walk */
}

void *shm_find_function(const char *name, uintptr_t skip_start, uintptr_t skip_end)
{
    struct function_search search = {name, gnu_symbol_hash(name), skip_start, skip_end, NULL};
    dl_iterate_phdr(search_object, &search);
    return search.found;
}

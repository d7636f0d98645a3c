/* elf_symbols.c - see elf_symbols.h. */
#include "elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status);

static int name_matches(const char *name, const char *wanted)
{
    if (strcmp(name, wanted) == 0)
        return 1;
    if (name[0] != '_' || name[1] != 'Z')
        return 0;
    int status = 0;
    char *demangled = __cxa_demangle(name, NULL, NULL, &status);
    if (!demangled)
        return 0;
    int match = strcmp(demangled, wanted) == 0;
    if (!match && !strchr(wanted, '(')) {
        /* "ns::Bench::run" matches "ns::Bench::run(int)". */
        char *parameters = strchr(demangled, '(');
        size_t length = parameters ? (size_t)(parameters - demangled) : strlen(demangled);
        match = strlen(wanted) == length && strncmp(demangled, wanted, length) == 0;
    }
    free(demangled);
    return match;
}

static int add_match(struct elf_symbol_match **matches, int *count, uint64_t value, const char *name, int local)
{
    for (int i = 0; i < *count; i++)
        if ((*matches)[i].value == value)
            return 0;
    struct elf_symbol_match *grown = realloc(*matches, (size_t)(*count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    *matches = grown;
    grown[*count] = (struct elf_symbol_match){value, strdup(name), local};
    if (!grown[*count].name)
        return -1;
    (*count)++;
    return 0;
}

static int scan_symbol_table(Elf *elf, Elf_Scn *section, const GElf_Shdr *header, const char *wanted,
                             struct elf_symbol_match **matches, int *count)
{
    Elf_Data *data = elf_getdata(section, NULL);
    if (!data || header->sh_entsize == 0)
        return 0;
    size_t symbols = header->sh_size / header->sh_entsize;
    for (size_t i = 0; i < symbols; i++) {
        GElf_Sym symbol;
        if (!gelf_getsym(data, (int)i, &symbol) || symbol.st_shndx == SHN_UNDEF || symbol.st_value == 0)
            continue;
        int type = GELF_ST_TYPE(symbol.st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC)
            continue;
        const char *name = elf_strptr(elf, header->sh_link, symbol.st_name);
        if (name && name_matches(name, wanted) &&
            add_match(matches, count, symbol.st_value, name, GELF_ST_BIND(symbol.st_info) == STB_LOCAL) < 0)
            return -1;
    }
    return 0;
}

int elf_find_functions(const char *path, const char *wanted, struct elf_symbol_match **matches)
{
    *matches = NULL;
    int count = 0;
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    Elf_Scn *section = NULL;
    int rc = 0;
    while (elf && rc == 0 && (section = elf_nextscn(elf, section)) != NULL) {
        GElf_Shdr header;
        if (gelf_getshdr(section, &header) && (header.sh_type == SHT_SYMTAB || header.sh_type == SHT_DYNSYM))
            rc = scan_symbol_table(elf, section, &header, wanted, matches, &count);
    }
    if (elf)
        elf_end(elf);
    close(fd);
    if (rc < 0) {
        elf_symbol_matches_free(*matches, count);
        *matches = NULL;
        return -1;
    }
    return count;
}

void elf_symbol_matches_free(struct elf_symbol_match *matches, int count)
{
    for (int i = 0; i < count; i++)
        free(matches[i].name);
    free(matches);
}

/* The lowest PT_LOAD's page-aligned virtual address, and the file type. */
static int first_load_address(const char *path, uint64_t *vaddr, int *is_exec)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr ehdr;
    size_t count = 0;
    int rc = -1;
    if (elf && gelf_getehdr(elf, &ehdr) && elf_getphdrnum(elf, &count) == 0) {
        *is_exec = ehdr.e_type == ET_EXEC;
        for (size_t i = 0; i < count; i++) {
            GElf_Phdr phdr;
            if (gelf_getphdr(elf, (int)i, &phdr) && phdr.p_type == PT_LOAD) {
                uint64_t align = phdr.p_align > 1 ? phdr.p_align : 4096;
                *vaddr = phdr.p_vaddr & ~(align - 1);
                rc = 0;
                break;
            }
        }
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

int elf_load_bias(const struct proc_maps *maps, const char *path, uint64_t *bias)
{
    const struct proc_map *lowest = NULL;
    for (size_t i = 0; i < maps->count; i++)
        if (strcmp(maps->maps[i].path, path) == 0 && (!lowest || maps->maps[i].start < lowest->start))
            lowest = &maps->maps[i];
    if (!lowest)
        return -1;
    elf_version(EV_CURRENT);
    uint64_t vaddr = 0;
    int is_exec = 0;
    if (first_load_address(path, &vaddr, &is_exec) < 0)
        return -1;
    *bias = is_exec ? 0 : lowest->start - lowest->offset - vaddr;
    return 0;
}

/* elf_symbols.c - see elf_symbols.h. */
#include "elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/demangle.h"

static int name_matches(const char *name, const char *wanted)
{
    if (strcmp(name, wanted) == 0)
        return 1;
    char *demangled = demangle_cxx(name);
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

/* The file's type and its executable PT_LOAD headers (up to capacity). */
static int executable_segments(const char *path, int *is_exec, GElf_Phdr *segments, size_t capacity, size_t *count)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr ehdr;
    size_t headers = 0;
    int rc = -1;
    *count = 0;
    if (elf && gelf_getehdr(elf, &ehdr) && elf_getphdrnum(elf, &headers) == 0) {
        *is_exec = ehdr.e_type == ET_EXEC;
        for (size_t i = 0; i < headers && *count < capacity; i++) {
            GElf_Phdr phdr;
            if (gelf_getphdr(elf, (int)i, &phdr) && phdr.p_type == PT_LOAD && (phdr.p_flags & PF_X))
                segments[(*count)++] = phdr;
        }
        rc = 0;
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

/* Whether the mapping maps part of the segment's file bytes: the loader
 * maps a PT_LOAD from the page that holds its first byte. Any part will
 * do (a mapping may be split): the byte at file offset X of the segment
 * lies at bias + p_vaddr + (X - p_offset). */
static int mapping_holds_segment(const struct proc_map *map, const GElf_Phdr *segment, uint64_t page_size)
{
    return map->offset >= (segment->p_offset & ~(page_size - 1)) &&
           map->offset < segment->p_offset + segment->p_filesz;
}

int elf_load_bias(const struct proc_maps *maps, const char *path, uint64_t *bias)
{
    elf_version(EV_CURRENT);
    GElf_Phdr segments[8];
    size_t count = 0;
    int is_exec = 0;
    if (executable_segments(path, &is_exec, segments, 8, &count) < 0)
        return -1;
    long page_size = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < maps->count; i++) {
        const struct proc_map *map = &maps->maps[i];
        if (!(map->perms & PROC_MAP_EXEC) || strcmp(map->path, path) != 0)
            continue;
        for (size_t s = 0; s < count; s++) {
            if (mapping_holds_segment(map, &segments[s], page_size > 0 ? (uint64_t)page_size : 4096)) {
                *bias = is_exec ? 0 : map->start + segments[s].p_offset - map->offset - segments[s].p_vaddr;
                return 0;
            }
        }
    }
    return -1;
}

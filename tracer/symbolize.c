/*
 * symbolize.c - see symbolize.h.
 *
 * The process may be gone, so nothing is read from its memory: every file it
 * mapped is reported to an offline libdwfl session at the load bias its
 * mappings imply, and addresses are looked up there. A file that cannot be
 * reported (not ELF, deleted and gone, unreadable) still names a module, and
 * its frames are module + file offset.
 */
#include "symbolize.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

/* From libstdc++ (the C++ ABI); declared here to keep this a C file. */
char *__cxa_demangle(const char *mangled_name, char *output_buffer, size_t *length, int *status);

static const char deleted_suffix[] = " (deleted)";

/* Owned copies of every string handed out, shared by all frames that name
 * them. */
struct interned_string {
    UT_hash_handle hh;
    char text[];
};

struct module_load;

/* One distinct path among the mappings; becomes a trace module once an
 * address falls into it. */
struct module_file {
    UT_hash_handle hh;    /* in symbolizer->files_by_path */
    const char *path;     /* as the kernel named it (interned) */
    const char *build_id; /* lower-case hex, "" if none or unknown */
    uint32_t module_id;   /* TRACE_NONE until an address resolves into it */
    bool not_elf;         /* not an ELF file we can read: no other mapping of it need try */
    const struct module_load *last_load; /* mappings come by address, so only this one can cover the next */
};

/* A function symbol of a module at its run-time address. */
struct function_symbol {
    uint64_t address, size;
    const char *name; /* dwfl's, valid until dwfl_end */
    int rank;         /* lower is the better name among aliases */
};

/* A module's function symbols sorted by address, one per address. dwfl's
 * own address-to-symbol lookup scans the whole symbol table every time
 * (200 us per libc address); this is a binary search. */
struct symbol_index {
    struct function_symbol *symbols;
    size_t count;
    bool built;
};

/* One load of a file, reported to dwfl; dwfl's per-module user data points
 * here. A library dlclosed and loaded again elsewhere has two loads. */
struct module_load {
    struct module_file *file;
    uint64_t bias;
    uint64_t low, high; /* [low, high): run-time span of its PT_LOAD segments, as dwfl sees it */
    struct symbol_index symbols; /* built at the first address in this load */
};

/* A file-backed mapping: the fallback when no load covers an address. */
struct mapping_range {
    uint64_t start, end, offset;
    struct module_file *file;
};

struct cache_key {
    uint64_t address;
    uint64_t return_address; /* 0 or 1; a full word so the key has no padding */
};

struct cached_resolution {
    struct cache_key key;
    UT_hash_handle hh;
    size_t count;
    struct trace_frame frames[];
};

/* Where one function's code lies, for the lookup of the function that
 * holds an address. */
struct code_range {
    Dwarf_Addr low, high;
    Dwarf_Die function;
};

/* The functions of one CU by address; built when an address first falls
 * into the CU, so later addresses skip the walk over the CU's DIEs. */
struct cu_function_index {
    const void *cu_die_address; /* key: where the CU's DIE is in the mapped debug info */
    UT_hash_handle hh;
    struct code_range *ranges; /* sorted by low */
    size_t count, capacity;
};

/* Frames of one address, innermost first, while they are being built. */
struct frame_list {
    struct trace_frame *items;
    size_t count, capacity;
};

struct symbolizer {
    Dwfl *dwfl;
    struct module_file *files; /* fixed capacity, like loads: pointers into both are kept */
    size_t file_count;
    struct module_file *files_by_path;
    struct module_load *loads;
    size_t load_count;
    struct mapping_range *ranges; /* sorted by start */
    size_t range_count;
    struct trace_module *modules; /* in module_id order */
    size_t module_count, module_capacity;
    struct interned_string *strings;
    struct cached_resolution *cache;
    struct cu_function_index *cu_indexes;
};

/* --- strings ------------------------------------------------------------- */

static const char *intern(struct symbolizer *symbolizer, const char *text)
{
    if (!text || !*text)
        return "";
    struct interned_string *found;
    size_t length = strlen(text);
    HASH_FIND(hh, symbolizer->strings, text, length, found);
    if (found)
        return found->text;
    struct interned_string *entry = malloc(sizeof *entry + length + 1);
    if (!entry)
        return "";
    memcpy(entry->text, text, length + 1);
    HASH_ADD_KEYPTR(hh, symbolizer->strings, entry->text, length, entry);
    return entry->text;
}

/* A demangled copy of a C++ (Itanium ABI) name, to free(); NULL when name is
 * not mangled. Not static: the unit test checks it directly. */
char *symbolize_demangle(const char *name)
{
    if (!name || strncmp(name, "_Z", 2) != 0)
        return NULL;
    int status = 0;
    char *demangled = __cxa_demangle(name, NULL, NULL, &status);
    if (status != 0) {
        free(demangled);
        return NULL;
    }
    return demangled;
}

static const char *intern_function_name(struct symbolizer *symbolizer, const char *name)
{
    char *demangled = symbolize_demangle(name);
    const char *interned = intern(symbolizer, demangled ? demangled : name);
    free(demangled);
    return interned;
}

/* --- allocator entry points ---------------------------------------------- */

static bool is_allocator_function(const char *function)
{
    static const char *const malloc_family[] = {
        "malloc",        "calloc",         "realloc",       "reallocarray",  "free",
        "memalign",      "posix_memalign", "aligned_alloc", "valloc",        "pvalloc",
        "__libc_malloc", "__libc_calloc",  "__libc_realloc", "__libc_free",  "__libc_memalign",
    };
    if (strncmp(function, "operator new", 12) == 0 || strncmp(function, "operator delete", 15) == 0)
        return true;
    for (size_t i = 0; i < sizeof malloc_family / sizeof malloc_family[0]; i++)
        if (strcmp(function, malloc_family[i]) == 0)
            return true;
    return false;
}

/* --- modules ------------------------------------------------------------- */

static bool is_file_backed(const struct proc_map *map)
{
    /* "" is anonymous; "[heap]", "[vdso]", ... are the kernel's. */
    return map->path && map->path[0] == '/';
}

static struct module_file *file_for_path(struct symbolizer *symbolizer, const char *path)
{
    struct module_file *file;
    HASH_FIND_STR(symbolizer->files_by_path, path, file);
    if (file)
        return file;
    file = &symbolizer->files[symbolizer->file_count++];
    *file = (struct module_file){.path = intern(symbolizer, path), .build_id = "", .module_id = TRACE_NONE};
    HASH_ADD_KEYPTR(hh, symbolizer->files_by_path, file->path, strlen(file->path), file);
    return file;
}

/* The module id of file, giving it the next one the first time. */
static uint32_t module_id_of(struct symbolizer *symbolizer, struct module_file *file)
{
    if (file->module_id != TRACE_NONE)
        return file->module_id;
    if (symbolizer->module_count == symbolizer->module_capacity) {
        size_t capacity = symbolizer->module_capacity ? 2 * symbolizer->module_capacity : 16;
        struct trace_module *grown = realloc(symbolizer->modules, capacity * sizeof *grown);
        if (!grown)
            return TRACE_NONE;
        symbolizer->modules = grown;
        symbolizer->module_capacity = capacity;
    }
    file->module_id = (uint32_t)symbolizer->module_count;
    symbolizer->modules[symbolizer->module_count++] =
        (struct trace_module){.module_id = file->module_id, .path = file->path, .build_id = file->build_id};
    return file->module_id;
}

/* The name to open: a deleted file may have been put back (a reinstall), so
 * its old name is worth a try. */
static char *openable_path(const char *path)
{
    char *copy = strdup(path);
    size_t length = copy ? strlen(copy) : 0, suffix = sizeof deleted_suffix - 1;
    if (length > suffix && strcmp(copy + length - suffix, deleted_suffix) == 0)
        copy[length - suffix] = '\0';
    return copy;
}

static uint64_t page_down(uint64_t value, uint64_t page_size)
{
    return value & ~(page_size - 1);
}

/* Where elf was loaded, given one of its mappings: the PT_LOAD segment that
 * holds the mapping's file offset was placed at map->start, so the bias is
 * what makes its p_vaddr land there (ET_EXEC is never moved). Also the
 * run-time span of all segments. Returns 0, or -1 if the mapping is not a
 * segment of this file. */
static int compute_load(Elf *elf, const struct proc_map *map, struct module_load *load)
{
    GElf_Ehdr ehdr;
    size_t phnum;
    if (!gelf_getehdr(elf, &ehdr) || (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) ||
        elf_getphdrnum(elf, &phnum) != 0)
        return -1;
    uint64_t page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    bool found = ehdr.e_type == ET_EXEC;
    uint64_t low = UINT64_MAX, high = 0;
    load->bias = 0;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr phdr;
        if (!gelf_getphdr(elf, (int)i, &phdr) || phdr.p_type != PT_LOAD)
            continue;
        /* dwfl starts a module at its first segment aligned down to
         * p_align (literally, even for 0) and derives the bias from that. */
        if (low == UINT64_MAX)
            low = phdr.p_vaddr & -phdr.p_align;
        high = phdr.p_vaddr + phdr.p_memsz > high ? phdr.p_vaddr + phdr.p_memsz : high;
        uint64_t file_start = page_down(phdr.p_offset, page_size);
        if (!found && phdr.p_filesz > 0 && map->offset >= file_start && map->offset < phdr.p_offset + phdr.p_filesz) {
            load->bias = map->start - (page_down(phdr.p_vaddr, page_size) + (map->offset - file_start));
            found = true;
        }
    }
    if (!found || low >= high)
        return -1;
    load->low = low + load->bias;
    load->high = high + load->bias;
    /* A mapping outside the span it implies belongs to some other file. */
    return map->start >= load->low && map->start < load->high ? 0 : -1;
}

static bool overlaps_a_load(const struct symbolizer *symbolizer, uint64_t low, uint64_t high)
{
    for (size_t i = 0; i < symbolizer->load_count; i++)
        if (low < symbolizer->loads[i].high && symbolizer->loads[i].low < high)
            return true;
    return false;
}

static bool covered_by_a_load(const struct module_file *file, const struct proc_map *map)
{
    return file->last_load && map->start >= file->last_load->low && map->start < file->last_load->high;
}

static void remember_build_id(struct symbolizer *symbolizer, Elf *elf, struct module_file *file)
{
    const void *build_id;
    ssize_t length = dwelf_elf_gnu_build_id(elf, &build_id);
    if (length <= 0 || *file->build_id)
        return;
    const unsigned char *bits = build_id;
    char *hex = malloc(2 * (size_t)length + 1);
    if (!hex)
        return;
    for (ssize_t i = 0; i < length; i++) {
        hex[2 * i] = "0123456789abcdef"[bits[i] >> 4];
        hex[2 * i + 1] = "0123456789abcdef"[bits[i] & 15];
    }
    hex[2 * length] = '\0';
    file->build_id = intern(symbolizer, hex);
    free(hex);
}

/* Reports the load of file that map starts, if map is an ELF segment not
 * already covered by an earlier load. Only its address range is reported:
 * dwfl opens the file (open_reported_file) when an address first needs it,
 * so a process with thousands of libraries does not cost thousands of
 * descriptors. */
static void report_load(struct symbolizer *symbolizer, const struct proc_map *map, struct module_file *file)
{
    char *path = openable_path(map->path);
    struct stat status;
    /* Never open a device or a FIFO someone mapped: opening may act. */
    int fd = path && stat(path, &status) == 0 && S_ISREG(status.st_mode) ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    free(path);
    Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    struct module_load load = {.file = file};
    file->not_elf = !elf || elf_kind(elf) != ELF_K_ELF;
    bool loadable = !file->not_elf && compute_load(elf, map, &load) == 0 &&
                    !overlaps_a_load(symbolizer, load.low, load.high);
    Dwfl_Module *module = loadable ? dwfl_report_module(symbolizer->dwfl, file->path, load.low, load.high) : NULL;
    if (module)
        remember_build_id(symbolizer, elf, file);
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
    if (!module)
        return;
    struct module_load *stored = &symbolizer->loads[symbolizer->load_count++];
    *stored = load;
    file->last_load = stored;
    void **user_data;
    dwfl_module_info(module, &user_data, NULL, NULL, NULL, NULL, NULL, NULL);
    *user_data = stored;
}

static int compare_maps_by_start(const void *left, const void *right)
{
    const struct proc_map *a = *(const struct proc_map *const *)left, *b = *(const struct proc_map *const *)right;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* The file-backed mappings, sorted by start; NULL (count 0) if none. */
static const struct proc_map **sorted_file_maps(const struct proc_maps *maps, size_t *count)
{
    const struct proc_map **sorted = malloc((maps->count ? maps->count : 1) * sizeof *sorted);
    *count = 0;
    for (size_t i = 0; sorted && i < maps->count; i++)
        if (is_file_backed(&maps->maps[i]))
            sorted[(*count)++] = &maps->maps[i];
    if (sorted)
        qsort(sorted, *count, sizeof *sorted, compare_maps_by_start);
    return sorted;
}

static int report_all_loads(struct symbolizer *symbolizer, const struct proc_map **sorted, size_t count)
{
    dwfl_report_begin(symbolizer->dwfl);
    for (size_t i = 0; i < count; i++) {
        struct module_file *file = file_for_path(symbolizer, sorted[i]->path);
        symbolizer->ranges[symbolizer->range_count++] = (struct mapping_range){
            .start = sorted[i]->start, .end = sorted[i]->end, .offset = sorted[i]->offset, .file = file};
        /* Only a readable mapping starts a load: glibc's PROT_NONE gaps
         * carry offsets that are no segment's. */
        if ((sorted[i]->perms & PROC_MAP_READ) && !file->not_elf && !covered_by_a_load(file, sorted[i]))
            report_load(symbolizer, sorted[i], file);
    }
    return dwfl_report_end(symbolizer->dwfl, NULL, NULL);
}

/* dwfl's find_elf: the file of a reported load, by the name it was mapped
 * under. Returns an fd that dwfl owns, or -1. */
static int open_reported_file(Dwfl_Module *module, void **user_data, const char *module_name, Dwarf_Addr base,
                              char **file_name, Elf **elf)
{
    (void)module;
    (void)module_name;
    (void)base;
    const struct module_load *load = *user_data;
    char *path = openable_path(load->file->path);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) {
        free(path);
        return -1;
    }
    *file_name = path; /* dwfl frees it */
    *elf = NULL;       /* dwfl reads the fd */
    return fd;
}

/* dwfl keeps a pointer to its callbacks, so they must outlive it. Separate
 * debug info is found by build-id or debuglink in the standard places. */
static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = open_reported_file,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

struct symbolizer *symbolizer_create(const struct proc_maps *maps)
{
    struct symbolizer *symbolizer = calloc(1, sizeof *symbolizer);
    if (!symbolizer)
        return NULL;
    elf_version(EV_CURRENT);
    size_t count;
    const struct proc_map **sorted = sorted_file_maps(maps, &count);
    size_t capacity = count ? count : 1;
    symbolizer->dwfl = dwfl_begin(&offline_callbacks);
    symbolizer->files = calloc(capacity, sizeof *symbolizer->files);
    symbolizer->loads = calloc(capacity, sizeof *symbolizer->loads);
    symbolizer->ranges = calloc(capacity, sizeof *symbolizer->ranges);
    if (!sorted || !symbolizer->dwfl || !symbolizer->files || !symbolizer->loads || !symbolizer->ranges ||
        report_all_loads(symbolizer, sorted, count) != 0) {
        free(sorted);
        symbolizer_destroy(symbolizer);
        return NULL;
    }
    free(sorted);
    return symbolizer;
}

/* --- symbol tables ------------------------------------------------------- */

/* Among aliases at one address, the name people know: a global or weak one
 * over a local one, then fewer leading underscores (getpid, not __getpid),
 * then global over weak. */
static int symbol_rank(const GElf_Sym *symbol, const char *name)
{
    int binding = GELF_ST_BIND(symbol->st_info);
    int underscores = 0;
    while (name[underscores] == '_' && underscores < 8)
        underscores++;
    return (binding == STB_LOCAL) * 100 + underscores * 2 + (binding == STB_WEAK);
}

static int compare_symbols(const void *left, const void *right)
{
    const struct function_symbol *a = left, *b = right;
    if (a->address != b->address)
        return a->address < b->address ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return (a->size < b->size) - (a->size > b->size); /* larger first */
}

static int collect_function_symbols(Dwfl_Module *module, struct symbol_index *index)
{
    int total = dwfl_module_getsymtab(module);
    index->symbols = total > 0 ? malloc((size_t)total * sizeof *index->symbols) : NULL;
    if (!index->symbols)
        return -1;
    for (int i = 1; i < total; i++) {
        GElf_Sym symbol;
        GElf_Addr address;
        GElf_Word section;
        const char *name = dwfl_module_getsym_info(module, i, &symbol, &address, &section, NULL, NULL);
        if (!name || !*name || section == SHN_UNDEF ||
            (GELF_ST_TYPE(symbol.st_info) != STT_FUNC && GELF_ST_TYPE(symbol.st_info) != STT_GNU_IFUNC))
            continue;
        index->symbols[index->count++] = (struct function_symbol){
            .address = address, .size = symbol.st_size, .name = name, .rank = symbol_rank(&symbol, name)};
    }
    return 0;
}

static void build_symbol_index(Dwfl_Module *module, struct symbol_index *index)
{
    index->built = true;
    if (collect_function_symbols(module, index) != 0 || index->count == 0)
        return;
    qsort(index->symbols, index->count, sizeof *index->symbols, compare_symbols);
    size_t kept = 1; /* the best-ranked alias of each address */
    for (size_t i = 1; i < index->count; i++)
        if (index->symbols[i].address != index->symbols[kept - 1].address)
            index->symbols[kept++] = index->symbols[i];
    index->count = kept;
}

/* The function symbol that holds pc: the nearest below it whose size
 * covers it (a few back, for symbols nested in bigger ones), else the
 * nearest below if it has no size (hand-written assembly). NULL if none. */
static const char *symbol_at(struct module_load *load, Dwfl_Module *module, uint64_t pc)
{
    struct symbol_index *index = &load->symbols;
    if (!index->built)
        build_symbol_index(module, index);
    size_t low = 0, high = index->count;
    while (low < high) { /* first symbol above pc */
        size_t middle = low + (high - low) / 2;
        if (index->symbols[middle].address <= pc)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == 0)
        return NULL;
    const struct function_symbol *nearest = &index->symbols[low - 1];
    for (size_t i = low, looked = 0; i-- > 0 && looked < 16; looked++)
        if (pc < index->symbols[i].address + index->symbols[i].size)
            return index->symbols[i].name;
    return nearest->size == 0 ? nearest->name : NULL;
}

/* --- resolution ---------------------------------------------------------- */

static int push_frame(struct frame_list *frames, const struct trace_frame *frame)
{
    if (frames->count == frames->capacity) {
        size_t capacity = frames->capacity ? 2 * frames->capacity : 8;
        struct trace_frame *grown = realloc(frames->items, capacity * sizeof *grown);
        if (!grown)
            return -1;
        frames->items = grown;
        frames->capacity = capacity;
    }
    frames->items[frames->count++] = *frame;
    return 0;
}

/* A function's name as DWARF gives it: a C++ linkage name demangled (it
 * has the qualifiers DW_AT_name lacks), else DW_AT_name (a C linkage name is
 * only an asm label, such as glibc's __GI_ aliases); attributes of the
 * abstract origin and of the declaration count too. NULL if it has neither. */
static const char *die_function_name(struct symbolizer *symbolizer, Dwarf_Die *die)
{
    Dwarf_Attribute attribute;
    const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attribute));
    if (!linkage)
        linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attribute));
    char *demangled = symbolize_demangle(linkage);
    if (demangled) {
        const char *interned = intern(symbolizer, demangled);
        free(demangled);
        return interned;
    }
    const char *name = dwarf_diename(die);
    return name ? intern(symbolizer, name) : NULL;
}

/* Where an inlined subroutine was called from, in the function it was
 * inlined into. */
static void call_site(struct symbolizer *symbolizer, Dwarf_Die *inlined, const char **file, uint32_t *line)
{
    Dwarf_Attribute attribute;
    Dwarf_Word file_index = 0, line_number = 0;
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t file_count;
    *file = "";
    *line = 0;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attribute), &line_number) == 0)
        *line = (uint32_t)line_number;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attribute), &file_index) == 0 &&
        dwarf_diecu(inlined, &cu, NULL, NULL) && dwarf_getsrcfiles(&cu, &files, &file_count) == 0 &&
        file_index < file_count)
        *file = intern(symbolizer, dwarf_filesrc(files, file_index, NULL, NULL));
}

/* Source file and line of pc from the line table, into frame. */
static void line_of(struct symbolizer *symbolizer, Dwfl_Module *module, uint64_t pc, struct trace_frame *frame)
{
    Dwfl_Line *line = dwfl_module_getsrc(module, pc);
    int line_number = 0;
    const char *file = line ? dwfl_lineinfo(line, NULL, &line_number, NULL, NULL, NULL) : NULL;
    if (!file)
        return;
    frame->file = intern(symbolizer, file);
    frame->line = line_number > 0 ? (uint32_t)line_number : 0;
}

/* DIEs, outermost first, while the scopes around pc are searched. */
struct die_path {
    Dwarf_Die dies[64]; /* deeper nesting than this is no real program's */
    int count;
};

static bool is_code_scope(int tag)
{
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
           tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

/* Scopes without addresses of their own that may still hold functions. */
static bool may_hold_code(int tag)
{
    /* Not classes: gcc and clang put member function code at CU level, and
     * what is missed here dwarf_getscopes still finds. */
    return tag == DW_TAG_namespace || tag == DW_TAG_module;
}

/* Appends the child of parent that holds pc, and its own such child, and so
 * on down to the innermost scope. Subtrees that do not hold pc are skipped
 * whole (gcc's DW_AT_sibling makes that a jump). */
static void descend_to_pc(Dwarf_Die *parent, Dwarf_Addr pc, struct die_path *path)
{
    Dwarf_Die child;
    if (path->count == (int)(sizeof path->dies / sizeof path->dies[0]) || dwarf_child(parent, &child) != 0)
        return;
    do {
        if (is_code_scope(dwarf_tag(&child)) && dwarf_haspc(&child, pc) == 1) {
            path->dies[path->count++] = child;
            descend_to_pc(&path->dies[path->count - 1], pc, path);
            return;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

/* dwarf_getscopes's answer turned into the nesting chain: it continues an
 * inlined function into its abstract definition, not into its caller, so
 * only its innermost scope is kept and the chain is rebuilt from there.
 * Slow (it visits the whole CU), but it follows imported units. */
static int scopes_by_getscopes(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die **scopes)
{
    Dwarf_Die *by_address = NULL;
    int count = dwarf_getscopes(cu, pc, &by_address);
    if (count <= 0) {
        free(by_address);
        return -1;
    }
    Dwarf_Die innermost = by_address[0];
    free(by_address);
    return dwarf_getscopes_die(&innermost, scopes);
}

static int add_code_ranges(struct cu_function_index *index, Dwarf_Die *function)
{
    Dwarf_Addr base, low, high;
    for (ptrdiff_t offset = 0; (offset = dwarf_ranges(function, offset, &base, &low, &high)) > 0;) {
        if (index->count == index->capacity) {
            size_t capacity = index->capacity ? 2 * index->capacity : 64;
            struct code_range *grown = realloc(index->ranges, capacity * sizeof *grown);
            if (!grown)
                return -1;
            index->ranges = grown;
            index->capacity = capacity;
        }
        if (low < high)
            index->ranges[index->count++] = (struct code_range){.low = low, .high = high, .function = *function};
    }
    return 0;
}

/* Adds the code ranges of the functions among parent's children, and
 * within its namespaces. */
static int index_functions(struct cu_function_index *index, Dwarf_Die *parent, int depth)
{
    Dwarf_Die child;
    if (depth > 32 || dwarf_child(parent, &child) != 0)
        return 0;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram && add_code_ranges(index, &child) != 0)
            return -1;
        if (may_hold_code(tag) && index_functions(index, &child, depth + 1) != 0)
            return -1;
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static int compare_code_ranges(const void *left, const void *right)
{
    const struct code_range *a = left, *b = right;
    return a->low < b->low ? -1 : a->low > b->low;
}

static struct cu_function_index *function_index_of(struct symbolizer *symbolizer, Dwarf_Die *cu)
{
    struct cu_function_index *index;
    const void *key = cu->addr;
    HASH_FIND(hh, symbolizer->cu_indexes, &key, sizeof key, index);
    if (index)
        return index;
    index = calloc(1, sizeof *index);
    if (!index)
        return NULL;
    index->cu_die_address = key;
    if (index_functions(index, cu, 0) != 0) {
        free(index->ranges);
        free(index);
        return NULL;
    }
    if (index->count > 1)
        qsort(index->ranges, index->count, sizeof *index->ranges, compare_code_ranges);
    HASH_ADD(hh, symbolizer->cu_indexes, cu_die_address, sizeof key, index);
    return index;
}

/* The function DIE whose code holds pc, or NULL. */
static const Dwarf_Die *function_at(const struct cu_function_index *index, Dwarf_Addr pc)
{
    size_t low = 0, high = index->count;
    while (low < high) { /* first range starting above pc */
        size_t middle = low + (high - low) / 2;
        if (index->ranges[middle].low <= pc)
            low = middle + 1;
        else
            high = middle;
    }
    for (size_t i = low, looked = 0; i-- > 0 && looked < 8; looked++)
        if (pc < index->ranges[i].high)
            return &index->ranges[i].function;
    return NULL;
}

/* The DIE scopes around pc from the innermost one outwards, as the DIE tree
 * nests them. Returns the count; *scopes is to free(). */
static int concrete_scopes(struct symbolizer *symbolizer, Dwfl_Module *module, uint64_t pc, Dwarf_Die **scopes)
{
    Dwarf_Addr dwarf_bias;
    Dwarf_Die *cu = dwfl_module_addrdie(module, pc, &dwarf_bias);
    *scopes = NULL;
    if (!cu)
        return -1;
    const struct cu_function_index *index = function_index_of(symbolizer, cu);
    const Dwarf_Die *function = index ? function_at(index, pc - dwarf_bias) : NULL;
    if (!function)
        return scopes_by_getscopes(cu, pc - dwarf_bias, scopes);
    struct die_path path = {.dies = {*function}, .count = 1};
    descend_to_pc(&path.dies[0], pc - dwarf_bias, &path);
    *scopes = malloc((size_t)path.count * sizeof **scopes);
    if (!*scopes)
        return -1;
    for (int i = 0; i < path.count; i++)
        (*scopes)[i] = path.dies[path.count - 1 - i];
    return path.count;
}

/* The classic libdw inline walk: the innermost frame has the line table's
 * line; each inlined subroutine's call site is the line of the frame
 * outside it, up to the subprogram that everything was inlined into. */
static int walk_inlined_scopes(struct symbolizer *symbolizer, Dwarf_Die *scopes, int count,
                               const char *symbol_name, struct trace_frame frame, struct frame_list *frames)
{
    for (int i = 0; i < count; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        const char *name = die_function_name(symbolizer, &scopes[i]);
        if (tag == DW_TAG_subprogram) {
            frame.function = name ? name : symbol_name;
            frame.flags = 0;
            return push_frame(frames, &frame);
        }
        frame.function = name ? name : "";
        frame.flags = TRACE_FRAME_INLINED;
        if (push_frame(frames, &frame) != 0)
            return -1;
        call_site(symbolizer, &scopes[i], &frame.file, &frame.line);
    }
    /* No enclosing subprogram DIE: the symbol table names the outer frame. */
    frame.function = symbol_name;
    frame.flags = 0;
    return push_frame(frames, &frame);
}

static int resolve_in_module(struct symbolizer *symbolizer, struct module_load *load, Dwfl_Module *module,
                             uint64_t pc, struct trace_frame frame, struct frame_list *frames)
{
    const char *symbol_name = symbol_at(load, module, pc);
    symbol_name = symbol_name ? intern_function_name(symbolizer, symbol_name) : "";
    line_of(symbolizer, module, pc, &frame);
    Dwarf_Die *scopes;
    int count = concrete_scopes(symbolizer, module, pc, &scopes);
    int result = walk_inlined_scopes(symbolizer, scopes, count > 0 ? count : 0, symbol_name, frame, frames);
    free(scopes);
    return result;
}

static const struct mapping_range *find_range(const struct symbolizer *symbolizer, uint64_t address)
{
    size_t low = 0, high = symbolizer->range_count;
    while (low < high) { /* first range starting above address */
        size_t middle = low + (high - low) / 2;
        if (symbolizer->ranges[middle].start <= address)
            low = middle + 1;
        else
            high = middle;
    }
    /* Overlapping entries (maps read at several times) may hide the one
     * that holds address behind a later, shorter one. */
    for (size_t i = low; i-- > 0;)
        if (address >= symbolizer->ranges[i].start && address < symbolizer->ranges[i].end)
            return &symbolizer->ranges[i];
    return NULL;
}

static int resolve_uncached(struct symbolizer *symbolizer, uint64_t address, bool return_address,
                            struct frame_list *frames)
{
    /* A return address is the instruction after the call; the call's own
     * line (and inline context) is one byte back. */
    uint64_t pc = return_address && address > 0 ? address - 1 : address;
    struct trace_frame frame = {.module_id = TRACE_NONE, .function = "", .file = "", .address = address,
                                .module_offset = address};
    Dwfl_Module *module = dwfl_addrmodule(symbolizer->dwfl, pc);
    void **user_data = NULL;
    if (module)
        dwfl_module_info(module, &user_data, NULL, NULL, NULL, NULL, NULL, NULL);
    if (user_data && *user_data) {
        struct module_load *load = *user_data;
        frame.module_id = module_id_of(symbolizer, load->file);
        frame.module_offset = address - load->bias;
        return resolve_in_module(symbolizer, load, module, pc, frame, frames);
    }
    const struct mapping_range *range = find_range(symbolizer, pc);
    if (range) {
        frame.module_id = module_id_of(symbolizer, range->file);
        frame.module_offset = address - range->start + range->offset;
    }
    return push_frame(frames, &frame);
}

static void flag_allocators(struct frame_list *frames)
{
    for (size_t i = 0; i < frames->count; i++)
        if (is_allocator_function(frames->items[i].function))
            frames->items[i].flags |= TRACE_FRAME_ALLOCATOR;
}

static struct cached_resolution *resolve_and_cache(struct symbolizer *symbolizer, const struct cache_key *key)
{
    struct frame_list frames = {0};
    struct cached_resolution *entry = NULL;
    if (resolve_uncached(symbolizer, key->address, key->return_address != 0, &frames) == 0 && frames.count > 0) {
        flag_allocators(&frames);
        entry = malloc(sizeof *entry + frames.count * sizeof entry->frames[0]);
    }
    if (entry) {
        entry->key = *key;
        entry->count = frames.count;
        memcpy(entry->frames, frames.items, frames.count * sizeof entry->frames[0]);
        HASH_ADD(hh, symbolizer->cache, key, sizeof entry->key, entry);
    }
    free(frames.items);
    return entry;
}

size_t symbolizer_resolve(struct symbolizer *symbolizer, uint64_t address, int return_address,
                          struct trace_frame *out, size_t max)
{
    if (max == 0)
        return 0;
    struct cache_key key = {.address = address, .return_address = return_address ? 1 : 0};
    struct cached_resolution *entry;
    HASH_FIND(hh, symbolizer->cache, &key, sizeof key, entry);
    if (!entry)
        entry = resolve_and_cache(symbolizer, &key);
    if (!entry) { /* out of memory: still one frame, as promised */
        out[0] = (struct trace_frame){.module_id = TRACE_NONE, .function = "", .file = "", .address = address,
                                      .module_offset = address};
        return 1;
    }
    size_t count = entry->count < max ? entry->count : max;
    memcpy(out, entry->frames, count * sizeof *out);
    return count;
}

const struct trace_module *symbolizer_modules(const struct symbolizer *symbolizer, size_t *count)
{
    *count = symbolizer->module_count;
    return symbolizer->modules;
}

void symbolizer_destroy(struct symbolizer *symbolizer)
{
    if (!symbolizer)
        return;
    if (symbolizer->dwfl)
        dwfl_end(symbolizer->dwfl);
    struct cached_resolution *entry, *next_entry;
    HASH_ITER(hh, symbolizer->cache, entry, next_entry) {
        HASH_DEL(symbolizer->cache, entry);
        free(entry);
    }
    struct cu_function_index *index, *next_index;
    HASH_ITER(hh, symbolizer->cu_indexes, index, next_index) {
        HASH_DEL(symbolizer->cu_indexes, index);
        free(index->ranges);
        free(index);
    }
    struct interned_string *string, *next_string;
    HASH_ITER(hh, symbolizer->strings, string, next_string) {
        HASH_DEL(symbolizer->strings, string);
        free(string);
    }
    HASH_CLEAR(hh, symbolizer->files_by_path);
    free(symbolizer->files);
    for (size_t i = 0; i < symbolizer->load_count; i++)
        free(symbolizer->loads[i].symbols.symbols);
    free(symbolizer->loads);
    free(symbolizer->ranges);
    free(symbolizer->modules);
    free(symbolizer);
}

/* --- warm-up ------------------------------------------------------------- */

struct symbolizer_warmup {
    pthread_t thread;
    struct proc_maps maps;
    uint64_t *addresses;
    size_t address_count;
    struct symbolizer *symbolizer; /* the thread's result */
};

static void *warm_up(void *argument)
{
    struct symbolizer_warmup *warmup = argument;
    warmup->symbolizer = symbolizer_create(&warmup->maps);
    struct trace_frame frames[1]; /* the cache keeps every frame; one is enough to fill it */
    for (size_t i = 0; warmup->symbolizer && i < warmup->address_count; i++)
        symbolizer_resolve(warmup->symbolizer, warmup->addresses[i], 1, frames, 1);
    return NULL;
}

static void warmup_free(struct symbolizer_warmup *warmup)
{
    proc_maps_free(&warmup->maps);
    free(warmup->addresses);
    free(warmup);
}

struct symbolizer_warmup *symbolizer_warmup_start(const struct proc_maps *maps, const uint64_t *addresses,
                                                  size_t count)
{
    struct symbolizer_warmup *warmup = calloc(1, sizeof *warmup);
    if (!warmup)
        return NULL;
    warmup->addresses = malloc((count ? count : 1) * sizeof *addresses);
    if (!warmup->addresses || proc_maps_copy(&warmup->maps, maps) < 0) {
        warmup_free(warmup);
        return NULL;
    }
    memcpy(warmup->addresses, addresses, count * sizeof *addresses);
    warmup->address_count = count;
    if (pthread_create(&warmup->thread, NULL, warm_up, warmup) != 0) {
        warmup_free(warmup);
        return NULL;
    }
    return warmup;
}

/* Whether symbolizer was built from exactly the file mappings of maps (its
 * ranges are all of them, sorted by start). */
static bool built_from(const struct symbolizer *symbolizer, const struct proc_maps *maps)
{
    size_t count;
    const struct proc_map **sorted = sorted_file_maps(maps, &count);
    bool same = sorted && count == symbolizer->range_count;
    for (size_t i = 0; same && i < count; i++) {
        const struct mapping_range *range = &symbolizer->ranges[i];
        same = range->start == sorted[i]->start && range->end == sorted[i]->end &&
               range->offset == sorted[i]->offset && strcmp(range->file->path, sorted[i]->path) == 0;
    }
    free(sorted);
    return same;
}

struct symbolizer *symbolizer_warmup_finish(struct symbolizer_warmup *warmup, const struct proc_maps *maps)
{
    struct symbolizer *symbolizer = NULL;
    if (warmup) {
        pthread_join(warmup->thread, NULL);
        symbolizer = warmup->symbolizer;
        warmup_free(warmup);
    }
    if (symbolizer && (!maps || !built_from(symbolizer, maps))) {
        symbolizer_destroy(symbolizer);
        symbolizer = NULL;
    }
    if (!symbolizer && maps)
        symbolizer = symbolizer_create(maps);
    return symbolizer;
}

/*
 * symbol_store.c - see symbol_store.h and symbolize.h.
 *
 * One offline libdwfl session serves the whole recording. Each distinct
 * module (by build-id) is reported to it once, when an address first needs
 * it, at a synthetic base of its own: module ranges never overlap however
 * the images placed them, and an image's address becomes the module's
 * offset plus the module's synthetic bias. libdwfl then opens the module's
 * debug file and libdw decompresses its sections once, and every frame is
 * resolved once per (module, offset) whatever the number of images that
 * ran the code.
 *
 * With a symbol cache (symbol_cache.h), a module is given to libdwfl only
 * when an offset is missing from the module's cache file: a module whose
 * every offset was resolved by an earlier recording is never read by
 * libdw. The frames resolved with libdw are added to the cache at the end
 * of the recording (symbol_store_save_cache).
 */
#include "../../common/growable_array.h"
#include "symbol_store.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <fcntl.h>
#include <link.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

#include "../../common/demangle.h"
#include "symbol_cache.h"

static const char deleted_suffix[] = " (deleted)";

/* Synthetic module bases start above any user-space address a non-PIE
 * executable is linked at, and are spaced so that no two modules touch. */
#define FIRST_SYNTHETIC_BASE (1ull << 48)
#define SYNTHETIC_ALIGNMENT (1ull << 21)
/* No real module spans more; a file that claims to is not loaded (its
 * synthetic range could wrap around). */
#define MAX_MODULE_SPAN (1ull << 40)

/* Owned copies of every string handed out, shared by all frames that name
 * them. */
struct interned_string {
    UT_hash_handle hh;
    char text[];
};

/* What stat says of a file: the same key is the same content. */
struct file_identity {
    uint64_t device, inode, size, mtime_seconds, mtime_nanoseconds;
};

struct load_segment {
    uint64_t vaddr, offset, file_size;
};

struct stored_module;

struct stored_file {
    struct file_identity identity;
    UT_hash_handle hh;        /* in store->files */
    const char *path;         /* the name it was opened under */
    bool readable_elf;        /* else only known not to be one (not opened again) */
    bool is_exec;             /* ET_EXEC: never moved */
    struct load_segment *segments; /* its PT_LOAD headers */
    size_t segment_count;
    uint64_t low, high;       /* span of its segments, from the first one aligned down as libdwfl does */
    const char *build_id;     /* hex, "" if none */
    Elf *elf;                 /* open until libdwfl takes it (hand_over_file) */
    struct stored_module *module; /* once an address needed it */
};

/* A function symbol of a module at its synthetic address. */
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

/* Modules are one per build-id; a copy of a file with a different size
 * (a stripped copy keeps the build-id but not the symbol table) is a
 * module of its own. Files without a build-id are modules of their own. */
struct module_key {
    const void *identity; /* the interned build-id, or the stored_file */
    uint64_t size;
};

struct stored_resolution;

/* The module's file in the user's symbol cache. */
struct module_cache {
    bool looked_up;
    void *bytes;                   /* the file read, while view is used */
    struct symbol_cache_view view; /* valid when bytes is set */
    struct symbol_cache_debug_source debug; /* what libdwfl searched for (once reported) */
    char *debug_path;              /* debug.path's storage */
    struct stored_resolution **fresh; /* resolved with libdw in this recording */
    size_t fresh_count, fresh_capacity;
};

struct stored_module {
    struct module_key key;
    UT_hash_handle hh;        /* in store->modules */
    struct symbol_store *store;
    uint64_t index;           /* in the frame cache's keys */
    struct stored_file *file; /* the file libdwfl reads */
    bool reported;            /* given to libdwfl: at its first offset not in the cache */
    Dwfl_Module *dwfl_module; /* NULL if libdwfl refused it */
    uint64_t synthetic_bias;  /* libdwfl address = file offset (vaddr) + this */
    bool dwarf_checked;
    struct symbol_index symbols;
    struct module_cache cache;
};

struct frame_key {
    uint64_t module_index;
    uint64_t offset;
    uint64_t return_address; /* 0 or 1; a full word so the key has no padding */
};

struct stored_resolution {
    struct frame_key key;
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

struct symbol_store {
    pthread_mutex_t lock;
    Dwfl *dwfl;
    bool debuginfod; /* DEBUGINFOD_URLS was set: libdwfl may ask a server */
    uint64_t next_synthetic_base;
    struct stored_file *files;
    struct stored_module *modules;
    struct stored_resolution *resolutions;
    struct cu_function_index *cu_indexes;
    struct interned_string *strings;
    struct symbol_cache *cache;  /* NULL: no symbol cache */
    char *cache_producer;        /* what resolved the frames, as cache files say it */
    struct symbol_store_stats stats;
};

/* --- strings ------------------------------------------------------------- */

const char *symbol_store_intern(struct symbol_store *store, const char *text)
{
    if (!text || !*text)
        return "";
    struct interned_string *found;
    size_t length = strlen(text);
    HASH_FIND(hh, store->strings, text, length, found);
    if (found)
        return found->text;
    struct interned_string *entry = malloc(sizeof *entry + length + 1);
    if (!entry)
        return "";
    memcpy(entry->text, text, length + 1);
    HASH_ADD_KEYPTR(hh, store->strings, entry->text, length, entry);
    return entry->text;
}

static const char *intern_function_name(struct symbol_store *store, const char *name)
{
    char *demangled = demangle_cxx(name);
    const char *interned = symbol_store_intern(store, demangled ? demangled : name);
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

/* --- files --------------------------------------------------------------- */

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

/* The PT_LOAD headers of an executable or shared object, and the span
 * libdwfl gives it: from the first segment aligned down to p_align
 * (literally, even for 0) to the end of the highest. Returns 0, or -1 if
 * elf is no such file. */
static int read_segments(Elf *elf, struct stored_file *file)
{
    GElf_Ehdr ehdr;
    size_t phnum;
    if (!gelf_getehdr(elf, &ehdr) || (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) ||
        elf_getphdrnum(elf, &phnum) != 0 || phnum == 0)
        return -1;
    file->segments = calloc(phnum, sizeof *file->segments);
    if (!file->segments)
        return -1;
    file->is_exec = ehdr.e_type == ET_EXEC;
    uint64_t low = UINT64_MAX, high = 0;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr phdr;
        if (!gelf_getphdr(elf, (int)i, &phdr) || phdr.p_type != PT_LOAD)
            continue;
        if (low == UINT64_MAX)
            low = phdr.p_vaddr & -phdr.p_align;
        high = phdr.p_vaddr + phdr.p_memsz > high ? phdr.p_vaddr + phdr.p_memsz : high;
        file->segments[file->segment_count++] =
            (struct load_segment){.vaddr = phdr.p_vaddr, .offset = phdr.p_offset, .file_size = phdr.p_filesz};
    }
    file->low = low;
    file->high = high;
    return low < high && high - low <= MAX_MODULE_SPAN ? 0 : -1;
}

static const char *build_id_of(struct symbol_store *store, Elf *elf)
{
    const void *build_id;
    ssize_t length = dwelf_elf_gnu_build_id(elf, &build_id);
    if (length <= 0)
        return "";
    char *hex = malloc(2 * (size_t)length + 1);
    if (!hex)
        return "";
    symbol_cache_build_id_hex(build_id, (size_t)length, hex);
    const char *interned = symbol_store_intern(store, hex);
    free(hex);
    return interned;
}

/* Opens the file and reads what every image needs of it. The whole file
 * is mapped by libelf, so the descriptor is closed at once: a recording
 * that meets thousands of files does not hold thousands of descriptors. */
static void read_file(struct symbol_store *store, struct stored_file *file)
{
    int fd = open(file->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    store->stats.files_opened++;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
    if (elf && elf_cntl(elf, ELF_C_FDREAD) != 0) {
        elf_end(elf);
        elf = NULL;
    }
    close(fd);
    file->readable_elf = elf && elf_kind(elf) == ELF_K_ELF && read_segments(elf, file) == 0;
    if (file->readable_elf) {
        file->build_id = build_id_of(store, elf);
        file->elf = elf;
    } else if (elf) {
        elf_end(elf);
    }
}

struct stored_file *symbol_store_file(struct symbol_store *store, const char *path)
{
    char *openable = openable_path(path);
    struct stat status;
    /* Never open a device or a FIFO someone mapped: opening may act. */
    if (!openable || stat(openable, &status) != 0 || !S_ISREG(status.st_mode)) {
        free(openable);
        return NULL;
    }
    struct file_identity identity = {(uint64_t)status.st_dev, (uint64_t)status.st_ino, (uint64_t)status.st_size,
                                     (uint64_t)status.st_mtim.tv_sec, (uint64_t)status.st_mtim.tv_nsec};
    struct stored_file *file;
    HASH_FIND(hh, store->files, &identity, sizeof identity, file);
    if (!file && (file = calloc(1, sizeof *file)) != NULL) {
        file->identity = identity;
        file->path = symbol_store_intern(store, openable);
        file->build_id = "";
        read_file(store, file);
        HASH_ADD(hh, store->files, identity, sizeof identity, file);
    }
    free(openable);
    return file && file->readable_elf ? file : NULL;
}

const char *stored_file_build_id(const struct stored_file *file)
{
    return file->build_id;
}

/* The segment that holds the mapping's file offset was placed at map_start,
 * so the bias is what makes its p_vaddr land there (ET_EXEC is never
 * moved). */
int stored_file_load(const struct stored_file *file, uint64_t map_start, uint64_t map_offset, uint64_t *bias,
                     uint64_t *low, uint64_t *high)
{
    uint64_t page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    bool found = file->is_exec;
    *bias = 0;
    for (size_t i = 0; i < file->segment_count && !found; i++) {
        const struct load_segment *segment = &file->segments[i];
        uint64_t file_start = page_down(segment->offset, page_size);
        if (segment->file_size > 0 && map_offset >= file_start && map_offset < segment->offset + segment->file_size) {
            *bias = map_start - (page_down(segment->vaddr, page_size) + (map_offset - file_start));
            found = true;
        }
    }
    if (!found)
        return -1;
    *low = file->low + *bias;
    *high = file->high + *bias;
    /* A mapping outside the span it implies belongs to some other file. */
    return map_start >= *low && map_start < *high ? 0 : -1;
}

/* --- modules ------------------------------------------------------------- */

/* dwfl's find_elf: the module's file, opened already by read_file. */
static int hand_over_file(Dwfl_Module *dwfl_module, void **user_data, const char *module_name, Dwarf_Addr base,
                          char **file_name, Elf **elf)
{
    (void)dwfl_module;
    (void)module_name;
    (void)base;
    struct stored_file *file = ((struct stored_module *)*user_data)->file;
    *file_name = strdup(file->path); /* dwfl frees it; its folder is where the debuglink search starts */
    *elf = file->elf;                /* dwfl's from now on */
    file->elf = NULL;
    return *elf ? -1 : open(file->path, O_RDONLY | O_CLOEXEC);
}

static bool path_exists(const char *format, ...) __attribute__((format(printf, 1, 2)));

static bool path_exists(const char *format, ...)
{
    char path[PATH_MAX];
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(path, sizeof path, format, arguments);
    va_end(arguments);
    return length > 0 && (size_t)length < sizeof path && access(path, F_OK) == 0;
}

/* Whether a file of that name is where libdwfl's search by name looks for
 * the debug file of file_name (its default path ":.debug:/usr/lib/debug"):
 * beside it (if beside), in .debug/ or .dwz/ beside it, under
 * /usr/lib/debug at the folder's path or any tail of it. More places than
 * libdwfl tries, never fewer, so a "no" never hides a debug file. */
static bool debug_name_may_exist(const char *file_name, const char *name, bool beside)
{
    const char *slash = strrchr(file_name, '/');
    if (!slash || !*name)
        return true; /* a relative name: libdwfl knows where it starts */
    int folder = (int)(slash - file_name);
    if ((beside && path_exists("%.*s/%s", folder, file_name, name)) ||
        path_exists("%.*s/.debug/%s", folder, file_name, name) || path_exists("%.*s/.dwz/%s", folder, file_name, name))
        return true;
    for (const char *tail = file_name; tail && tail <= slash; tail = strchr(tail + 1, '/'))
        if (path_exists("/usr/lib/debug%.*s/%s", (int)(slash - tail), tail, name) ||
            path_exists("/usr/lib/debug%.*s/.dwz/%s", (int)(slash - tail), tail, name))
            return true;
    return false;
}

/* Whether libdwfl's search by name (after the one by build-id) could find
 * anything, for the file as named and as realpath resolves it: the
 * debuglink name and its last component, or without a debuglink the
 * file's name + ".debug", and its plain name away from its own folder. */
static bool debug_file_may_exist(const char *file_name, const char *debuglink)
{
    if (!file_name)
        return true;
    if (debuglink && debuglink[0] == '/')
        return access(debuglink, F_OK) == 0;
    char *real = realpath(file_name, NULL);
    bool found = false;
    for (int i = 0; i < 2 && !found; i++) {
        const char *name = i == 0 ? file_name : real;
        if (!name)
            continue;
        const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
        char made_up[NAME_MAX + 8];
        snprintf(made_up, sizeof made_up, "%s.debug", base);
        const char *link_base = debuglink && strrchr(debuglink, '/') ? strrchr(debuglink, '/') + 1 : debuglink;
        found = debug_name_may_exist(name, debuglink ? debuglink : made_up, true) ||
                (link_base && debug_name_may_exist(name, link_base, true)) ||
                (!debuglink && debug_name_may_exist(name, base, false));
    }
    free(real);
    return found;
}

static struct symbol_cache_file_identity identity_of(const struct stat *status)
{
    return (struct symbol_cache_file_identity){(uint64_t)status->st_dev, (uint64_t)status->st_ino,
                                               (uint64_t)status->st_size, (uint64_t)status->st_mtim.tv_sec,
                                               (uint64_t)status->st_mtim.tv_nsec};
}

/* What the search for the module's debug file found, for its cache file. */
static void note_debug_source(struct stored_module *module, int fd, const char *path)
{
    struct module_cache *cache = &module->cache;
    struct stat status;
    /* A later call looks for the debug file's own supplement (dwz's
     * .gnu_debugaltlink), which comes with the debug file. */
    if (cache->debug.kind == SYMBOL_CACHE_DEBUG_FOUND)
        return;
    free(cache->debug_path);
    cache->debug_path = NULL;
    cache->debug = (struct symbol_cache_debug_source){
        .kind = SYMBOL_CACHE_DEBUG_NONE_FOUND, .debuginfod = module->store->debuginfod, .path = ""};
    if (fd >= 0 && path && fstat(fd, &status) == 0 && (cache->debug_path = strdup(path)) != NULL) {
        cache->debug.kind = SYMBOL_CACHE_DEBUG_FOUND;
        cache->debug.path = cache->debug_path;
        cache->debug.identity = identity_of(&status);
    }
}

/* dwfl's find_debuginfo: by build-id under /usr/lib/debug/.build-id, then
 * by debuglink (else the file's name) beside the file and under
 * /usr/lib/debug; then, only when DEBUGINFOD_URLS is set, from debuginfod.
 * libdwfl's standard search ends with debuginfod whatever the variable
 * says: unset, the client contacts nothing, but libdwfl still loads it
 * (libdebuginfod, libcurl and its TLS library: 5 ms). So offline, the
 * standard search runs only when a file it looks for by name exists. */
static int find_debug_file(Dwfl_Module *dwfl_module, void **user_data, const char *module_name, Dwarf_Addr base,
                           const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                           char **debug_file_name)
{
    struct stored_module *module = *user_data;
    int fd;
    if (module->store->debuginfod || debug_file_may_exist(file_name, debuglink_file))
        fd = dwfl_standard_find_debuginfo(dwfl_module, user_data, module_name, base, file_name, debuglink_file,
                                          debuglink_crc, debug_file_name);
    else
        fd = dwfl_build_id_find_debuginfo(dwfl_module, user_data, module_name, base, file_name, debuglink_file,
                                          debuglink_crc, debug_file_name);
    if (fd >= 0)
        module->store->stats.debug_files_found++;
    note_debug_source(module, fd, *debug_file_name);
    return fd;
}

/* dwfl keeps a pointer to its callbacks, so they must outlive it. */
static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = hand_over_file,
    .find_debuginfo = find_debug_file,
    .section_address = dwfl_offline_section_address,
};

/* Gives the module to dwfl at the next free synthetic base. */
static void report_module(struct symbol_store *store, struct stored_module *module)
{
    const struct stored_file *file = module->file;
    uint64_t base = store->next_synthetic_base, span = file->high - file->low;
    dwfl_report_begin_add(store->dwfl);
    module->dwfl_module = dwfl_report_module(store->dwfl, file->path, base, base + span);
    if (dwfl_report_end(store->dwfl, NULL, NULL) != 0 || !module->dwfl_module) {
        module->dwfl_module = NULL;
        return;
    }
    module->synthetic_bias = base - file->low;
    store->next_synthetic_base = (base + span + 2 * SYNTHETIC_ALIGNMENT - 1) & ~(SYNTHETIC_ALIGNMENT - 1);
    store->stats.modules_reported++;
    void **user_data;
    dwfl_module_info(module->dwfl_module, &user_data, NULL, NULL, NULL, NULL, NULL, NULL);
    *user_data = module;
}

/* The module as libdwfl has it, reported the first time; NULL if libdwfl
 * refused it. */
static Dwfl_Module *module_in_dwfl(struct symbol_store *store, struct stored_module *module)
{
    if (!module->reported) {
        module->reported = true;
        report_module(store, module);
    }
    return module->dwfl_module;
}

static struct stored_module *module_of_file(struct symbol_store *store, struct stored_file *file)
{
    if (file->module)
        return file->module;
    struct module_key key = {.identity = *file->build_id ? (const void *)file->build_id : file,
                             .size = file->identity.size};
    struct stored_module *module;
    HASH_FIND(hh, store->modules, &key, sizeof key, module);
    if (module) { /* the same file under another name or inode: read once */
        if (file->elf)
            elf_end(file->elf);
        file->elf = NULL;
        return file->module = module;
    }
    module = calloc(1, sizeof *module);
    if (!module)
        return NULL;
    *module = (struct stored_module){.key = key, .store = store, .index = HASH_COUNT(store->modules), .file = file};
    module->cache.debug.path = "";
    HASH_ADD(hh, store->modules, key, sizeof key, module);
    return file->module = module;
}

/* --- the symbol cache ---------------------------------------------------- */

static bool build_id_debug_path(const char *build_id, char *path, size_t size)
{
    int length = snprintf(path, size, "/usr/lib/debug/.build-id/%.2s/%s.debug", build_id, build_id + 2);
    return strlen(build_id) > 2 && length > 0 && (size_t)length < size;
}

/* Whether libdwfl would read the debug information a cache file's frames
 * came from again: the debug file it read is there unchanged and would be
 * found first, or none is there to find. */
static bool debug_source_holds(const struct symbol_store *store, const struct stored_file *file,
                               const struct symbol_cache_debug_source *debug)
{
    char by_build_id[PATH_MAX];
    struct stat status;
    if (debug->kind == SYMBOL_CACHE_DEBUG_NOT_SEARCHED)
        return true; /* the module's own file (the same build-id and size) had all */
    if (!build_id_debug_path(file->build_id, by_build_id, sizeof by_build_id))
        return false;
    bool has_by_build_id = stat(by_build_id, &status) == 0;
    if (debug->kind == SYMBOL_CACHE_DEBUG_NONE_FOUND) {
        GElf_Word crc;
        const char *debuglink = file->elf ? dwelf_elf_gnu_debuglink(file->elf, &crc) : NULL;
        return file->elf && !store->debuginfod && !has_by_build_id && !debug_file_may_exist(file->path, debuglink);
    }
    struct symbol_cache_file_identity by_id = has_by_build_id ? identity_of(&status) : (struct symbol_cache_file_identity){0};
    if (stat(debug->path, &status) != 0) 
        return false;
    struct symbol_cache_file_identity now = identity_of(&status);
    if (memcmp(&now, &debug->identity, sizeof now) != 0)
        return false;
    if (has_by_build_id) /* searched first */
        return memcmp(&by_id, &debug->identity, sizeof by_id) == 0;
    return debug->debuginfod == store->debuginfod;
}

/* Reads and checks the module's cache file, once. */
static const struct symbol_cache_view *cache_view_of(struct symbol_store *store, struct stored_module *module)
{
    struct module_cache *cache = &module->cache;
    const struct stored_file *file = module->file;
    if (cache->looked_up || !store->cache || !*file->build_id)
        return cache->bytes ? &cache->view : NULL;
    cache->looked_up = true;
    size_t size;
    void *bytes = symbol_cache_read(store->cache, file->build_id, module->key.size, &size);
    if (!bytes)
        return NULL;
    struct symbol_cache_view view;
    if (symbol_cache_parse(bytes, size, &view) != 0 || strcmp(view.header.producer, store->cache_producer) != 0 ||
        strcmp(view.header.build_id, file->build_id) != 0 || view.header.file_size != module->key.size ||
        !debug_source_holds(store, file, &view.header.debug)) {
        free(bytes); /* replaced when this recording's frames are saved */
        store->stats.cache_files_rejected++;
        return NULL;
    }
    cache->bytes = bytes;
    cache->view = view;
    store->stats.cache_files_read++;
    return &cache->view;
}

/* The frames of key from the module's cache file, now in the store; NULL
 * if the file has none. */
static struct stored_resolution *resolution_from_cache(struct symbol_store *store, struct stored_module *module,
                                                       const struct frame_key *key)
{
    const struct symbol_cache_view *view = cache_view_of(store, module);
    ssize_t index = view ? symbol_cache_find(view, key->offset, key->return_address) : -1;
    if (index < 0)
        return NULL;
    uint64_t offset;
    bool return_address;
    size_t count;
    symbol_cache_entry(view, (size_t)index, &offset, &return_address, &count);
    struct stored_resolution *entry = malloc(sizeof *entry + count * sizeof entry->frames[0]);
    if (!entry)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        struct symbol_cache_frame frame;
        symbol_cache_frame(view, (size_t)index, i, &frame);
        entry->frames[i] = (struct trace_frame){.module_id = TRACE_NONE,
                                                .function = symbol_store_intern(store, frame.function),
                                                .file = symbol_store_intern(store, frame.file),
                                                .line = frame.line,
                                                .flags = frame.flags};
    }
    entry->key = *key;
    entry->count = count;
    HASH_ADD(hh, store->resolutions, key, sizeof entry->key, entry);
    store->stats.cache_hits++;
    return entry;
}

/* Keeps a frame resolved with libdw for the module's cache file. */
static void note_fresh(struct symbol_store *store, struct stored_module *module, struct stored_resolution *entry)
{
    struct module_cache *cache = &module->cache;
    if (!store->cache || !*module->file->build_id)
        return;
    if (cache->fresh_count == cache->fresh_capacity) {
        size_t capacity = cache->fresh_capacity ? 2 * cache->fresh_capacity : 64;
        struct stored_resolution **grown = realloc(cache->fresh, capacity * sizeof *grown);
        if (!grown)
            return;
        cache->fresh = grown;
        cache->fresh_capacity = capacity;
    }
    cache->fresh[cache->fresh_count++] = entry;
}

static void add_fresh(struct symbol_cache_builder *builder, const struct module_cache *cache)
{
    struct symbol_cache_frame frames[SYMBOL_CACHE_MAX_FRAMES];
    for (size_t i = 0; i < cache->fresh_count; i++) {
        const struct stored_resolution *entry = cache->fresh[i];
        if (entry->count > SYMBOL_CACHE_MAX_FRAMES)
            continue; /* the next recording resolves it again */
        for (size_t j = 0; j < entry->count; j++)
            frames[j] = (struct symbol_cache_frame){.function = entry->frames[j].function,
                                                    .file = entry->frames[j].file,
                                                    .line = entry->frames[j].line,
                                                    .flags = entry->frames[j].flags};
        symbol_cache_builder_add(builder, entry->key.offset, entry->key.return_address != 0, frames, entry->count);
    }
}

/* Writes the module's cache file: the frames resolved now, with those of
 * the file read at the start and of the file as it is now (another
 * recording may have written it since) when they came from the same
 * debug information. */
static void save_module(struct symbol_store *store, struct stored_module *module)
{
    struct module_cache *cache = &module->cache;
    struct symbol_cache_header header = {.producer = store->cache_producer,
                                         .build_id = module->file->build_id,
                                         .file_size = module->key.size,
                                         .debug = cache->debug};
    struct symbol_cache_builder *builder = symbol_cache_builder_create();
    if (!builder)
        return;
    add_fresh(builder, cache);
    if (cache->bytes && symbol_cache_header_equal(&cache->view.header, &header))
        symbol_cache_builder_add_view(builder, &cache->view);
    size_t size;
    void *current = symbol_cache_read(store->cache, header.build_id, header.file_size, &size);
    struct symbol_cache_view view;
    if (current && symbol_cache_parse(current, size, &view) == 0 && symbol_cache_header_equal(&view.header, &header))
        symbol_cache_builder_add_view(builder, &view);
    void *bytes = symbol_cache_builder_serialize(builder, &header, &size);
    if (bytes && symbol_cache_write(store->cache, header.build_id, header.file_size, bytes, size) == 0)
        store->stats.cache_files_written++;
    free(bytes);
    free(current);
    symbol_cache_builder_destroy(builder);
}

int symbol_store_save_cache(struct symbol_store *store, char *err, size_t err_size)
{
    struct stored_module *module;
    size_t fresh = 0, modules = 0;
    symbol_store_lock(store);
    for (module = store->modules; module && store->cache; module = module->hh.next) {
        fresh += module->cache.fresh_count;
        modules += module->cache.fresh_count > 0;
    }
    int rc = 0;
    if (fresh > 0 && symbol_cache_lock(store->cache) != 0) {
        snprintf(err, err_size,
                 "symbol cache %s: its lock was held for over a second; the %zu frames resolved now were not "
                 "added (the next recording resolves them again; remove the folder if this goes on)",
                 symbol_cache_directory(store->cache), fresh);
        rc = -1;
    } else if (fresh > 0) {
        size_t written_before = store->stats.cache_files_written;
        for (module = store->modules; module; module = module->hh.next)
            if (module->cache.fresh_count > 0)
                save_module(store, module);
        symbol_cache_evict(store->cache);
        symbol_cache_unlock(store->cache);
        size_t written = store->stats.cache_files_written - written_before;
        if (written < modules) {
            snprintf(err, err_size,
                     "symbol cache %s: %zu of %zu files could not be written (a full disk, out of memory, or "
                     "over 32 MiB of frames); "
                     "their frames are resolved again next time",
                     symbol_cache_directory(store->cache), modules - written, modules);
            rc = -1;
        }
    }
    for (module = store->modules; module; module = module->hh.next)
        module->cache.fresh_count = 0; /* kept or not, never saved twice */
    symbol_store_unlock(store);
    return rc;
}

const char *symbol_store_cache_directory(struct symbol_store *store)
{
    return store->cache ? symbol_cache_directory(store->cache) : NULL;
}

struct symbol_cache *symbol_store_cache(struct symbol_store *store)
{
    return store->cache;
}

/* Reads the build-id note of the program itself. */
static int find_own_build_id(struct dl_phdr_info *info, size_t size, void *hex)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_NOTE)
            continue;
        const char *note = (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        const char *end = note + info->dlpi_phdr[i].p_memsz;
        while (note + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *header = (const ElfW(Nhdr) *)note;
            const unsigned char *desc = (const unsigned char *)note + sizeof *header + ((header->n_namesz + 3) & ~3u);
            if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 && memcmp(header + 1, "GNU", 4) == 0 &&
                header->n_descsz <= SYMBOL_CACHE_MAX_BUILD_ID / 2) {
                for (unsigned j = 0; j < header->n_descsz; j++)
                    sprintf((char *)hex + 2 * j, "%02x", desc[j]);
                return 1;
            }
            note = (const char *)desc + ((header->n_descsz + 3) & ~3u);
        }
    }
    return 1; /* the first object is the program: stop there */
}

void symbol_store_own_build_id(char hex[SYMBOL_CACHE_MAX_BUILD_ID + 1])
{
    hex[0] = '\0';
    dl_iterate_phdr(find_own_build_id, hex);
}

/* What resolves frames: this program (its build-id, else its file's
 * identity) and libdw. A cache file from another is not used: a change in
 * either may change the frames. */
static char *cache_producer(void)
{
    char build_id[SYMBOL_CACHE_MAX_BUILD_ID + 1] = "", text[512];
    struct stat status;
    symbol_store_own_build_id(build_id);
    if (!build_id[0] && stat("/proc/self/exe", &status) == 0)
        snprintf(build_id, sizeof build_id, "file %llx:%llx:%llx:%llx.%09ld", (unsigned long long)status.st_dev,
                 (unsigned long long)status.st_ino, (unsigned long long)status.st_size,
                 (unsigned long long)status.st_mtim.tv_sec, status.st_mtim.tv_nsec);
    if (!build_id[0])
        return NULL;
    snprintf(text, sizeof text, "memslope %s, libdw %s", build_id, dwfl_version(NULL));
    return strdup(text);
}

void symbol_store_use_cache(struct symbol_store *store, struct symbol_cache *cache)
{
    if (!cache)
        return;
    char *producer = cache_producer();
    if (!producer) {
        symbol_cache_close(cache);
        return;
    }
    symbol_store_lock(store);
    symbol_cache_close(store->cache);
    free(store->cache_producer);
    store->cache = cache;
    store->cache_producer = producer;
    symbol_store_unlock(store);
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

/* Every function symbol libdwfl has for the module: .symtab (of the file or
 * its debug file), else .dynsym, and the MiniDebugInfo table of
 * .gnu_debugdata (libdw reads it when built with lzma, as Debian's is). */
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
static const char *symbol_at(struct stored_module *module, uint64_t pc)
{
    struct symbol_index *index = &module->symbols;
    if (!index->built)
        build_symbol_index(module->dwfl_module, index);
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
    if (growable_array_reserve(&frames->items, &frames->capacity, frames->count + 1, sizeof *frames->items) < 0)
        return -1;
    frames->items[frames->count++] = *frame;
    return 0;
}

/* A function's name as DWARF gives it: a C++ linkage name demangled (it
 * has the qualifiers DW_AT_name lacks), else DW_AT_name (a C linkage name is
 * only an asm label, such as glibc's __GI_ aliases); attributes of the
 * abstract origin and of the declaration count too. NULL if it has neither. */
static const char *die_function_name(struct symbol_store *store, Dwarf_Die *die)
{
    Dwarf_Attribute attribute;
    const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attribute));
    if (!linkage)
        linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attribute));
    char *demangled = demangle_cxx(linkage);
    if (demangled) {
        const char *interned = symbol_store_intern(store, demangled);
        free(demangled);
        return interned;
    }
    const char *name = dwarf_diename(die);
    return name ? symbol_store_intern(store, name) : NULL;
}

/* Where an inlined subroutine was called from, in the function it was
 * inlined into. */
static void call_site(struct symbol_store *store, Dwarf_Die *inlined, const char **file, uint32_t *line)
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
        *file = symbol_store_intern(store, dwarf_filesrc(files, file_index, NULL, NULL));
}

/* Source file and line of pc from the line table, into frame. */
static void line_of(struct symbol_store *store, Dwfl_Module *module, uint64_t pc, struct trace_frame *frame)
{
    Dwfl_Line *line = dwfl_module_getsrc(module, pc);
    int line_number = 0;
    const char *file = line ? dwfl_lineinfo(line, NULL, &line_number, NULL, NULL, NULL) : NULL;
    if (!file)
        return;
    frame->file = symbol_store_intern(store, file);
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
        if (growable_array_reserve(&index->ranges, &index->capacity, index->count + 1, sizeof *index->ranges) < 0)
            return -1;
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

static struct cu_function_index *function_index_of(struct symbol_store *store, Dwarf_Die *cu)
{
    struct cu_function_index *index;
    const void *key = cu->addr;
    HASH_FIND(hh, store->cu_indexes, &key, sizeof key, index);
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
    HASH_ADD(hh, store->cu_indexes, cu_die_address, sizeof key, index);
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
static int concrete_scopes(struct symbol_store *store, Dwfl_Module *module, uint64_t pc, Dwarf_Die **scopes)
{
    Dwarf_Addr dwarf_bias;
    Dwarf_Die *cu = dwfl_module_addrdie(module, pc, &dwarf_bias);
    *scopes = NULL;
    if (!cu)
        return -1;
    const struct cu_function_index *index = function_index_of(store, cu);
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
static int walk_inlined_scopes(struct symbol_store *store, Dwarf_Die *scopes, int count, const char *symbol_name,
                               struct trace_frame frame, struct frame_list *frames)
{
    for (int i = 0; i < count; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        const char *name = die_function_name(store, &scopes[i]);
        if (tag == DW_TAG_subprogram) {
            frame.function = name ? name : symbol_name;
            frame.flags = 0;
            return push_frame(frames, &frame);
        }
        frame.function = name ? name : "";
        frame.flags = TRACE_FRAME_INLINED;
        if (push_frame(frames, &frame) != 0)
            return -1;
        call_site(store, &scopes[i], &frame.file, &frame.line);
    }
    /* No enclosing subprogram DIE: the symbol table names the outer frame. */
    frame.function = symbol_name;
    frame.flags = 0;
    return push_frame(frames, &frame);
}

/* Counts the module's DWARF the first time (libdw reads it here once;
 * later calls return what it kept). */
static void note_dwarf(struct symbol_store *store, struct stored_module *module)
{
    if (module->dwarf_checked)
        return;
    module->dwarf_checked = true;
    Dwarf_Addr bias;
    if (dwfl_module_getdwarf(module->dwfl_module, &bias))
        store->stats.dwarf_loaded++;
}

static int resolve_in_module(struct symbol_store *store, struct stored_module *module, const struct frame_key *key,
                             struct frame_list *frames)
{
    /* A return address is the instruction after the call; the call's own
     * line (and inline context) is one byte back. */
    uint64_t address = key->offset + module->synthetic_bias;
    uint64_t pc = key->return_address && address > 0 ? address - 1 : address;
    struct trace_frame frame = {.module_id = TRACE_NONE, .function = "", .file = ""};
    note_dwarf(store, module);
    const char *symbol_name = symbol_at(module, pc);
    symbol_name = symbol_name ? intern_function_name(store, symbol_name) : "";
    line_of(store, module->dwfl_module, pc, &frame);
    Dwarf_Die *scopes;
    int count = concrete_scopes(store, module->dwfl_module, pc, &scopes);
    int result = walk_inlined_scopes(store, scopes, count > 0 ? count : 0, symbol_name, frame, frames);
    free(scopes);
    return result;
}

static void flag_allocators(struct frame_list *frames)
{
    for (size_t i = 0; i < frames->count; i++)
        if (is_allocator_function(frames->items[i].function))
            frames->items[i].flags |= TRACE_FRAME_ALLOCATOR;
}

static struct stored_resolution *resolve_and_cache(struct symbol_store *store, struct stored_module *module,
                                                   const struct frame_key *key)
{
    struct frame_list frames = {0};
    struct stored_resolution *entry = NULL;
    if (resolve_in_module(store, module, key, &frames) == 0 && frames.count > 0) {
        flag_allocators(&frames);
        entry = malloc(sizeof *entry + frames.count * sizeof entry->frames[0]);
    }
    if (entry) {
        entry->key = *key;
        entry->count = frames.count;
        memcpy(entry->frames, frames.items, frames.count * sizeof entry->frames[0]);
        HASH_ADD(hh, store->resolutions, key, sizeof entry->key, entry);
        store->stats.offsets_resolved++;
        note_fresh(store, module, entry);
    }
    free(frames.items);
    return entry;
}

const struct trace_frame *symbol_store_resolve(struct symbol_store *store, struct stored_file *file, uint64_t offset,
                                               bool return_address, size_t *count)
{
    struct stored_module *module = module_of_file(store, file);
    if (!module)
        return NULL;
    struct frame_key key = {.module_index = module->index, .offset = offset, .return_address = return_address};
    struct stored_resolution *entry;
    HASH_FIND(hh, store->resolutions, &key, sizeof key, entry);
    if (!entry)
        entry = resolution_from_cache(store, module, &key);
    if (!entry && module_in_dwfl(store, module))
        entry = resolve_and_cache(store, module, &key);
    if (!entry)
        return NULL;
    *count = entry->count;
    return entry->frames;
}

/* --- the store ----------------------------------------------------------- */

void symbol_store_lock(struct symbol_store *store)
{
    pthread_mutex_lock(&store->lock);
}

void symbol_store_unlock(struct symbol_store *store)
{
    pthread_mutex_unlock(&store->lock);
}

struct symbol_store *symbol_store_create(void)
{
    struct symbol_store *store = calloc(1, sizeof *store);
    if (!store)
        return NULL;
    elf_version(EV_CURRENT);
    store->dwfl = dwfl_begin(&offline_callbacks);
    if (!store->dwfl || pthread_mutex_init(&store->lock, NULL) != 0) {
        if (store->dwfl)
            dwfl_end(store->dwfl);
        free(store);
        return NULL;
    }
    const char *urls = getenv("DEBUGINFOD_URLS");
    store->debuginfod = urls && *urls;
    store->next_synthetic_base = FIRST_SYNTHETIC_BASE;
    return store;
}

void symbol_store_stats(struct symbol_store *store, struct symbol_store_stats *out)
{
    symbol_store_lock(store);
    *out = store->stats;
    symbol_store_unlock(store);
}

static void free_files(struct symbol_store *store)
{
    struct stored_file *file, *next;
    HASH_ITER(hh, store->files, file, next) {
        HASH_DEL(store->files, file);
        if (file->elf)
            elf_end(file->elf);
        free(file->segments);
        free(file);
    }
}

void symbol_store_destroy(struct symbol_store *store)
{
    if (!store)
        return;
    dwfl_end(store->dwfl);
    struct stored_module *module, *next_module;
    HASH_ITER(hh, store->modules, module, next_module) {
        HASH_DEL(store->modules, module);
        free(module->symbols.symbols);
        free(module->cache.bytes);
        free(module->cache.debug_path);
        free(module->cache.fresh);
        free(module);
    }
    free_files(store);
    struct stored_resolution *entry, *next_entry;
    HASH_ITER(hh, store->resolutions, entry, next_entry) {
        HASH_DEL(store->resolutions, entry);
        free(entry);
    }
    struct cu_function_index *index, *next_index;
    HASH_ITER(hh, store->cu_indexes, index, next_index) {
        HASH_DEL(store->cu_indexes, index);
        free(index->ranges);
        free(index);
    }
    struct interned_string *string, *next_string;
    HASH_ITER(hh, store->strings, string, next_string) {
        HASH_DEL(store->strings, string);
        free(string);
    }
    symbol_cache_close(store->cache);
    free(store->cache_producer);
    pthread_mutex_destroy(&store->lock);
    free(store);
}

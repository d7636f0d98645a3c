/*
 * symbolize.c - see symbolize.h.
 *
 * The process may be gone, so nothing is read from its memory. An image's
 * symbolizer is its file-backed mappings; when an address first falls into
 * a file, the file's loads in this image (where each copy of it was placed)
 * are worked out from its mappings and its program headers, and the
 * address becomes an offset in the file, which the recording's symbol store
 * (symbol_store.c) resolves. A file that cannot be read (not ELF, deleted
 * and gone, unreadable) still names a module, and its frames are module +
 * file offset.
 */
#include "symbolize.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include "symbol_store.h"

struct image_load;

/* One distinct path among the image's mappings; becomes a trace module
 * once an address falls into it. */
struct image_file {
    UT_hash_handle hh;        /* in symbolizer->files_by_path */
    const char *path;         /* as the kernel named it (interned) */
    const char *build_id;     /* lower-case hex, "" if none or unknown */
    uint32_t module_id;       /* TRACE_NONE until an address resolves into it */
    bool looked_up;           /* stored below is known */
    struct stored_file *stored; /* NULL: not an ELF file we can read */
};

/* One load of a file in the image. A library dlclosed and loaded again
 * elsewhere has two loads. */
struct image_load {
    struct image_file *file;
    uint64_t bias;
    uint64_t low, high; /* [low, high): run-time span of its PT_LOAD segments */
};

/* A file-backed mapping: where a file's loads come from, and the fallback
 * when no load covers an address. */
struct mapping_range {
    uint64_t start, end, offset;
    uint32_t perms;
    struct image_file *file;
};

struct symbolizer {
    struct symbol_store *store;
    struct image_file *files; /* fixed capacity, like loads: pointers into both are kept */
    size_t file_count;
    struct image_file *files_by_path;
    struct image_load *loads;
    size_t load_count;
    struct mapping_range *ranges; /* sorted by start */
    size_t range_count;
    struct trace_module *modules; /* in module_id order */
    size_t module_count, module_capacity;
};

/* --- the image's files and loads ----------------------------------------- */

static bool is_file_backed(const struct proc_map *map)
{
    /* "" is anonymous; "[heap]", "[vdso]", ... are the kernel's. */
    return map->path && map->path[0] == '/';
}

static struct image_file *file_for_path(struct symbolizer *symbolizer, const char *path)
{
    struct image_file *file;
    HASH_FIND_STR(symbolizer->files_by_path, path, file);
    if (file)
        return file;
    file = &symbolizer->files[symbolizer->file_count++];
    *file = (struct image_file){
        .path = symbol_store_intern(symbolizer->store, path), .build_id = "", .module_id = TRACE_NONE};
    HASH_ADD_KEYPTR(hh, symbolizer->files_by_path, file->path, strlen(file->path), file);
    return file;
}

/* The module id of file, giving it the next one the first time. */
static uint32_t module_id_of(struct symbolizer *symbolizer, struct image_file *file)
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

static bool overlaps_a_load(const struct symbolizer *symbolizer, uint64_t low, uint64_t high)
{
    for (size_t i = 0; i < symbolizer->load_count; i++)
        if (low < symbolizer->loads[i].high && symbolizer->loads[i].low < high)
            return true;
    return false;
}

/* Adds the load of file that range implies if it holds address and
 * overlaps no load known. */
static const struct image_load *add_load(struct symbolizer *symbolizer, const struct mapping_range *range,
                                         uint64_t address)
{
    struct image_file *file = range->file;
    struct image_load load = {.file = file};
    if (!(range->perms & PROC_MAP_READ) ||
        stored_file_load(file->stored, range->start, range->offset, &load.bias, &load.low, &load.high) != 0 ||
        address < load.low || address >= load.high || overlaps_a_load(symbolizer, load.low, load.high))
        return NULL;
    file->build_id = stored_file_build_id(file->stored);
    symbolizer->loads[symbolizer->load_count] = load;
    return &symbolizer->loads[symbolizer->load_count++];
}

/* The load of range's file that holds address, worked out from the
 * mapping that holds it (a return address's is the code segment), else
 * from the file's other mappings in address order (glibc's PROT_NONE gaps
 * carry offsets that are no segment's). Only the files addresses fall in
 * are read, and a copy of a file mapped elsewhere as data (as the shim
 * maps the files it reads call-frame rules from) makes no load unless an
 * address falls in it. */
static const struct image_load *load_from_mappings(struct symbolizer *symbolizer, const struct mapping_range *range,
                                                   uint64_t address)
{
    struct image_file *file = range->file;
    if (!file->looked_up) {
        file->looked_up = true;
        file->stored = symbol_store_file(symbolizer->store, file->path);
    }
    if (!file->stored || symbolizer->load_count == symbolizer->range_count)
        return NULL;
    const struct image_load *load = add_load(symbolizer, range, address);
    for (size_t i = 0; !load && i < symbolizer->range_count; i++)
        if (symbolizer->ranges[i].file == file)
            load = add_load(symbolizer, &symbolizer->ranges[i], address);
    return load;
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

static const struct image_load *find_load(const struct symbolizer *symbolizer, uint64_t address)
{
    for (size_t i = 0; i < symbolizer->load_count; i++)
        if (address >= symbolizer->loads[i].low && address < symbolizer->loads[i].high)
            return &symbolizer->loads[i];
    return NULL;
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

struct symbolizer *symbolizer_create(struct symbol_store *store, const struct proc_maps *maps)
{
    struct symbolizer *symbolizer = store ? calloc(1, sizeof *symbolizer) : NULL;
    if (!symbolizer)
        return NULL;
    symbolizer->store = store;
    size_t count;
    const struct proc_map **sorted = sorted_file_maps(maps, &count);
    size_t capacity = count ? count : 1;
    symbolizer->files = calloc(capacity, sizeof *symbolizer->files);
    symbolizer->loads = calloc(capacity, sizeof *symbolizer->loads);
    symbolizer->ranges = calloc(capacity, sizeof *symbolizer->ranges);
    if (!sorted || !symbolizer->files || !symbolizer->loads || !symbolizer->ranges) {
        free(sorted);
        symbolizer_destroy(symbolizer);
        return NULL;
    }
    symbol_store_lock(store);
    for (size_t i = 0; i < count; i++)
        symbolizer->ranges[symbolizer->range_count++] = (struct mapping_range){
            .start = sorted[i]->start, .end = sorted[i]->end, .offset = sorted[i]->offset,
            .perms = sorted[i]->perms, .file = file_for_path(symbolizer, sorted[i]->path)};
    symbol_store_unlock(store);
    free(sorted);
    return symbolizer;
}

/* --- resolution ---------------------------------------------------------- */

/* Called with the store locked. */
static size_t resolve_locked(struct symbolizer *symbolizer, uint64_t address, bool return_address,
                             struct trace_frame *out, size_t max)
{
    uint64_t pc = return_address && address > 0 ? address - 1 : address;
    const struct mapping_range *range = find_range(symbolizer, pc);
    const struct image_load *load = find_load(symbolizer, pc);
    if (!load && range)
        load = load_from_mappings(symbolizer, range, pc);
    size_t count = 0;
    const struct trace_frame *frames =
        load ? symbol_store_resolve(symbolizer->store, load->file->stored, address - load->bias, return_address,
                                    &count)
             : NULL;
    if (frames) {
        uint32_t module_id = module_id_of(symbolizer, load->file);
        count = count < max ? count : max;
        for (size_t i = 0; i < count; i++) {
            out[i] = frames[i];
            out[i].module_id = module_id;
            out[i].address = address;
            out[i].module_offset = address - load->bias;
        }
        return count;
    }
    out[0] = (struct trace_frame){
        .module_id = TRACE_NONE, .function = "", .file = "", .address = address, .module_offset = address};
    if (range) {
        out[0].module_id = module_id_of(symbolizer, range->file);
        out[0].module_offset = address - range->start + range->offset;
    }
    return 1;
}

size_t symbolizer_resolve(struct symbolizer *symbolizer, uint64_t address, int return_address,
                          struct trace_frame *out, size_t max)
{
    if (max == 0)
        return 0;
    if ((address & SYMBOLIZER_NOT_AN_ADDRESS) == SYMBOLIZER_NOT_AN_ADDRESS) {
        out[0] = (struct trace_frame){
            .module_id = TRACE_NONE, .function = "", .file = "", .address = address, .module_offset = address};
        return 1;
    }
    symbol_store_lock(symbolizer->store);
    size_t count = resolve_locked(symbolizer, address, return_address != 0, out, max);
    symbol_store_unlock(symbolizer->store);
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
    HASH_CLEAR(hh, symbolizer->files_by_path);
    free(symbolizer->files);
    free(symbolizer->loads);
    free(symbolizer->ranges);
    free(symbolizer->modules);
    free(symbolizer);
}

/* --- warm-up ------------------------------------------------------------- */

struct symbolizer_warmup {
    pthread_t thread;
    struct symbol_store *store;
    struct proc_maps maps;
    uint64_t *addresses;
    size_t address_count;
    int stop; /* set by symbolizer_warmup_stop: the addresses left are someone else's to resolve */
    int done; /* set by the thread as it ends */
    int done_signal; /* then sent to the process, if not 0 */
};

static void *warm_up(void *argument)
{
    struct symbolizer_warmup *warmup = argument;
    struct symbolizer *symbolizer = symbolizer_create(warmup->store, &warmup->maps);
    struct trace_frame frames[1]; /* the store keeps every frame; one is enough to fill it */
    for (size_t i = 0; symbolizer && i < warmup->address_count && !__atomic_load_n(&warmup->stop, __ATOMIC_RELAXED);
         i++)
        symbolizer_resolve(symbolizer, warmup->addresses[i], 1, frames, 1);
    symbolizer_destroy(symbolizer);
    __atomic_store_n(&warmup->done, 1, __ATOMIC_RELEASE);
    if (warmup->done_signal)
        kill(getpid(), warmup->done_signal);
    return NULL;
}

static void warmup_free(struct symbolizer_warmup *warmup)
{
    proc_maps_free(&warmup->maps);
    free(warmup->addresses);
    free(warmup);
}

struct symbolizer_warmup *symbolizer_warmup_start(struct symbol_store *store, const struct proc_maps *maps,
                                                  const uint64_t *addresses, size_t count, int done_signal)
{
    struct symbolizer_warmup *warmup = store ? calloc(1, sizeof *warmup) : NULL;
    if (!warmup)
        return NULL;
    warmup->store = store;
    warmup->addresses = malloc((count ? count : 1) * sizeof *addresses);
    if (!warmup->addresses || proc_maps_copy(&warmup->maps, maps) < 0) {
        warmup_free(warmup);
        return NULL;
    }
    memcpy(warmup->addresses, addresses, count * sizeof *addresses);
    warmup->address_count = count;
    warmup->done_signal = done_signal;
    if (pthread_create(&warmup->thread, NULL, warm_up, warmup) != 0) {
        warmup_free(warmup);
        return NULL;
    }
    return warmup;
}

void symbolizer_warmup_stop(struct symbolizer_warmup *warmup)
{
    if (warmup)
        __atomic_store_n(&warmup->stop, 1, __ATOMIC_RELAXED);
}

int symbolizer_warmup_done(const struct symbolizer_warmup *warmup)
{
    return !warmup || __atomic_load_n(&warmup->done, __ATOMIC_ACQUIRE);
}

void symbolizer_warmup_finish(struct symbolizer_warmup *warmup)
{
    if (!warmup)
        return;
    pthread_join(warmup->thread, NULL);
    warmup_free(warmup);
}

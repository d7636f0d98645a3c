/*
 * symbol_cache.c - see symbol_cache.h.
 *
 * A cache file, every number little-endian:
 *
 *   0   "MSLSYMC1"          magic
 *   8   u32 version         1
 *  12   u32 entry_count     offsets
 *  16   u32 frame_count     frames of every offset
 *  20   u32 string_count
 *  24   u32 blob_size       bytes of string text, each string NUL-terminated
 *  28   u32 producer        string index
 *  32   u32 build_id        string index
 *  36   u32 debug_kind      enum symbol_cache_debug_kind
 *  40   u64 file_size       of the module's ELF file
 *  48   u32 debug_path      string index ("" unless FOUND)
 *  52   u32 debuginfod      0 or 1
 *  56   u64 x 5             the debug file's device, inode, size, mtime s, ns
 *  96   entries             16 bytes each: u64 offset, u32 first frame,
 *                           u16 frame count, u8 return address, u8 0;
 *                           strictly increasing by (offset, return address)
 *       frames              16 bytes each: u32 function, u32 file (string
 *                           indexes), u32 line, u32 flags
 *       strings             8 bytes each: u32 offset in the blob, u32 length
 *       blob
 *       u32 crc32           of every byte before it
 */
#include "symbol_cache.h"
#include "../../common/unwind_rules_file.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "../../common/crc32.h"
#include "../../common/trace_format.h"

static const char magic[8] = {'M', 'S', 'L', 'S', 'Y', 'M', 'C', '1'};
#define FORMAT_VERSION 1u
#define HEADER_BYTES 96u
#define ENTRY_BYTES 16u
#define FRAME_BYTES 16u
#define STRING_BYTES 8u
#define CRC_BYTES 4u
#define KNOWN_FRAME_FLAGS (TRACE_FRAME_INLINED | TRACE_FRAME_ALLOCATOR)

static const char cache_suffix[] = ".sym";
/* The unwind rules kept beside the frames (common/unwind_rules_file.h). */
static const char rules_suffix[] = UNWIND_RULES_FILE_SUFFIX;
static const char temporary_prefix[] = ".tmp-";
/* A temporary file this old was left by a writer that died. */
#define ABANDONED_SECONDS 3600
/* A file read is marked used when its mark is older than this. */
#define USE_MARK_SECONDS 3600

/* --- bytes --------------------------------------------------------------- */

static uint16_t get16(const unsigned char *at)
{
    uint16_t value;
    memcpy(&value, at, sizeof value);
    return le16toh(value);
}

static uint32_t get32(const unsigned char *at)
{
    uint32_t value;
    memcpy(&value, at, sizeof value);
    return le32toh(value);
}

static uint64_t get64(const unsigned char *at)
{
    uint64_t value;
    memcpy(&value, at, sizeof value);
    return le64toh(value);
}

static unsigned char *put16(unsigned char *at, uint16_t value)
{
    value = htole16(value);
    memcpy(at, &value, sizeof value);
    return at + sizeof value;
}

static unsigned char *put32(unsigned char *at, uint32_t value)
{
    value = htole32(value);
    memcpy(at, &value, sizeof value);
    return at + sizeof value;
}

static unsigned char *put64(unsigned char *at, uint64_t value)
{
    value = htole64(value);
    memcpy(at, &value, sizeof value);
    return at + sizeof value;
}

static uint32_t crc_of(const unsigned char *bytes, size_t size)
{
    return crc32_of(bytes, size);
}

static bool text_equal(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

bool symbol_cache_header_equal(const struct symbol_cache_header *a, const struct symbol_cache_header *b)
{
    const struct symbol_cache_debug_source *x = &a->debug, *y = &b->debug;
    return text_equal(a->producer, b->producer) && text_equal(a->build_id, b->build_id) &&
           a->file_size == b->file_size && x->kind == y->kind && x->debuginfod == y->debuginfod &&
           text_equal(x->path, y->path) && memcmp(&x->identity, &y->identity, sizeof x->identity) == 0;
}

/* --- reading ------------------------------------------------------------- */

/* String index's text, checked by validate_strings. */
static const char *string_at(const struct symbol_cache_view *view, uint32_t index)
{
    return (const char *)view->blob + get32(view->strings + (size_t)index * STRING_BYTES);
}

/* Every string lies in the blob, is NUL-terminated at its length and holds
 * no NUL before. */
static int validate_strings(const struct symbol_cache_view *view, size_t blob_size)
{
    for (size_t i = 0; i < view->string_count; i++) {
        const unsigned char *record = view->strings + i * STRING_BYTES;
        uint64_t offset = get32(record), length = get32(record + 4);
        if (length > SYMBOL_CACHE_MAX_STRING || offset + length >= blob_size || view->blob[offset + length] != 0 ||
            memchr(view->blob + offset, 0, length) != NULL)
            return -1;
    }
    return 0;
}

static int validate_frames(const struct symbol_cache_view *view)
{
    for (size_t i = 0; i < view->frame_count; i++) {
        const unsigned char *record = view->frames + i * FRAME_BYTES;
        if (get32(record) >= view->string_count || get32(record + 4) >= view->string_count ||
            (get32(record + 12) & ~(uint32_t)KNOWN_FRAME_FLAGS) != 0)
            return -1;
    }
    return 0;
}

static int validate_entries(const struct symbol_cache_view *view)
{
    for (size_t i = 0; i < view->entry_count; i++) {
        const unsigned char *record = view->entries + i * ENTRY_BYTES;
        uint64_t first = get32(record + 8), count = get16(record + 12);
        unsigned return_address = record[14];
        if (count == 0 || count > SYMBOL_CACHE_MAX_FRAMES || first + count > view->frame_count ||
            return_address > 1 || record[15] != 0)
            return -1;
        if (i > 0) { /* strictly increasing: a binary search finds each key, once */
            const unsigned char *previous = record - ENTRY_BYTES;
            uint64_t offset = get64(record), previous_offset = get64(previous);
            if (offset < previous_offset || (offset == previous_offset && return_address <= previous[14]))
                return -1;
        }
    }
    return 0;
}

static bool is_hex_text(const char *text)
{
    size_t length = strlen(text);
    if (length == 0 || length > SYMBOL_CACHE_MAX_BUILD_ID)
        return false;
    for (const char *c = text; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* The fixed header's fields that name strings or a debug source. */
static int read_header(const unsigned char *bytes, struct symbol_cache_view *view)
{
    uint32_t producer = get32(bytes + 28), build_id = get32(bytes + 32), kind = get32(bytes + 36);
    uint32_t debug_path = get32(bytes + 48), debuginfod = get32(bytes + 52);
    if (producer >= view->string_count || build_id >= view->string_count || debug_path >= view->string_count ||
        kind > SYMBOL_CACHE_DEBUG_FOUND || debuginfod > 1)
        return -1;
    struct symbol_cache_header *header = &view->header;
    header->producer = string_at(view, producer);
    header->build_id = string_at(view, build_id);
    header->file_size = get64(bytes + 40);
    header->debug.kind = kind;
    header->debug.debuginfod = debuginfod == 1;
    header->debug.path = string_at(view, debug_path);
    header->debug.identity = (struct symbol_cache_file_identity){
        get64(bytes + 56), get64(bytes + 64), get64(bytes + 72), get64(bytes + 80), get64(bytes + 88)};
    bool found = kind == SYMBOL_CACHE_DEBUG_FOUND;
    if (!is_hex_text(header->build_id) || found != (header->debug.path[0] != '\0'))
        return -1;
    static const struct symbol_cache_file_identity none;
    return found || memcmp(&header->debug.identity, &none, sizeof none) == 0 ? 0 : -1;
}

int symbol_cache_parse(const void *data, size_t size, struct symbol_cache_view *view)
{
    const unsigned char *bytes = data;
    *view = (struct symbol_cache_view){0};
    if (size < HEADER_BYTES + CRC_BYTES || size > SYMBOL_CACHE_MAX_FILE_BYTES ||
        memcmp(bytes, magic, sizeof magic) != 0 || get32(bytes + 8) != FORMAT_VERSION ||
        get32(bytes + size - CRC_BYTES) != crc_of(bytes, size - CRC_BYTES))
        return -1;
    uint64_t entries = get32(bytes + 12), frames = get32(bytes + 16), strings = get32(bytes + 20);
    uint64_t blob_size = get32(bytes + 24);
    /* Each count is below 2^32, so this sum cannot overflow. */
    if (HEADER_BYTES + entries * ENTRY_BYTES + frames * FRAME_BYTES + strings * STRING_BYTES + blob_size +
            CRC_BYTES != size)
        return -1;
    view->entry_count = entries;
    view->frame_count = frames;
    view->string_count = strings;
    view->entries = bytes + HEADER_BYTES;
    view->frames = view->entries + entries * ENTRY_BYTES;
    view->strings = view->frames + frames * FRAME_BYTES;
    view->blob = view->strings + strings * STRING_BYTES;
    if (validate_strings(view, blob_size) != 0 || validate_frames(view) != 0 || validate_entries(view) != 0 ||
        read_header(bytes, view) != 0) {
        *view = (struct symbol_cache_view){0};
        return -1;
    }
    return 0;
}

static int compare_key(uint64_t offset, unsigned return_address, const unsigned char *record)
{
    uint64_t other = get64(record);
    if (offset != other)
        return offset < other ? -1 : 1;
    return (int)return_address - (int)record[14];
}

ssize_t symbol_cache_find(const struct symbol_cache_view *view, uint64_t offset, bool return_address)
{
    size_t low = 0, high = view->entry_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int order = compare_key(offset, return_address, view->entries + middle * ENTRY_BYTES);
        if (order == 0)
            return (ssize_t)middle;
        if (order < 0)
            high = middle;
        else
            low = middle + 1;
    }
    return -1;
}

void symbol_cache_entry(const struct symbol_cache_view *view, size_t index, uint64_t *offset, bool *return_address,
                        size_t *frame_count)
{
    const unsigned char *record = view->entries + index * ENTRY_BYTES;
    *offset = get64(record);
    *return_address = record[14] != 0;
    *frame_count = get16(record + 12);
}

void symbol_cache_frame(const struct symbol_cache_view *view, size_t index, size_t frame,
                        struct symbol_cache_frame *out)
{
    const unsigned char *entry = view->entries + index * ENTRY_BYTES;
    const unsigned char *record = view->frames + ((size_t)get32(entry + 8) + frame) * FRAME_BYTES;
    *out = (struct symbol_cache_frame){
        .function = string_at(view, get32(record)),
        .file = string_at(view, get32(record + 4)),
        .line = get32(record + 8),
        .flags = get32(record + 12),
    };
}

/* --- writing ------------------------------------------------------------- */

struct entry_key {
    uint64_t offset;
    uint64_t return_address; /* 0 or 1; a full word so the key has no padding */
};

struct builder_entry {
    struct entry_key key;
    UT_hash_handle hh;
    size_t count;
    struct symbol_cache_frame frames[];
};

struct builder_string {
    const char *text; /* the caller's */
    uint32_t index;
    UT_hash_handle hh;
};

struct symbol_cache_builder {
    struct builder_entry *entries;
};

struct symbol_cache_builder *symbol_cache_builder_create(void)
{
    return calloc(1, sizeof(struct symbol_cache_builder));
}

void symbol_cache_builder_destroy(struct symbol_cache_builder *builder)
{
    if (!builder)
        return;
    struct builder_entry *entry, *next;
    HASH_ITER(hh, builder->entries, entry, next) {
        HASH_DEL(builder->entries, entry);
        free(entry);
    }
    free(builder);
}

static bool fits_a_file(const struct symbol_cache_frame *frames, size_t count)
{
    if (count == 0 || count > SYMBOL_CACHE_MAX_FRAMES)
        return false;
    for (size_t i = 0; i < count; i++)
        if (!frames[i].function || !frames[i].file || strlen(frames[i].function) > SYMBOL_CACHE_MAX_STRING ||
            strlen(frames[i].file) > SYMBOL_CACHE_MAX_STRING || (frames[i].flags & ~(uint32_t)KNOWN_FRAME_FLAGS))
            return false;
    return true;
}

int symbol_cache_builder_add(struct symbol_cache_builder *builder, uint64_t offset, bool return_address,
                             const struct symbol_cache_frame *frames, size_t count)
{
    struct entry_key key = {.offset = offset, .return_address = return_address};
    struct builder_entry *entry;
    HASH_FIND(hh, builder->entries, &key, sizeof key, entry);
    if (entry)
        return 0;
    if (!fits_a_file(frames, count) || !(entry = malloc(sizeof *entry + count * sizeof *frames)))
        return -1;
    entry->key = key;
    entry->count = count;
    memcpy(entry->frames, frames, count * sizeof *frames);
    HASH_ADD(hh, builder->entries, key, sizeof key, entry);
    return 0;
}

int symbol_cache_builder_add_view(struct symbol_cache_builder *builder, const struct symbol_cache_view *view)
{
    struct symbol_cache_frame frames[SYMBOL_CACHE_MAX_FRAMES];
    for (size_t i = 0; i < view->entry_count; i++) {
        uint64_t offset;
        bool return_address;
        size_t count;
        symbol_cache_entry(view, i, &offset, &return_address, &count);
        for (size_t j = 0; j < count; j++)
            symbol_cache_frame(view, i, j, &frames[j]);
        if (symbol_cache_builder_add(builder, offset, return_address, frames, count) != 0)
            return -1;
    }
    return 0;
}

size_t symbol_cache_builder_count(const struct symbol_cache_builder *builder)
{
    return HASH_COUNT(builder->entries);
}

static int compare_entries(const void *left, const void *right)
{
    const struct builder_entry *a = *(const struct builder_entry *const *)left;
    const struct builder_entry *b = *(const struct builder_entry *const *)right;
    if (a->key.offset != b->key.offset)
        return a->key.offset < b->key.offset ? -1 : 1;
    return (a->key.return_address > b->key.return_address) - (a->key.return_address < b->key.return_address);
}

/* The file's string table: each distinct text once, in first-use order. */
struct string_table {
    struct builder_string *by_text;
    struct builder_string **in_order;
    size_t count, capacity;
    uint64_t blob_size;
};

static int string_index(struct string_table *table, const char *text, uint32_t *index)
{
    struct builder_string *found;
    size_t length = strlen(text);
    HASH_FIND(hh, table->by_text, text, length, found);
    if (!found) {
        if (table->count == table->capacity) {
            size_t capacity = table->capacity ? 2 * table->capacity : 64;
            struct builder_string **grown = realloc(table->in_order, capacity * sizeof *grown);
            if (!grown)
                return -1;
            table->in_order = grown;
            table->capacity = capacity;
        }
        if (!(found = malloc(sizeof *found)))
            return -1;
        *found = (struct builder_string){.text = text, .index = (uint32_t)table->count};
        HASH_ADD_KEYPTR(hh, table->by_text, found->text, length, found);
        table->in_order[table->count++] = found;
        table->blob_size += length + 1;
    }
    *index = found->index;
    return 0;
}

static void string_table_free(struct string_table *table)
{
    HASH_CLEAR(hh, table->by_text);
    for (size_t i = 0; i < table->count; i++)
        free(table->in_order[i]);
    free(table->in_order);
}

/* The header's strings first, then the frames' in entry order. */
static int collect_strings(struct string_table *table, const struct symbol_cache_header *header,
                           struct builder_entry **sorted, size_t count, uint64_t *frame_total)
{
    uint32_t ignored;
    if (string_index(table, header->producer ? header->producer : "", &ignored) != 0 ||
        string_index(table, header->build_id, &ignored) != 0 ||
        string_index(table, header->debug.path ? header->debug.path : "", &ignored) != 0)
        return -1;
    *frame_total = 0;
    for (size_t i = 0; i < count; i++) {
        *frame_total += sorted[i]->count;
        for (size_t j = 0; j < sorted[i]->count; j++)
            if (string_index(table, sorted[i]->frames[j].function, &ignored) != 0 ||
                string_index(table, sorted[i]->frames[j].file, &ignored) != 0)
                return -1;
    }
    return 0;
}

static unsigned char *write_header(unsigned char *at, const struct symbol_cache_header *header,
                                   struct string_table *table, size_t entries, uint64_t frames)
{
    uint32_t producer, build_id, debug_path;
    string_index(table, header->producer ? header->producer : "", &producer); /* present: no failure */
    string_index(table, header->build_id, &build_id);
    string_index(table, header->debug.path ? header->debug.path : "", &debug_path);
    const struct symbol_cache_file_identity *identity = &header->debug.identity;
    memcpy(at, magic, sizeof magic);
    at += sizeof magic;
    at = put32(at, FORMAT_VERSION);
    at = put32(at, (uint32_t)entries);
    at = put32(at, (uint32_t)frames);
    at = put32(at, (uint32_t)table->count);
    at = put32(at, (uint32_t)table->blob_size);
    at = put32(at, producer);
    at = put32(at, build_id);
    at = put32(at, header->debug.kind);
    at = put64(at, header->file_size);
    at = put32(at, debug_path);
    at = put32(at, header->debug.debuginfod ? 1 : 0);
    at = put64(at, identity->device);
    at = put64(at, identity->inode);
    at = put64(at, identity->size);
    at = put64(at, identity->mtime_seconds);
    return put64(at, identity->mtime_nanoseconds);
}

static unsigned char *write_body(unsigned char *at, struct string_table *table, struct builder_entry **sorted,
                                 size_t count)
{
    uint32_t first_frame = 0, index;
    for (size_t i = 0; i < count; i++) {
        at = put64(at, sorted[i]->key.offset);
        at = put32(at, first_frame);
        at = put16(at, (uint16_t)sorted[i]->count);
        *at++ = (unsigned char)sorted[i]->key.return_address;
        *at++ = 0;
        first_frame += (uint32_t)sorted[i]->count;
    }
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < sorted[i]->count; j++) {
            const struct symbol_cache_frame *frame = &sorted[i]->frames[j];
            string_index(table, frame->function, &index);
            at = put32(at, index);
            string_index(table, frame->file, &index);
            at = put32(at, index);
            at = put32(at, frame->line);
            at = put32(at, frame->flags);
        }
    uint32_t blob_offset = 0;
    for (size_t i = 0; i < table->count; i++) {
        uint32_t length = (uint32_t)strlen(table->in_order[i]->text);
        at = put32(at, blob_offset);
        at = put32(at, length);
        blob_offset += length + 1;
    }
    for (size_t i = 0; i < table->count; i++) {
        size_t length = strlen(table->in_order[i]->text) + 1;
        memcpy(at, table->in_order[i]->text, length);
        at += length;
    }
    return at;
}

void *symbol_cache_builder_serialize(const struct symbol_cache_builder *builder,
                                     const struct symbol_cache_header *header, size_t *size)
{
    size_t count = HASH_COUNT(builder->entries), i = 0;
    struct builder_entry **sorted = malloc((count ? count : 1) * sizeof *sorted);
    struct string_table table = {0};
    unsigned char *bytes = NULL;
    uint64_t frames = 0;
    if (!sorted || !is_hex_text(header->build_id))
        goto out;
    for (struct builder_entry *entry = builder->entries; entry; entry = entry->hh.next)
        sorted[i++] = entry;
    qsort(sorted, count, sizeof *sorted, compare_entries);
    if (collect_strings(&table, header, sorted, count, &frames) != 0)
        goto out;
    uint64_t total = HEADER_BYTES + count * ENTRY_BYTES + frames * FRAME_BYTES + table.count * STRING_BYTES +
                     table.blob_size + CRC_BYTES;
    if (total > SYMBOL_CACHE_MAX_FILE_BYTES || !(bytes = malloc(total)))
        goto out;
    unsigned char *at = write_header(bytes, header, &table, count, frames);
    at = write_body(at, &table, sorted, count);
    put32(at, crc_of(bytes, (size_t)(at - bytes)));
    *size = (size_t)total;
out:
    string_table_free(&table);
    free(sorted);
    return bytes;
}

/* --- the directory ------------------------------------------------------- */

struct symbol_cache {
    int directory_fd;
    int lock_fd; /* -1 unless locked */
    uint64_t max_bytes;
    char *path;
};

int memslope_cache_path(const char *name, char *path, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int length;
    /* The XDG specification: a relative path is invalid and ignored. */
    if (xdg && xdg[0] == '/')
        length = snprintf(path, size, "%s/memslope%s", xdg, name);
    else if (home && home[0] == '/')
        length = snprintf(path, size, "%s/.cache/memslope%s", home, name);
    else
        return -1;
    return length > 0 && (size_t)length < size ? 0 : -1;
}

int symbol_cache_default_directory(char *path, size_t size)
{
    return memslope_cache_path("/symbols", path, size);
}

/* mkdir -p with mode 0700 for what it creates. */
static int make_directories(const char *path, char *err, size_t err_size)
{
    char *copy = strdup(path);
    if (!copy) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    int rc = 0;
    for (char *end = copy + 1; rc == 0; end++) {
        if (*end != '/' && *end != '\0')
            continue;
        char saved = *end;
        *end = '\0';
        if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
            snprintf(err, err_size, "cannot create %s (%s)", copy, strerror(errno));
            rc = -1;
        }
        *end = saved;
        if (saved == '\0')
            break;
    }
    free(copy);
    return rc;
}

struct symbol_cache *symbol_cache_open(const char *directory, uint64_t max_bytes, char *err, size_t err_size)
{
    if (directory[0] != '/') {
        snprintf(err, err_size, "%s is not an absolute path", directory);
        return NULL;
    }
    if (make_directories(directory, err, err_size) != 0)
        return NULL;
    int fd = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat status;
    if (fd < 0 || fstat(fd, &status) != 0) {
        snprintf(err, err_size, "cannot open %s (%s)", directory, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    /* Another user who may write here could plant frames in our reports. */
    if (status.st_uid != geteuid() || (status.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(err, err_size, "%s belongs to another user or others may write to it", directory);
        close(fd);
        return NULL;
    }
    struct symbol_cache *cache = calloc(1, sizeof *cache);
    if (!cache || !(cache->path = strdup(directory))) {
        snprintf(err, err_size, "out of memory");
        free(cache);
        close(fd);
        return NULL;
    }
    cache->directory_fd = fd;
    cache->lock_fd = -1;
    cache->max_bytes = max_bytes;
    return cache;
}

struct symbol_cache *symbol_cache_open_user(void)
{
    char directory[4096], err[4096 + 256];
    if (symbol_cache_default_directory(directory, sizeof directory) != 0)
        return NULL;
    struct symbol_cache *cache = symbol_cache_open(directory, SYMBOL_CACHE_DEFAULT_MAX_BYTES, err, sizeof err);
    if (!cache)
        fprintf(stderr,
                "memslope: symbol cache not used: %s (symbols are read from debug info every time; point "
                "XDG_CACHE_HOME at a folder of yours, or record with --no-symbol-cache)\n",
                err);
    return cache;
}

void symbol_cache_close(struct symbol_cache *cache)
{
    if (!cache)
        return;
    symbol_cache_unlock(cache);
    close(cache->directory_fd);
    free(cache->path);
    free(cache);
}

const char *symbol_cache_directory(const struct symbol_cache *cache)
{
    return cache->path;
}

void symbol_cache_build_id_hex(const uint8_t *bytes, size_t size, char *out)
{
    for (size_t i = 0; i < size; i++) {
        out[2 * i] = "0123456789abcdef"[bytes[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[bytes[i] & 15];
    }
    out[2 * size] = '\0';
}

/* BUILDID-SIZE.sym (or suffix); -1 if the build-id is no hex text. */
static int file_name(char *name, size_t size, const char *build_id, uint64_t file_size, const char *suffix)
{
    if (!is_hex_text(build_id))
        return -1;
    int length = snprintf(name, size, "%s-%llx%s", build_id, (unsigned long long)file_size, suffix);
    return length > 0 && (size_t)length < size ? 0 : -1;
}

static void mark_used(int fd, const struct stat *status)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec - status->st_mtim.tv_sec > USE_MARK_SECONDS)
        futimens(fd, NULL);
}

static void *read_all(int fd, size_t size)
{
    unsigned char *bytes = malloc(size ? size : 1);
    size_t done = 0;
    while (bytes && done < size) {
        ssize_t n = read(fd, bytes + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(bytes);
            return NULL;
        }
        done += (size_t)n;
    }
    return bytes;
}

static void *read_named(struct symbol_cache *cache, const char *build_id, uint64_t file_size, const char *suffix,
                        size_t *size)
{
    char name[SYMBOL_CACHE_MAX_BUILD_ID + 64];
    if (file_name(name, sizeof name, build_id, file_size, suffix) != 0)
        return NULL;
    int fd = openat(cache->directory_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat status;
    void *bytes = NULL;
    if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_size <= SYMBOL_CACHE_MAX_FILE_BYTES &&
        (bytes = read_all(fd, (size_t)status.st_size)) != NULL) {
        *size = (size_t)status.st_size;
        mark_used(fd, &status);
    }
    close(fd);
    return bytes;
}

void *symbol_cache_read(struct symbol_cache *cache, const char *build_id, uint64_t file_size, size_t *size)
{
    return read_named(cache, build_id, file_size, cache_suffix, size);
}

void *symbol_cache_read_rules(struct symbol_cache *cache, const char *build_id, uint64_t file_size, size_t *size)
{
    return read_named(cache, build_id, file_size, rules_suffix, size);
}

int symbol_cache_lock(struct symbol_cache *cache)
{
    if (cache->lock_fd >= 0)
        return 0;
    int fd = openat(cache->directory_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    for (int waited_ms = 0; waited_ms <= 1000; waited_ms += 10) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            cache->lock_fd = fd;
            return 0;
        }
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    close(fd);
    return -1;
}

void symbol_cache_unlock(struct symbol_cache *cache)
{
    if (cache->lock_fd < 0)
        return;
    close(cache->lock_fd); /* releases the flock */
    cache->lock_fd = -1;
}

static int write_all(int fd, const unsigned char *bytes, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, bytes, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        bytes += n;
        size -= (size_t)n;
    }
    return 0;
}

static int write_named(struct symbol_cache *cache, const char *build_id, uint64_t file_size, const char *suffix,
                       const void *bytes, size_t size)
{
    char name[SYMBOL_CACHE_MAX_BUILD_ID + 64], temporary[96];
    if (file_name(name, sizeof name, build_id, file_size, suffix) != 0)
        return -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    snprintf(temporary, sizeof temporary, "%s%d-%lld-%ld", temporary_prefix, (int)getpid(), (long long)now.tv_sec,
             now.tv_nsec);
    int fd = openat(cache->directory_fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, bytes, size);
    if (close(fd) != 0)
        rc = -1;
    if (rc == 0)
        rc = renameat(cache->directory_fd, temporary, cache->directory_fd, name);
    if (rc != 0)
        unlinkat(cache->directory_fd, temporary, 0);
    return rc;
}

int symbol_cache_write(struct symbol_cache *cache, const char *build_id, uint64_t file_size, const void *bytes,
                       size_t size)
{
    return write_named(cache, build_id, file_size, cache_suffix, bytes, size);
}

int symbol_cache_write_rules(struct symbol_cache *cache, const char *build_id, uint64_t file_size, const void *bytes,
                             size_t size)
{
    return write_named(cache, build_id, file_size, rules_suffix, bytes, size);
}

/* --- eviction ------------------------------------------------------------ */

struct cached_file {
    char name[256];
    uint64_t size;
    struct timespec used;
};

static bool has_suffix(const char *name, const char *suffix)
{
    size_t length = strlen(name), suffix_length = strlen(suffix);
    return length > suffix_length && strcmp(name + length - suffix_length, suffix) == 0;
}

static int compare_by_use(const void *left, const void *right)
{
    const struct cached_file *a = left, *b = right;
    if (a->used.tv_sec != b->used.tv_sec)
        return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
    return (a->used.tv_nsec > b->used.tv_nsec) - (a->used.tv_nsec < b->used.tv_nsec);
}

/* The cache files of the directory, and their total size; temporary files
 * abandoned long ago are removed on the way. */
static struct cached_file *list_files(struct symbol_cache *cache, size_t *count, uint64_t *total, size_t *removed)
{
    int fd = dup(cache->directory_fd);
    DIR *directory = fd >= 0 ? fdopendir(fd) : NULL;
    struct cached_file *files = NULL;
    size_t capacity = 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    *count = 0;
    *total = 0;
    if (!directory) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    rewinddir(directory);
    for (struct dirent *entry; (entry = readdir(directory)) != NULL;) {
        bool temporary = strncmp(entry->d_name, temporary_prefix, sizeof temporary_prefix - 1) == 0;
        struct stat status;
        if ((!temporary && !has_suffix(entry->d_name, cache_suffix) && !has_suffix(entry->d_name, rules_suffix)) ||
            strlen(entry->d_name) >= 256 ||
            fstatat(cache->directory_fd, entry->d_name, &status, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(status.st_mode))
            continue;
        if (temporary) {
            if (now.tv_sec - status.st_mtim.tv_sec > ABANDONED_SECONDS &&
                unlinkat(cache->directory_fd, entry->d_name, 0) == 0)
                ++*removed;
            continue;
        }
        if (*count == capacity) {
            capacity = capacity ? 2 * capacity : 64;
            struct cached_file *grown = realloc(files, capacity * sizeof *grown);
            if (!grown)
                break;
            files = grown;
        }
        struct cached_file *file = &files[(*count)++];
        snprintf(file->name, sizeof file->name, "%s", entry->d_name);
        file->size = (uint64_t)status.st_size;
        file->used = status.st_mtim;
        *total += file->size;
    }
    closedir(directory);
    return files;
}

size_t symbol_cache_evict(struct symbol_cache *cache)
{
    size_t count, removed = 0;
    uint64_t total;
    struct cached_file *files = list_files(cache, &count, &total, &removed);
    if (files && total > cache->max_bytes) {
        qsort(files, count, sizeof *files, compare_by_use);
        uint64_t low_water = cache->max_bytes / 4 * 3;
        for (size_t i = 0; i < count && total > low_water; i++)
            if (unlinkat(cache->directory_fd, files[i].name, 0) == 0) {
                total -= files[i].size;
                removed++;
            }
    }
    free(files);
    return removed;
}

/*
 * test_symbol_cache.c - tracer/symbol_cache.c: a cache file written and
 * read back, every way a file can be damaged (cut, a wrong CRC, counts,
 * strings and entries that do not hold together), and the directory:
 * files written whole, the writers' lock, the least recently used files
 * evicted past the bound. MEMSLOPE_FUZZ_CORPUS=DIR also writes the sample
 * file there, as the seed of tests/fuzz/fuzz_symbol_cache.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "../../common/trace_format.h"
#include "../../tracer/symbols/symbol_cache.h"

/* The file layout (symbol_cache.c's opening comment). */
enum {
    HEADER_BYTES = 96,
    ENTRY_BYTES = 16,
    FRAME_BYTES = 16,
    STRING_BYTES = 8,
    AT_VERSION = 8,
    AT_ENTRY_COUNT = 12,
    AT_FRAME_COUNT = 16,
    AT_STRING_COUNT = 20,
    AT_BLOB_SIZE = 24,
    AT_PRODUCER = 28,
    AT_BUILD_ID = 32,
    AT_DEBUG_KIND = 36,
    AT_DEBUG_PATH = 48,
    AT_DEBUGINFOD = 52,
    AT_IDENTITY = 56,
};

static const char sample_build_id[] = "00112233445566778899aabbccddeeff00112233";
#define SAMPLE_FILE_SIZE 4096u

static const struct symbol_cache_header sample_header = {
    .producer = "memslope test, libdw test",
    .build_id = sample_build_id,
    .file_size = SAMPLE_FILE_SIZE,
    .debug = {.kind = SYMBOL_CACHE_DEBUG_FOUND,
              .debuginfod = false,
              .path = "/usr/lib/debug/.build-id/00/1122.debug",
              .identity = {1, 2, 3, 4, 5}},
};

/* Three entries, added out of order: a return address with an inlined
 * frame, the same offset as no return address, an allocator. */
static const struct symbol_cache_frame inlined_call[] = {
    {.function = "helper", .file = "a.c", .line = 10, .flags = TRACE_FRAME_INLINED},
    {.function = "main", .file = "a.c", .line = 20, .flags = 0},
};
static const struct symbol_cache_frame function_entry[] = {{.function = "main", .file = "a.c", .line = 19}};
static const struct symbol_cache_frame allocator[] = {
    {.function = "malloc", .file = "malloc.c", .line = 3000, .flags = TRACE_FRAME_ALLOCATOR}};

static uint32_t get32(const unsigned char *at)
{
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static void set32(unsigned char *at, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        at[i] = (unsigned char)(value >> (8 * i));
}

static void fix_crc(unsigned char *bytes, size_t size)
{
    set32(bytes + size - 4, (uint32_t)crc32(0, bytes, (uInt)(size - 4)));
}

static unsigned char *sample_file(size_t *size)
{
    struct symbol_cache_builder *builder = symbol_cache_builder_create();
    assert_non_null(builder);
    assert_int_equal(symbol_cache_builder_add(builder, 0x1000, true, inlined_call, 2), 0);
    assert_int_equal(symbol_cache_builder_add(builder, 0x20, true, allocator, 1), 0);
    assert_int_equal(symbol_cache_builder_add(builder, 0x1000, false, function_entry, 1), 0);
    unsigned char *bytes = symbol_cache_builder_serialize(builder, &sample_header, size);
    assert_non_null(bytes);
    symbol_cache_builder_destroy(builder);
    return bytes;
}

/* Where the sections of a file start, from its own counts. */
struct layout {
    size_t entries, frames, strings, blob;
};

static struct layout layout_of(const unsigned char *bytes)
{
    struct layout at = {.entries = HEADER_BYTES};
    at.frames = at.entries + get32(bytes + AT_ENTRY_COUNT) * ENTRY_BYTES;
    at.strings = at.frames + get32(bytes + AT_FRAME_COUNT) * FRAME_BYTES;
    at.blob = at.strings + get32(bytes + AT_STRING_COUNT) * STRING_BYTES;
    return at;
}

static void expect_frames(const struct symbol_cache_view *view, uint64_t offset, bool return_address,
                          const struct symbol_cache_frame *expected, size_t count)
{
    ssize_t index = symbol_cache_find(view, offset, return_address);
    assert_true(index >= 0);
    uint64_t found_offset;
    bool found_return_address;
    size_t found_count;
    symbol_cache_entry(view, (size_t)index, &found_offset, &found_return_address, &found_count);
    assert_int_equal(found_offset, offset);
    assert_int_equal(found_return_address, return_address);
    assert_int_equal(found_count, count);
    for (size_t i = 0; i < count; i++) {
        struct symbol_cache_frame frame;
        symbol_cache_frame(view, (size_t)index, i, &frame);
        assert_string_equal(frame.function, expected[i].function);
        assert_string_equal(frame.file, expected[i].file);
        assert_int_equal(frame.line, expected[i].line);
        assert_int_equal(frame.flags, expected[i].flags);
    }
}

/* A damaged copy of the sample, its CRC made right again: only the
 * consistency checks can refuse it. */
static int parse_patched(const unsigned char *bytes, size_t size, size_t at, uint32_t value)
{
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    memcpy(copy, bytes, size);
    set32(copy + at, value);
    fix_crc(copy, size);
    struct symbol_cache_view view;
    int rc = symbol_cache_parse(copy, size, &view);
    free(copy);
    return rc;
}

static void write_fuzz_seed(const unsigned char *bytes, size_t size)
{
    const char *corpus = getenv("MEMSLOPE_FUZZ_CORPUS");
    char path[4096];
    if (!corpus)
        return;
    snprintf(path, sizeof path, "%s/sample", corpus);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(bytes, 1, size, out), size);
    fclose(out);
}

/* --- one file ------------------------------------------------------------ */

static void test_round_trip(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    write_fuzz_seed(bytes, size);
    struct symbol_cache_view view;
    assert_int_equal(symbol_cache_parse(bytes, size, &view), 0);
    assert_true(symbol_cache_header_equal(&view.header, &sample_header));
    assert_int_equal(view.entry_count, 3);
    expect_frames(&view, 0x1000, true, inlined_call, 2);
    expect_frames(&view, 0x1000, false, function_entry, 1);
    expect_frames(&view, 0x20, true, allocator, 1);
    assert_int_equal(symbol_cache_find(&view, 0x20, false), -1);
    assert_int_equal(symbol_cache_find(&view, 0x1001, true), -1);
    assert_int_equal(symbol_cache_find(&view, 0, true), -1);
    /* Sorted by (offset, return address), so the search finds each. */
    assert_int_equal(symbol_cache_find(&view, 0x20, true), 0);
    assert_int_equal(symbol_cache_find(&view, 0x1000, false), 1);
    assert_int_equal(symbol_cache_find(&view, 0x1000, true), 2);
    /* "main" and "a.c" are stored once: 3 header strings + 5 texts. */
    assert_int_equal(view.string_count, 8);
    free(bytes);
}

static void test_every_cut_fails(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    struct symbol_cache_view view;
    for (size_t length = 0; length < size; length++) {
        assert_int_equal(symbol_cache_parse(bytes, length, &view), -1);
        if (length < HEADER_BYTES + 4)
            continue;
        memcpy(copy, bytes, length); /* cut, with a CRC that matches what is left */
        fix_crc(copy, length);
        assert_int_equal(symbol_cache_parse(copy, length, &view), -1);
    }
    free(copy);
    free(bytes);
}

static void test_wrong_crc_fails(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    struct symbol_cache_view view;
    for (size_t i = 0; i < size; i++) {
        bytes[i] ^= 0x01;
        assert_int_equal(symbol_cache_parse(bytes, size, &view), -1);
        bytes[i] ^= 0x01;
    }
    assert_int_equal(symbol_cache_parse(bytes, size, &view), 0);
    free(bytes);
}

static void test_bad_counts_fail(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    static const size_t counts[] = {AT_ENTRY_COUNT, AT_FRAME_COUNT, AT_STRING_COUNT, AT_BLOB_SIZE};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        uint32_t count = get32(bytes + counts[i]);
        assert_int_equal(parse_patched(bytes, size, counts[i], count + 1), -1);
        assert_int_equal(parse_patched(bytes, size, counts[i], count - 1), -1);
        assert_int_equal(parse_patched(bytes, size, counts[i], UINT32_MAX), -1);
    }
    assert_int_equal(parse_patched(bytes, size, AT_VERSION, 2), -1);
    /* Bytes between the last string and the CRC. */
    unsigned char *longer = malloc(size + 4);
    assert_non_null(longer);
    memcpy(longer, bytes, size - 4);
    memset(longer + size - 4, 'x', 4);
    fix_crc(longer, size + 4);
    struct symbol_cache_view longer_view;
    assert_int_equal(symbol_cache_parse(longer, size + 4, &longer_view), -1);
    free(longer);
    /* One entry fewer and one frame more: the sizes still add up. */
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    memcpy(copy, bytes, size);
    set32(copy + AT_ENTRY_COUNT, get32(bytes + AT_ENTRY_COUNT) - 1);
    set32(copy + AT_FRAME_COUNT, get32(bytes + AT_FRAME_COUNT) + 1);
    fix_crc(copy, size);
    struct symbol_cache_view view;
    assert_int_equal(symbol_cache_parse(copy, size, &view), -1);
    free(copy);
    free(bytes);
}

static void test_bad_strings_fail(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    struct layout at = layout_of(bytes);
    uint32_t string_count = get32(bytes + AT_STRING_COUNT), blob_size = get32(bytes + AT_BLOB_SIZE);
    size_t last = at.strings + (string_count - 1) * STRING_BYTES;
    /* Past the blob, one short of its NUL, one past it. */
    assert_int_equal(parse_patched(bytes, size, last, blob_size), -1);
    assert_int_equal(parse_patched(bytes, size, last + 4, get32(bytes + last + 4) - 1), -1);
    assert_int_equal(parse_patched(bytes, size, last + 4, get32(bytes + last + 4) + 1), -1);
    assert_int_equal(parse_patched(bytes, size, last + 4, 70000), -1);
    /* A NUL inside the text of the build-id (string 1). */
    uint32_t build_id_at = get32(bytes + at.strings + STRING_BYTES);
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    memcpy(copy, bytes, size);
    copy[at.blob + build_id_at + 3] = 0;
    fix_crc(copy, size);
    struct symbol_cache_view view;
    assert_int_equal(symbol_cache_parse(copy, size, &view), -1);
    /* The build-id is no hex text. */
    memcpy(copy, bytes, size);
    copy[at.blob + build_id_at + 3] = 'G';
    fix_crc(copy, size);
    assert_int_equal(symbol_cache_parse(copy, size, &view), -1);
    free(copy);
    /* Indexes of strings there are not. */
    assert_int_equal(parse_patched(bytes, size, at.frames, string_count), -1);
    assert_int_equal(parse_patched(bytes, size, at.frames + 4, string_count), -1);
    assert_int_equal(parse_patched(bytes, size, AT_PRODUCER, string_count), -1);
    assert_int_equal(parse_patched(bytes, size, AT_BUILD_ID, string_count), -1);
    assert_int_equal(parse_patched(bytes, size, AT_DEBUG_PATH, string_count), -1);
    free(bytes);
}

static void test_bad_entries_and_frames_fail(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    struct layout at = layout_of(bytes);
    uint32_t frame_count = get32(bytes + AT_FRAME_COUNT);
    size_t second = at.entries + ENTRY_BYTES, third = at.entries + 2 * ENTRY_BYTES;
    /* Frame count (u16 at 12) 0; frames past the last; return address 2;
     * the pad byte set. */
    assert_int_equal(parse_patched(bytes, size, second + 12, get32(bytes + second + 12) & 0xffff0000u), -1);
    assert_int_equal(parse_patched(bytes, size, third + 8, frame_count - 1), -1);
    assert_int_equal(parse_patched(bytes, size, third + 12, (get32(bytes + third + 12) & 0xff00ffffu) | 2u << 16), -1);
    assert_int_equal(parse_patched(bytes, size, third + 12, get32(bytes + third + 12) | 1u << 24), -1);
    /* Out of order (the second entry's offset below the first's), and a
     * key twice (the third made the second's). */
    assert_int_equal(parse_patched(bytes, size, second, 0x10), -1);
    assert_int_equal(parse_patched(bytes, size, third + 12, get32(bytes + third + 12) & 0xff00ffffu), -1);
    /* A frame flag no frame has. */
    assert_int_equal(parse_patched(bytes, size, at.frames + 12, 1u << 7), -1);
    free(bytes);
}

static void test_bad_debug_source_fails(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    assert_int_equal(parse_patched(bytes, size, AT_DEBUG_KIND, 3), -1);
    assert_int_equal(parse_patched(bytes, size, AT_DEBUGINFOD, 2), -1);
    /* A path with "none found". */
    assert_int_equal(parse_patched(bytes, size, AT_DEBUG_KIND, SYMBOL_CACHE_DEBUG_NONE_FOUND), -1);
    free(bytes);
    struct symbol_cache_builder *builder = symbol_cache_builder_create();
    assert_int_equal(symbol_cache_builder_add(builder, 0x20, true, allocator, 1), 0);
    struct symbol_cache_view view;
    /* "Found" with no path. */
    struct symbol_cache_header header = sample_header;
    header.debug.path = "";
    bytes = symbol_cache_builder_serialize(builder, &header, &size);
    assert_non_null(bytes);
    assert_int_equal(symbol_cache_parse(bytes, size, &view), -1);
    free(bytes);
    /* A string longer than any the store makes (the header's are not
     * checked when written). */
    char *long_text = malloc(SYMBOL_CACHE_MAX_STRING + 2);
    assert_non_null(long_text);
    memset(long_text, 'p', SYMBOL_CACHE_MAX_STRING + 1);
    long_text[SYMBOL_CACHE_MAX_STRING + 1] = '\0';
    header.debug = sample_header.debug;
    header.producer = long_text;
    bytes = symbol_cache_builder_serialize(builder, &header, &size);
    assert_non_null(bytes);
    assert_int_equal(symbol_cache_parse(bytes, size, &view), -1);
    free(bytes);
    long_text[SYMBOL_CACHE_MAX_STRING] = '\0';
    bytes = symbol_cache_builder_serialize(builder, &header, &size);
    assert_non_null(bytes);
    assert_int_equal(symbol_cache_parse(bytes, size, &view), 0);
    free(bytes);
    free(long_text);
    header.producer = sample_header.producer;
    /* "None found" with the identity of a file, or a kind there is not. */
    header.debug = (struct symbol_cache_debug_source){.kind = SYMBOL_CACHE_DEBUG_NONE_FOUND, .path = ""};
    bytes = symbol_cache_builder_serialize(builder, &header, &size);
    assert_non_null(bytes);
    assert_int_equal(symbol_cache_parse(bytes, size, &view), 0);
    assert_int_equal(parse_patched(bytes, size, AT_IDENTITY + 8, 7), -1);
    assert_int_equal(parse_patched(bytes, size, AT_DEBUG_KIND, 3), -1);
    symbol_cache_builder_destroy(builder);
    free(bytes);
}

/* Any byte changed, the CRC made right: refused, or read whole without a
 * read out of bounds (which ASan would stop). */
static void test_every_byte_changed_is_safe(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = sample_file(&size);
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    static const unsigned char changes[] = {0x01, 0x80, 0xff};
    size_t accepted = 0;
    for (size_t i = 0; i < size - 4; i++)
        for (size_t c = 0; c < sizeof changes; c++) {
            memcpy(copy, bytes, size);
            copy[i] ^= changes[c];
            fix_crc(copy, size);
            struct symbol_cache_view view;
            if (symbol_cache_parse(copy, size, &view) != 0)
                continue;
            accepted++;
            for (size_t e = 0; e < view.entry_count; e++) {
                uint64_t offset;
                bool return_address;
                size_t count;
                symbol_cache_entry(&view, e, &offset, &return_address, &count);
                assert_int_equal(symbol_cache_find(&view, offset, return_address), (ssize_t)e);
                for (size_t f = 0; f < count; f++) {
                    struct symbol_cache_frame frame;
                    symbol_cache_frame(&view, e, f, &frame);
                    assert_true(strlen(frame.function) + strlen(frame.file) < size);
                }
            }
        }
    /* Lines, offsets and string texts may change and stay consistent. */
    assert_true(accepted > 0);
    free(copy);
    free(bytes);
}

static void test_builder_rules(void **state)
{
    (void)state;
    struct symbol_cache_builder *builder = symbol_cache_builder_create();
    assert_non_null(builder);
    struct symbol_cache_frame too_many[SYMBOL_CACHE_MAX_FRAMES + 1];
    for (size_t i = 0; i < SYMBOL_CACHE_MAX_FRAMES + 1; i++)
        too_many[i] = function_entry[0];
    struct symbol_cache_frame no_name = {.function = NULL, .file = "a.c"};
    struct symbol_cache_frame odd_flags = {.function = "f", .file = "a.c", .flags = 1u << 7};
    assert_int_equal(symbol_cache_builder_add(builder, 1, true, too_many, SYMBOL_CACHE_MAX_FRAMES + 1), -1);
    assert_int_equal(symbol_cache_builder_add(builder, 1, true, too_many, 0), -1);
    assert_int_equal(symbol_cache_builder_add(builder, 1, true, &no_name, 1), -1);
    assert_int_equal(symbol_cache_builder_add(builder, 1, true, &odd_flags, 1), -1);
    assert_int_equal(symbol_cache_builder_count(builder), 0);
    assert_int_equal(symbol_cache_builder_add(builder, 1, true, too_many, SYMBOL_CACHE_MAX_FRAMES), 0);
    /* The first added wins. */
    assert_int_equal(symbol_cache_builder_add(builder, 0x20, true, allocator, 1), 0);
    assert_int_equal(symbol_cache_builder_add(builder, 0x20, true, function_entry, 1), 0);
    assert_int_equal(symbol_cache_builder_count(builder), 2);
    size_t size;
    unsigned char *bytes = symbol_cache_builder_serialize(builder, &sample_header, &size);
    struct symbol_cache_view view;
    assert_int_equal(symbol_cache_parse(bytes, size, &view), 0);
    expect_frames(&view, 0x20, true, allocator, 1);
    expect_frames(&view, 1, true, too_many, SYMBOL_CACHE_MAX_FRAMES);
    /* Merged with another file: its new keys join, the builder's stay. */
    size_t other_size;
    unsigned char *other = sample_file(&other_size);
    struct symbol_cache_view other_view;
    assert_int_equal(symbol_cache_parse(other, other_size, &other_view), 0);
    assert_int_equal(symbol_cache_builder_add_view(builder, &other_view), 0);
    assert_int_equal(symbol_cache_builder_count(builder), 4);
    free(bytes);
    bytes = symbol_cache_builder_serialize(builder, &sample_header, &size);
    assert_int_equal(symbol_cache_parse(bytes, size, &view), 0);
    expect_frames(&view, 0x20, true, allocator, 1);
    expect_frames(&view, 0x1000, true, inlined_call, 2);
    struct symbol_cache_header not_hex = sample_header;
    not_hex.build_id = "xyz";
    assert_null(symbol_cache_builder_serialize(builder, &not_hex, &size));
    free(bytes);
    free(other);
    symbol_cache_builder_destroy(builder);
}

/* --- the directory ------------------------------------------------------- */

struct folder {
    char root[64];
    char cache[128];
};

static int make_folder(void **state)
{
    struct folder *folder = calloc(1, sizeof *folder);
    snprintf(folder->root, sizeof folder->root, "/tmp/memslope-symcache.XXXXXX");
    assert_non_null(mkdtemp(folder->root));
    snprintf(folder->cache, sizeof folder->cache, "%s/a/b/symbols", folder->root);
    *state = folder;
    return 0;
}

static int remove_folder(void **state)
{
    struct folder *folder = *state;
    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", folder->root);
    assert_int_equal(system(command), 0);
    free(folder);
    return 0;
}

static struct symbol_cache *open_cache(const char *path, uint64_t max_bytes)
{
    char err[512] = "";
    struct symbol_cache *cache = symbol_cache_open(path, max_bytes, err, sizeof err);
    if (!cache)
        fail_msg("symbol_cache_open: %s", err);
    return cache;
}

static bool file_exists(const char *folder, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    return access(path, F_OK) == 0;
}

static size_t files_in(const char *folder)
{
    char command[512];
    snprintf(command, sizeof command, "ls -A '%s' | wc -l", folder);
    FILE *pipe = popen(command, "r");
    size_t count = 0;
    assert_int_equal(fscanf(pipe, "%zu", &count), 1);
    pclose(pipe);
    return count;
}

static void test_written_then_read(void **state)
{
    struct folder *folder = *state;
    struct symbol_cache *cache = open_cache(folder->cache, 1 << 20);
    struct stat status;
    assert_int_equal(stat(folder->cache, &status), 0);
    assert_int_equal(status.st_mode & 0777, 0700);
    size_t size, read_size = 0;
    unsigned char *bytes = sample_file(&size);
    assert_null(symbol_cache_read(cache, sample_build_id, SAMPLE_FILE_SIZE, &read_size));
    assert_int_equal(symbol_cache_write(cache, sample_build_id, SAMPLE_FILE_SIZE, bytes, size), 0);
    assert_true(file_exists(folder->cache, "00112233445566778899aabbccddeeff00112233-1000.sym"));
    assert_int_equal(files_in(folder->cache), 1); /* no temporary file left */
    unsigned char *read = symbol_cache_read(cache, sample_build_id, SAMPLE_FILE_SIZE, &read_size);
    assert_non_null(read);
    assert_int_equal(read_size, size);
    assert_memory_equal(read, bytes, size);
    /* Another size is another file; a name that is no build-id, none. */
    assert_null(symbol_cache_read(cache, sample_build_id, SAMPLE_FILE_SIZE + 1, &read_size));
    assert_int_equal(symbol_cache_write(cache, "../x", 1, bytes, size), -1);
    free(read);
    free(bytes);
    symbol_cache_close(cache);
}

static void test_read_refuses_a_symbolic_link(void **state)
{
    struct folder *folder = *state;
    struct symbol_cache *cache = open_cache(folder->cache, 1 << 20);
    size_t size, read_size;
    unsigned char *bytes = sample_file(&size);
    char target[256], link_path[512];
    snprintf(target, sizeof target, "%s/elsewhere", folder->root);
    FILE *out = fopen(target, "wb");
    assert_int_equal(fwrite(bytes, 1, size, out), size);
    fclose(out);
    snprintf(link_path, sizeof link_path, "%s/%s-1000.sym", folder->cache, sample_build_id);
    assert_int_equal(symlink(target, link_path), 0);
    assert_null(symbol_cache_read(cache, sample_build_id, SAMPLE_FILE_SIZE, &read_size));
    free(bytes);
    symbol_cache_close(cache);
}

static void test_open_refuses_a_folder_others_may_write(void **state)
{
    struct folder *folder = *state;
    char err[512] = "";
    symbol_cache_close(open_cache(folder->cache, 1 << 20));
    assert_int_equal(chmod(folder->cache, 0777), 0);
    assert_null(symbol_cache_open(folder->cache, 1 << 20, err, sizeof err));
    assert_non_null(strstr(err, "others may write to it"));
    assert_null(symbol_cache_open("relative/symbols", 1 << 20, err, sizeof err));
    assert_non_null(strstr(err, "not an absolute path"));
}

static void test_default_directory(void **state)
{
    (void)state;
    char path[256];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(symbol_cache_default_directory(path, sizeof path), 0);
    assert_string_equal(path, "/x/cache/memslope/symbols");
    setenv("XDG_CACHE_HOME", "relative", 1); /* invalid for XDG: ignored */
    assert_int_equal(symbol_cache_default_directory(path, sizeof path), 0);
    assert_string_equal(path, "/home/u/.cache/memslope/symbols");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_int_equal(symbol_cache_default_directory(path, sizeof path), -1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(symbol_cache_default_directory(path, 10), -1);
}

/* Writes a file of `size` bytes named NAME into the cache, last used
 * hours_ago. */
static void put_file(const char *folder, const char *name, size_t size, int hours_ago)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    for (size_t i = 0; i < size; i++)
        fputc('x', out);
    fclose(out);
    struct timespec times[2];
    clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= hours_ago * 3600;
    times[1] = times[0];
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
}

static void test_least_recently_used_go_first(void **state)
{
    struct folder *folder = *state;
    /* Five files of 1000 bytes where 3500 fit: the oldest go until at
     * most three quarters (2625) are left, so two stay. */
    struct symbol_cache *cache = open_cache(folder->cache, 3500);
    put_file(folder->cache, "aa-1.sym", 1000, 5);
    put_file(folder->cache, "bb-1.sym", 1000, 2);
    put_file(folder->cache, "cc-1.sym", 1000, 4);
    put_file(folder->cache, "dd-1.sym", 1000, 3);
    put_file(folder->cache, "ee-1.sym", 1000, 1);
    put_file(folder->cache, "notes.txt", 5000, 9); /* not a cache file: never counted or removed */
    size_t size;
    void *read = symbol_cache_read(cache, "cc", 1, &size); /* now the most recently used */
    assert_non_null(read);
    free(read);
    assert_int_equal(symbol_cache_evict(cache), 3);
    assert_false(file_exists(folder->cache, "aa-1.sym"));
    assert_false(file_exists(folder->cache, "dd-1.sym"));
    assert_false(file_exists(folder->cache, "bb-1.sym"));
    assert_true(file_exists(folder->cache, "cc-1.sym"));
    assert_true(file_exists(folder->cache, "ee-1.sym"));
    assert_true(file_exists(folder->cache, "notes.txt"));
    /* Within the bound, nothing goes. */
    assert_int_equal(symbol_cache_evict(cache), 0);
    assert_true(file_exists(folder->cache, "ee-1.sym"));
    symbol_cache_close(cache);
}

static void test_abandoned_temporary_files_go(void **state)
{
    struct folder *folder = *state;
    struct symbol_cache *cache = open_cache(folder->cache, 1 << 20);
    put_file(folder->cache, ".tmp-1-2-3", 10, 2);
    put_file(folder->cache, ".tmp-4-5-6", 10, 0); /* a writer at work now */
    assert_int_equal(symbol_cache_evict(cache), 1);
    assert_false(file_exists(folder->cache, ".tmp-1-2-3"));
    assert_true(file_exists(folder->cache, ".tmp-4-5-6"));
    symbol_cache_close(cache);
}

static void test_lock_excludes_a_second_writer(void **state)
{
    struct folder *folder = *state;
    struct symbol_cache *first = open_cache(folder->cache, 1 << 20);
    struct symbol_cache *second = open_cache(folder->cache, 1 << 20);
    assert_int_equal(symbol_cache_lock(first), 0);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    assert_int_equal(symbol_cache_lock(second), -1);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double waited = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    assert_true(waited >= 0.9 && waited < 30); /* a second or more (a loaded machine oversleeps), then gave up */
    symbol_cache_unlock(first);
    assert_int_equal(symbol_cache_lock(second), 0);
    assert_int_equal(symbol_cache_lock(first), -1);
    symbol_cache_close(second); /* closing releases the lock */
    assert_int_equal(symbol_cache_lock(first), 0);
    symbol_cache_close(first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_cut_fails),
        cmocka_unit_test(test_wrong_crc_fails),
        cmocka_unit_test(test_bad_counts_fail),
        cmocka_unit_test(test_bad_strings_fail),
        cmocka_unit_test(test_bad_entries_and_frames_fail),
        cmocka_unit_test(test_bad_debug_source_fails),
        cmocka_unit_test(test_every_byte_changed_is_safe),
        cmocka_unit_test(test_builder_rules),
        cmocka_unit_test_setup_teardown(test_written_then_read, make_folder, remove_folder),
        cmocka_unit_test_setup_teardown(test_read_refuses_a_symbolic_link, make_folder, remove_folder),
        cmocka_unit_test_setup_teardown(test_open_refuses_a_folder_others_may_write, make_folder, remove_folder),
        cmocka_unit_test(test_default_directory),
        cmocka_unit_test_setup_teardown(test_least_recently_used_go_first, make_folder, remove_folder),
        cmocka_unit_test_setup_teardown(test_abandoned_temporary_files_go, make_folder, remove_folder),
        cmocka_unit_test_setup_teardown(test_lock_excludes_a_second_writer, make_folder, remove_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

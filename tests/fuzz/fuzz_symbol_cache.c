/* fuzz_symbol_cache.c - libFuzzer target: any byte string through the
 * symbol cache's file reader (tracer/symbol_cache.c), and whatever it
 * accepts read whole and written back, which must give a file the reader
 * accepts with the same entries. Seeds: tests/fuzz/corpus/symbol_cache/
 * (written by MEMSLOPE_FUZZ_CORPUS=DIR build/unit/test_symbol_cache). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../../tracer/symbols/symbol_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The Makefile links every core object into a fuzz target, and the command
 * files call command_usage() from tracer/main.c, which is not among them. */
const char *command_usage(const char *name) __attribute__((weak));
const char *command_usage(const char *name)
{
    (void)name;
    return NULL;
}

/* Rewrites the file's closing CRC, so mutations reach the checks behind it. */
static void fix_crc(uint8_t *data, size_t size)
{
    if (size < 4)
        return;
    uint32_t crc = (uint32_t)crc32(0, data, (uInt)(size - 4));
    for (int i = 0; i < 4; i++)
        data[size - 4 + i] = (uint8_t)(crc >> (8 * i));
}

/* Every entry and frame of view, as the symbol store reads them. */
static void read_whole(const struct symbol_cache_view *view)
{
    for (size_t i = 0; i < view->entry_count; i++) {
        uint64_t offset;
        bool return_address;
        size_t count;
        symbol_cache_entry(view, i, &offset, &return_address, &count);
        if (symbol_cache_find(view, offset, return_address) != (ssize_t)i)
            abort();
        for (size_t f = 0; f < count; f++) {
            struct symbol_cache_frame frame;
            symbol_cache_frame(view, i, f, &frame);
            if (strlen(frame.function) > SYMBOL_CACHE_MAX_STRING || strlen(frame.file) > SYMBOL_CACHE_MAX_STRING)
                abort();
        }
    }
}

static void write_back(const struct symbol_cache_view *view)
{
    struct symbol_cache_builder *builder = symbol_cache_builder_create();
    if (!builder)
        return;
    size_t size;
    void *bytes = NULL;
    if (symbol_cache_builder_add_view(builder, view) == 0 &&
        (bytes = symbol_cache_builder_serialize(builder, &view->header, &size)) != NULL) {
        struct symbol_cache_view again;
        if (symbol_cache_parse(bytes, size, &again) != 0 || again.entry_count != view->entry_count ||
            !symbol_cache_header_equal(&again.header, &view->header))
            abort();
    }
    free(bytes);
    symbol_cache_builder_destroy(builder);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (size % 4 != 3) /* a quarter of the inputs keep their CRC as mutated */
        fix_crc(copy, size);
    struct symbol_cache_view view;
    if (symbol_cache_parse(copy, size, &view) == 0) {
        read_whole(&view);
        write_back(&view);
    }
    free(copy);
    return 0;
}

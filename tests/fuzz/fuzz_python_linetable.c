/* fuzz_python_linetable.c - libFuzzer target: any line table the shim may
 * copy out of a program's code object (preload/python_linetable.h), in
 * each of its three formats: the first byte picks first_line, the format
 * (bits 1-2: the location table of 3.11+, 3.10's line table, 3.6-3.9's
 * lnotab) and the order (bit 0); the rest is the table. Offsets up to past
 * the table's end are read from the start and, with one cursor, in a
 * second order (forwards for even first bytes, in strides for odd ones):
 * both readings agree, and no read leaves the table (ASan: the table is a
 * heap copy of its exact size). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../preload/python_linetable.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef int (*line_reader)(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                           struct python_linetable_cursor *cursor);

/* The byte offsets a table covers, and a little past: a location entry
 * covers at most 8 code units, an older pair at most 255 bytes. */
static uint32_t offsets_covered(unsigned format, const uint8_t *table, size_t length)
{
    if (format == 0)
        return (uint32_t)length * 16 + 4;
    uint32_t bytes = 4;
    for (size_t i = 0; i + 1 < length; i += 2)
        bytes += table[i];
    return bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 512) /* the reading from the start is quadratic */
        return 0;
    static const line_reader readers[] = {python_linetable_line_from, python_linetable310_line_from,
                                          python_lnotab_line_from};
    unsigned format = (data[0] >> 1) % 3;
    int first_line = (int)data[0] - 8;
    size_t length = size - 1;
    uint8_t *table = malloc(length ? length : 1);
    if (!table)
        abort();
    memcpy(table, data + 1, length);
    uint32_t bytes = offsets_covered(format, table, length);
    uint32_t step = bytes / 4096 + 1; /* an older table covers up to 255 bytes a pair: at most ~4,000 readings */
    uint32_t count = bytes / step + 1;
    struct python_linetable_cursor cursor = {0, 0, 0};
    for (uint32_t k = 0; k < count; k++) {
        uint32_t offset = (data[0] & 1 ? (k * 7) % count : k) * step;
        struct python_linetable_cursor start = {0, 0, 0};
        int expected = readers[format](table, length, first_line, offset, &start);
        if (readers[format](table, length, first_line, offset, &cursor) != expected)
            abort();
    }
    free(table);
    return 0;
}

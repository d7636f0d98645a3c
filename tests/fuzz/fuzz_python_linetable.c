/* fuzz_python_linetable.c - libFuzzer target: any location table the shim
 * may copy out of a program's code object (preload/python_linetable.h).
 * The first byte picks first_line, the rest is the table. Every offset up
 * to past its end is read from the start and, with one cursor, in a second
 * order (forwards for even first bytes, in strides for odd ones): both
 * readings agree, and no read leaves the table (ASan: the table is a heap
 * copy of its exact size). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../preload/python_linetable.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 512) /* the reading from the start is quadratic */
        return 0;
    int first_line = (int)data[0] - 8;
    size_t length = size - 1;
    uint8_t *table = malloc(length ? length : 1);
    if (!table)
        abort();
    memcpy(table, data + 1, length);
    uint32_t offsets = (uint32_t)length * 8 + 2; /* an entry covers at most 8 units of 2 bytes */
    struct python_linetable_cursor cursor = {0, 0, 0};
    for (uint32_t k = 0; k < offsets; k++) {
        uint32_t unit = data[0] & 1 ? (k * 7) % offsets : k;
        int expected = python_linetable_line(table, length, first_line, unit * 2);
        if (python_linetable_line_from(table, length, first_line, unit * 2, &cursor) != expected)
            abort();
    }
    free(table);
    return 0;
}

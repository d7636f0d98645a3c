/* fuzz_unwind_rules_file.c - libFuzzer target: any byte string through
 * the kept unwind rules' reader (common/unwind_rules_file.c), which the
 * shim runs inside the traced program on a file from the user's cache.
 * The module it is checked for is the one its own header names, and most
 * inputs get their CRC made right, so mutations reach the checks behind
 * both. What it accepts must be sorted, plausible, found again by offset,
 * and written back to the same bytes. Seeds: tests/fuzz/corpus/
 * unwind_rules_file/ (written by MEMSLOPE_FUZZ_CORPUS=DIR
 * build/unit/test_kept_rules). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../../common/unwind_rules_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The Makefile links every core object into a fuzz target, and the command
 * files call command_usage() from tracer/main.c, which is not among them. */
const char *command_usage(const char *name) __attribute__((weak));
const char *command_usage(const char *name)
{
    (void)name;
    return NULL;
}

static void check_accepted(const uint8_t *bytes, size_t size, const struct unwind_rules_file_header *header,
                           const struct unwind_rule_entry *entries, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if ((i > 0 && entries[i].offset <= entries[i - 1].offset) || !unwind_rule_plausible(entries[i].rule) ||
            unwind_rules_find(entries, count, entries[i].offset) != &entries[i])
            abort();
    }
    uint8_t *again = malloc(size);
    if (!again)
        return;
    unwind_rules_file_write(again, header->build_id, header->build_id_size, header->module_size, entries, count);
    if (unwind_rules_file_size(count) != size || memcmp(again, bytes, size) != 0)
        abort();
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t *copy = malloc(size + 8); /* 8-byte aligned, as the shim's mapping */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    uint8_t *bytes = (uint8_t *)copy;
    if (size >= 4 && size % 4 != 3) { /* a quarter keep their CRC as mutated */
        uint32_t crc = (uint32_t)crc32(0, bytes, (uInt)(size - 4));
        memcpy(bytes + size - 4, &crc, 4);
    }
    struct unwind_rules_file_header header;
    memset(&header, 0, sizeof header);
    memcpy(&header, bytes, size < sizeof header ? size : sizeof header);
    uint32_t id_size = header.build_id_size <= UNWIND_RULES_MAX_BUILD_ID ? header.build_id_size : 0;
    const struct unwind_rule_entry *entries;
    size_t count;
    if (unwind_rules_file_check(bytes, size, header.build_id, id_size, header.module_size, &entries, &count) == 0)
        check_accepted(bytes, size, &header, entries, count);
    free(copy);
    return 0;
}

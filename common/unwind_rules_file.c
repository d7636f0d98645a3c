/* unwind_rules_file.c - see unwind_rules_file.h. Built into the shim as
 * well as the tracer: it allocates nothing. zlib's crc32 because the shim
 * has zlib already (elfutils needs it) and no other CRC. */
#include "unwind_rules_file.h"

#include <string.h>
#include <zlib.h>

_Static_assert(sizeof(struct unwind_rules_file_header) == 64, "the file's header is 64 bytes");
_Static_assert(sizeof(struct unwind_rule_entry) == 16, "an entry is 16 bytes");

/* fast_unwind.c's packing: bits 0-3 the kind, bit 4 the rbp flag, bits
 * 5-7 unused, then the CFA offset and the rbp offset. */
#define RULE_KIND_MASK 15u
#define RULE_UNUSED_BITS 0xe0u
#define RULE_KIND_LAST 4u

int unwind_rule_plausible(uint64_t rule)
{
    uint64_t kind = rule & RULE_KIND_MASK;
    return kind >= 1 && kind <= RULE_KIND_LAST && (rule & RULE_UNUSED_BITS) == 0;
}

size_t unwind_rules_file_size(size_t count)
{
    return sizeof(struct unwind_rules_file_header) + count * sizeof(struct unwind_rule_entry) + 4;
}

static uint32_t checksum(const void *bytes, size_t size)
{
    return (uint32_t)crc32(0, bytes, (uInt)size);
}

static int header_fits(const struct unwind_rules_file_header *header, const uint8_t *build_id,
                       uint32_t build_id_size, uint64_t module_size)
{
    static const uint8_t zero[UNWIND_RULES_MAX_BUILD_ID];
    return memcmp(header->magic, UNWIND_RULES_FILE_MAGIC, sizeof header->magic) == 0 &&
           header->version == UNWIND_RULES_FILE_VERSION && header->reserved == 0 &&
           header->count <= UNWIND_RULES_FILE_MAX_ENTRIES && header->module_size == module_size &&
           build_id_size > 0 && build_id_size <= UNWIND_RULES_MAX_BUILD_ID && header->build_id_size == build_id_size &&
           memcmp(header->build_id, build_id, build_id_size) == 0 &&
           memcmp(header->build_id + build_id_size, zero, UNWIND_RULES_MAX_BUILD_ID - build_id_size) == 0;
}

int unwind_rules_file_check(const void *bytes, size_t size, const uint8_t *build_id, uint32_t build_id_size,
                            uint64_t module_size, const struct unwind_rule_entry **entries, size_t *count)
{
    struct unwind_rules_file_header header;
    if (((uintptr_t)bytes & 7) != 0 || size < unwind_rules_file_size(0))
        return -1;
    memcpy(&header, bytes, sizeof header);
    if (!header_fits(&header, build_id, build_id_size, module_size) || size != unwind_rules_file_size(header.count))
        return -1;
    uint32_t stored;
    memcpy(&stored, (const uint8_t *)bytes + size - 4, sizeof stored);
    if (stored != checksum(bytes, size - 4))
        return -1;
    const struct unwind_rule_entry *list =
        (const struct unwind_rule_entry *)((const uint8_t *)bytes + sizeof(struct unwind_rules_file_header));
    for (size_t i = 0; i < header.count; i++)
        if ((i > 0 && list[i].offset <= list[i - 1].offset) || !unwind_rule_plausible(list[i].rule))
            return -1;
    *entries = list;
    *count = header.count;
    return 0;
}

void unwind_rules_file_write(void *out, const uint8_t *build_id, uint32_t build_id_size, uint64_t module_size,
                             const struct unwind_rule_entry *entries, size_t count)
{
    struct unwind_rules_file_header header;
    memset(&header, 0, sizeof header);
    memcpy(header.magic, UNWIND_RULES_FILE_MAGIC, sizeof header.magic);
    header.version = UNWIND_RULES_FILE_VERSION;
    header.count = (uint32_t)count;
    header.module_size = module_size;
    header.build_id_size = build_id_size;
    memcpy(header.build_id, build_id, build_id_size);
    uint8_t *at = out;
    memcpy(at, &header, sizeof header);
    if (count)
        memcpy(at + sizeof header, entries, count * sizeof *entries);
    size_t body = unwind_rules_file_size(count) - 4;
    uint32_t sum = checksum(at, body);
    memcpy(at + body, &sum, sizeof sum);
}

const struct unwind_rule_entry *unwind_rules_find(const struct unwind_rule_entry *entries, size_t count,
                                                  uint64_t offset)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (entries[middle].offset < offset)
            low = middle + 1;
        else
            high = middle;
    }
    return low < count && entries[low].offset == offset ? &entries[low] : NULL;
}

/*
 * unwind_rules_file.h - the call-frame rules the shim's unwinder
 * (preload/fast_unwind.c) looked up in one module's CFI, kept across
 * recordings, so that the next recording of the same binaries reads them
 * instead of asking libdw for each again (docs/internals.md, "Unwind rules
 * kept across runs").
 *
 * One file per module, BUILDID-SIZE.rules in the symbol cache's folder
 * (tracer/symbols/symbol_cache.h: the same lock, bound and eviction). The
 * shim reads it (unwind_rules_file_check); the tracer writes it
 * (unwind_rules_file_write) from what the shim reported in its region.
 * Little-endian, as the machines it is written and read on:
 *   header    struct unwind_rules_file_header (64 bytes)
 *   entries   count x struct unwind_rule_entry, offsets strictly increasing
 *   checksum  CRC-32 (zlib's) of everything before it, 4 bytes
 * An offset is a return address less the module's load bias; a rule is the
 * shim's packed rule. A file is used whatever memslope wrote it: its rules
 * depend on the module's bytes and on how fast_unwind.c derives and packs
 * them, which UNWIND_RULES_FILE_VERSION names: change it whenever either
 * changes, or old files keep answering for the call sites they hold.
 *
 * Every file is untrusted input: a reader checks it whole, and one that
 * fails is not used (the shim looks its rules up again; the tracer writes
 * a good file over it).
 */
#ifndef MEMSLOPE_UNWIND_RULES_FILE_H
#define MEMSLOPE_UNWIND_RULES_FILE_H

#include <stddef.h>
#include <stdint.h>

#define UNWIND_RULES_FILE_MAGIC "MSRULES" /* with its NUL: 8 bytes */
#define UNWIND_RULES_FILE_VERSION 1u
#define UNWIND_RULES_FILE_SUFFIX ".rules"
/* 16 MiB: far more than any module's call sites that allocate. */
#define UNWIND_RULES_FILE_MAX_ENTRIES (1u << 20)
#define UNWIND_RULES_MAX_BUILD_ID 32u /* bytes; ld writes 20 */

struct unwind_rules_file_header {
    char magic[8];
    uint32_t version;
    uint32_t count;       /* entries */
    uint64_t module_size; /* of the module's file, as the symbol cache keys it */
    uint32_t build_id_size;
    uint32_t reserved;    /* 0 */
    uint8_t build_id[UNWIND_RULES_MAX_BUILD_ID]; /* zero past build_id_size */
};

struct unwind_rule_entry {
    uint64_t offset;
    uint64_t rule;
};

/* Whether rule is one the shim could have cached: a known kind
 * (fast_unwind.c's enum rule_kind, 1 to 4) and no bit its packing does
 * not use. */
int unwind_rule_plausible(uint64_t rule);

/* Checks size bytes as the file of the module (build_id, module_size).
 * Returns 0 with *entries (pointing into bytes, which must be 8-byte
 * aligned) and *count, or -1 when they are not a whole, consistent file
 * for that module. */
int unwind_rules_file_check(const void *bytes, size_t size, const uint8_t *build_id, uint32_t build_id_size,
                            uint64_t module_size, const struct unwind_rule_entry **entries, size_t *count);

/* The size of a file of count entries. */
size_t unwind_rules_file_size(size_t count);

/* Writes the file of entries (offsets strictly increasing, count at most
 * UNWIND_RULES_FILE_MAX_ENTRIES, build_id_size at most
 * UNWIND_RULES_MAX_BUILD_ID) into out, unwind_rules_file_size(count)
 * bytes. */
void unwind_rules_file_write(void *out, const uint8_t *build_id, uint32_t build_id_size, uint64_t module_size,
                             const struct unwind_rule_entry *entries, size_t count);

/* The entry for offset among count sorted entries, or NULL. */
const struct unwind_rule_entry *unwind_rules_find(const struct unwind_rule_entry *entries, size_t count,
                                                  uint64_t offset);

#endif

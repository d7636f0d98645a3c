/* kept_rules.c - see kept_rules.h. */
#include "kept_rules.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/growable_array.h"
#include "../../common/shm_layout.h"
#include "../../common/unwind_rules_file.h"
#include "symbol_cache.h"

_Static_assert(SHM_UNWIND_MAX_BUILD_ID == UNWIND_RULES_MAX_BUILD_ID, "a region's build-ids fit a file's");

/* One module (by build-id and file size) and the rules collected for it,
 * in the order they came. */
struct kept_module {
    uint8_t build_id[UNWIND_RULES_MAX_BUILD_ID];
    uint32_t build_id_size;
    uint64_t file_size;
    bool file_read; /* some shim read its kept rules: mark the file used */
    struct unwind_rule_entry *rules;
    size_t count, capacity;
};

struct kept_rules {
    struct kept_module *modules;
    size_t count, capacity;
    struct kept_rules_stats stats;
};

struct kept_rules *kept_rules_create(void)
{
    return calloc(1, sizeof(struct kept_rules));
}

void kept_rules_destroy(struct kept_rules *kept)
{
    if (!kept)
        return;
    for (size_t i = 0; i < kept->count; i++)
        free(kept->modules[i].rules);
    free(kept->modules);
    free(kept);
}

/* The index of the module's entry, added if new (adding may move the
 * entries: hold indexes, not pointers); -1 when out of memory. */
static ptrdiff_t module_entry(struct kept_rules *kept, const struct shm_unwind_module *module)
{
    for (size_t i = 0; i < kept->count; i++) {
        const struct kept_module *known = &kept->modules[i];
        if (known->file_size == module->file_size && known->build_id_size == module->build_id_size &&
            memcmp(known->build_id, module->build_id, module->build_id_size) == 0)
            return (ptrdiff_t)i;
    }
    if (growable_array_reserve(&kept->modules, &kept->capacity, kept->count + 1, sizeof *kept->modules) < 0)
        return -1;
    struct kept_module *added = &kept->modules[kept->count];
    memset(added, 0, sizeof *added);
    memcpy(added->build_id, module->build_id, module->build_id_size);
    added->build_id_size = module->build_id_size;
    added->file_size = module->file_size;
    return (ptrdiff_t)kept->count++;
}

/* The region's first module that holds address, or -1: the first, as
 * the shim's unwinder takes it, when a module unloaded and another mapped
 * at its place are both reported. */
static ptrdiff_t module_holding(const struct shm_unwind_module *modules, size_t count, uint64_t address)
{
    for (size_t i = 0; i < count; i++)
        if (address >= modules[i].start && address < modules[i].end)
            return (ptrdiff_t)i;
    return -1;
}

static uint32_t count_below(const uint32_t *used, uint32_t limit)
{
    uint32_t count = __atomic_load_n(used, __ATOMIC_ACQUIRE);
    return count < limit ? count : limit;
}

void kept_rules_collect(struct kept_rules *kept, void *region)
{
    struct shm_header *header = region;
    uint32_t module_count = count_below(&header->unwind_modules_used, SHM_UNWIND_MODULES);
    uint32_t rule_count = count_below(&header->unwind_rules_used, SHM_UNWIND_RULES);
    kept->stats.reused += __atomic_load_n(&header->unwind_rules_reused, __ATOMIC_RELAXED);
    kept->stats.looked_up += __atomic_load_n(&header->unwind_rules_looked_up, __ATOMIC_RELAXED);
    /* Copied first: the target may still write (a process that is stopped
     * now but resumes), and every field is checked once. */
    struct shm_unwind_module *modules = malloc((module_count ? module_count : 1) * sizeof *modules);
    ptrdiff_t *entries = malloc((module_count ? module_count : 1) * sizeof *entries);
    size_t usable = 0;
    for (uint32_t i = 0; modules && entries && i < module_count; i++) {
        modules[usable] = shm_unwind_modules(region)[i];
        const struct shm_unwind_module *module = &modules[usable];
        if (module->build_id_size == 0 || module->build_id_size > SHM_UNWIND_MAX_BUILD_ID ||
            module->start >= module->end || (entries[usable] = module_entry(kept, module)) < 0)
            continue;
        kept->modules[entries[usable]].file_read |= module->rules_kept > 0;
        usable++;
    }
    for (uint32_t i = 0; modules && entries && i < rule_count; i++) {
        struct shm_unwind_rule rule = shm_unwind_rules(region)[i];
        ptrdiff_t m = module_holding(modules, usable, rule.address);
        if (m < 0 || !unwind_rule_plausible(rule.rule))
            continue;
        struct kept_module *module = &kept->modules[entries[m]];
        if (growable_array_reserve(&module->rules, &module->capacity, module->count + 1, sizeof *module->rules) < 0)
            break;
        module->rules[module->count++] = (struct unwind_rule_entry){rule.address - modules[m].bias, rule.rule};
        kept->stats.kept++;
    }
    free(modules);
    free(entries);
}

static int compare_offsets(const void *a, const void *b)
{
    const struct unwind_rule_entry *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Sorts the rules and drops repeated offsets (two images of one module
 * look a rule up alike). */
static size_t sort_unique(struct unwind_rule_entry *rules, size_t count)
{
    qsort(rules, count, sizeof *rules, compare_offsets);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (kept == 0 || rules[i].offset != rules[kept - 1].offset)
            rules[kept++] = rules[i];
    return kept;
}

/* The union of two sorted lists into out (room for both), at most
 * UNWIND_RULES_FILE_MAX_ENTRIES: the new rules where both have an offset. */
static size_t merge(const struct unwind_rule_entry *fresh, size_t fresh_count, const struct unwind_rule_entry *old,
                    size_t old_count, struct unwind_rule_entry *out)
{
    size_t i = 0, j = 0, n = 0;
    while ((i < fresh_count || j < old_count) && n < UNWIND_RULES_FILE_MAX_ENTRIES) {
        if (j == old_count || (i < fresh_count && fresh[i].offset <= old[j].offset)) {
            if (j < old_count && old[j].offset == fresh[i].offset)
                j++;
            out[n++] = fresh[i++];
        } else {
            out[n++] = old[j++];
        }
    }
    return n;
}

/* The module's file with its collected rules added. 0, or -1. */
static int save_module(struct symbol_cache *cache, struct kept_module *module, const char *hex)
{
    size_t size = 0, old_count = 0;
    void *old_bytes = symbol_cache_read_rules(cache, hex, module->file_size, &size);
    const struct unwind_rule_entry *old = NULL;
    if (old_bytes && unwind_rules_file_check(old_bytes, size, module->build_id, module->build_id_size,
                                             module->file_size, &old, &old_count) != 0)
        old_count = 0;
    size_t fresh_count = sort_unique(module->rules, module->count);
    struct unwind_rule_entry *merged = malloc((fresh_count + old_count) * sizeof *merged);
    size_t count = merged ? merge(module->rules, fresh_count, old, old_count, merged) : 0;
    void *bytes = merged ? malloc(unwind_rules_file_size(count)) : NULL;
    int rc = -1;
    if (bytes) {
        unwind_rules_file_write(bytes, module->build_id, module->build_id_size, module->file_size, merged, count);
        rc = symbol_cache_write_rules(cache, hex, module->file_size, bytes, unwind_rules_file_size(count));
    }
    free(bytes);
    free(merged);
    free(old_bytes);
    return rc;
}

int kept_rules_save(struct kept_rules *kept, struct symbol_cache *cache, char *err, size_t err_size)
{
    size_t failed = 0;
    bool locked = false, lock_failed = false;
    for (size_t i = 0; i < kept->count; i++) {
        struct kept_module *module = &kept->modules[i];
        char hex[2 * UNWIND_RULES_MAX_BUILD_ID + 1];
        symbol_cache_build_id_hex(module->build_id, module->build_id_size, hex);
        if (module->count == 0) {
            size_t size;
            if (module->file_read) /* reading marks it used (symbol_cache_read) */
                free(symbol_cache_read_rules(cache, hex, module->file_size, &size));
            continue;
        }
        if (!locked && !lock_failed && symbol_cache_lock(cache) != 0)
            lock_failed = true; /* the files read are still marked used */
        locked = !lock_failed;
        if (lock_failed)
            failed++;
        else if (save_module(cache, module, hex) == 0)
            kept->stats.files_written++;
        else
            failed++;
    }
    if (locked) {
        symbol_cache_evict(cache);
        symbol_cache_unlock(cache);
    }
    if (lock_failed)
        snprintf(err, err_size,
                 "the unwind rules of %zu modules were not kept: the symbol cache %s could not be locked within a "
                 "second (another recording holding it, or its lock file not writable); the next recording looks "
                 "them up again",
                 failed, symbol_cache_directory(cache));
    else if (failed)
        snprintf(err, err_size,
                 "the unwind rules of %zu modules could not be written to the symbol cache %s (a full disk, or a "
                 "folder not writable); the next recording looks them up again; remove the folder if this goes on",
                 failed, symbol_cache_directory(cache));
    return failed ? -1 : 0;
}

void kept_rules_stats(const struct kept_rules *kept, struct kept_rules_stats *stats)
{
    *stats = kept->stats;
}

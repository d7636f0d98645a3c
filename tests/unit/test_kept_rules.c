/*
 * test_kept_rules.c - the unwind rules kept across recordings: the file
 * (common/unwind_rules_file.c) written and read back, found by offset,
 * and refused whenever it is not whole and for its module; and the
 * tracer's keeper (tracer/symbols/kept_rules.c), which takes what a shim
 * reported in its region (checking every entry) and adds it to the
 * modules' files. MEMSLOPE_FUZZ_CORPUS=DIR also writes a sample file
 * there, the seed of tests/fuzz/fuzz_unwind_rules_file.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "../../common/unwind_rules_file.h"
#include "../../tracer/symbols/kept_rules.h"
#include "../../tracer/symbols/symbol_cache.h"
#include "test_region.h"

static const uint8_t sample_id[20] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
                                      0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x23, 0x45, 0x67};
static const char sample_hex[] = "00112233445566778899aabbccddeeff01234567";
#define SAMPLE_SIZE 0x1234u

/* Rules as fast_unwind.c packs them: CFA = rsp + 16 (kind 1), CFA = rbp
 * + 16 with rbp saved at CFA - 16 (kind 2), outermost (3), unsupported (4). */
#define RULE_RSP16 ((16u << 8) | 1u)
#define RULE_RBP16 (((uint64_t)(uint32_t)-16 << 32) | (16u << 8) | 16u | 2u)
#define RULE_OUTERMOST 3u
#define RULE_UNSUPPORTED 4u

static const struct unwind_rule_entry sample_rules[] = {
    {0x1000, RULE_RSP16}, {0x1008, RULE_RBP16}, {0x2000, RULE_OUTERMOST}, {0x2ff0, RULE_UNSUPPORTED}};
#define SAMPLE_COUNT (sizeof sample_rules / sizeof sample_rules[0])

/* An 8-byte aligned copy of a file of entries, size in *size. */
static uint64_t *sample_file(const struct unwind_rule_entry *entries, size_t count, size_t *size)
{
    *size = unwind_rules_file_size(count);
    uint64_t *bytes = calloc(1, *size + 8);
    assert_non_null(bytes);
    unwind_rules_file_write(bytes, sample_id, sizeof sample_id, SAMPLE_SIZE, entries, count);
    return bytes;
}

static int check(const void *bytes, size_t size)
{
    const struct unwind_rule_entry *entries;
    size_t count;
    return unwind_rules_file_check(bytes, size, sample_id, sizeof sample_id, SAMPLE_SIZE, &entries, &count);
}

static void fix_crc(uint8_t *bytes, size_t size)
{
    uint32_t crc = (uint32_t)crc32(0, bytes, (uInt)(size - 4));
    memcpy(bytes + size - 4, &crc, 4);
}

static void test_file_round_trip(void **state)
{
    (void)state;
    size_t size;
    uint64_t *bytes = sample_file(sample_rules, SAMPLE_COUNT, &size);
    assert_int_equal(size, 64 + 16 * SAMPLE_COUNT + 4);
    const struct unwind_rule_entry *entries;
    size_t count;
    assert_int_equal(unwind_rules_file_check(bytes, size, sample_id, sizeof sample_id, SAMPLE_SIZE, &entries, &count),
                     0);
    assert_int_equal(count, SAMPLE_COUNT);
    assert_memory_equal(entries, sample_rules, sizeof sample_rules);
    for (size_t i = 0; i < SAMPLE_COUNT; i++)
        assert_ptr_equal(unwind_rules_find(entries, count, sample_rules[i].offset), &entries[i]);
    assert_null(unwind_rules_find(entries, count, 0x0fff));
    assert_null(unwind_rules_find(entries, count, 0x1004));
    assert_null(unwind_rules_find(entries, count, 0x3000));
    assert_null(unwind_rules_find(entries, 0, 0x1000));
    const char *corpus = getenv("MEMSLOPE_FUZZ_CORPUS");
    if (corpus) {
        char path[4096];
        snprintf(path, sizeof path, "%s/sample", corpus);
        FILE *out = fopen(path, "wb");
        assert_non_null(out);
        assert_int_equal(fwrite(bytes, 1, size, out), size);
        fclose(out);
    }
    free(bytes);
}

/* Each damage, its CRC made right again where the damage is not the CRC. */
static void test_file_refused_unless_whole_and_its_own(void **state)
{
    (void)state;
    size_t size;
    uint64_t *good = sample_file(sample_rules, SAMPLE_COUNT, &size);
    uint64_t *bytes = calloc(1, size + 8);
    const struct unwind_rule_entry *entries;
    size_t count;
    /* another module: build-id, its length, the file's size */
    uint8_t other_id[20];
    memcpy(other_id, sample_id, sizeof other_id);
    other_id[19] ^= 1;
    assert_int_equal(unwind_rules_file_check(good, size, other_id, sizeof other_id, SAMPLE_SIZE, &entries, &count), -1);
    assert_int_equal(unwind_rules_file_check(good, size, sample_id, 19, SAMPLE_SIZE, &entries, &count), -1);
    assert_int_equal(unwind_rules_file_check(good, size, sample_id, sizeof sample_id, SAMPLE_SIZE + 1, &entries, &count),
                     -1);
    /* cut, longer, empty, misaligned */
    assert_int_equal(check(good, size - 1), -1);
    assert_int_equal(check(good, size - 16), -1);
    assert_int_equal(check(good, 0), -1);
    memcpy(bytes, good, size);
    assert_int_equal(check(bytes, size + 8), -1);
    memcpy((uint8_t *)bytes + 4, good, size);
    assert_int_equal(check((uint8_t *)bytes + 4, size), -1);
    /* a byte changed, the CRC left: every byte of the file */
    for (size_t at = 0; at < size; at++) {
        memcpy(bytes, good, size);
        ((uint8_t *)bytes)[at] ^= 0x40;
        assert_int_equal(check(bytes, size), -1);
    }
    /* damage behind a right CRC */
    struct {
        size_t at;
        uint64_t value;
        size_t width;
    } damages[] = {
        {0, 'X', 1},                          /* magic */
        {8, 2, 4},                            /* version */
        {12, SAMPLE_COUNT + 1, 4},            /* count past the end */
        {12, UNWIND_RULES_FILE_MAX_ENTRIES + 1, 4},
        {28, 1, 4},                           /* reserved */
        {32 + 20, 1, 1},                      /* a byte past the build-id */
        {64 + 16, 0x1000, 8},                 /* an offset repeated */
        {64 + 32, 0x0800, 8},                 /* offsets out of order */
        {64 + 8, 0, 8},                       /* a rule of 0 */
        {64 + 8, 5, 8},                       /* no such kind */
        {64 + 8, RULE_RSP16 | 0x20, 8},       /* a bit the packing does not use */
    };
    for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
        memcpy(bytes, good, size);
        memcpy((uint8_t *)bytes + damages[i].at, &damages[i].value, damages[i].width);
        fix_crc((uint8_t *)bytes, size);
        assert_int_equal(check(bytes, size), -1);
    }
    /* no entries at all is a whole file */
    free(good);
    good = sample_file(NULL, 0, &size);
    assert_int_equal(check(good, size), 0);
    free(good);
    free(bytes);
}

/* --- the keeper ---------------------------------------------------------- */

struct fixture {
    void *region;
    char root[64];
    struct symbol_cache *cache;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(setup_region(&f->region), 0);
    snprintf(f->root, sizeof f->root, "/tmp/memslope-kept-rules.XXXXXX");
    assert_non_null(mkdtemp(f->root));
    char err[512] = "";
    f->cache = symbol_cache_open(f->root, 1u << 20, err, sizeof err);
    if (!f->cache)
        fail_msg("symbol_cache_open: %s", err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    symbol_cache_close(f->cache);
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", f->root);
    assert_int_equal(system(command), 0);
    teardown_region(&f->region);
    free(f);
    return 0;
}

/* Reports a module at [start, end) with bias, as the shim does. */
static void report_module(void *region, uint64_t start, uint64_t end, uint64_t bias, uint32_t id_size,
                          uint32_t rules_kept)
{
    struct shm_header *header = region;
    struct shm_unwind_module *module = &shm_unwind_modules(region)[header->unwind_modules_used++];
    *module = (struct shm_unwind_module){start, end, bias, SAMPLE_SIZE, id_size, rules_kept, {0}};
    memcpy(module->build_id, sample_id, sizeof sample_id);
}

static void report_rule(void *region, uint64_t address, uint64_t rule)
{
    struct shm_header *header = region;
    header->unwind_rules_looked_up++;
    shm_unwind_rules(region)[header->unwind_rules_used++] = (struct shm_unwind_rule){address, rule};
}

/* The module's kept rules as the shim would read them: 0 with a copy in
 * *entries (to free), or -1 when there is no whole file. */
static int read_kept(struct fixture *f, struct unwind_rule_entry **entries, size_t *count)
{
    size_t size;
    void *bytes = symbol_cache_read_rules(f->cache, sample_hex, SAMPLE_SIZE, &size);
    const struct unwind_rule_entry *in;
    int rc = bytes ? unwind_rules_file_check(bytes, size, sample_id, sizeof sample_id, SAMPLE_SIZE, &in, count) : -1;
    if (rc == 0) {
        *entries = malloc(*count * sizeof **entries + 1);
        memcpy(*entries, in, *count * sizeof **entries);
    }
    free(bytes);
    return rc;
}

static void save(struct kept_rules *kept, struct fixture *f)
{
    char err[512] = "";
    if (kept_rules_save(kept, f->cache, err, sizeof err) != 0)
        fail_msg("kept_rules_save: %s", err);
}

static void test_keeper_adds_what_the_shim_looked_up(void **state)
{
    struct fixture *f = *state;
    struct kept_rules *kept = kept_rules_create();
    /* the module loaded at 0x7f0000000000, its text at +0x1000 */
    report_module(f->region, 0x7f0000001000, 0x7f0000003000, 0x7f0000000000, sizeof sample_id, 0);
    report_rule(f->region, 0x7f0000002000, RULE_OUTERMOST);
    report_rule(f->region, 0x7f0000001008, RULE_RBP16);
    report_rule(f->region, 0x7f0000001000, RULE_RSP16);
    report_rule(f->region, 0x7f0000001000, RULE_RSP16); /* a rule two threads looked up */
    report_rule(f->region, 0x7f0000005000, RULE_RSP16); /* in no module: not kept */
    report_rule(f->region, 0x7f0000001010, 0x25);       /* not a rule: not kept */
    struct shm_header *header = f->region;
    header->unwind_rules_reused = 7;
    header->unwind_rules_looked_up += 2; /* two more the log had no room for */
    kept_rules_collect(kept, f->region);
    save(kept, f);
    struct kept_rules_stats stats;
    kept_rules_stats(kept, &stats);
    assert_int_equal(stats.looked_up, 8);
    assert_int_equal(stats.kept, 4);
    assert_int_equal(stats.reused, 7);
    assert_int_equal(stats.files_written, 1);
    struct unwind_rule_entry *entries;
    size_t count;
    assert_int_equal(read_kept(f, &entries, &count), 0);
    static const struct unwind_rule_entry expected[] = {
        {0x1000, RULE_RSP16}, {0x1008, RULE_RBP16}, {0x2000, RULE_OUTERMOST}};
    assert_int_equal(count, 3);
    assert_memory_equal(entries, expected, sizeof expected);
    free(entries);
    kept_rules_destroy(kept);

    /* A later recording, the module elsewhere: merged with the file. */
    teardown_region(&f->region);
    assert_int_equal(setup_region(&f->region), 0);
    kept = kept_rules_create();
    report_module(f->region, 0x5000, 0x9000, 0x4000, sizeof sample_id, 3);
    report_rule(f->region, 0x4000 + 0x1004, RULE_RSP16);
    report_rule(f->region, 0x4000 + 0x2ff0, RULE_UNSUPPORTED);
    kept_rules_collect(kept, f->region);
    save(kept, f);
    assert_int_equal(read_kept(f, &entries, &count), 0);
    static const struct unwind_rule_entry merged[] = {{0x1000, RULE_RSP16},
                                                      {0x1004, RULE_RSP16},
                                                      {0x1008, RULE_RBP16},
                                                      {0x2000, RULE_OUTERMOST},
                                                      {0x2ff0, RULE_UNSUPPORTED}};
    assert_int_equal(count, 5);
    assert_memory_equal(entries, merged, sizeof merged);
    free(entries);
    kept_rules_destroy(kept);
}

static void test_keeper_checks_the_region(void **state)
{
    struct fixture *f = *state;
    struct kept_rules *kept = kept_rules_create();
    struct shm_header *header = f->region;
    report_module(f->region, 0x1000, 0x2000, 0, 0, 0);                      /* no build-id */
    report_module(f->region, 0x3000, 0x4000, 0, SHM_UNWIND_MAX_BUILD_ID + 1, 0); /* too long a one */
    report_module(f->region, 0x6000, 0x5000, 0, sizeof sample_id, 0);       /* ends before it starts */
    report_rule(f->region, 0x1800, RULE_RSP16);
    report_rule(f->region, 0x3800, RULE_RSP16);
    report_rule(f->region, 0x5800, RULE_RSP16);
    /* counts past the tables: read up to their ends */
    header->unwind_modules_used = UINT32_MAX;
    header->unwind_rules_used = UINT32_MAX;
    kept_rules_collect(kept, f->region);
    save(kept, f);
    struct kept_rules_stats stats;
    kept_rules_stats(kept, &stats);
    assert_int_equal(stats.looked_up, 3);
    assert_int_equal(stats.kept, 0);
    assert_int_equal(stats.files_written, 0);
    struct unwind_rule_entry *entries;
    size_t count;
    assert_int_equal(read_kept(f, &entries, &count), -1);
    kept_rules_destroy(kept);
}

/* A module unloaded and another mapped at its place, both reported: a
 * rule in both goes to the first, as the unwinder takes it. */
static void test_keeper_takes_the_first_module_that_holds_a_rule(void **state)
{
    struct fixture *f = *state;
    struct kept_rules *kept = kept_rules_create();
    report_module(f->region, 0x1000, 0x3000, 0, sizeof sample_id, 0);
    struct shm_header *header = f->region;
    struct shm_unwind_module *other = &shm_unwind_modules(f->region)[header->unwind_modules_used++];
    *other = (struct shm_unwind_module){0x2000, 0x5000, 0x1000, SAMPLE_SIZE + 1, sizeof sample_id, 0, {0}};
    memcpy(other->build_id, sample_id, sizeof sample_id);
    report_rule(f->region, 0x4000, RULE_RSP16);     /* the second only */
    report_rule(f->region, 0x2800, RULE_OUTERMOST); /* both: the first */
    report_rule(f->region, 0x1800, RULE_RBP16);     /* the first only */
    kept_rules_collect(kept, f->region);
    save(kept, f);
    struct unwind_rule_entry *entries;
    size_t count;
    assert_int_equal(read_kept(f, &entries, &count), 0);
    static const struct unwind_rule_entry first[] = {{0x1800, RULE_RBP16}, {0x2800, RULE_OUTERMOST}};
    assert_int_equal(count, 2);
    assert_memory_equal(entries, first, sizeof first);
    free(entries);
    kept_rules_destroy(kept);
}

/* More modules than the keeper's first table holds, each with a rule:
 * adding a module may move the others' entries (python3 -c 'import json,
 * email.parser, decimal, collections' met 40 and crashed the tracer). */
static void test_keeper_holds_many_modules(void **state)
{
    struct fixture *f = *state;
    struct kept_rules *kept = kept_rules_create();
    struct shm_header *header = f->region;
    enum { MODULES = 40 };
    for (uint32_t i = 0; i < MODULES; i++) {
        struct shm_unwind_module *module = &shm_unwind_modules(f->region)[header->unwind_modules_used++];
        uint64_t start = 0x100000 * (i + 1);
        *module = (struct shm_unwind_module){start, start + 0x10000, start - 0x1000, SAMPLE_SIZE + i,
                                             sizeof sample_id, 0, {0}};
        memcpy(module->build_id, sample_id, sizeof sample_id);
    }
    for (uint32_t i = 0; i < MODULES; i++)
        report_rule(f->region, 0x100000 * (i + 1) + 0x800, RULE_RSP16);
    kept_rules_collect(kept, f->region);
    save(kept, f);
    struct kept_rules_stats stats;
    kept_rules_stats(kept, &stats);
    assert_int_equal(stats.kept, MODULES);
    assert_int_equal(stats.files_written, MODULES);
    size_t size;
    void *bytes = symbol_cache_read_rules(f->cache, sample_hex, SAMPLE_SIZE + MODULES - 1, &size);
    const struct unwind_rule_entry *entries;
    size_t count;
    assert_non_null(bytes);
    assert_int_equal(unwind_rules_file_check(bytes, size, sample_id, sizeof sample_id, SAMPLE_SIZE + MODULES - 1,
                                             &entries, &count),
                     0);
    assert_int_equal(count, 1);
    assert_int_equal(entries[0].offset, 0x1800);
    free(bytes);
    kept_rules_destroy(kept);
}

/* A damaged file is written whole again, with the new rules only. */
static void test_keeper_replaces_a_damaged_file(void **state)
{
    struct fixture *f = *state;
    size_t size;
    uint64_t *bytes = sample_file(sample_rules, SAMPLE_COUNT, &size);
    ((uint8_t *)bytes)[70] ^= 1;
    assert_int_equal(symbol_cache_write_rules(f->cache, sample_hex, SAMPLE_SIZE, bytes, size), 0);
    free(bytes);
    struct kept_rules *kept = kept_rules_create();
    report_module(f->region, 0x1000, 0x3000, 0, sizeof sample_id, 0);
    report_rule(f->region, 0x1500, RULE_RSP16);
    kept_rules_collect(kept, f->region);
    save(kept, f);
    struct unwind_rule_entry *entries;
    size_t count;
    assert_int_equal(read_kept(f, &entries, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(entries[0].offset, 0x1500);
    assert_int_equal(entries[0].rule, RULE_RSP16);
    free(entries);
    kept_rules_destroy(kept);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_file_refused_unless_whole_and_its_own),
        cmocka_unit_test_setup_teardown(test_keeper_adds_what_the_shim_looked_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeper_checks_the_region, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeper_takes_the_first_module_that_holds_a_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeper_holds_many_modules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeper_replaces_a_damaged_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

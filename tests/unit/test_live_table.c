/* The tracer's table of live blocks (tracer/live_table.h): every block
 * reads back with its own size, site, case and iteration however contexts
 * are shared, contexts do not pile up across iterations, and the table
 * fills to three quarters once it is large. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tracer/live_table.h"

static void assert_block(const struct live_block *got, const struct live_block *want)
{
    assert_int_equal(got->address, want->address);
    assert_int_equal(got->size, want->size);
    assert_int_equal(got->site, want->site);
    assert_int_equal(got->iteration, want->iteration);
    assert_int_equal(got->case_id, want->case_id);
}

static void one_site_shares_one_context(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    for (uint64_t i = 1; i <= 100; i++) {
        struct live_block block = {i * 16, i, 3, 7, 2};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
    }
    assert_int_equal(table.context_count, 1);
    struct live_block got;
    assert_int_equal(live_table_remove(&table, 50 * 16, &got), 1);
    assert_block(&got, &(struct live_block){50 * 16, 50, 3, 7, 2});
    live_table_free(&table);
}

/* A benchmark's thousand iterations, each allocating at two sites and
 * freeing the previous iteration's blocks: the contexts in use stay a few. */
static void contexts_are_recycled_across_iterations(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t caches[2] = {0, 0};
    for (uint32_t iteration = 1; iteration <= 1000; iteration++) {
        for (uint32_t site = 0; site < 2; site++) {
            struct live_block block = {((uint64_t)iteration * 2 + site) * 32, 100 + site, site, iteration, 1};
            assert_int_equal(live_table_insert(&table, &block, &caches[site]), 0);
        }
        if (iteration > 1) {
            for (uint32_t site = 0; site < 2; site++) {
                struct live_block got;
                uint64_t address = ((uint64_t)(iteration - 1) * 2 + site) * 32;
                assert_int_equal(live_table_remove(&table, address, &got), 1);
                assert_block(&got, &(struct live_block){address, 100 + site, site, iteration - 1, 1});
            }
        }
    }
    assert_int_equal(table.count, 2);
    assert_true(table.context_count <= 4);
    live_table_free(&table);
}

static void sizes_of_4_gib_and_more_are_exact(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    const uint64_t sizes[] = {UINT32_MAX - 1, UINT32_MAX, (uint64_t)UINT32_MAX + 1, 5ull << 40};
    for (size_t i = 0; i < 4; i++) {
        struct live_block block = {0x10000 + i * 16, sizes[i], 1, 0, 0};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
    }
    for (size_t i = 0; i < 4; i++) {
        struct live_block got;
        assert_int_equal(live_table_remove(&table, 0x10000 + i * 16, &got), 1);
        assert_int_equal(got.size, sizes[i]);
        assert_int_equal(got.site, 1);
    }
    assert_int_equal(table.count, 0);
    live_table_free(&table);
}

/* A driver that leaves a block behind at every iteration: one context for
 * the site, each block's iteration in its slot. */
static void iterations_share_their_site_context(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    for (uint32_t iteration = 1; iteration <= 1000; iteration++) {
        struct live_block block = {0x1000 + (uint64_t)iteration * 64, 48, 4, iteration, 1};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
    }
    assert_int_equal(table.context_count, 1);
    for (uint32_t iteration = 1000; iteration >= 1; iteration--) {
        struct live_block got;
        assert_int_equal(live_table_remove(&table, 0x1000 + (uint64_t)iteration * 64, &got), 1);
        assert_block(&got, &(struct live_block){0x1000 + (uint64_t)iteration * 64, 48, 4, iteration, 1});
    }
    live_table_free(&table);
}

/* A context covers LIVE_TABLE_ITERATION_SPAN iterations from its first;
 * an iteration outside them (later, or earlier) gets another. */
static void a_context_covers_a_span_of_iterations(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    const uint32_t span = LIVE_TABLE_ITERATION_SPAN;
    const uint32_t iterations[] = {7, span + 6, span + 7, 3 * span, 5, UINT32_MAX};
    const uint32_t contexts_after[] = {1, 1, 2, 3, 4, 5};
    for (size_t i = 0; i < sizeof iterations / sizeof *iterations; i++) {
        struct live_block block = {0x2000 + i * 16, 100, 2, iterations[i], 0};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
        assert_int_equal(table.context_count, contexts_after[i]);
    }
    for (size_t i = 0; i < sizeof iterations / sizeof *iterations; i++) {
        struct live_block got;
        assert_int_equal(live_table_remove(&table, 0x2000 + i * 16, &got), 1);
        assert_block(&got, &(struct live_block){0x2000 + i * 16, 100, 2, iterations[i], 0});
    }
    live_table_free(&table);
}

/* Sizes around what the slot holds (4 MiB - 1 and more go in a context). */
static void sizes_around_the_slot_limit_are_exact(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    const uint64_t sizes[] = {0, (1u << 22) - 2, (1u << 22) - 1, 1u << 22, (1u << 22) + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        struct live_block block = {0x3000 + i * 16, sizes[i], 6, 9, 1};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
    }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        struct live_block got;
        assert_int_equal(live_table_remove(&table, 0x3000 + i * 16, &got), 1);
        assert_block(&got, &(struct live_block){0x3000 + i * 16, sizes[i], 6, 9, 1});
    }
    live_table_free(&table);
}

/* Half full at most while small, three quarters from
 * LIVE_TABLE_DENSE_CAPACITY slots: a million blocks in 2^21 slots. */
static void a_large_table_fills_to_three_quarters(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    const size_t dense = LIVE_TABLE_DENSE_CAPACITY;
    size_t n = 0;
    for (; n < dense / 4; n++) {
        struct live_block block = {0x10000000 + n * 32, 24, 1, 0, 0};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
    }
    assert_int_equal(table.capacity, dense / 2);
    for (; n < dense / 4 * 3; n++) {
        struct live_block block = {0x10000000 + n * 32, 24, 1, 0, 0};
        assert_int_equal(live_table_insert(&table, &block, &cache), 0);
    }
    assert_int_equal(table.capacity, dense);
    struct live_block one_more = {0x10000000 + n * 32, 24, 1, 0, 0};
    assert_int_equal(live_table_insert(&table, &one_more, &cache), 0);
    assert_int_equal(table.capacity, 2 * dense);
    for (size_t i = 0; i <= n; i += 4099) {
        struct live_block got;
        assert_int_equal(live_table_remove(&table, 0x10000000 + i * 32, &got), 1);
        assert_int_equal(got.size, 24);
    }
    live_table_free(&table);
}

/* Two live blocks at one address (a free committed late, see the header):
 * the oldest goes first. */
static void duplicates_leave_oldest_first(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t caches[2] = {0, 0};
    struct live_block first = {0x5000, 10, 0, 1, 0}, second = {0x5000, 20, 1, 2, 0};
    assert_int_equal(live_table_insert(&table, &first, &caches[0]), 0);
    assert_int_equal(live_table_insert(&table, &second, &caches[1]), 0);
    struct live_block got;
    assert_int_equal(live_table_remove(&table, 0x5000, &got), 1);
    assert_block(&got, &first);
    assert_int_equal(live_table_remove(&table, 0x5000, &got), 1);
    assert_block(&got, &second);
    assert_int_equal(live_table_remove(&table, 0x5000, &got), 0);
    live_table_free(&table);
}

/* Random inserts and removes through several growths, against a plain
 * array; then the walk and a copy see exactly the blocks left. */
#define MODEL_BLOCKS 20000

static void matches_a_plain_model(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    struct live_block *model = calloc(MODEL_BLOCKS, sizeof *model);
    assert_non_null(model);
    uint32_t caches[8] = {0};
    uint64_t rng = 42;
    uint32_t iteration = 0, case_id = 0;
    for (int step = 0; step < 200000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(rng >> 33);
        if (r % 1000 == 0)
            iteration++;
        if (r % 7919 == 0)
            case_id++;
        size_t i = (r >> 4) % MODEL_BLOCKS;
        if (model[i].address) {
            struct live_block got;
            assert_int_equal(live_table_remove(&table, model[i].address, &got), 1);
            assert_block(&got, &model[i]);
            memset(&model[i], 0, sizeof model[i]);
        } else {
            uint32_t site = r % 8;
            uint64_t size = r % 97 == 0 ? (uint64_t)r << 8 : r % 4096;
            model[i] = (struct live_block){(i + 1) * 64, size, site, iteration, case_id};
            assert_int_equal(live_table_insert(&table, &model[i], &caches[site]), 0);
        }
    }
    struct live_table copy;
    assert_int_equal(live_table_copy(&copy, &table), 0);
    live_table_free(&table);
    size_t position = 0, walked = 0;
    struct live_block got;
    while (live_table_next(&copy, &position, &got)) {
        size_t i = got.address / 64 - 1;
        assert_true(i < MODEL_BLOCKS);
        assert_block(&got, &model[i]);
        walked++;
    }
    size_t live = 0;
    for (size_t i = 0; i < MODEL_BLOCKS; i++)
        live += model[i].address != 0;
    assert_int_equal(walked, live);
    assert_int_equal(copy.count, live);
    /* never more contexts at once than blocks, plus one cached per site */
    assert_true(copy.context_count <= MODEL_BLOCKS + 8);
    live_table_free(&copy);
    free(model);
}

/* The table's hash, as live_table.c computes a block's first slot. */
static size_t home_of(uint64_t address, size_t capacity)
{
    return (size_t)(((address >> 4) * 0x9e3779b97f4a7c15ull) >> 20) & (capacity - 1);
}

/* An address whose first slot in a table of capacity is at least low. */
static uint64_t address_homed_at_or_above(size_t low, size_t capacity, uint64_t *search)
{
    for (;;) {
        uint64_t address = (*search += 16);
        if (home_of(address, capacity) >= low)
            return address;
    }
}

/* Doubling in place: chains that wrap around the old end and runs that
 * reach the new end (blocks homed in the last slots, before and after),
 * duplicates among them, through growths from 1,024 slots on; every
 * block is then found, the older duplicate first, and the slots stayed
 * where they were. */
static void growth_in_place_keeps_every_chain(void **state)
{
    (void)state;
    struct live_table table;
    live_table_init(&table);
    uint32_t cache = 0;
    enum { BLOCKS = 3000, CROWD = 80 };
    struct live_block *blocks = calloc(BLOCKS + CROWD, sizeof *blocks);
    assert_non_null(blocks);
    size_t n = 0;
    uint64_t search = 0x7f0000000000ull, rng = 7;
    /* crowded at the end of 2,048 and of 4,096 slots: the last 6 of each */
    for (; n < CROWD; n++) {
        size_t capacity = n % 2 ? 2048 : 4096;
        uint64_t address = n % 10 == 9 ? blocks[n - 1].address : address_homed_at_or_above(capacity - 6, capacity, &search);
        blocks[n] = (struct live_block){address, 1000 + n, 0, 0, 0};
        assert_int_equal(live_table_insert(&table, &blocks[n], &cache), 0);
    }
    const struct live_slot *slots = table.slots;
    for (; n < BLOCKS + CROWD; n++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        blocks[n] = (struct live_block){(rng >> 16) << 4, 1000 + n, 0, 0, 0};
        assert_int_equal(live_table_insert(&table, &blocks[n], &cache), 0);
    }
    assert_int_equal(table.capacity, 8192);
    assert_ptr_equal(table.slots, slots); /* grown in place, three times */
    for (size_t i = 0; i < BLOCKS + CROWD; i++) {
        struct live_block got;
        assert_int_equal(live_table_remove(&table, blocks[i].address, &got), 1);
        assert_int_equal(got.size, blocks[i].size); /* a duplicate's older copy first */
    }
    assert_int_equal(table.count, 0);
    live_table_free(&table);
    free(blocks);
}

/* Random tables through growths in place: a third of the blocks crowded
 * in the last slots of some capacity, duplicates, removals; each removal
 * takes the oldest copy of its address, and every block left is found.
 * Halfway the table is copied (a forked process's) and the copy grows on,
 * in a reservation of its own. Taking the old slots from the start of the
 * table instead of after an empty one fails it. */
static void random_tables_grow_in_place(void **state)
{
    (void)state;
    enum { BLOCKS = 4000 };
    struct live_block *blocks = calloc(BLOCKS, sizeof *blocks);
    int *live = calloc(BLOCKS, sizeof *live);
    assert_non_null(blocks);
    assert_non_null(live);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct live_table table;
        live_table_init(&table);
        uint32_t cache = 0;
        uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1, search = 0x10000;
        memset(live, 0, BLOCKS * sizeof *live);
        for (size_t i = 0; i < BLOCKS; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(rng >> 40);
            uint64_t address = (rng >> 16) << 4;
            if (r % 3 == 0)
                address = address_homed_at_or_above(((size_t)1024 << (r / 3 % 3)) - (r / 12 % 16 + 1),
                                                    (size_t)1024 << (r / 3 % 3), &search);
            else if (r % 11 == 1 && i > 0)
                address = blocks[i - 1].address;
            blocks[i] = (struct live_block){address, i + 1, 0, 0, 0};
            assert_int_equal(live_table_insert(&table, &blocks[i], &cache), 0);
            live[i] = 1;
            if (i == BLOCKS / 2) {
                struct live_table copy;
                assert_int_equal(live_table_copy(&copy, &table), 0);
                live_table_free(&table);
                table = copy;
            }
            if (r % 5 != 0)
                continue;
            size_t picked = (size_t)((rng >> 20) % (i + 1)), oldest = 0;
            while (!(live[oldest] && blocks[oldest].address == blocks[picked].address) && oldest < i)
                oldest++;
            if (!live[oldest] || blocks[oldest].address != blocks[picked].address)
                continue;
            struct live_block got;
            assert_int_equal(live_table_remove(&table, blocks[oldest].address, &got), 1);
            assert_int_equal(got.size, blocks[oldest].size);
            live[oldest] = 0;
        }
        for (size_t i = 0; i < BLOCKS; i++) {
            struct live_block got;
            if (!live[i])
                continue;
            assert_int_equal(live_table_remove(&table, blocks[i].address, &got), 1);
            assert_int_equal(got.size, blocks[i].size);
        }
        assert_int_equal(table.count, 0);
        live_table_free(&table);
    }
    free(blocks);
    free(live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_site_shares_one_context),
        cmocka_unit_test(contexts_are_recycled_across_iterations),
        cmocka_unit_test(sizes_of_4_gib_and_more_are_exact),
        cmocka_unit_test(iterations_share_their_site_context),
        cmocka_unit_test(a_context_covers_a_span_of_iterations),
        cmocka_unit_test(sizes_around_the_slot_limit_are_exact),
        cmocka_unit_test(a_large_table_fills_to_three_quarters),
        cmocka_unit_test(duplicates_leave_oldest_first),
        cmocka_unit_test(matches_a_plain_model),
        cmocka_unit_test(growth_in_place_keeps_every_chain),
        cmocka_unit_test(random_tables_grow_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

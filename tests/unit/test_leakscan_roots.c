/* test_leakscan_roots.c - leakscan_mapping_roots on synthetic memory: which
 * parts of a writable mapping are roots once allocators' memory is cut out
 * (the shim's pymalloc arenas, glibc's arena heaps and mmapped chunks), and
 * what that does to the categories. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../leakscan/leakscan_internal.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
/* A mapping that starts 64 KiB below a 64 MiB-aligned address (where a
 * glibc heap may begin), 4 MiB long. */
#define ALIGNED (0x7f0000000000ull + 64 * MIB)
#define MAP_START (ALIGNED - 64 * KIB)
#define MAP_SIZE (4 * MIB)

struct image {
    uint8_t *bytes; /* [MAP_START, MAP_START + MAP_SIZE) */
    struct leakscan_range roots[64];
    size_t root_count;
    struct leakscan_block blocks[16];
    size_t block_count;
};

static int image_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct image *m = context;
    for (size_t i = 0; i < length; i++) {
        uint64_t at = address + i;
        ((uint8_t *)buffer)[i] = at >= MAP_START && at < MAP_START + MAP_SIZE ? m->bytes[at - MAP_START] : 0;
    }
    return 0;
}

static void store(struct image *m, uint64_t address, uint64_t value)
{
    assert_true(address >= MAP_START && address + 8 <= MAP_START + MAP_SIZE);
    memcpy(&m->bytes[address - MAP_START], &value, 8);
}

static int setup(void **state)
{
    struct image *m = calloc(1, sizeof *m);
    m->bytes = calloc(1, MAP_SIZE);
    *state = m;
    return m && m->bytes ? 0 : -1;
}

static int teardown(void **state)
{
    struct image *m = *state;
    free(m->bytes);
    free(m);
    return 0;
}

static uint64_t add_block(struct image *m, uint64_t address, uint64_t size)
{
    m->blocks[m->block_count] = (struct leakscan_block){.address = address, .size = size,
                                                        .stack_id = (uint32_t)m->block_count, .category = 99};
    m->block_count++;
    return address;
}

/* The roots of [start, end) as leakscan_mapping_roots gives them, into
 * m->roots, for m->blocks (added in address order). */
static size_t mapping_roots(struct image *m, uint64_t start, uint64_t end, const struct leakscan_range *owned,
                            size_t owned_count)
{
    struct leakscan_memory memory = {.read = image_read, .context = m};
    struct leakscan_range *roots = NULL;
    size_t count = 0, capacity = 0;
    assert_int_equal(leakscan_mapping_roots(&memory, (struct leakscan_range){start, end}, m->blocks, m->block_count,
                                            owned, owned_count, &roots, &count, &capacity),
                     0);
    assert_true(count <= 64);
    if (count)
        memcpy(m->roots, roots, count * sizeof *roots);
    free(roots);
    m->root_count = count;
    return count;
}

static void expect_root(const struct image *m, size_t i, uint64_t start, uint64_t end)
{
    assert_true(i < m->root_count);
    if (m->roots[i].start != start || m->roots[i].end != end)
        fail_msg("root %zu: [0x%llx, 0x%llx), expected [0x%llx, 0x%llx)", i, (unsigned long long)m->roots[i].start,
                 (unsigned long long)m->roots[i].end, (unsigned long long)start, (unsigned long long)end);
}

static uint32_t category_of(const struct image *m, uint64_t address)
{
    for (size_t i = 0; i < m->block_count; i++)
        if (m->blocks[i].address == address)
            return m->blocks[i].category;
    fail_msg("no block at 0x%llx", (unsigned long long)address);
    return 99;
}

static void classify(struct image *m)
{
    struct leakscan_image image = {.memory = {.read = image_read, .context = m},
                                   .roots = m->roots, .root_count = m->root_count};
    char err[256];
    assert_int_equal(leakscan_classify(&image, m->blocks, m->block_count, NULL, NULL, err, sizeof err), 0);
}

static void test_mapping_without_blocks_is_a_root_whole(void **state)
{
    struct image *m = *state;
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + 64 * KIB, NULL, 0), 1);
    expect_root(m, 0, MAP_START, MAP_START + 64 * KIB);
}

/* Two pymalloc arenas with a frame stack merged between them: the frame
 * stack is the root, the arenas are not, free parts included. */
static void test_arenas_are_cut_out(void **state)
{
    struct image *m = *state;
    const struct leakscan_range arenas[] = {{MAP_START, MAP_START + MIB},
                                            {MAP_START + MIB + 16 * KIB, MAP_START + 2 * MIB + 16 * KIB}};
    add_block(m, MAP_START + 0x4030, 48);
    add_block(m, MAP_START + MIB + 16 * KIB + 0x4030, 48);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + 2 * MIB + 16 * KIB, arenas, 2), 1);
    expect_root(m, 0, MAP_START + MIB, MAP_START + MIB + 16 * KIB);
}

/* An arena that holds no block is still no root: its free blocks keep the
 * addresses of objects long gone. */
static void test_empty_arena_is_no_root(void **state)
{
    struct image *m = *state;
    const struct leakscan_range arena = {MAP_START, MAP_START + MIB};
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB, &arena, 1), 0);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB + 8 * KIB, &arena, 1), 1);
    expect_root(m, 0, MAP_START + MIB, MAP_START + MIB + 8 * KIB);
}

/* A block that no known allocator holds: its allocator's free memory would
 * count, so nothing in the mapping is a root. */
static void test_block_of_an_unknown_allocator_means_no_root(void **state)
{
    struct image *m = *state;
    const struct leakscan_range arena = {MAP_START, MAP_START + MIB};
    add_block(m, MAP_START + 0x4030, 48);
    add_block(m, MAP_START + MIB + 0x100, 64);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + 2 * MIB, &arena, 1), 0);
}

/* glibc's mmapped chunks, found by their headers: the chunk's pages are
 * the allocator's, the rest of the mapping is a root. */
static void test_glibc_mmapped_chunks_are_cut_out(void **state)
{
    struct image *m = *state;
    uint64_t chunk = MAP_START + 256 * KIB;
    store(m, chunk, 0);                         /* prev_size: no lead */
    store(m, chunk + 8, 128 * KIB | 2);         /* size | IS_MMAPPED */
    add_block(m, chunk + 16, 100000);
    uint64_t base = MAP_START + 512 * KIB, lead = 0x30; /* memalign: the chunk starts past a lead */
    store(m, base + lead, lead);
    store(m, base + lead + 8, (64 * KIB - lead) | 2);
    add_block(m, base + lead + 16, 4096);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB, NULL, 0), 3);
    expect_root(m, 0, MAP_START, chunk);
    expect_root(m, 1, chunk + 128 * KIB, base);
    expect_root(m, 2, base + 64 * KIB, MAP_START + MIB);
}

static void test_bad_chunk_headers_are_no_chunks(void **state)
{
    struct image *m = *state;
    uint64_t chunk = MAP_START + 256 * KIB;
    store(m, chunk, 0);
    store(m, chunk + 8, (128 * KIB + 16) | 2); /* not whole pages */
    add_block(m, chunk + 16, 5000);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB, NULL, 0), 0);
    store(m, chunk + 8, 128 * KIB | 2 | 4);    /* NON_MAIN_ARENA: a heap chunk */
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB, NULL, 0), 0);
    store(m, chunk + 8, 4 * KIB | 2);          /* the block does not fit */
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB, NULL, 0), 0);
    store(m, chunk + 8, 128 * KIB | 2);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + MIB, NULL, 0), 2);
}

/* A glibc arena heap the kernel merged with the mapping before it: from
 * its 64 MiB-aligned heap_info on, the allocator's. */
static void test_merged_glibc_heap_is_cut_out(void **state)
{
    struct image *m = *state;
    store(m, ALIGNED, ALIGNED + 32);      /* ar_ptr: its malloc_state follows */
    store(m, ALIGNED + 8, 0);             /* prev */
    store(m, ALIGNED + 16, 132 * KIB);    /* size */
    store(m, ALIGNED + 24, 132 * KIB);    /* mprotect_size */
    add_block(m, ALIGNED + 0x1010, 200);
    assert_int_equal(mapping_roots(m, MAP_START, ALIGNED + 132 * KIB, NULL, 0), 1);
    expect_root(m, 0, MAP_START, ALIGNED);
    store(m, ALIGNED + 16, 132 * KIB + 8); /* not whole pages: no heap_info, the block's allocator unknown */
    store(m, ALIGNED + 24, 256 * KIB);
    assert_int_equal(mapping_roots(m, MAP_START, ALIGNED + 132 * KIB, NULL, 0), 0);
}

/* What it changes: a live frame's reference (in the frame stack merged
 * with the arenas) reaches its object; a stale pointer in an arena's free
 * part does not hide a leak. */
static void test_frame_stack_reaches_and_free_memory_hides_nothing(void **state)
{
    struct image *m = *state;
    const struct leakscan_range arenas[] = {{MAP_START, MAP_START + MIB},
                                            {MAP_START + MIB + 16 * KIB, MAP_START + 2 * MIB + 16 * KIB}};
    uint64_t local = add_block(m, MAP_START + 0x4030, 48);
    uint64_t leaked = add_block(m, MAP_START + 0x4070, 48);
    uint64_t child = add_block(m, MAP_START + MIB + 16 * KIB + 0x4030, 48);
    store(m, MAP_START + MIB + 0x100, local);       /* a frame's local */
    store(m, local + 16, child);                     /* the local's item */
    store(m, MAP_START + 0x8000, leaked);            /* a free block in the arena: stale */
    store(m, MAP_START + MIB + 16 * KIB + 0x8000, leaked + 16);
    assert_int_equal(mapping_roots(m, MAP_START, MAP_START + 2 * MIB + 16 * KIB, arenas, 2), 1);
    classify(m);
    assert_int_equal(category_of(m, local), TRACE_LEAK_REACHABLE);
    assert_int_equal(category_of(m, child), TRACE_LEAK_REACHABLE);
    assert_int_equal(category_of(m, leaked), TRACE_LEAK_DEFINITE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mapping_without_blocks_is_a_root_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arenas_are_cut_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_arena_is_no_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_of_an_unknown_allocator_means_no_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glibc_mmapped_chunks_are_cut_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_chunk_headers_are_no_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merged_glibc_heap_is_cut_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frame_stack_reaches_and_free_memory_hides_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

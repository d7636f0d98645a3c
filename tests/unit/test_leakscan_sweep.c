/* test_leakscan_sweep.c - the leak classification at scale, against a
 * plain transcription of memcheck's mark stack: tens of thousands of
 * blocks in several regions of different alignments, chains that run up
 * and down through memory, cycles, interior pointers, a block larger
 * than a read window; given in shuffled order, read through read() or
 * read_ranges(). Also what the scan reads: never more than a window at a
 * time, and each block about once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../leakscan/leakscan.h"

#define MAX_BLOCKS 48000
#define ROOT_WORDS 64
#define WINDOW (1u << 20) /* classify.c's WINDOW_BYTES and CHUNK_BYTES */

/* An address space of a few separate regions (gaps of more than 1 MiB
 * between them start a region of the index) and a root area. */
struct area {
    uint64_t base;
    size_t size;
    uint8_t *bytes;
    /* unmapped, as the space between two mmapped chunks can be: from
     * hole_from on in every hole_stride bytes (no hole_stride: none) */
    uint64_t hole_stride, hole_from, holes_above;
};

struct image {
    struct area areas[48]; /* build: three heaps, the roots, the chains */
    size_t area_count;
    struct leakscan_block *blocks;
    size_t count;
    uint64_t rng;
    /* what the scan read */
    size_t largest_read, reads;
    uint64_t bytes_read, unmapped_read;
};

static int is_hole(const struct area *a, uint64_t offset)
{
    return a->hole_stride && offset >= a->holes_above && offset % a->hole_stride >= a->hole_from;
}

static uint64_t next_random(struct image *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return m->rng;
}

static uint8_t *host(struct image *m, uint64_t address)
{
    for (size_t a = 0; a < m->area_count; a++) {
        uint64_t offset = address - m->areas[a].base;
        if (address >= m->areas[a].base && offset < m->areas[a].size)
            return is_hole(&m->areas[a], offset) ? NULL : &m->areas[a].bytes[offset];
    }
    return NULL;
}

static void copy_out(struct image *m, uint64_t address, uint8_t *buffer, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        uint8_t *byte = host(m, address + i);
        buffer[i] = byte ? *byte : 0;
        m->unmapped_read += !byte;
    }
}

static void count_read(struct image *m, size_t length)
{
    m->reads++;
    m->bytes_read += length;
    if (length > m->largest_read)
        m->largest_read = length;
}

static int fake_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct image *m = context;
    count_read(m, length);
    copy_out(m, address, buffer, length);
    return 0;
}

static int fake_read_ranges(void *context, const struct leakscan_range *ranges, size_t count, void *buffer)
{
    struct image *m = context;
    uint8_t *out = buffer;
    size_t total = 0;
    for (size_t r = 0; r < count; r++) {
        size_t length = (size_t)(ranges[r].end - ranges[r].start);
        copy_out(m, ranges[r].start, out, length);
        out += length;
        total += length;
    }
    count_read(m, total);
    return 0;
}

static void store(struct image *m, uint64_t address, uint64_t value)
{
    uint8_t *at = host(m, address);
    assert_non_null(at);
    memcpy(at, &value, 8);
}

static uint64_t load(struct image *m, uint64_t address)
{
    uint64_t value = 0;
    copy_out(m, address, (uint8_t *)&value, 8);
    return value;
}

static struct area *add_area(struct image *m, uint64_t base, size_t size)
{
    struct area *a = &m->areas[m->area_count++];
    *a = (struct area){base, size, calloc(1, size), 0, 0, 0};
    assert_non_null(a->bytes);
    return a;
}

static uint64_t add_block(struct image *m, uint64_t address, uint64_t size)
{
    assert_true(m->count < MAX_BLOCKS);
    m->blocks[m->count] = (struct leakscan_block){.address = address, .size = size,
                                                  .stack_id = (uint32_t)m->count, .category = 99};
    m->count++;
    return address;
}

/* A random block's start, or now and then a word inside it. */
static uint64_t pointer_into(struct image *m, size_t first, size_t last)
{
    const struct leakscan_block *b = &m->blocks[first + next_random(m) % (last - first)];
    if (next_random(m) % 5 == 0 && b->size > 1)
        return b->address + next_random(m) % b->size;
    return b->address;
}

#define CHAIN 2000

/* Three regions: 16-byte aligned small blocks, 8-byte aligned ones, and
 * page-aligned large ones (one larger than a read window); random
 * pointers, two linked lists (one running down through memory, one up),
 * and roots reaching a few of each. A fourth region holds two chains that
 * nothing else points into, one running down through memory and one up:
 * each is one sweep's work when sweeps alternate, a sweep per link if not. */
static struct image *build(uint64_t seed)
{
    struct image *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->blocks = calloc(MAX_BLOCKS, sizeof *m->blocks);
    assert_non_null(m->blocks);
    m->rng = seed;
    add_area(m, 0x10000000, 6u << 20);
    add_area(m, 0x20000000, 2u << 20);
    struct area *paged = add_area(m, 0x30000000, 4u << 20);
    *paged = (struct area){paged->base, paged->size, paged->bytes, 8192, 4096, WINDOW + 4096}; /* between blocks */
    add_area(m, 0x40000000, ROOT_WORDS * 8);
    add_area(m, 0x50000000, 2 * CHAIN * 64);
    uint64_t at = m->areas[0].base + 16;
    while (at + 200 < m->areas[0].base + m->areas[0].size && m->count < 30000) {
        uint64_t size = next_random(m) % 4 == 0 ? 0 : next_random(m) % 160;
        add_block(m, at, size);
        at += (size + 16 + 15) / 16 * 16 + 16 * (next_random(m) % 3);
    }
    size_t small = m->count;
    for (at = m->areas[1].base + 8; at + 100 < m->areas[1].base + m->areas[1].size && m->count < 38000;) {
        uint64_t size = 8 + next_random(m) % 40;
        add_block(m, at, size);
        at += (size + 8 + 7) / 8 * 8;
    }
    size_t aligned8 = m->count;
    add_block(m, m->areas[2].base, WINDOW + 4096); /* scanned a chunk at a time */
    for (at = m->areas[2].base + WINDOW + 8192; at + 4096 <= m->areas[2].base + m->areas[2].size; at += 8192)
        add_block(m, at, 4096);
    size_t all = m->count;
    /* random words in every block, a third of them pointers */
    for (size_t i = 0; i < all; i++) {
        const struct leakscan_block *b = &m->blocks[i];
        for (uint64_t w = (b->address + 7) & ~7ull; w + 8 <= b->address + b->size; w += 8)
            store(m, w, next_random(m) % 3 == 0 ? pointer_into(m, 0, all) : next_random(m) & 0xffff);
    }
    /* a list that runs down through memory, one that runs up, and a cycle */
    for (size_t i = 1; i < 2000; i++)
        if (m->blocks[small - i].size >= 8 && m->blocks[small - i - 1].size >= 8)
            store(m, (m->blocks[small - i].address + 7) & ~7ull, m->blocks[small - i - 1].address);
    for (size_t i = small; i + 1 < small + 3000; i++)
        store(m, m->blocks[i].address, m->blocks[i + 1].address);
    store(m, m->blocks[aligned8 - 1].address, m->blocks[aligned8 - 500].address);
    /* the large block holds a pointer in its last word only */
    store(m, m->blocks[aligned8].address + WINDOW + 4096 - 8, m->blocks[aligned8 + 3].address);
    uint64_t chains = m->areas[4].base;
    for (size_t k = 0; k < 2 * CHAIN; k++)
        add_block(m, chains + 64 * k, 32);
    for (size_t k = 1; k < CHAIN; k++) {
        store(m, chains + 64 * k, chains + 64 * (k - 1));                     /* down */
        store(m, chains + 64 * (CHAIN + k - 1), chains + 64 * (CHAIN + k)); /* up */
    }
    uint64_t roots = m->areas[3].base;
    store(m, roots, m->blocks[small - 1].address);
    store(m, roots + 8, m->blocks[small].address);
    store(m, roots + 16, m->blocks[aligned8].address + 4096); /* interior */
    store(m, roots + 24, chains + 64 * (CHAIN - 1)); /* the top of the one running down */
    store(m, roots + 32, chains + 64 * CHAIN);       /* the bottom of the one running up */
    for (size_t r = 5; r < ROOT_WORDS; r++)
        store(m, roots + 8 * r, r % 4 ? pointer_into(m, 0, all) : 0);
    /* the caller's order is no order */
    for (size_t i = m->count - 1; i > 0; i--) {
        size_t j = next_random(m) % (i + 1);
        struct leakscan_block t = m->blocks[i];
        m->blocks[i] = m->blocks[j];
        m->blocks[j] = t;
    }
    return m;
}

static void free_image(struct image *m)
{
    for (size_t a = 0; a < m->area_count; a++)
        free(m->areas[a].bytes);
    free(m->blocks);
    free(m);
}

/* ---- memcheck's algorithm, transcribed plainly: a mark stack ------------- */

struct oracle {
    struct image *m;
    const struct leakscan_block **sorted;
    int *state; /* 0 unreached, 1 possible, 2 reachable, 3 indirect */
    size_t *stack, top;
};

static int by_address(const void *a, const void *b)
{
    const struct leakscan_block *x = *(const struct leakscan_block *const *)a;
    const struct leakscan_block *y = *(const struct leakscan_block *const *)b;
    return x->address < y->address ? -1 : x->address > y->address;
}

static long find(const struct oracle *o, uint64_t word)
{
    size_t low = 0, high = o->m->count;
    while (low < high) { /* first block starting after word */
        size_t mid = (low + high) / 2;
        if (o->sorted[mid]->address <= word)
            low = mid + 1;
        else
            high = mid;
    }
    if (low == 0)
        return -1;
    const struct leakscan_block *b = o->sorted[low - 1];
    return word == b->address || word - b->address < b->size ? (long)low - 1 : -1;
}

/* memcheck's default heuristics, from its documentation. */
static int heuristic(struct oracle *o, long k, uint64_t ptr)
{
    const struct leakscan_block *b = o->sorted[k];
    uint64_t data = b->address, size = b->size;
    uint64_t capacity = load(o->m, data + 8);
    if (ptr == data + 24 && size >= 24 && 24 + capacity + 1 == size && load(o->m, data) <= capacity)
        return 1;
    uint64_t first = load(o->m, data);
    return ptr == data + 8 && first > 0 && (size - 8 == first || (size - 8) % first == 0);
}

static void push_from_roots(struct oracle *o, uint64_t word, int prior_definite)
{
    long k = find(o, word);
    if (k < 0 || o->state[k] == 2)
        return;
    int via_start = word == o->sorted[k]->address || heuristic(o, k, word);
    if (via_start && prior_definite) {
        o->state[k] = 2;
        o->stack[o->top++] = (size_t)k;
    } else if (o->state[k] == 0) {
        o->state[k] = 1;
        o->stack[o->top++] = (size_t)k;
    }
}

static void oracle_classify(struct image *m, uint32_t *expected)
{
    struct oracle o = {m, calloc(m->count, sizeof *o.sorted), calloc(m->count, sizeof *o.state),
                       calloc(4 * (size_t)MAX_BLOCKS, sizeof *o.stack), 0};
    assert_true(o.sorted && o.state && o.stack);
    for (size_t i = 0; i < m->count; i++)
        o.sorted[i] = &m->blocks[i];
    qsort(o.sorted, m->count, sizeof *o.sorted, by_address);
    for (size_t r = 0; r < ROOT_WORDS; r++) {
        push_from_roots(&o, load(m, m->areas[3].base + 8 * r), 1);
        while (o.top) {
            size_t k = o.stack[--o.top];
            const struct leakscan_block *b = o.sorted[k];
            int prior_definite = o.state[k] != 1;
            for (uint64_t w = (b->address + 7) & ~7ull; w + 8 <= b->address + b->size; w += 8)
                push_from_roots(&o, load(m, w), prior_definite);
        }
    }
    for (size_t leader = 0; leader < m->count; leader++) {
        if (o.state[leader] != 0)
            continue;
        o.stack[o.top++] = leader;
        while (o.top) {
            const struct leakscan_block *b = o.sorted[o.stack[--o.top]];
            for (uint64_t w = (b->address + 7) & ~7ull; w + 8 <= b->address + b->size; w += 8) {
                long k = find(&o, load(m, w));
                if (k >= 0 && o.state[k] == 0 && (size_t)k != leader) {
                    o.state[k] = 3;
                    o.stack[o.top++] = (size_t)k;
                }
            }
        }
    }
    static const uint32_t category[4] = {TRACE_LEAK_DEFINITE, TRACE_LEAK_POSSIBLE, TRACE_LEAK_REACHABLE,
                                         TRACE_LEAK_INDIRECT};
    for (size_t k = 0; k < m->count; k++)
        expected[o.sorted[k]->stack_id] = category[o.state[k]];
    free(o.sorted);
    free(o.state);
    free(o.stack);
}

static void classify_with_stats(struct image *m, int batched, struct leakscan_stats *stats)
{
    struct leakscan_range root = {m->areas[3].base, m->areas[3].base + ROOT_WORDS * 8};
    struct leakscan_image image = {
        .memory = {.read = fake_read, .read_ranges = batched ? fake_read_ranges : NULL, .context = m},
        .roots = &root,
        .root_count = 1,
    };
    char err[256] = "";
    if (leakscan_classify(&image, m->blocks, m->count, NULL, stats, err, sizeof err) != 0)
        fail_msg("leakscan_classify: %s", err);
}

static void classify(struct image *m, int batched)
{
    struct leakscan_stats stats;
    classify_with_stats(m, batched, &stats);
}

static void check_against_oracle(int batched, uint64_t seed)
{
    struct image *m = build(seed);
    uint32_t *expected = calloc(m->count, sizeof *expected);
    assert_non_null(expected);
    oracle_classify(m, expected);
    classify(m, batched);
    size_t counts[TRACE_LEAK_CATEGORIES] = {0};
    for (size_t i = 0; i < m->count; i++) {
        if (i > 0)
            assert_true(m->blocks[i - 1].address < m->blocks[i].address); /* sorted in place */
        if (m->blocks[i].category != expected[m->blocks[i].stack_id])
            fail_msg("block at 0x%llx (%llu bytes): %s, memcheck's rule gives %s",
                     (unsigned long long)m->blocks[i].address, (unsigned long long)m->blocks[i].size,
                     leakscan_category_name(m->blocks[i].category),
                     leakscan_category_name(expected[m->blocks[i].stack_id]));
        counts[m->blocks[i].category]++;
    }
    for (int c = 0; c < TRACE_LEAK_CATEGORIES; c++) /* a test of every category */
        assert_true(counts[c] > 0);
    free(expected);
    free_image(m);
}

static void matches_memcheck_reading_block_by_block(void **state)
{
    (void)state;
    check_against_oracle(0, 88172645463325252ull);
}

static void matches_memcheck_reading_batches(void **state)
{
    (void)state;
    check_against_oracle(1, 88172645463325252ull);
    check_against_oracle(1, 0x9e3779b97f4a7c15ull);
}

/* Blocks are read as the scan reaches them: no read larger than a window,
 * neighbours read together (a few hundred reads for 40,000 blocks, the
 * chains included), no more bytes than the scan went through (blocks
 * rescanned when they turn reachable count again) plus the small gaps
 * read with them, and never a gap wider than that (it may be unmapped). */
static void reads_are_bounded(void **state)
{
    (void)state;
    struct image *m = build(7);
    struct leakscan_stats stats;
    classify_with_stats(m, 1, &stats);
    assert_true(m->largest_read <= WINDOW);
    assert_true(m->reads < m->count / 50);
    assert_true(m->bytes_read < 2 * (stats.block_bytes + stats.root_bytes));
    assert_int_equal(m->unmapped_read, 0);
    /* Sweeps alternate, so the chain running down is one sweep's work, as
     * is the one running up: a sweep a link would be CHAIN of them. */
    assert_true(stats.sweeps < 40);
    free_image(m);
}

/* A chain down through pairs of neighbouring blocks with unmapped holes
 * between the pairs: what is read around a small batch grows as it
 * serves, and never reaches across a hole. */
static void reads_around_stop_at_wide_gaps(void **state)
{
    (void)state;
    enum { PAIRS = 200, STRIDE = 4096 };
    struct image *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->blocks = calloc(MAX_BLOCKS, sizeof *m->blocks);
    assert_non_null(m->blocks);
    struct area *pairs = add_area(m, 0x60000000, PAIRS * STRIDE);
    pairs->hole_stride = STRIDE;
    pairs->hole_from = 160;
    add_area(m, 0x40000000, ROOT_WORDS * 8);
    for (size_t k = 0; k < PAIRS; k++) {
        uint64_t low = pairs->base + STRIDE * k;
        add_block(m, low, 64);
        add_block(m, low + 80, 64);
        store(m, low + 80, low);
        if (k > 0)
            store(m, low, low - STRIDE + 80);
    }
    store(m, m->areas[1].base, pairs->base + STRIDE * (PAIRS - 1) + 80);
    struct leakscan_range root = {m->areas[1].base, m->areas[1].base + ROOT_WORDS * 8};
    struct leakscan_image image = {.memory = {.read = fake_read, .read_ranges = fake_read_ranges, .context = m},
                                   .roots = &root, .root_count = 1};
    char err[256] = "";
    struct leakscan_totals totals;
    assert_int_equal(leakscan_classify(&image, m->blocks, m->count, &totals, NULL, err, sizeof err), 0);
    assert_int_equal(totals.blocks[TRACE_LEAK_REACHABLE], 2 * PAIRS);
    assert_int_equal(m->unmapped_read, 0);
    assert_true(m->reads <= PAIRS + 1); /* the roots, then a read a pair: its first block comes with the second */
    free_image(m);
}

/* Chains 2 MiB apart, half running down through memory and half up,
 * reached at their ends: a batch stays within a window of addresses, so
 * the sweep that takes a link of one chain does not pass over the next
 * link on its way to the others (which would take a sweep a link). */
static void chains_far_apart_take_few_sweeps(void **state)
{
    (void)state;
    enum { CHAINS = 40, LINKS = 100, STRIDE = 128 };
    struct image *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->blocks = calloc(MAX_BLOCKS, sizeof *m->blocks);
    assert_non_null(m->blocks);
    add_area(m, 0x40000000, ROOT_WORDS * 8);
    for (size_t a = 1; a <= CHAINS; a++) {
        struct area *chain = add_area(m, 0x70000000 + (a - 1) * (2u << 20), LINKS * STRIDE);
        int down = a % 2;
        for (size_t k = 0; k < LINKS; k++) {
            add_block(m, chain->base + STRIDE * k, 64);
            if (down && k > 0)
                store(m, chain->base + STRIDE * k, chain->base + STRIDE * (k - 1));
            if (!down && k + 1 < LINKS)
                store(m, chain->base + STRIDE * k, chain->base + STRIDE * (k + 1));
        }
        store(m, m->areas[0].base + 8 * a, chain->base + (down ? STRIDE * (LINKS - 1) : 0));
    }
    struct leakscan_range root = {m->areas[0].base, m->areas[0].base + ROOT_WORDS * 8};
    struct leakscan_image image = {.memory = {.read = fake_read, .read_ranges = fake_read_ranges, .context = m},
                                   .roots = &root, .root_count = 1};
    char err[256] = "";
    struct leakscan_totals totals;
    struct leakscan_stats stats;
    assert_int_equal(leakscan_classify(&image, m->blocks, m->count, &totals, &stats, err, sizeof err), 0);
    assert_int_equal(totals.blocks[TRACE_LEAK_REACHABLE], CHAINS * LINKS);
    assert_true(stats.sweeps < 10);
    free_image(m);
}

/* Two zero-size blocks at one address would share a start: refused. */
static void duplicate_starts_are_refused(void **state)
{
    (void)state;
    struct image *m = build(11);
    m->blocks[0].size = 0;
    m->blocks[1] = m->blocks[0];
    struct leakscan_image image = {.memory = {.read = fake_read, .context = m}};
    char err[256] = "";
    assert_int_equal(leakscan_classify(&image, m->blocks, m->count, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "overlap"));
    free_image(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_memcheck_reading_block_by_block),
        cmocka_unit_test(matches_memcheck_reading_batches),
        cmocka_unit_test(reads_are_bounded),
        cmocka_unit_test(reads_around_stop_at_wide_gaps),
        cmocka_unit_test(chains_far_apart_take_few_sweeps),
        cmocka_unit_test(duplicate_starts_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_leakscan_untouched.c - a large block whose pages were never touched
 * costs the leak scan its page-table entries, not reads (issue 19): the
 * classification skips the chunks the memory says hold no data, and the
 * process reader reads only the pages that hold data, so it never maps
 * the zero page into the target (which a later scan would take for data). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../leakscan/leakscan.h"

#define MIB (1ull << 20)
#define BIG_BASE 0x10000000ull
#define BIG_SIZE (8 * MIB)
#define SMALL_BASE 0x40000000ull
#define ROOT_BASE 0x50000000ull

/* Block A at BIG_BASE, 8 MiB, whose only touched MiB is the fourth; it
 * holds the one pointer to block B. Block C is pointed to from A's sixth
 * MiB, which holds no data: the fake memory would return the pointer if
 * it were read, so reading it shows as C being reached. */
struct fake {
    uint64_t read_in_untouched; /* bytes read from chunks said to hold no data */
    uint64_t pointer_to_b, pointer_to_c;
};

static int touched(uint64_t address)
{
    return address >= BIG_BASE + 3 * MIB && address < BIG_BASE + 4 * MIB;
}

static int fake_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct fake *f = context;
    uint64_t *words = buffer;
    memset(buffer, 0, length);
    for (size_t k = 0; k < length / 8; k++) {
        uint64_t at = address + 8 * k;
        if (at >= BIG_BASE && at < BIG_BASE + BIG_SIZE && !touched(at))
            f->read_in_untouched += 8;
        if (at == BIG_BASE + 3 * MIB + 64)
            words[k] = f->pointer_to_b;
        if (at == BIG_BASE + 5 * MIB + 64)
            words[k] = f->pointer_to_c;
        if (at == ROOT_BASE)
            words[k] = BIG_BASE;
    }
    return 0;
}

static int fake_holds_data(void *context, uint64_t address, size_t length)
{
    (void)context;
    if (address + length <= BIG_BASE || address >= BIG_BASE + BIG_SIZE)
        return 1;
    for (uint64_t at = address & ~7ull; at < address + length; at += 8)
        if (touched(at))
            return 1;
    return 0;
}

static void classify_skips_chunks_that_hold_no_data(void **state)
{
    (void)state;
    struct fake f = {.pointer_to_b = SMALL_BASE, .pointer_to_c = SMALL_BASE + 4096};
    struct leakscan_block blocks[] = {
        {.address = BIG_BASE, .size = BIG_SIZE},
        {.address = SMALL_BASE, .size = 64},
        {.address = SMALL_BASE + 4096, .size = 64},
    };
    struct leakscan_range root = {ROOT_BASE, ROOT_BASE + 4096};
    struct leakscan_image image = {
        .memory = {.read = fake_read, .holds_data = fake_holds_data, .context = &f},
        .roots = &root,
        .root_count = 1,
    };
    struct leakscan_stats stats;
    char err[256];
    assert_int_equal(leakscan_classify(&image, blocks, 3, NULL, &stats, err, sizeof err), 0);
    assert_int_equal(blocks[0].category, TRACE_LEAK_REACHABLE);
    assert_int_equal(blocks[1].category, TRACE_LEAK_REACHABLE);
    /* A's sixth MiB holds no data: its stale pointer to C is never read. */
    assert_int_equal(blocks[2].category, TRACE_LEAK_DEFINITE);
    /* Only the touched MiB of A and its neighbours' shared edges are read:
     * the block starts on a chunk boundary, so nothing else. */
    assert_int_equal(f.read_in_untouched, 0);
    assert_int_equal(stats.untouched_bytes, BIG_SIZE - MIB);
}

/* The process reader on this process: a 64 MiB mapping with one page
 * written reads back whole (that page's value, zeros elsewhere) and
 * leaves every other page untouched, so asking again still says so. */
static void target_reads_only_pages_that_hold_data(void **state)
{
    (void)state;
    size_t size = 64 * MIB, page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *mapping = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(mapping != MAP_FAILED);
    madvise(mapping, size, MADV_NOHUGEPAGE); /* one touched page stays one page */
    uint64_t written = 10 * MIB + 3 * page;
    *(uint64_t *)(mapping + written + 8) = 0x1122334455667788ull;

    struct leakscan_target target;
    leakscan_target_open(&target, getpid());
    uint64_t base = (uint64_t)(uintptr_t)mapping;
    assert_int_equal(leakscan_target_holds_data(&target, base, 4 * MIB), 0);
    assert_int_equal(leakscan_target_holds_data(&target, base + written, 16), 1);

    uint8_t *copy = malloc(size);
    assert_non_null(copy);
    memset(copy, 0xaa, size);
    assert_int_equal(leakscan_target_read(&target, base, copy, size), 0);

    /* Reading did not fault the untouched pages in (checked before this
     * test looks at the mapping itself, which would). */
    assert_int_equal(leakscan_target_holds_data(&target, base, written), 0);
    assert_int_equal(leakscan_target_holds_data(&target, base + written + page, size - written - page), 0);
    assert_int_equal(*(uint64_t *)(copy + written + 8), 0x1122334455667788ull);
    size_t nonzero = 0;
    for (size_t i = 0; i < size; i++)
        nonzero += copy[i] != 0;
    assert_int_equal(nonzero, 8);
    leakscan_target_close(&target);
    free(copy);
    munmap(mapping, size);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(classify_skips_chunks_that_hold_no_data),
        cmocka_unit_test(target_reads_only_pages_that_hold_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

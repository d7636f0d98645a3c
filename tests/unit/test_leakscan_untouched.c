/* test_leakscan_untouched.c - a large block whose pages were never touched
 * costs the leak scan its page-table entries, not reads (issue 19): the
 * classification skips a block's chunks that the memory says hold no data
 * (never a root's: a shared page another process wrote holds data without
 * being in this process's page table), and the process reader tells the
 * pages that hold data from the others through /proc/PID/pagemap. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/huge_pages.h"
#include "../../leakscan/leakscan_internal.h"

#define MIB (1ull << 20)
#define BIG_BASE 0x10000000ull
#define BIG_SIZE (8 * MIB)
#define SMALL_BASE 0x40000000ull
#define ROOT_BASE 0x50000000ull

#define PAGE 4096u
#define BIG_PAGES (BIG_SIZE / PAGE + 1)

/* Block A at BIG_BASE + 16 (its chunks not aligned with it), 8 MiB, whose
 * only touched MiB is the fourth of its mapping; it holds the one pointer
 * to block B. Block C is pointed to from A's sixth MiB, which holds no
 * data: the fake memory would return the pointer if it were read, so
 * reading it shows as C being reached. As the kernel does, a page read
 * becomes present (the zero page is mapped in): a chunk that shared a page
 * with one read before it would then look touched. */
struct fake {
    uint64_t read_in_untouched; /* bytes read from pages that held no data */
    uint64_t pointer_to_b, pointer_to_c;
    unsigned char present[BIG_PAGES];
};

static unsigned char *page_of(struct fake *f, uint64_t address)
{
    return address >= BIG_BASE && address < BIG_BASE + BIG_PAGES * PAGE ? &f->present[(address - BIG_BASE) / PAGE]
                                                                       : NULL;
}

static int fake_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct fake *f = context;
    uint64_t *words = buffer;
    memset(buffer, 0, length);
    for (size_t k = 0; k < length / 8; k++) {
        uint64_t at = address + 8 * k;
        unsigned char *page = page_of(f, at);
        if (page && !*page)
            f->read_in_untouched += 8;
        if (at == BIG_BASE + 3 * MIB + 64)
            words[k] = f->pointer_to_b;
        if (at == BIG_BASE + 5 * MIB + 64)
            words[k] = f->pointer_to_c;
        if (at == ROOT_BASE)
            words[k] = BIG_BASE + 16;
    }
    for (uint64_t at = address; at < address + length; at += 8)
        if (page_of(f, at))
            *page_of(f, at) = 1;
    return 0;
}

static int fake_holds_data(void *context, uint64_t address, size_t length)
{
    struct fake *f = context;
    if (address >= ROOT_BASE && address < ROOT_BASE + 4096)
        return 0; /* said of the roots too: they must be read anyway */
    if (address + length <= BIG_BASE || address >= BIG_BASE + BIG_PAGES * PAGE)
        return 1;
    for (uint64_t at = address & ~7ull; at < address + length; at += 8)
        if (page_of(f, at) && *page_of(f, at))
            return 1;
    return 0;
}

static void classify_skips_chunks_that_hold_no_data(void **state)
{
    (void)state;
    static struct fake f;
    f = (struct fake){.pointer_to_b = SMALL_BASE, .pointer_to_c = SMALL_BASE + 4096};
    memset(f.present + 3 * MIB / PAGE, 1, MIB / PAGE); /* the fourth MiB was written */
    struct leakscan_block blocks[] = {
        {.address = BIG_BASE + 16, .size = BIG_SIZE - 16},
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
    assert_int_equal(blocks[0].category, TRACE_LEAK_REACHABLE); /* the root was read */
    assert_int_equal(blocks[1].category, TRACE_LEAK_REACHABLE);
    /* A's sixth MiB holds no data: its stale pointer to C is never read. */
    assert_int_equal(blocks[2].category, TRACE_LEAK_DEFINITE);
    /* Only the touched MiB of A is read, though A starts 16 bytes past a
     * chunk boundary: the chunks end on boundaries, so none shares a page
     * with the one read. */
    assert_int_equal(f.read_in_untouched, 0);
    assert_int_equal(stats.untouched_bytes, BIG_SIZE - 16 - MIB);
}

/* The copy a check takes before the process runs on (memory_copy.c): the
 * root whole, the pages of B and C as one range, of A only the MiB that
 * holds data, nothing read from a page that held none; classified from
 * the copy, the same categories as from the memory; too large for its
 * limit, nothing copied. */
static void copy_holds_what_the_scan_reads(void **state)
{
    (void)state;
    static struct fake f;
    f = (struct fake){.pointer_to_b = SMALL_BASE, .pointer_to_c = SMALL_BASE + 4096};
    memset(f.present + 3 * MIB / PAGE, 1, MIB / PAGE);
    struct leakscan_block blocks[] = {
        {.address = BIG_BASE + 16, .size = BIG_SIZE - 16, .stack_id = 0},
        {.address = SMALL_BASE, .size = 64, .stack_id = 1},
        {.address = SMALL_BASE + 4096, .size = 64, .stack_id = 2},
    };
    struct leakscan_range root = {ROOT_BASE, ROOT_BASE + 4096};
    struct leakscan_memory memory = {.read = fake_read, .holds_data = fake_holds_data, .context = &f};
    struct leakscan_copy copy;
    assert_int_equal(leakscan_copy_take(&copy, &memory, &root, 1, blocks, 3, MIB, NULL), 1);
    assert_int_equal(leakscan_copy_take(&copy, &memory, &root, 1, blocks, 3, 64 * MIB, NULL), 0);
    assert_int_equal(f.read_in_untouched, 0);
    assert_int_equal(copy.count, 3);
    assert_int_equal(copy.size, MIB + 2 * PAGE + 4096);
    assert_int_equal(copy.ranges[0].start, BIG_BASE + 3 * MIB);
    assert_int_equal(copy.ranges[1].start, SMALL_BASE);
    assert_int_equal(copy.ranges[1].end, SMALL_BASE + 2 * PAGE);
    assert_int_equal(copy.ranges[2].start, ROOT_BASE);

    /* Reading the copy: whole views inside a range, zeros outside. */
    assert_non_null(leakscan_copy_view(&copy, BIG_BASE + 3 * MIB + 64, 8));
    assert_null(leakscan_copy_view(&copy, BIG_BASE + 3 * MIB - 8, 16));
    uint64_t words[2] = {1, 1};
    assert_int_equal(leakscan_copy_read(&copy, BIG_BASE + 3 * MIB + 56, words, 16), 0);
    assert_int_equal(words[0], 0);
    assert_int_equal(words[1], SMALL_BASE);
    assert_int_equal(leakscan_copy_holds_data(&copy, BIG_BASE + 5 * MIB, MIB), 0);
    assert_int_equal(leakscan_copy_holds_data(&copy, BIG_BASE + 4 * MIB - 8, 16), 1);

    struct leakscan_image image = {.roots = &root, .root_count = 1};
    leakscan_copy_as_memory(&copy, &image.memory);
    char err[256];
    assert_int_equal(leakscan_classify(&image, blocks, 3, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(blocks[0].category, TRACE_LEAK_REACHABLE);
    assert_int_equal(blocks[1].category, TRACE_LEAK_REACHABLE);
    assert_int_equal(blocks[2].category, TRACE_LEAK_DEFINITE);

    /* Its buffer kept for the next copy, which takes it (its pages are in
     * already), the same bytes read into it; one too small is not taken. */
    struct leakscan_buffer spare = {0};
    uint8_t *buffer = copy.bytes;
    leakscan_copy_release(&copy, &spare);
    leakscan_copy_free(&copy);
    assert_ptr_equal(spare.bytes, buffer);
    memset(spare.bytes, 0xee, (size_t)spare.size); /* stale bytes of an earlier copy */
    assert_int_equal(leakscan_copy_take(&copy, &memory, &root, 1, blocks, 3, 64 * MIB, &spare), 0);
    assert_ptr_equal(copy.bytes, buffer);
    assert_null(spare.bytes);
    assert_int_equal(leakscan_copy_read(&copy, BIG_BASE + 3 * MIB + 56, words, 16), 0);
    assert_int_equal(words[0], 0);
    assert_int_equal(words[1], SMALL_BASE);
    leakscan_copy_release(&copy, &spare);
    leakscan_copy_free(&copy);
    /* One too small is grown (a plain mapping: into a reservation of its
     * own), and taken. */
    struct leakscan_buffer smaller = {
        .bytes = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), .size = 4096};
    assert_true(smaller.bytes != MAP_FAILED);
    assert_int_equal(leakscan_copy_take(&copy, &memory, &root, 1, blocks, 3, 64 * MIB, &smaller), 0);
    assert_null(smaller.bytes);
    assert_int_equal(copy.buffer.size, copy.size);
    assert_int_equal(copy.buffer.written, copy.size); /* the copy wrote it all */
    assert_int_equal(leakscan_copy_read(&copy, BIG_BASE + 3 * MIB + 56, words, 16), 0);
    assert_int_equal(words[1], SMALL_BASE);
    struct leakscan_buffer grown = {0};
    leakscan_copy_release(&copy, &grown);
    leakscan_copy_free(&copy);
    /* keep_larger: the larger stays, the other is unmapped */
    struct leakscan_buffer small = {
        .bytes = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), .size = 4096};
    assert_true(small.bytes != MAP_FAILED);
    leakscan_buffer_keep_larger(&spare, &small);
    assert_ptr_equal(spare.bytes, buffer);
    assert_null(small.bytes);
    leakscan_buffer_free(&spare);
    leakscan_buffer_free(&grown);

    /* Grown ahead of a copy, then written ahead a few pages at a time;
     * growing again keeps what it holds and how far it was written. */
    struct leakscan_buffer ahead = {0};
    assert_int_equal(leakscan_buffer_grow(&ahead, 5000), 0);
    assert_int_equal(ahead.size, 8192);
    assert_int_equal(ahead.written, 0);
    assert_true(leakscan_buffer_write_ahead(&ahead, 1));
    assert_int_equal(ahead.written, 4096);
    assert_false(leakscan_buffer_write_ahead(&ahead, 5));
    assert_int_equal(ahead.written, 8192);
    ahead.bytes[100] = 7;
    assert_int_equal(leakscan_buffer_grow(&ahead, 4096), 0); /* never shrinks */
    assert_int_equal(leakscan_buffer_grow(&ahead, 3 * 4096), 0);
    assert_int_equal(ahead.size, 3 * 4096);
    assert_int_equal(ahead.bytes[100], 7);
    assert_int_equal(ahead.written, 8192);
    assert_true(leakscan_buffer_write_ahead(&ahead, 0));
    assert_false(leakscan_buffer_write_ahead(&ahead, 1));

    /* Written ahead as a copy writes, through the kernel: the pages it
     * reached hold what it copied (zeros), the others what they held. */
    struct leakscan_buffer copied = {0};
    assert_int_equal(leakscan_buffer_grow(&copied, 200 * 4096), 0);
    memset(copied.bytes, 0xaa, 200 * 4096);
    assert_true(leakscan_buffer_copy_ahead(&copied, 70)); /* two calls to the kernel, 64 and 6 pages */
    assert_int_equal(copied.written, 70 * 4096);
    for (size_t i = 0; i < 200 * 4096; i += 512)
        assert_int_equal(copied.bytes[i], i < 70 * 4096 ? 0 : 0xaa);
    assert_false(leakscan_buffer_copy_ahead(&copied, 1000));
    assert_int_equal(copied.written, 200 * 4096);
    assert_int_equal(copied.bytes[199 * 4096 + 4095], 0);
    leakscan_buffer_free(&copied);

    /* Beyond its reservation it moves to a new one, twice, holding
     * nothing written (a moved page would cost its first write again);
     * its old one is gone. A size of 2 MiB or more is whole huge pages
     * (common/huge_pages.h), at a 2 MiB-aligned address. */
    uint8_t *old = ahead.bytes;
    uint64_t reserved = ahead.reserved;
    assert_true(reserved >= 64 * MIB);
    assert_int_equal(leakscan_buffer_grow(&ahead, reserved + 4096), 0);
    assert_true(ahead.bytes != old);
    assert_int_equal(ahead.size, reserved + HUGE_PAGE_BYTES);
    assert_int_equal((uintptr_t)ahead.bytes % HUGE_PAGE_BYTES, 0);
    assert_int_equal(ahead.written, 0);
    assert_true(ahead.reserved >= 2 * (reserved + 4096));
    assert_int_equal(msync(old, 4096, MS_ASYNC), -1); /* unmapped */
    assert_int_equal(errno, ENOMEM);
    ahead.bytes[ahead.size - 1] = 9;
    old = ahead.bytes;
    assert_int_equal(leakscan_buffer_grow(&ahead, ahead.reserved + 4096), 0);
    assert_true(ahead.bytes != old);
    assert_int_equal(ahead.written, 0);
    ahead.bytes[ahead.size - 1] = 9; /* all of it mapped, writable */
    assert_int_equal(leakscan_buffer_grow(&ahead, UINT64_MAX - 100), -1); /* buffer unchanged */
    assert_int_equal(ahead.bytes[ahead.size - 1], 9);
    leakscan_buffer_free(&ahead);
    assert_null(ahead.bytes);
    assert_int_equal(ahead.written, 0);
}

/* Root ranges that do not start or end on a word: the copy takes whole
 * words, so every range after one lies 8-aligned in the buffer as its
 * words are in memory (the scan reads them as uint64_t). */
static void copy_keeps_words_aligned(void **state)
{
    (void)state;
    static struct fake f;
    f = (struct fake){0};
    struct leakscan_range roots[] = {{ROOT_BASE + 4, ROOT_BASE + 4 + 20}, {ROOT_BASE + 64, ROOT_BASE + 128}};
    struct leakscan_memory memory = {.read = fake_read, .context = &f};
    struct leakscan_copy copy;
    assert_int_equal(leakscan_copy_take(&copy, &memory, roots, 2, NULL, 0, MIB, NULL), 0);
    assert_int_equal(copy.count, 2);
    assert_int_equal(copy.ranges[0].start, ROOT_BASE);
    assert_int_equal(copy.ranges[0].end, ROOT_BASE + 24);
    const uint64_t *word = leakscan_copy_view(&copy, ROOT_BASE + 64, 8);
    assert_non_null(word);
    assert_int_equal((uintptr_t)word % 8, 0);
    const uint64_t *first = leakscan_copy_view(&copy, ROOT_BASE, 8);
    assert_non_null(first);
    assert_int_equal(*first, BIG_BASE + 16); /* the fake's root word */
    leakscan_copy_free(&copy);
}

/* The process reader on this process: in a 64 MiB private mapping with one
 * page written, only the chunk around that page holds data, and reading
 * that chunk leaves every other page untouched, so asking again still
 * says so. */
static void target_tells_pages_that_hold_data(void **state)
{
    (void)state;
    size_t size = 64 * MIB;
    uint8_t *mapping = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(mapping != MAP_FAILED);
    madvise(mapping, size, MADV_NOHUGEPAGE); /* one touched page stays one page */
    uint64_t chunk = 10 * MIB, written = chunk + 3 * 4096;
    *(uint64_t *)(mapping + written + 8) = 0x1122334455667788ull;

    struct leakscan_target target;
    leakscan_target_open(&target, getpid());
    uint64_t base = (uint64_t)(uintptr_t)mapping;
    assert_int_equal(leakscan_target_holds_data(&target, base, chunk), 0);
    assert_int_equal(leakscan_target_holds_data(&target, base + written, 16), 1);
    assert_int_equal(leakscan_target_holds_data(&target, base, size), 1);

    uint8_t *copy = malloc(MIB);
    assert_non_null(copy);
    assert_int_equal(leakscan_target_read(&target, base + chunk, copy, MIB), 0);
    assert_int_equal(*(uint64_t *)(copy + (written - chunk) + 8), 0x1122334455667788ull);
    /* Checked before this test looks at the mapping itself, which would
     * fault its pages in. */
    assert_int_equal(leakscan_target_holds_data(&target, base, chunk), 0);
    assert_int_equal(leakscan_target_holds_data(&target, base + chunk + MIB, size - chunk - MIB), 0);
    leakscan_target_close(&target);
    free(copy);
    munmap(mapping, size);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(classify_skips_chunks_that_hold_no_data),
        cmocka_unit_test(target_tells_pages_that_hold_data),
        cmocka_unit_test(copy_holds_what_the_scan_reads),
        cmocka_unit_test(copy_keeps_words_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

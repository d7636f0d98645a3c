/* test_leak_check.c - the LEAKS records a leak check makes of classified
 * blocks (tracer/leak_check.h): one record per stack and category, sorted,
 * for the whole image and for each case, with the first iteration that
 * allocated one of the blocks; a case checked at its own end left out of
 * the check at exit; sampled sites scaled, totals exact. The scan itself is
 * test_leakscan*.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/huge_pages.h"
#include "../../leakscan/leakscan.h"
#include "../../tracer/leak_check.h"

static const uint64_t frames[1] = {0x401000};

static uint32_t lookup(void *context, uint32_t stack_id, const uint64_t **out, const uint64_t **tail,
                       uint32_t *tail_count)
{
    *tail = NULL;
    *tail_count = 0;
    (void)context, (void)stack_id;
    *out = frames;
    return 1;
}

/* The category the scan is to find for each block, by address. */
struct planted {
    uint64_t address;
    uint32_t category;
};

static const struct planted planted[] = {
    {0x1000, TRACE_LEAK_REACHABLE}, {0x2000, TRACE_LEAK_DEFINITE}, {0x3000, TRACE_LEAK_DEFINITE},
    {0x4000, TRACE_LEAK_INDIRECT},  {0x5000, TRACE_LEAK_DEFINITE}, {0x6000, TRACE_LEAK_REACHABLE},
    {0x7000, TRACE_LEAK_DEFINITE},  {0x8000, TRACE_LEAK_POSSIBLE},
};

/* What leak_check_run would get from the scan: the recorder's blocks with
 * their planted categories, in reverse order (the scan may reorder). */
static struct leakscan_block *scanned(const struct recorder *r, size_t *count)
{
    struct leakscan_block *blocks = leak_check_blocks(r, count);
    assert_non_null(blocks);
    for (size_t i = 0; i < *count; i++)
        for (size_t p = 0; p < sizeof planted / sizeof *planted; p++)
            if (planted[p].address == blocks[i].address)
                blocks[i].category = planted[p].category;
    for (size_t i = 0; i < *count / 2; i++) {
        struct leakscan_block swap = blocks[i];
        blocks[i] = blocks[*count - 1 - i];
        blocks[*count - 1 - i] = swap;
    }
    return blocks;
}

static void expect_record(const struct trace_leaks *check, uint32_t index, uint32_t stack_id, uint32_t category,
                          uint64_t bytes, uint64_t blocks, uint64_t first_iteration)
{
    assert_true(index < check->count);
    const struct trace_loss_record *record = &check->records[index];
    assert_int_equal(record->stack_id, stack_id);
    assert_int_equal(record->category, category);
    assert_int_equal(record->bytes, bytes);
    assert_int_equal(record->blocks, blocks);
    assert_int_equal(record->first_iteration, first_iteration);
}

/* Blocks outside any case and in three cases, one (case 2) open. */
static void record_cases(struct recorder *r)
{
    recorder_init(r, 0);
    recorder_alloc(r, 1, 0x1000, 10, 5, lookup, NULL); /* outside any case */
    recorder_case_begin(r, 2, "one", 3);
    recorder_iteration(r, 3);
    recorder_alloc(r, 4, 0x2000, 20, 3, lookup, NULL);
    recorder_iteration(r, 5);
    recorder_alloc(r, 6, 0x3000, 30, 3, lookup, NULL);
    recorder_alloc(r, 7, 0x4000, 40, 9, lookup, NULL);
    recorder_case_begin(r, 8, "two", 3);
    recorder_iteration(r, 9);
    recorder_alloc(r, 10, 0x5000, 50, 3, lookup, NULL);
    recorder_iteration(r, 11);
    recorder_iteration(r, 12);
    recorder_alloc(r, 13, 0x6000, 60, 5, lookup, NULL);
    recorder_case_begin(r, 14, "three", 5);
    recorder_iteration(r, 15);
    recorder_alloc(r, 16, 0x7000, 70, 3, lookup, NULL);
    recorder_iteration(r, 17);
    recorder_alloc(r, 18, 0x8000, 80, 9, lookup, NULL);
}

/* At a case's end: that case's blocks only, at its iteration. */
static void case_end_checks_the_open_case(void **state)
{
    (void)state;
    struct recorder r;
    record_cases(&r);
    size_t count;
    struct leakscan_block *blocks = scanned(&r, &count);
    assert_int_equal(count, 8);
    struct leak_results results;
    assert_int_equal(leak_check_results(&r, blocks, count, TRACE_SNAP_CASE_END, 99, NULL, 0, &results), 0);
    assert_int_equal(results.count, 1);
    const struct trace_leaks *check = &results.checks[0];
    assert_int_equal(check->case_id, 2);
    assert_int_equal(check->when, TRACE_SNAP_CASE_END);
    assert_int_equal(check->time_ns, 99);
    assert_int_equal(check->iteration, 2);
    assert_int_equal(check->count, 2);
    expect_record(check, 0, 3, TRACE_LEAK_DEFINITE, 70, 1, 1);
    expect_record(check, 1, 9, TRACE_LEAK_POSSIBLE, 80, 1, 2);
    assert_int_equal(check->bytes[TRACE_LEAK_DEFINITE], 70);
    assert_int_equal(check->bytes[TRACE_LEAK_POSSIBLE], 80);
    assert_int_equal(check->blocks[TRACE_LEAK_REACHABLE], 0);
    leak_results_free(&results);
    free(blocks);
    recorder_free(&r);
}

/* At exit: the whole image, one record per stack and category whatever
 * case allocated the blocks, then each case not checked at its own end. */
static void exit_checks_the_image_then_each_case(void **state)
{
    (void)state;
    struct recorder r;
    record_cases(&r);
    recorder_case_end(&r, 19);
    size_t count;
    struct leakscan_block *blocks = scanned(&r, &count);
    const unsigned char checked_at_end[] = {0, 0, 1}; /* case 2 was */
    struct leak_results results;
    assert_int_equal(leak_check_results(&r, blocks, count, TRACE_SNAP_EXIT, 99, checked_at_end, 3, &results), 0);
    assert_int_equal(results.count, 3);
    const struct trace_leaks *image = &results.checks[0];
    assert_int_equal(image->case_id, TRACE_NONE);
    assert_int_equal(image->when, TRACE_SNAP_EXIT);
    assert_int_equal(image->count, 4);
    expect_record(image, 0, 3, TRACE_LEAK_DEFINITE, 20 + 30 + 50 + 70, 4, 1);
    expect_record(image, 1, 5, TRACE_LEAK_REACHABLE, 10 + 60, 2, 0);
    expect_record(image, 2, 9, TRACE_LEAK_INDIRECT, 40, 1, 2);
    expect_record(image, 3, 9, TRACE_LEAK_POSSIBLE, 80, 1, 2);
    assert_int_equal(image->bytes[TRACE_LEAK_DEFINITE], 170);
    assert_int_equal(image->blocks[TRACE_LEAK_DEFINITE], 4);
    assert_int_equal(image->bytes[TRACE_LEAK_REACHABLE], 70);
    assert_int_equal(image->blocks[TRACE_LEAK_INDIRECT], 1);
    const struct trace_leaks *one = &results.checks[1], *two = &results.checks[2];
    assert_int_equal(one->case_id, 0);
    assert_int_equal(one->count, 2);
    expect_record(one, 0, 3, TRACE_LEAK_DEFINITE, 50, 2, 1);
    expect_record(one, 1, 9, TRACE_LEAK_INDIRECT, 40, 1, 2);
    assert_int_equal(two->case_id, 1);
    assert_int_equal(two->count, 2);
    expect_record(two, 0, 3, TRACE_LEAK_DEFINITE, 50, 1, 1);
    expect_record(two, 1, 5, TRACE_LEAK_REACHABLE, 60, 1, 3);
    assert_int_equal(two->bytes[TRACE_LEAK_REACHABLE], 60);
    leak_results_free(&results);
    free(blocks);
    recorder_free(&r);
}

/* --sample-rate: a sampled site's record is scaled by its blocks' weights;
 * the unsampled blocks (stack 0) count in the totals only. */
static void sampled_records_are_scaled(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 64;
    recorder_alloc(&r, 1, 0x2000, 16, 3, lookup, NULL);
    recorder_alloc(&r, 2, 0x3000, 48, 3, lookup, NULL);
    recorder_alloc(&r, 3, 0x5000, 24, RECORDER_UNSAMPLED, lookup, NULL);
    size_t count;
    struct leakscan_block *blocks = scanned(&r, &count);
    struct leak_results results;
    assert_int_equal(leak_check_results(&r, blocks, count, TRACE_SNAP_EXIT, 1, NULL, 0, &results), 0);
    assert_int_equal(results.count, 1);
    const struct trace_leaks *image = &results.checks[0];
    double w16 = recorder_sample_weight(64, 16), w48 = recorder_sample_weight(64, 48);
    assert_int_equal(image->count, 1);
    expect_record(image, 0, 3, TRACE_LEAK_DEFINITE, (uint64_t)llround(16 * w16 + 48 * w48), (uint64_t)llround(w16 + w48),
                  0);
    assert_int_equal(image->bytes[TRACE_LEAK_DEFINITE], 16 + 48 + 24);
    assert_int_equal(image->blocks[TRACE_LEAK_DEFINITE], 3);
    leak_results_free(&results);
    free(blocks);
    recorder_free(&r);
}

/* A record's first iteration is its blocks' earliest, whichever block
 * the live table's walk meets first. */
static void first_iteration_is_the_earliest(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_case_begin(&r, 1, "loop", 4);
    for (uint64_t i = 1; i <= 100; i++) {
        recorder_iteration(&r, 1 + i);
        recorder_alloc(&r, 1 + i, 0x100000 + 0x1000 * (101 - i), 8, 4, lookup, NULL);
    }
    size_t count;
    struct leakscan_block *blocks = leak_check_blocks(&r, &count);
    assert_non_null(blocks);
    assert_int_equal(count, 100);
    for (size_t i = 0; i < count; i++)
        blocks[i].category = TRACE_LEAK_DEFINITE;
    struct leak_results results;
    assert_int_equal(leak_check_results(&r, blocks, count, TRACE_SNAP_CASE_END, 200, NULL, 0, &results), 0);
    assert_int_equal(results.count, 1);
    expect_record(&results.checks[0], 0, 4, TRACE_LEAK_DEFINITE, 800, 100, 1);
    leak_results_free(&results);
    free(blocks);
    recorder_free(&r);
}

/* An image with no live block is checked without reading it: a check of
 * a process that is gone (as one at exit may be to the scan) reports
 * nothing lost, not an error. */
static void no_block_needs_no_scan(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_alloc(&r, 1, 0x1000, 10, 5, lookup, NULL);
    recorder_free_block(&r, 2, 0x1000);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    assert_true(child > 0);
    assert_int_equal(waitpid(child, NULL, 0), child); /* its pid names no process now */
    struct leak_results results;
    char err[256] = "";
    assert_int_equal(leak_check_run(child, &child, 1, NULL, &r, TRACE_SNAP_EXIT, 1000, NULL, 0, 0, NULL, &results, err,
                                    sizeof err),
                     0);
    assert_int_equal(results.count, 1);
    for (int c = 0; c < TRACE_LEAK_CATEGORIES; c++)
        assert_int_equal(results.checks[0].blocks[c], 0);
    assert_int_equal(results.checks[0].count, 0);
    leak_results_free(&results);
    recorder_free(&r);
}

/* A check writes into the lists the last one kept (their pages written
 * already), and keeps its own, larger ones for the next, even when its
 * scan failed. */
static void a_check_writes_into_the_lists_the_last_one_kept(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    assert_true(child > 0);
    assert_int_equal(waitpid(child, NULL, 0), child); /* gone: a scan of it fails */
    struct leak_check_spare spare = {0};
    struct leak_results results;
    char err[256] = "";
    assert_int_equal(leak_check_run(child, &child, 1, NULL, &r, TRACE_SNAP_EXIT, 10, NULL, 0, 0, &spare, &results, err,
                                    sizeof err),
                     0);
    leak_results_free(&results);
    assert_non_null(spare.lists.blocks.bytes);
    assert_non_null(spare.lists.open.bytes);
    const uint8_t *first = spare.lists.blocks.bytes;
    size_t capacity = spare.lists.capacity;
    assert_true(capacity >= 1);
    assert_int_equal(leak_check_run(child, &child, 1, NULL, &r, TRACE_SNAP_EXIT, 20, NULL, 0, 0, &spare, &results, err,
                                    sizeof err),
                     0);
    leak_results_free(&results);
    assert_ptr_equal(spare.lists.blocks.bytes, first); /* written into again */
    assert_int_equal(spare.lists.capacity, capacity);
    for (uint64_t i = 0; i < 100; i++)
        recorder_alloc(&r, 30 + i, 0x100000 + 0x100 * i, 16, 5, lookup, NULL);
    assert_int_equal(leak_check_run(child, &child, 1, NULL, &r, TRACE_SNAP_EXIT, 200, NULL, 0, 0, &spare, &results,
                                    err, sizeof err),
                     -1); /* the process is gone */
    assert_true(spare.lists.capacity >= 101 + 101 / 2); /* room for the heap to grow before the next */
    assert_ptr_equal(spare.lists.blocks.bytes, first); /* grown in place */
    leak_check_spare_free(&spare);
    assert_null(spare.lists.blocks.bytes);
    assert_null(spare.lists.open.bytes);
    assert_int_equal(spare.lists.capacity, 0);
    recorder_free(&r);
}

/* While the program runs, the spare's lists are made ready a few pages at
 * a time for a check of the heap as it is: room for a quarter more blocks
 * (grown when less than an eighth more is left), every page written; the
 * check then lists into them where they are. */
static void the_lists_are_readied_a_few_pages_at_a_time(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    for (uint64_t i = 0; i < 20000; i++)
        recorder_alloc(&r, 30 + i, 0x100000 + 0x100 * i, 200, 5, lookup, NULL);
    struct leak_check_spare spare = {0};
    assert_int_equal(leak_check_spare_ready(&spare, &r, 0, 1), 1); /* one page a call: more to do */
    assert_true(spare.lists.capacity >= 20000 + 20000 / 4);
    assert_int_equal(spare.lists.blocks.written, 4096);
    assert_int_equal(spare.lists.open.written, 0);
    assert_null(spare.copy.bytes); /* the copy's buffer is the check's to make */
    int calls = 1;
    while (leak_check_spare_ready(&spare, &r, 0, 16))
        calls++;
    assert_true(calls > 10);
    assert_int_equal(spare.lists.blocks.written, spare.lists.blocks.size);
    assert_int_equal(spare.lists.open.written, spare.lists.open.size);
    size_t capacity = spare.lists.capacity;
    assert_int_equal(leak_check_spare_ready(&spare, &r, 0, 16), 0); /* nothing left, nothing grown */
    assert_int_equal(spare.lists.capacity, capacity);

    /* more blocks: grown where they are, only the new pages to write */
    const uint8_t *lists = spare.lists.blocks.bytes;
    for (uint64_t i = 20000; i < 40000; i++)
        recorder_alloc(&r, 30 + i, 0x100000 + 0x100 * i, 200, 5, lookup, NULL);
    size_t written = spare.lists.blocks.written;
    assert_int_equal(leak_check_spare_ready(&spare, &r, 0, 0), 1);
    assert_true(spare.lists.capacity >= 40000 + 40000 / 4);
    assert_true(spare.lists.capacity <= 40000 + 40000 / 4 + 2048);
    assert_ptr_equal(spare.lists.blocks.bytes, lists);
    assert_int_equal(spare.lists.blocks.written, written);

    /* a check takes them as they are, and gives them back */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    assert_true(child > 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    struct leak_results results;
    char err[256] = "";
    assert_int_equal(leak_check_run(child, &child, 1, NULL, &r, TRACE_SNAP_EXIT, 10, NULL, 0, 0, &spare, &results, err,
                                    sizeof err),
                     -1); /* the process is gone */
    assert_ptr_equal(spare.lists.blocks.bytes, lists);
    leak_check_spare_free(&spare);
    recorder_free(&r);
}

/* With room under the copy's limit and a heap of 65,536 blocks or more,
 * the copy's buffer is readied too: grown pages at a time (its growth
 * populates what it adds in one call) to at least an eighth more than the
 * heap suggests (its live bytes and 16 a block), at most a quarter, every
 * page written as a copy writes it; not past the limit, where the check
 * will scan in place and a buffer readied before is let go. */
static void the_copy_buffer_is_readied_under_its_limit(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    struct leak_check_spare spare = {0};
    for (uint64_t i = 0; i < 65535; i++)
        recorder_alloc(&r, 30 + i, 0x100000 + 0x400 * i, 100, 5, lookup, NULL);
    while (leak_check_spare_ready(&spare, &r, 64ull << 20, 1 << 20))
        ;
    assert_null(spare.copy.bytes); /* a heap too small to bet on */
    recorder_alloc(&r, 30 + 65535, 0x100000 + 0x400 * 65535, 100, 5, lookup, NULL);
    const uint64_t expected = 65536 * (100 + 16);
    assert_int_equal(leak_check_spare_ready(&spare, &r, expected, 1 << 20), 0); /* over the limit's 7/8 */
    assert_null(spare.copy.bytes);
    int calls = 0;
    uint64_t grown = 0;
    while (leak_check_spare_ready(&spare, &r, 64ull << 20, 32)) {
        calls++;
        /* a call grows it by 16 times its pages at most, to whole huge pages */
        assert_true(spare.copy.size - grown <= 16 * 32 * 4096 + HUGE_PAGE_BYTES);
        grown = spare.copy.size;
    }
    assert_true(calls > 5);
    assert_true(spare.copy.size >= expected + expected / 8);
    assert_true(spare.copy.size <= expected + expected / 4 + HUGE_PAGE_BYTES);
    assert_int_equal(spare.copy.written, spare.copy.size);
    /* a heap a little larger: the room suffices, nothing grows */
    uint64_t size = spare.copy.size;
    for (uint64_t i = 65536; i < 66000; i++)
        recorder_alloc(&r, 30 + i, 0x100000 + 0x400 * i, 100, 5, lookup, NULL);
    assert_int_equal(leak_check_spare_ready(&spare, &r, 64ull << 20, 256), 0);
    assert_int_equal(spare.copy.size, size);
    /* the limit lower than the heap: let go */
    assert_int_equal(leak_check_spare_ready(&spare, &r, expected, 256), 0);
    assert_null(spare.copy.bytes);
    leak_check_spare_free(&spare);
    recorder_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(case_end_checks_the_open_case),
        cmocka_unit_test(exit_checks_the_image_then_each_case),
        cmocka_unit_test(sampled_records_are_scaled),
        cmocka_unit_test(the_lists_are_readied_a_few_pages_at_a_time),
        cmocka_unit_test(the_copy_buffer_is_readied_under_its_limit),
        cmocka_unit_test(first_iteration_is_the_earliest),
        cmocka_unit_test(no_block_needs_no_scan),
        cmocka_unit_test(a_check_writes_into_the_lists_the_last_one_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_common_helpers.c - the small helpers of common/: an array that
 * doubles (growable_array.h), the word map (word_map.h), the error
 * buffer (error_buffer.h), huge pages and a detached thread's signals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/detached_thread.h"
#include "../../common/error_buffer.h"
#include "../../common/growable_array.h"
#include "../../common/huge_pages.h"
#include "../../common/reservation.h"
#include "../../common/word_map.h"

static void test_array_grows_and_keeps_items(void **state)
{
    (void)state;
    uint64_t *items = NULL;
    size_t capacity = 0;
    for (size_t i = 0; i < 1000; i++) {
        assert_int_equal(growable_array_reserve(&items, &capacity, i + 1, sizeof *items), 0);
        assert_true(capacity >= i + 1);
        items[i] = i * 7;
    }
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(items[i], i * 7);
    assert_int_equal(capacity, 1024); /* 16 doubled six times */
    free(items);
}

static void test_array_jumps_to_what_is_needed(void **state)
{
    (void)state;
    char *items = NULL;
    size_t capacity = 0;
    assert_int_equal(growable_array_reserve(&items, &capacity, 100, 1), 0);
    assert_int_equal(capacity, 128);
    char *before = items;
    assert_int_equal(growable_array_reserve(&items, &capacity, 128, 1), 0); /* room already */
    assert_ptr_equal(items, before);
    assert_int_equal(capacity, 128);
    free(items);
}

static void test_array_refuses_overflow_unchanged(void **state)
{
    (void)state;
    uint64_t *items = NULL;
    size_t capacity = 0;
    assert_int_equal(growable_array_reserve(&items, &capacity, 4, sizeof *items), 0);
    uint64_t *before = items;
    assert_int_equal(growable_array_reserve(&items, &capacity, SIZE_MAX / 4, sizeof *items), -1);
    assert_ptr_equal(items, before);
    assert_int_equal(capacity, 16);
    free(items);
}

static void test_word_map_finds_what_it_was_given(void **state)
{
    (void)state;
    struct word_map map;
    word_map_init(&map);
    assert_null(word_map_find(&map, 0x401000));
    assert_null(word_map_find(&map, 0));
    /* neighbouring addresses, addresses 4 KiB apart (one hash's low bits
     * alike), the key 0 and the largest word: through several doublings */
    for (uint64_t i = 0; i < 5000; i++) {
        assert_int_equal(word_map_put(&map, 0x401000 + i, i), 0);
        assert_int_equal(word_map_put(&map, 0x7f0000000000ull + (i << 12), i + 1), 0);
    }
    assert_int_equal(word_map_put(&map, 0, 77), 0);
    assert_int_equal(word_map_put(&map, UINT64_MAX, 78), 0);
    assert_int_equal(map.count, 10002);
    for (uint64_t i = 0; i < 5000; i++) {
        assert_non_null(word_map_find(&map, 0x401000 + i));
        assert_int_equal(*word_map_find(&map, 0x401000 + i), i);
        assert_int_equal(*word_map_find(&map, 0x7f0000000000ull + (i << 12)), i + 1);
    }
    assert_int_equal(*word_map_find(&map, 0), 77);
    assert_int_equal(*word_map_find(&map, UINT64_MAX), 78);
    assert_null(word_map_find(&map, 0x401000 + 5000));
    assert_true(map.count * 2 <= map.capacity);
    /* a put of a present key replaces its value */
    assert_int_equal(word_map_put(&map, 0x401000, 9), 0);
    assert_int_equal(*word_map_find(&map, 0x401000), 9);
    assert_int_equal(map.count, 10002);
    /* the walk sees every entry once */
    size_t position = 0, seen = 0;
    uint64_t key, value, sum = 0;
    while (word_map_next(&map, &position, &key, &value)) {
        seen++;
        sum += value;
    }
    assert_int_equal(seen, 10002);
    assert_int_equal(sum, 9 + (4999ull * 5000 / 2 - 0) + (5000ull * 5001 / 2) + 77 + 78);
    word_map_free(&map);
    assert_null(word_map_find(&map, 0x401001));
}

static void test_error_printf(void **state)
{
    (void)state;
    char err[16] = "untouched";
    error_printf(NULL, 0, "no buffer: %d", 1);
    error_printf(err, 0, "empty buffer: %d", 2);
    assert_string_equal(err, "untouched");
    error_printf(err, sizeof err, "process %d is gone for good", 1234);
    assert_string_equal(err, "process 1234 is"); /* cut to the buffer */
}

/* /proc/buddyinfo's free blocks of 2 MiB and more, over every zone. */
static void test_huge_pages_free_in_buddyinfo(void **state)
{
    (void)state;
    const char *text = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n"
                       "Node 0, zone    DMA32      8      9      9      8      7      7     11     11      9      7    745 \n"
                       "Node 0, zone   Normal   6564   4235   6756   5015   2230   1090    991    479    131     40   4427 \n";
    uint64_t mib = 1ull << 20;
    /* orders 9 and 10 of 4 KiB pages: 2 and 4 MiB */
    uint64_t expected = (1 + 7 + 40) * 2 * mib + (3 + 745 + 4427) * 4 * mib;
    assert_int_equal(huge_pages_free_in(text, 4096), expected);
    /* no order reaches 2 MiB with 1 KiB pages and 11 orders */
    assert_int_equal(huge_pages_free_in(text, 1024), 0);
    assert_int_equal(huge_pages_free_in("", 4096), 0);
    assert_int_equal(huge_pages_free_in("garbage\nNode 0, zone\n", 4096), 0);
    /* a line cut short counts what it has */
    assert_int_equal(huge_pages_free_in("Node 0, zone Normal 0 0 0 0 0 0 0 0 0 5", 4096), 5 * 2 * mib);
}

/* A reservation from huge_pages_reserve is 2 MiB-aligned and usable once
 * committed, whether or not the kernel marked it. */
static void test_huge_pages_reserve_is_aligned(void **state)
{
    (void)state;
    size_t bytes = 8u << 20;
    char *base = huge_pages_reserve(bytes);
    assert_non_null(base);
    assert_int_equal((uintptr_t)base % HUGE_PAGE_BYTES, 0);
    assert_int_equal(reservation_commit(base, bytes, true), 0);
    base[0] = 1;
    base[bytes - 1] = 2;
    assert_int_equal(base[0] + base[bytes - 1], 3);
    assert_int_equal(munmap(base, bytes), 0);
}

/* What a detached thread finds of its own mask, through a pipe. */
static void *report_mask(void *pipe_end)
{
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    char blocked[3] = {(char)sigismember(&mask, SIGINT), (char)sigismember(&mask, SIGTERM),
                       (char)sigismember(&mask, SIGCHLD)};
    (void)!write((int)(intptr_t)pipe_end, blocked, sizeof blocked);
    return NULL;
}

/* A detached thread starts with every signal blocked (detached_thread.h:
 * the main thread waits for them), and its creator's mask is left as it
 * was, blocked signals included. */
static void test_detached_thread_blocks_signals(void **state)
{
    (void)state;
    int ends[2];
    assert_int_equal(pipe(ends), 0);
    sigset_t usr2, before, after;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    assert_int_equal(detached_thread_start(report_mask, (void *)(intptr_t)ends[1]), 0);
    char blocked[3] = {0};
    assert_int_equal(read(ends[0], blocked, sizeof blocked), (ssize_t)sizeof blocked);
    assert_int_equal(blocked[0], 1);
    assert_int_equal(blocked[1], 1);
    assert_int_equal(blocked[2], 1);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    for (int signal = 1; signal < SIGRTMIN; signal++)
        assert_int_equal(sigismember(&after, signal), sigismember(&before, signal));
    assert_int_equal(sigismember(&after, SIGINT), 0);
    assert_int_equal(sigismember(&after, SIGUSR2), 1);
    pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
    close(ends[0]);
    close(ends[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_array_grows_and_keeps_items),
        cmocka_unit_test(test_array_jumps_to_what_is_needed),
        cmocka_unit_test(test_array_refuses_overflow_unchanged),
        cmocka_unit_test(test_word_map_finds_what_it_was_given),
        cmocka_unit_test(test_error_printf),
        cmocka_unit_test(test_huge_pages_free_in_buddyinfo),
        cmocka_unit_test(test_huge_pages_reserve_is_aligned),
        cmocka_unit_test(test_detached_thread_blocks_signals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

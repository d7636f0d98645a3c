/* A thread's cache of whole backtraces (preload/capture_cache.h): an entry
 * is found only for its key and only while every word it was computed from
 * holds; a set keeps its most recently used entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../preload/capture_cache.h"

static uint64_t memory[8]; /* the words a capture read */

/* A cache of memory that is not zeroed, as a slot's part is when another
 * thread used it: cleared before use. */
static struct capture_cache *new_cache(void)
{
    struct capture_cache *cache = malloc(sizeof *cache);
    assert_non_null(cache);
    memset(cache, 0xa5, sizeof *cache);
    capture_cache_clear(cache);
    return cache;
}

static void read_all(struct read_set *reads)
{
    read_set_clear(reads);
    for (uint32_t i = 0; i < 4; i++)
        read_set_add_word(reads, (uint64_t)(uintptr_t)&memory[i], memory[i]);
    read_set_add_field(reads, (uint64_t)(uintptr_t)&memory[4] + 3, 1); /* one byte of memory[4] */
}

static struct capture_key key_at(uint64_t frame)
{
    return (struct capture_key){.ip = 0x401000, .sp = 0x7ffd0000, .bp = 0x7ffd0100, .python_frame = frame,
                                .python_instruction = 0x1234};
}

static void found_while_its_words_hold(void **state)
{
    (void)state;
    struct capture_cache *cache = new_cache();
    assert_non_null(cache);
    memset(memory, 0, sizeof memory);
    struct read_set reads;
    read_all(&reads);
    struct capture_key key = key_at(0x5000);
    uint32_t id = 0;
    assert_false(capture_cache_find(cache, &key, &id));
    capture_cache_store(cache, &key, false, &reads, 77);
    assert_true(capture_cache_find(cache, &key, &id));
    assert_int_equal(id, 77);
    memory[2] = 1; /* a word it read changed */
    assert_false(capture_cache_find(cache, &key, &id));
    memory[2] = 0;
    ((uint8_t *)&memory[4])[2] = 9; /* beside the byte it read */
    assert_true(capture_cache_find(cache, &key, &id));
    ((uint8_t *)&memory[4])[3] = 9; /* the byte itself */
    assert_false(capture_cache_find(cache, &key, &id));
    ((uint8_t *)&memory[4])[3] = 0;
    struct capture_key other = key;
    other.python_instruction++;
    assert_false(capture_cache_find(cache, &other, &id));
    other = key;
    other.bp++; /* the unwind did not read rbp */
    assert_true(capture_cache_find(cache, &other, &id));
    free(cache);
}

static void start_rbp_compared_when_it_matters(void **state)
{
    (void)state;
    struct capture_cache *cache = new_cache();
    memset(memory, 0, sizeof memory);
    struct read_set reads;
    read_all(&reads);
    struct capture_key key = key_at(0x6000), other = key;
    capture_cache_store(cache, &key, true, &reads, 5);
    other.bp += 16;
    uint32_t id;
    assert_false(capture_cache_find(cache, &other, &id));
    assert_true(capture_cache_find(cache, &key, &id));
    free(cache);
}

static void overflowed_reads_not_kept(void **state)
{
    (void)state;
    struct capture_cache *cache = new_cache();
    struct read_set reads;
    read_set_clear(&reads);
    for (uint32_t i = 0; i <= READ_SET_MAX; i++)
        read_set_add_word(&reads, (uint64_t)(uintptr_t)&memory[0], memory[0]);
    assert_true(reads.overflow);
    struct capture_key key = key_at(0x7000);
    capture_cache_store(cache, &key, false, &reads, 3);
    uint32_t id;
    assert_false(capture_cache_find(cache, &key, &id));
    free(cache);
}

/* Three keys of one set: storing the third replaces the one used least
 * recently. */
static void a_set_keeps_its_recently_used(void **state)
{
    (void)state;
    struct capture_cache *cache = new_cache();
    memset(memory, 0, sizeof memory);
    struct read_set reads;
    read_all(&reads);
    struct capture_key keys[3] = {key_at(0x1000)};
    uint32_t found = 1, set = capture_cache_set(&keys[0]);
    for (uint64_t frame = 0x1040; found < 3; frame += 0x40) {
        struct capture_key key = key_at(frame);
        if (capture_cache_set(&key) == set)
            keys[found++] = key;
    }
    uint32_t id;
    capture_cache_store(cache, &keys[0], false, &reads, 10);
    capture_cache_store(cache, &keys[1], false, &reads, 11);
    assert_true(capture_cache_find(cache, &keys[0], &id)); /* 0 now used after 1 */
    capture_cache_store(cache, &keys[2], false, &reads, 12);
    assert_true(capture_cache_find(cache, &keys[0], &id));
    assert_int_equal(id, 10);
    assert_false(capture_cache_find(cache, &keys[1], &id));
    assert_true(capture_cache_find(cache, &keys[2], &id));
    assert_int_equal(id, 12);
    free(cache);
}

/* A cleared cache finds nothing it held: a slot's next thread must not
 * take entries whose words name the last thread's stack. */
static void nothing_found_once_cleared(void **state)
{
    (void)state;
    struct capture_cache *cache = new_cache();
    memset(memory, 0, sizeof memory);
    struct read_set reads;
    read_all(&reads);
    struct capture_key key = key_at(0x5000);
    uint32_t id;
    capture_cache_store(cache, &key, false, &reads, 5);
    assert_true(capture_cache_find(cache, &key, &id));
    capture_cache_clear(cache);
    assert_false(capture_cache_find(cache, &key, &id));
    free(cache);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(found_while_its_words_hold),
        cmocka_unit_test(start_rbp_compared_when_it_matters),
        cmocka_unit_test(overflowed_reads_not_kept),
        cmocka_unit_test(a_set_keeps_its_recently_used),
        cmocka_unit_test(nothing_found_once_cleared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

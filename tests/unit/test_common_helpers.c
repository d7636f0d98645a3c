/* test_common_helpers.c - the small helpers of common/: an array that
 * doubles (growable_array.h) and the error buffer (error_buffer.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../common/error_buffer.h"
#include "../../common/growable_array.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_array_grows_and_keeps_items),
        cmocka_unit_test(test_array_jumps_to_what_is_needed),
        cmocka_unit_test(test_array_refuses_overflow_unchanged),
        cmocka_unit_test(test_error_printf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_progress.c - record's status line text (tracer/progress.h): the
 * figures in order, thousands separated, cut to the terminal's width. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../tracer/progress.h"

static void test_line_with_case(void **state)
{
    (void)state;
    char line[256];
    assert_string_equal(progress_format(line, sizeof line, 200, 12.34, 1234567, 3u << 20, "leaky", 37000),
                        "memslope: 12.3 s, 1,234,567 events, 3.0 MiB live, case leaky iteration 37,000");
}

static void test_line_without_case(void **state)
{
    (void)state;
    char line[256];
    assert_string_equal(progress_format(line, sizeof line, 200, 0.5, 999, 48, NULL, 0),
                        "memslope: 0.5 s, 999 events, 48 B live");
}

/* One column short of the terminal: a full line wraps on some terminals. */
static void test_line_cut_to_width(void **state)
{
    (void)state;
    char line[256];
    progress_format(line, sizeof line, 30, 1.0, 5, 0, "a-long-case-name", 1);
    assert_int_equal(strlen(line), 29);
    assert_string_equal(line, "memslope: 1.0 s, 5 events, 0 ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_with_case),
        cmocka_unit_test(test_line_without_case),
        cmocka_unit_test(test_line_cut_to_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

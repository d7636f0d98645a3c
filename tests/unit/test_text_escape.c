/* test_text_escape.c - names as the text outputs print them
 * (report/text_escape.h): control characters escaped, everything else,
 * UTF-8 included, unchanged; a column width never cuts an escape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../report/text_escape.h"

static char *printed(const char *text, int width)
{
    static char result[256];
    FILE *out = fmemopen(result, sizeof result, "w");
    assert_non_null(out);
    int written = width < 0 ? text_put(out, text) : text_put_width(out, text, width);
    fclose(out);
    assert_int_equal((int)strlen(result), written);
    return result;
}

static void test_plain_names_unchanged(void **state)
{
    (void)state;
    assert_false(text_needs_escape("leaky_site (demo_leak.c:6)"));
    assert_string_equal(printed("std::vector<int>::push_back", -1), "std::vector<int>::push_back");
    assert_string_equal(printed("caf\xc3\xa9.c", -1), "caf\xc3\xa9.c"); /* UTF-8 passes */
    assert_string_equal(printed("C:\\path", -1), "C:\\path");         /* nothing to make ambiguous */
}

static void test_controls_escaped(void **state)
{
    (void)state;
    assert_true(text_needs_escape("a\x1b[31mb"));
    assert_string_equal(printed("a\x1b[31mb", -1), "a\\x1b[31mb");
    assert_string_equal(printed("line\nforged", -1), "line\\x0aforged");
    assert_string_equal(printed("bell\a\x7f", -1), "bell\\x07\\x7f");
    assert_string_equal(printed("csi\xc2\x9b" "2J", -1), "csi\\xc2\\x9b2J"); /* C1 in UTF-8 */
    assert_string_equal(printed("back\\slash\t", -1), "back\\\\slash\\x09");
}

static void test_width_never_cuts_an_escape(void **state)
{
    (void)state;
    assert_string_equal(printed("abcdef", 3), "abc");
    assert_string_equal(printed("ab\x1b" "cd", 5), "ab"); /* \x1b needs 4 more */
    assert_string_equal(printed("ab\x1b" "cd", 6), "ab\\x1b");
}

static void test_into_buffer(void **state)
{
    (void)state;
    char buffer[8];
    assert_string_equal(text_escape("x\x1by", buffer, sizeof buffer), "x\\x1by");
    assert_string_equal(text_escape("\x1b\x1b", buffer, sizeof buffer), "\\x1b"); /* cut whole */
    assert_string_equal(text_escape("plain", buffer, sizeof buffer), "plain");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_names_unchanged),
        cmocka_unit_test(test_controls_escaped),
        cmocka_unit_test(test_width_never_cuts_an_escape),
        cmocka_unit_test(test_into_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_python_linetable.c - the shim's reading of CPython's location
 * tables (preload/python_linetable.c) against the lines CPython itself
 * gives every instruction of real code objects (3.6 to 3.13:
 * data/python_linetables.h, written by data/gen_python_linetables.py),
 * and against damaged tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../preload/python_linetable.h"
#include "data/python_linetables.h"

/* A reader of one format (python_linetable.h). */
typedef int (*line_reader)(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                           struct python_linetable_cursor *cursor);

/* What a reader gives past the last instruction: no line (-1), or, for the
 * lnotab of 3.6 to 3.9, the last instruction's line (LAST_LINE). */
#define LAST_LINE (-2)

static int past_end_line(const struct linetable_case *code, int past_end)
{
    return past_end == LAST_LINE ? code->lines[code->instructions - 1] : past_end;
}

static void check_cases_with(line_reader read, const struct linetable_case *cases, size_t count, int past_end)
{
    size_t checked = 0;
    for (size_t c = 0; c < count; c++) {
        const struct linetable_case *code = &cases[c];
        for (unsigned i = 0; i < code->instructions; i++) {
            struct python_linetable_cursor start = {0, 0, 0};
            int line = read(code->table, code->table_length, code->first_line, i * 2, &start);
            if (line != code->lines[i])
                fail_msg("%s: instruction %u (byte offset %u): line %d, CPython says %d", code->name, i, i * 2,
                         line, code->lines[i]);
            checked++;
        }
        struct python_linetable_cursor start = {0, 0, 0};
        assert_int_equal(read(code->table, code->table_length, code->first_line, code->instructions * 2, &start),
                         past_end_line(code, past_end));
    }
    assert_true(checked > 100);
}

static void check_cases(const struct linetable_case *cases, size_t count)
{
    check_cases_with(python_linetable_line_from, cases, count, -1);
}

/* Reading on from a cursor gives CPython's line for every instruction,
 * whatever order they are asked in: forwards (as code runs), backwards (a
 * loop jumping back, read from the start again) and in strides. */
static void check_cursor_orders_with(line_reader read, const struct linetable_case *cases, size_t count,
                                     int past_end)
{
    for (size_t c = 0; c < count; c++) {
        const struct linetable_case *code = &cases[c];
        unsigned n = code->instructions;
        for (int order = 0; order < 3; order++) {
            struct python_linetable_cursor cursor = {0, 0, 0};
            for (unsigned k = 0; k < n; k++) {
                unsigned i = order == 0 ? k : order == 1 ? n - 1 - k : (k * 7) % n;
                int line = read(code->table, code->table_length, code->first_line, i * 2, &cursor);
                if (line != code->lines[i])
                    fail_msg("%s, order %d: instruction %u: line %d from the cursor, CPython says %d", code->name,
                             order, i, line, code->lines[i]);
            }
            assert_int_equal(read(code->table, code->table_length, code->first_line, n * 2, &cursor),
                             past_end_line(code, past_end));
        }
    }
}

static void check_cursor_orders(const struct linetable_case *cases, size_t count)
{
    check_cursor_orders_with(python_linetable_line_from, cases, count, -1);
}

static void cursor_reads_on_in_any_order(void **state)
{
    (void)state;
    check_cursor_orders(py311_cases, sizeof py311_cases / sizeof py311_cases[0]);
    check_cursor_orders(py312_cases, sizeof py312_cases / sizeof py312_cases[0]);
    check_cursor_orders(py313_cases, sizeof py313_cases / sizeof py313_cases[0]);
}

static void every_instruction_of_python_3_11(void **state)
{
    (void)state;
    check_cases(py311_cases, sizeof py311_cases / sizeof py311_cases[0]);
}

static void every_instruction_of_python_3_12(void **state)
{
    (void)state;
    check_cases(py312_cases, sizeof py312_cases / sizeof py312_cases[0]);
}

static void every_instruction_of_python_3_13(void **state)
{
    (void)state;
    check_cases(py313_cases, sizeof py313_cases / sizeof py313_cases[0]);
}

#define CASES(name) name, sizeof name / sizeof name[0]

static void every_instruction_of_python_3_10(void **state)
{
    (void)state;
    check_cases_with(python_linetable310_line_from, CASES(py310_cases), -1);
    check_cursor_orders_with(python_linetable310_line_from, CASES(py310_cases), -1);
}

static void every_instruction_of_python_3_6_to_3_9(void **state)
{
    (void)state;
    check_cases_with(python_lnotab_line_from, CASES(py36_cases), LAST_LINE);
    check_cases_with(python_lnotab_line_from, CASES(py37_cases), LAST_LINE);
    check_cases_with(python_lnotab_line_from, CASES(py38_cases), LAST_LINE);
    check_cases_with(python_lnotab_line_from, CASES(py39_cases), LAST_LINE);
    check_cursor_orders_with(python_lnotab_line_from, CASES(py36_cases), LAST_LINE);
    check_cursor_orders_with(python_lnotab_line_from, CASES(py37_cases), LAST_LINE);
    check_cursor_orders_with(python_lnotab_line_from, CASES(py38_cases), LAST_LINE);
    check_cursor_orders_with(python_lnotab_line_from, CASES(py39_cases), LAST_LINE);
}

/* The older samples hold what their formats have beyond plain pairs: in
 * 3.10 an instruction without a line (-128) and a pair of no length; in
 * the lnotab a line going back (a negative increment) and a jump of over
 * 127 lines split over several pairs. */
static void older_samples_cover_their_forms(void **state)
{
    (void)state;
    int no_line = 0, empty = 0, back = 0, split = 0;
    for (size_t c = 0; c < sizeof py310_cases / sizeof py310_cases[0]; c++)
        for (unsigned b = 0; b + 1 < py310_cases[c].table_length; b += 2) {
            no_line += py310_cases[c].table[b + 1] == 0x80;
            empty += py310_cases[c].table[b] == 0;
        }
    for (size_t c = 0; c < sizeof py38_cases / sizeof py38_cases[0]; c++)
        for (unsigned b = 0; b + 1 < py38_cases[c].table_length; b += 2) {
            back += py38_cases[c].table[b + 1] >= 0x80;
            split += py38_cases[c].table[b] == 0 && py38_cases[c].table[b + 1] == 0x7f;
        }
    assert_true(no_line > 0);
    assert_true(empty > 0);
    assert_true(back > 0);
    assert_true(split > 0);
}

/* A long jump (the far_jump sample's 300 blank lines) needs the long form
 * with a multi-chunk varint: the sample must contain one, or the test above
 * would not cover it. */
static void samples_cover_the_long_form(void **state)
{
    (void)state;
    int long_forms = 0, no_lines = 0;
    for (size_t c = 0; c < sizeof py311_cases / sizeof py311_cases[0]; c++)
        for (unsigned b = 0; b < py311_cases[c].table_length; b++) {
            unsigned char byte = py311_cases[c].table[b];
            long_forms += (byte & 0x80) && ((byte >> 3) & 15) == 14;
            no_lines += (byte & 0x80) && ((byte >> 3) & 15) == 15;
        }
    assert_true(long_forms > 0);
    assert_true(no_lines > 0);
}

/* Reads of a table copied into a heap buffer of its exact size: ASan
 * fails the test on any byte read past it. */
static int line_of_copy(const unsigned char *bytes, size_t length, int first_line, uint32_t offset)
{
    unsigned char *copy = malloc(length ? length : 1);
    assert_non_null(copy);
    memcpy(copy, bytes, length);
    int line = python_linetable_line(copy, length, first_line, offset);
    free(copy);
    return line;
}

static void damaged_tables_stay_in_bounds(void **state)
{
    (void)state;
    assert_int_equal(python_linetable_line(NULL, 0, 10, 0), -1);
    /* no first byte at all: continuation bytes only */
    static const unsigned char continuation[] = {0x41, 0x42, 0x43};
    assert_int_equal(line_of_copy(continuation, sizeof continuation, 10, 0), -1);
    /* a long form whose varint runs off the end: delta 1 (+2 >> 1), read no further */
    static const unsigned char cut[] = {0xf0, 0x42};
    assert_int_equal(line_of_copy(cut, sizeof cut, 10, 0), 11);
    /* a delta that takes the line below 1 is no line */
    static const unsigned char negative[] = {0xe8 /* no columns, 1 unit */, 0x3f /* -31 */};
    assert_int_equal(line_of_copy(negative, sizeof negative, 10, 0), -1);
    /* a varint of many chunks does not overflow into nonsense shifts */
    static const unsigned char long_varint[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x01};
    line_of_copy(long_varint, sizeof long_varint, 10, 0);
}

/* The older formats read whole pairs only: a dangling last byte is not
 * read, an empty table gives 3.10 no line and the lnotab its first line. */
static int older_line_of_copy(line_reader read, const unsigned char *bytes, size_t length, int first_line,
                              uint32_t offset)
{
    unsigned char *copy = malloc(length ? length : 1);
    assert_non_null(copy);
    memcpy(copy, bytes, length);
    struct python_linetable_cursor cursor = {0, 0, 0};
    int line = read(copy, length, first_line, offset, &cursor);
    free(copy);
    return line;
}

static void damaged_older_tables_stay_in_bounds(void **state)
{
    (void)state;
    struct python_linetable_cursor cursor = {0, 0, 0};
    assert_int_equal(python_linetable310_line_from(NULL, 0, 10, 0, &cursor), -1);
    assert_int_equal(python_lnotab_line_from(NULL, 0, 10, 0, &cursor), 10);
    static const unsigned char dangling[] = {0x04, 0x01, 0x04};
    assert_int_equal(older_line_of_copy(python_linetable310_line_from, dangling, sizeof dangling, 10, 2), 11);
    assert_int_equal(older_line_of_copy(python_linetable310_line_from, dangling, sizeof dangling, 10, 6), -1);
    assert_int_equal(older_line_of_copy(python_lnotab_line_from, dangling, sizeof dangling, 10, 100), 11);
    /* increments that take the line below 1 are no line */
    static const unsigned char down[] = {0x02, 0xf0};
    assert_int_equal(older_line_of_copy(python_linetable310_line_from, down, sizeof down, 10, 0), -1);
    assert_int_equal(older_line_of_copy(python_lnotab_line_from, down, sizeof down, 10, 4), -1);
    /* a cursor left past the table starts again from the start (where
     * byte 2 has the first line: the increment to 11 comes at byte 4) */
    cursor = (struct python_linetable_cursor){40, 2, 11};
    assert_int_equal(python_lnotab_line_from(dangling, sizeof dangling, 10, 2, &cursor), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_instruction_of_python_3_11),
        cmocka_unit_test(every_instruction_of_python_3_12),
        cmocka_unit_test(every_instruction_of_python_3_13),
        cmocka_unit_test(every_instruction_of_python_3_10),
        cmocka_unit_test(every_instruction_of_python_3_6_to_3_9),
        cmocka_unit_test(cursor_reads_on_in_any_order),
        cmocka_unit_test(samples_cover_the_long_form),
        cmocka_unit_test(older_samples_cover_their_forms),
        cmocka_unit_test(damaged_tables_stay_in_bounds),
        cmocka_unit_test(damaged_older_tables_stay_in_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

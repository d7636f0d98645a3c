/*
 * test_python_linetable.c - the shim's reading of CPython's location
 * tables (preload/python_linetable.c) against the lines CPython itself
 * gives every instruction of real code objects (3.11, 3.12 and 3.13:
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

static void check_cases(const struct linetable_case *cases, size_t count)
{
    size_t checked = 0;
    for (size_t c = 0; c < count; c++) {
        const struct linetable_case *code = &cases[c];
        for (unsigned i = 0; i < code->instructions; i++) {
            int line = python_linetable_line(code->table, code->table_length, code->first_line, i * 2);
            if (line != code->lines[i])
                fail_msg("%s: instruction %u (byte offset %u): line %d, CPython says %d", code->name, i, i * 2,
                         line, code->lines[i]);
            checked++;
        }
        /* past the last instruction there is no line */
        assert_int_equal(python_linetable_line(code->table, code->table_length, code->first_line,
                                               code->instructions * 2),
                         -1);
    }
    assert_true(checked > 100);
}

/* Reading on from a cursor gives CPython's line for every instruction,
 * whatever order they are asked in: forwards (as code runs), backwards (a
 * loop jumping back, read from the start again) and in strides. */
static void check_cursor_orders(const struct linetable_case *cases, size_t count)
{
    for (size_t c = 0; c < count; c++) {
        const struct linetable_case *code = &cases[c];
        unsigned n = code->instructions;
        for (int order = 0; order < 3; order++) {
            struct python_linetable_cursor cursor = {0, 0, 0};
            for (unsigned k = 0; k < n; k++) {
                unsigned i = order == 0 ? k : order == 1 ? n - 1 - k : (k * 7) % n;
                int line = python_linetable_line_from(code->table, code->table_length, code->first_line, i * 2,
                                                      &cursor);
                if (line != code->lines[i])
                    fail_msg("%s, order %d: instruction %u: line %d from the cursor, CPython says %d", code->name,
                             order, i, line, code->lines[i]);
            }
            assert_int_equal(python_linetable_line_from(code->table, code->table_length, code->first_line, n * 2,
                                                        &cursor),
                             -1);
        }
    }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_instruction_of_python_3_11),
        cmocka_unit_test(every_instruction_of_python_3_12),
        cmocka_unit_test(every_instruction_of_python_3_13),
        cmocka_unit_test(cursor_reads_on_in_any_order),
        cmocka_unit_test(samples_cover_the_long_form),
        cmocka_unit_test(damaged_tables_stay_in_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

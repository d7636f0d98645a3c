/* test_command_options.c - the subcommands' option tables as shipped: each
 * entry well formed (a value name exactly when it takes a value, a parse
 * function where one is needed, help text, no name twice), and every
 * option named in the man page's section of its command, so that
 * `memslope help NAME` and docs/memslope.1 list the same options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/commands.h"

static const struct option_table *const tables[] = {
    &cmd_record_options, &cmd_report_options, &cmd_gate_options,        &cmd_diff_options,
    &cmd_leaks_options,  &cmd_perf_options,   &cmd_instruments_options,
};
#define TABLE_COUNT (sizeof tables / sizeof tables[0])

static int takes_value(const struct option_entry *entry)
{
    return entry->kind == OPTION_STRING || entry->kind == OPTION_LIST || entry->kind == OPTION_VALUE;
}

static void check_entry(const struct option_table *table, const struct option_entry *entry)
{
    const char *name = entry->long_name ? entry->long_name : "(short only)";
    if (!entry->long_name && !entry->short_name)
        fail_msg("%s: an entry without a name", table->command);
    if (!entry->help || !*entry->help)
        fail_msg("%s --%s: no help line", table->command, name);
    if (takes_value(entry) && !entry->value_name)
        fail_msg("%s --%s: takes a value but the usage names none", table->command, name);
    if (entry->kind == OPTION_FLAG && entry->value_name)
        fail_msg("%s --%s: a flag with a value name", table->command, name);
    if ((entry->kind == OPTION_VALUE || entry->kind == OPTION_ACTION) && !entry->parse)
        fail_msg("%s --%s: no parse function", table->command, name);
    if (entry->short_name == 'h' || (entry->long_name && strcmp(entry->long_name, "help") == 0))
        fail_msg("%s --%s: -h and --help are every command's usage", table->command, name);
}

static void check_unique(const struct option_table *table, size_t i)
{
    const struct option_entry *a = &table->entries[i];
    for (size_t j = i + 1; j < table->entry_count; j++) {
        const struct option_entry *b = &table->entries[j];
        if (a->long_name && b->long_name && strcmp(a->long_name, b->long_name) == 0)
            fail_msg("%s: --%s twice", table->command, a->long_name);
        if (a->short_name && a->short_name == b->short_name)
            fail_msg("%s: -%c twice", table->command, a->short_name);
    }
}

static void test_entries_well_formed(void **state)
{
    (void)state;
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        assert_non_null(tables[t]->command);
        assert_non_null(tables[t]->synopsis);
        assert_true(tables[t]->entry_count > 0);
        assert_true(tables[t]->failure_status > 0);
        for (size_t i = 0; i < tables[t]->entry_count; i++) {
            check_entry(tables[t], &tables[t]->entries[i]);
            check_unique(tables[t], i);
        }
    }
}

static char *read_man_page(void)
{
    FILE *file = fopen("docs/memslope.1", "r");
    assert_non_null(file);
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 20) - 1, file);
    fclose(file);
    assert_true(n > 0);
    return text;
}

/* From `.SS "memslope NAME ` to the next .SS or .SH; NUL-terminated in place. */
static char *man_section(char *page, const char *command)
{
    char heading[64];
    snprintf(heading, sizeof heading, ".SS \"memslope %s ", command);
    char *start = strstr(page, heading);
    if (!start)
        fail_msg("docs/memslope.1 has no section %s\"", heading);
    char *end = start + 1;
    while ((end = strstr(end, "\n.S")) && end[3] != 'S' && end[3] != 'H')
        end++;
    char *section = strndup(start, end ? (size_t)(end - start) : strlen(start));
    assert_non_null(section);
    return section;
}

/* "--max-leaked" as roff writes it, "\-\-max\-leaked", followed by
 * something that cannot continue the name (not "\-\-max\-leaked\-blocks"). */
static int man_names(const char *section, const char *dashes, const char *name)
{
    char roff[256] = "";
    for (const char *c = dashes; *c; c++)
        strcat(roff, "\\-");
    for (const char *c = name; *c; c++)
        strncat(roff, *c == '-' ? "\\-" : (char[]){*c, 0}, sizeof roff - strlen(roff) - 1);
    size_t length = strlen(roff);
    for (const char *at = strstr(section, roff); at; at = strstr(at + 1, roff)) {
        const char *after = at + length;
        if (!isalnum((unsigned char)*after) && strncmp(after, "\\-", 2) != 0)
            return 1;
    }
    return 0;
}

static void test_man_page_lists_every_option(void **state)
{
    (void)state;
    char *page = read_man_page();
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        char *section = man_section(page, tables[t]->command);
        for (size_t i = 0; i < tables[t]->entry_count; i++) {
            const struct option_entry *entry = &tables[t]->entries[i];
            if (entry->long_name && !man_names(section, "--", entry->long_name))
                fail_msg("docs/memslope.1's section on %s lacks --%s", tables[t]->command, entry->long_name);
            if (entry->short_name && !man_names(section, "-", (char[]){entry->short_name, 0}))
                fail_msg("docs/memslope.1's section on %s lacks -%c", tables[t]->command, entry->short_name);
        }
        free(section);
    }
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries_well_formed),
        cmocka_unit_test(test_man_page_lists_every_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

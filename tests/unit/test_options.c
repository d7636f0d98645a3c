/* test_options.c - the option tables (common/options.h): both value forms,
 * short options, flags, repeated options, "--", the two operand modes, the
 * usage printed from the table, and each kind of bad input with its exit
 * status and message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/options.h"

struct sample_options {
    const char *output;
    const char *name;
    bool verbose;
    int quiet;
    unsigned level;
    struct option_list includes;
    int actions;
};

static int parse_level(const char *value, void *destination, char *err, size_t err_size)
{
    char *end;
    unsigned long level = strtoul(value, &end, 10);
    if (!*value || *end || level > 9) {
        snprintf(err, err_size, "--level takes a number from 0 to 9, not: %s", value);
        return -1;
    }
    *(unsigned *)destination = (unsigned)level;
    return 0;
}

static int count_action(const char *value, void *destination, char *err, size_t err_size)
{
    (void)value, (void)err, (void)err_size;
    ((struct sample_options *)destination)->actions++;
    return 0;
}

static const struct option_entry sample_entries[] = {
    OPT_STRING('o', "output", "FILE", struct sample_options, output, "where it goes\n(default stdout)"),
    OPT_STRING(0, "name", "NAME", struct sample_options, name, "a name", .wants = "a name to use", .nonempty = true),
    OPT_FLAG('v', "verbose", struct sample_options, verbose, "say more"),
    OPT_FLAG(0, "quiet", struct sample_options, quiet, "say less"),
    OPT_VALUE(0, "level", "N", struct sample_options, level, parse_level, "how much"),
    OPT_LIST('I', "include", "DIR", struct sample_options, includes, "also look in DIR"),
    OPT_ACTION(0, "a-rather-long-option-name", NULL, count_action, "counted"),
};

static const struct option_table anywhere_table = {
    .command = "sample",
    .synopsis = "[options] FILE...",
    .mode = OPERANDS_ANYWHERE,
    .entries = sample_entries,
    .entry_count = OPTION_COUNT(sample_entries),
    .notes = "Notes go last.\n",
    .failure_status = 1,
};

static const struct option_table command_table = {
    .command = "sample",
    .synopsis = "[options] [--] COMMAND [ARG...]",
    .mode = OPERANDS_END_OPTIONS,
    .entries = sample_entries,
    .entry_count = OPTION_COUNT(sample_entries),
    .failure_status = 1,
};

static const struct option_entry ambiguous_entries[] = {
    OPT_STRING(0, "version", "V", struct sample_options, output, "the whole name of another"),
    OPT_FLAG(0, "version-list", struct sample_options, quiet, "begins like it"),
    OPT_FLAG(0, "verbose", struct sample_options, verbose, "also begins with --ver"),
};

static const struct option_table ambiguous_table = {
    .command = "sample",
    .synopsis = "[options]",
    .entries = ambiguous_entries,
    .entry_count = OPTION_COUNT(ambiguous_entries),
    .failure_status = 1,
};

/* What one options_parse call did: its result, options, operands, and
 * what it wrote on stdout and stderr. */
struct parsed {
    int rc;
    struct sample_options options;
    struct option_operands operands;
    char out[4096], err[4096];
};

static void read_all(FILE *file, char *text, size_t size)
{
    rewind(file);
    size_t n = fread(text, 1, size - 1, file);
    text[n] = '\0';
    fclose(file);
}

/* argv is modified in place, as by options_parse for the caller. */
static void parse(const struct option_table *table, int argc, char **argv, struct parsed *p)
{
    memset(p, 0, sizeof *p);
    p->options.quiet = -1; /* a default; a flag makes it exactly 1 */
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    p->rc = options_parse(table, argc, argv, &p->options, &p->operands);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    read_all(out, p->out, sizeof p->out);
    read_all(err, p->err, sizeof p->err);
}

static void free_parsed(struct parsed *p)
{
    option_list_free(&p->options.includes);
}

#define ARGV(...) ((char *[]){"sample", __VA_ARGS__})
#define ARGC(...) ((int)(sizeof((char *[]){"sample", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(table, p, ...) parse(table, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), p)

static void expect_in(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("missing '%s' in:\n%s", part, text);
}

static void test_value_forms(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "--output=a.out", "--name", "n1", "--level=7", "-I", "x", "-Iy", "f");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_string_equal(p.options.output, "a.out");
    assert_string_equal(p.options.name, "n1");
    assert_int_equal(p.options.level, 7);
    assert_int_equal(p.options.includes.count, 2);
    assert_string_equal(p.options.includes.items[0], "x");
    assert_string_equal(p.options.includes.items[1], "y");
    assert_int_equal(p.operands.count, 1);
    assert_string_equal(p.operands.items[0], "f");
    assert_string_equal(p.err, "");
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "--output", "b.out", "-oc.out", "--level", "3", "-o", "-d.out");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_string_equal(p.options.output, "-d.out"); /* the value is the next argument, whatever it looks like */
    assert_int_equal(p.options.level, 3);
    assert_int_equal(p.operands.count, 0);
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "--output=", "--name=a=b");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_string_equal(p.options.output, ""); /* no .nonempty: an empty value is a value */
    assert_string_equal(p.options.name, "a=b");
    free_parsed(&p);
}

static void test_flags_and_actions(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "-v", "--quiet", "--a-rather-long-option-name", "--a-rather-long-option-name");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_true(p.options.verbose);
    assert_int_equal(p.options.quiet, 1);
    assert_int_equal(p.options.actions, 2);
    assert_null(p.options.output);
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "--verbose");
    assert_true(p.options.verbose);
    assert_int_equal(p.options.quiet, -1);
    free_parsed(&p);
}

static void test_repeated_options(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "-o", "first", "--level", "1", "--output=second", "--level=2", "-I", "a", "--include",
          "b", "--include=c");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_string_equal(p.options.output, "second");
    assert_int_equal(p.options.level, 2);
    assert_int_equal(p.options.includes.count, 3);
    assert_string_equal(p.options.includes.items[0], "a");
    assert_string_equal(p.options.includes.items[1], "b");
    assert_string_equal(p.options.includes.items[2], "c");
    free_parsed(&p);
}

static void test_operands_anywhere(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "one", "-v", "two", "-", "--level", "4", "three", "--", "--quiet", "-o", "four");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_true(p.options.verbose);
    assert_int_equal(p.options.level, 4);
    assert_int_equal(p.options.quiet, -1); /* after "--": an operand */
    assert_null(p.options.output);
    const char *expected[] = {"one", "two", "-", "three", "--quiet", "-o", "four"};
    assert_int_equal(p.operands.count, 7);
    for (int i = 0; i < 7; i++)
        assert_string_equal(p.operands.items[i], expected[i]);
    free_parsed(&p);
}

static void test_operands_end_options(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&command_table, &p, "-v", "ls", "-o", "x", "--help");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_true(p.options.verbose);
    assert_null(p.options.output); /* ls's own -o */
    assert_int_equal(p.operands.count, 4);
    assert_string_equal(p.operands.items[0], "ls");
    assert_string_equal(p.operands.items[3], "--help");
    assert_string_equal(p.out, "");
    free_parsed(&p);

    PARSE(&command_table, &p, "--quiet", "--", "-v", "x");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_false(p.options.verbose);
    assert_int_equal(p.operands.count, 2);
    assert_string_equal(p.operands.items[0], "-v");
    free_parsed(&p);

    PARSE(&command_table, &p, "-o", "f", "--");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_int_equal(p.operands.count, 0);
    free_parsed(&p);
}

static void test_unknown_options(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "f", "--nope", "-v");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    assert_false(p.options.verbose); /* parsing stopped at the error */
    expect_in(p.err, "memslope sample: unknown option '--nope'\nusage: memslope sample [options] FILE...\n");
    assert_string_equal(p.out, "");
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "-x");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "unknown option '-x'");
    free_parsed(&p);

    /* A flag's letter does not take a tail. */
    PARSE(&anywhere_table, &p, "-vx");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "unknown option '-vx'");
    free_parsed(&p);
    PARSE(&anywhere_table, &p, "--outputx=1");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "unknown option '--outputx=1'");
    free_parsed(&p);
}

/* A prefix of one long name stands for it; a prefix of several is refused. */
static void test_abbreviations(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "--out", "x", "--verb", "--le=5", "--a-r");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_string_equal(p.options.output, "x");
    assert_true(p.options.verbose);
    assert_int_equal(p.options.level, 5);
    assert_int_equal(p.options.actions, 1);
    free_parsed(&p);

    PARSE(&ambiguous_table, &p, "--ver=1");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: option '--ver' is ambiguous: give more of its name\n");
    assert_null(p.options.output);
    free_parsed(&p);

    /* The whole name wins over the longer names it begins. */
    PARSE(&ambiguous_table, &p, "--version", "1", "--verbose");
    assert_int_equal(p.rc, OPTIONS_RUN);
    assert_string_equal(p.options.output, "1");
    assert_true(p.options.verbose);
    free_parsed(&p);
}

static void test_missing_values(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "f", "--output");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: --output needs a value (--output FILE)\nusage:");
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "-o");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: -o needs a value (-o FILE)\n");
    free_parsed(&p);

    /* .wants names what was expected; .nonempty refuses "" the same way. */
    PARSE(&anywhere_table, &p, "--name");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: --name needs a name to use\n");
    free_parsed(&p);
    PARSE(&anywhere_table, &p, "--name=");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: --name needs a name to use\n");
    assert_null(p.options.name);
    free_parsed(&p);
    PARSE(&anywhere_table, &p, "--name", "");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    free_parsed(&p);
}

static void test_bad_values(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "--level", "10");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: --level takes a number from 0 to 9, not: 10\nusage:");
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "--verbose=yes");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    expect_in(p.err, "memslope sample: --verbose takes no value ('--verbose=yes')\n");
    assert_false(p.options.verbose);
    free_parsed(&p);
}

static const char expected_usage[] =
    "usage: memslope sample [options] FILE...\n"
    "  -o, --output FILE         where it goes\n"
    "                            (default stdout)\n"
    "  --name NAME               a name\n"
    "  -v, --verbose             say more\n"
    "  --quiet                   say less\n"
    "  --level N                 how much\n"
    "  -I, --include DIR         also look in DIR\n"
    "  --a-rather-long-option-name\n"
    "                            counted\n"
    "Notes go last.\n";

static void test_help(void **state)
{
    (void)state;
    struct parsed p;
    PARSE(&anywhere_table, &p, "-v", "--help", "--nope");
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.out, expected_usage);
    assert_string_equal(p.err, "");
    free_parsed(&p);

    PARSE(&anywhere_table, &p, "-h");
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.out, expected_usage);
    free_parsed(&p);

    /* The same text after a usage error, on stderr. */
    PARSE(&anywhere_table, &p, "--level");
    assert_int_equal(p.rc, OPTIONS_EXIT_USAGE);
    assert_string_equal(strchr(p.err, '\n') + 1, expected_usage);
    free_parsed(&p);
}

static void test_usage_without_notes(void **state)
{
    (void)state;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    options_print_usage(&command_table, out);
    fclose(out);
    expect_in(text, "usage: memslope sample [options] [--] COMMAND [ARG...]\n  -o, --output FILE");
    assert_null(strstr(text, "Notes"));
    free(text);
}

/* What the commands use for their operands: the message, then the usage. */
static void test_usage_error(void **state)
{
    (void)state;
    FILE *err = tmpfile();
    assert_non_null(err);
    fflush(stderr);
    int saved_err = dup(2);
    dup2(fileno(err), 2);
    int rc = options_usage_error(&anywhere_table, "give %d files", 2);
    fflush(stderr);
    dup2(saved_err, 2);
    close(saved_err);
    char text[4096];
    read_all(err, text, sizeof text);
    assert_int_equal(rc, OPTIONS_EXIT_USAGE);
    assert_string_equal(strchr(text, '\n') + 1, expected_usage);
    assert_int_equal(strncmp(text, "memslope sample: give 2 files\n", 30), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_forms),       cmocka_unit_test(test_flags_and_actions),
        cmocka_unit_test(test_repeated_options),  cmocka_unit_test(test_operands_anywhere),
        cmocka_unit_test(test_operands_end_options), cmocka_unit_test(test_unknown_options),
        cmocka_unit_test(test_abbreviations),
        cmocka_unit_test(test_missing_values),    cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_help),              cmocka_unit_test(test_usage_without_notes),
        cmocka_unit_test(test_usage_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

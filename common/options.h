/*
 * options.h - one table per subcommand that both parses its command line and
 * prints its usage, after the idea of perf's parse-options: the usage cannot
 * drift from what is parsed, and every subcommand reads its options the same
 * way.
 *
 * The accepted syntax, for every subcommand alike:
 *   --name VALUE, --name=VALUE, -n VALUE, -nVALUE   an option with a value
 *                                                   (the next argument is the
 *                                                   value, whatever it looks like)
 *   --name, -n                                      an option without one
 *   --                                              ends the options
 *   -h, --help                                      the usage on stdout, exit 0
 * A long name may be shortened to any prefix no other option shares, as
 * getopt_long allows (--out for --output). "-" alone is an operand.
 * Either the operands may sit anywhere among the options (report FILE
 * --format json), or the first operand ends the options and is the command
 * to run (record [options] COMMAND ARG...: COMMAND's own options stay its).
 *
 * A table is static const data naming each option's destination as an offset
 * in the subcommand's options struct, so that `memslope help NAME` prints the
 * same usage from the same table without parsing anything.
 */
#ifndef MEMSLOPE_OPTIONS_H
#define MEMSLOPE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* options_parse's result when the subcommand is to go on; any other result
 * is the exit status to return at once: 0 after --help, OPTIONS_EXIT_USAGE
 * after a usage error (said on stderr with the usage), or the table's
 * failure_status when memory ran out. The one convention of every
 * subcommand's parser. */
#define OPTIONS_RUN (-1)
#define OPTIONS_EXIT_USAGE 2

enum option_kind {
    OPTION_FLAG,   /* no value: sets its member (bool or int) to true */
    OPTION_STRING, /* the value itself (const char *, into argv); the last one given counts */
    OPTION_LIST,   /* every value given, in order, into a struct option_list */
    OPTION_VALUE,  /* parse converts and checks the value into its member */
    OPTION_ACTION, /* parse gets the whole options struct (value NULL when it takes none) */
};

/* The values of a repeatable option (--suppressions FILE...). */
struct option_list {
    const char **items; /* into argv */
    size_t count;
};

void option_list_free(struct option_list *list);

/* Converts value into *destination (its member, or the whole options struct
 * for OPTION_ACTION). 0, or -1 with err holding the whole message, naming
 * the option and the value ("--snapshots takes a number from 3 to 1000000,
 * not: 2"); options_parse prints it with the usage. */
typedef int option_parse_fn(const char *value, void *destination, char *err, size_t err_size);

struct option_entry {
    char short_name;        /* 'o' for -o; 0: none */
    const char *long_name;  /* "output" for --output; NULL: none */
    const char *value_name; /* "FILE" in the usage; NULL: the option takes no value */
    enum option_kind kind;
    size_t offset;          /* of the member in the options struct (0 for OPTION_ACTION) */
    bool flag_is_int;       /* OPTION_FLAG: the member is an int, not a bool */
    option_parse_fn *parse; /* OPTION_VALUE and OPTION_ACTION */
    const char *help;       /* its line in the usage; '\n' starts another, aligned */
    const char *wants;      /* a missing value's message: "-o needs a file name"; NULL: "needs a value (-o FILE)" */
    bool nonempty;          /* an empty value is refused as a missing one */
};

enum operand_mode {
    OPERANDS_ANYWHERE,    /* operands and options mixed; operands kept in order */
    OPERANDS_END_OPTIONS, /* the first operand and everything after it are a command to run */
};

struct option_table {
    const char *command;  /* "record": messages read "memslope record: ..." */
    const char *synopsis; /* "[options] [--] COMMAND [ARG...]": after "usage: memslope record " */
    enum operand_mode mode;
    const struct option_entry *entries;
    size_t entry_count;
    const char *notes;    /* printed after the options as they are (lines ending in '\n'); NULL: none */
    int failure_status;   /* the exit status when memory runs out: 1, gate's 2 (its 1 is "limit exceeded") */
};

/* The operands left after the options: into argv, in their order. */
struct option_operands {
    char **items;
    int count;
};

/* Parses argv[1..argc) (argv[0] is the subcommand's name) by table into
 * options, which the caller has filled with the defaults. Returns
 * OPTIONS_RUN with operands set, or an exit status (see OPTIONS_RUN). In
 * OPERANDS_ANYWHERE mode the operands are moved to the front of argv[1..],
 * as getopt permutes. OPTION_LIST members are to be freed with
 * option_list_free whatever this returns. */
int options_parse(const struct option_table *table, int argc, char **argv, void *options,
                  struct option_operands *operands);

/* "usage: memslope NAME SYNOPSIS", an aligned line per option, the notes. */
void options_print_usage(const struct option_table *table, FILE *out);

/* "memslope NAME: MESSAGE" and the usage on stderr; returns OPTIONS_EXIT_USAGE.
 * For what the table cannot check: operands, options that go together. */
int options_usage_error(const struct option_table *table, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Table entries. TYPE is the options struct, MEMBER the field the option
 * fills; a member of the wrong type does not compile. Designated
 * initializers after HELP add .wants or .nonempty. */
#define OPTION_MEMBER_(type, member, member_type) \
    (offsetof(type, member) + 0 * sizeof(&((type *)0)->member == (member_type *)0))

#define OPT_FLAG(short_name_, long_name_, type, member, help_, ...)                                              \
    {.short_name = (short_name_), .long_name = (long_name_), .kind = OPTION_FLAG,                              \
     .offset = offsetof(type, member), .flag_is_int = _Generic(((type *)0)->member, bool: false, int: true),   \
     .help = (help_), __VA_ARGS__}
#define OPT_STRING(short_name_, long_name_, value_name_, type, member, help_, ...)                               \
    {.short_name = (short_name_), .long_name = (long_name_), .value_name = (value_name_), .kind = OPTION_STRING, \
     .offset = OPTION_MEMBER_(type, member, const char *), .help = (help_), __VA_ARGS__}
#define OPT_LIST(short_name_, long_name_, value_name_, type, member, help_, ...)                                 \
    {.short_name = (short_name_), .long_name = (long_name_), .value_name = (value_name_), .kind = OPTION_LIST,   \
     .offset = OPTION_MEMBER_(type, member, struct option_list), .help = (help_), __VA_ARGS__}
#define OPT_VALUE(short_name_, long_name_, value_name_, type, member, parse_, help_, ...)                        \
    {.short_name = (short_name_), .long_name = (long_name_), .value_name = (value_name_), .kind = OPTION_VALUE,  \
     .offset = offsetof(type, member), .parse = (parse_), .help = (help_), __VA_ARGS__}
#define OPT_ACTION(short_name_, long_name_, value_name_, parse_, help_, ...)                                     \
    {.short_name = (short_name_), .long_name = (long_name_), .value_name = (value_name_), .kind = OPTION_ACTION, \
     .parse = (parse_), .help = (help_), __VA_ARGS__}

#define OPTION_COUNT(entries) (sizeof(entries) / sizeof((entries)[0]))

#endif

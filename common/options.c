/*
 * options.c - parses a subcommand's command line by its option table and
 * prints the usage from the same table (options.h).
 */
#include "options.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Where the help column starts in the usage; a longer name gets its own line. */
#define HELP_COLUMN 28

void option_list_free(struct option_list *list)
{
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

/* --- the usage -------------------------------------------------------------------- */

/* "-o, --output FILE", "--iteration SYMBOL", "-v, --verbose". */
static void format_names(const struct option_entry *entry, char *text, size_t size)
{
    int used = 0;
    if (entry->short_name)
        used = snprintf(text, size, "-%c%s", entry->short_name, entry->long_name ? ", " : "");
    if (entry->long_name && used >= 0 && (size_t)used < size)
        used += snprintf(text + used, size - (size_t)used, "--%s", entry->long_name);
    if (entry->value_name && used >= 0 && (size_t)used < size)
        snprintf(text + used, size - (size_t)used, " %s", entry->value_name);
}

static void print_entry(const struct option_entry *entry, FILE *out)
{
    char names[256];
    format_names(entry, names, sizeof names);
    int width = fprintf(out, "  %s", names);
    if (width + 2 > HELP_COLUMN) {
        fputc('\n', out);
        width = 0;
    }
    for (const char *line = entry->help; line && *line;) {
        const char *end = strchrnul(line, '\n');
        fprintf(out, "%*s%.*s\n", HELP_COLUMN - width, "", (int)(end - line), line);
        width = 0;
        line = *end ? end + 1 : end;
    }
    if (!entry->help || !*entry->help)
        fputc('\n', out);
}

void options_print_usage(const struct option_table *table, FILE *out)
{
    fprintf(out, "usage: memslope %s %s\n", table->command, table->synopsis);
    for (size_t i = 0; i < table->entry_count; i++)
        print_entry(&table->entries[i], out);
    if (table->notes)
        fputs(table->notes, out);
}

int options_usage_error(const struct option_table *table, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "memslope %s: ", table->command);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    options_print_usage(table, stderr);
    return OPTIONS_EXIT_USAGE;
}

/* --- one option ----------------------------------------------------------------- */

/* What the user typed is named back to them: "-o" or "--output". */
struct typed_option {
    const struct option_entry *entry;
    char name[128];
};

/* The entry named name[0..length), or the only one it is a prefix of (as
 * getopt_long allows); NULL when none. *ambiguous is set when several start
 * with it and none is it. */
static const struct option_entry *find_long(const struct option_table *table, const char *name, size_t length,
                                            bool *ambiguous)
{
    const struct option_entry *prefixed = NULL;
    size_t prefixed_count = 0;
    for (size_t i = 0; i < table->entry_count; i++) {
        const char *candidate = table->entries[i].long_name;
        if (!candidate || strncmp(candidate, name, length) != 0)
            continue;
        if (candidate[length] == '\0')
            return &table->entries[i];
        prefixed = &table->entries[i];
        prefixed_count++;
    }
    *ambiguous = prefixed_count > 1;
    return prefixed_count == 1 ? prefixed : NULL;
}

static const struct option_entry *find_short(const struct option_table *table, char name)
{
    for (size_t i = 0; i < table->entry_count; i++)
        if (table->entries[i].short_name && table->entries[i].short_name == name)
            return &table->entries[i];
    return NULL;
}

static int missing_value(const struct option_table *table, const struct typed_option *option)
{
    if (option->entry->wants)
        return options_usage_error(table, "%s needs %s", option->name, option->entry->wants);
    return options_usage_error(table, "%s needs a value (%s %s)", option->name, option->name,
                               option->entry->value_name);
}

static int append(const struct option_table *table, struct option_list *list, const char *value)
{
    const char **items = realloc(list->items, (list->count + 1) * sizeof *items);
    if (!items) {
        fprintf(stderr, "memslope %s: out of memory for the command line's %zu values\n", table->command,
                list->count + 1);
        return table->failure_status;
    }
    items[list->count++] = value;
    list->items = items;
    return OPTIONS_RUN;
}

/* Stores value (NULL for an option without one) as the entry says. */
static int apply(const struct option_table *table, const struct typed_option *option, const char *value,
                 void *options)
{
    const struct option_entry *entry = option->entry;
    char *member = (char *)options + entry->offset;
    if (value && entry->nonempty && !*value)
        return missing_value(table, option);
    char err[1024];
    switch (entry->kind) {
    case OPTION_FLAG:
        if (entry->flag_is_int)
            *(int *)(void *)member = 1;
        else
            *(bool *)member = true;
        return OPTIONS_RUN;
    case OPTION_STRING:
        *(const char **)(void *)member = value;
        return OPTIONS_RUN;
    case OPTION_LIST:
        return append(table, (struct option_list *)(void *)member, value);
    case OPTION_VALUE:
    case OPTION_ACTION:
        /* An OPTION_ACTION's offset is 0: its member is the whole struct. */
        if (entry->parse(value, member, err, sizeof err) != 0)
            return options_usage_error(table, "%s", err);
        return OPTIONS_RUN;
    }
    return OPTIONS_RUN;
}

/* argv[*index] starts with "--": "--name", "--name=VALUE" or "--name VALUE". */
static int take_long(const struct option_table *table, int argc, char **argv, int *index, void *options)
{
    const char *arg = argv[*index];
    const char *equals = strchr(arg, '=');
    size_t length = equals ? (size_t)(equals - arg) - 2 : strlen(arg) - 2;
    bool ambiguous = false;
    struct typed_option option = {find_long(table, arg + 2, length, &ambiguous), ""};
    if (ambiguous)
        return options_usage_error(table, "option '%.*s' is ambiguous: give more of its name", (int)(length + 2), arg);
    if (!option.entry)
        return options_usage_error(table, "unknown option '%s'", arg);
    snprintf(option.name, sizeof option.name, "--%s", option.entry->long_name);
    if (!option.entry->value_name) {
        if (equals)
            return options_usage_error(table, "%s takes no value ('%s')", option.name, arg);
        return apply(table, &option, NULL, options);
    }
    if (equals)
        return apply(table, &option, equals + 1, options);
    if (*index + 1 >= argc)
        return missing_value(table, &option);
    return apply(table, &option, argv[++*index], options);
}

/* argv[*index] is "-x...": "-n", "-nVALUE" or "-n VALUE". */
static int take_short(const struct option_table *table, int argc, char **argv, int *index, void *options)
{
    const char *arg = argv[*index];
    struct typed_option option = {find_short(table, arg[1]), ""};
    if (!option.entry || (!option.entry->value_name && arg[2]))
        return options_usage_error(table, "unknown option '%s'", arg);
    snprintf(option.name, sizeof option.name, "-%c", arg[1]);
    if (!option.entry->value_name)
        return apply(table, &option, NULL, options);
    if (arg[2])
        return apply(table, &option, arg + 2, options);
    if (*index + 1 >= argc)
        return missing_value(table, &option);
    return apply(table, &option, argv[++*index], options);
}

/* --- the command line ------------------------------------------------------------- */

static int is_operand(const char *arg)
{
    return arg[0] != '-' || arg[1] == '\0';
}

int options_parse(const struct option_table *table, int argc, char **argv, void *options,
                  struct option_operands *operands)
{
    int kept = 1; /* OPERANDS_ANYWHERE: argv[1..kept) holds the operands seen */
    int i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (is_operand(arg)) {
            if (table->mode == OPERANDS_END_OPTIONS)
                break;
            argv[kept++] = argv[i];
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            options_print_usage(table, stdout);
            return 0;
        }
        int rc = arg[1] == '-' ? take_long(table, argc, argv, &i, options) : take_short(table, argc, argv, &i, options);
        if (rc != OPTIONS_RUN)
            return rc;
    }
    if (table->mode == OPERANDS_END_OPTIONS) {
        operands->items = argv + i;
        operands->count = argc - i;
        return OPTIONS_RUN;
    }
    while (i < argc)
        argv[kept++] = argv[i++];
    operands->items = argv + 1;
    operands->count = kept - 1;
    return OPTIONS_RUN;
}

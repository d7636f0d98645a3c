/*
 * cmd_diff.c - `memslope diff OLD.trace NEW.trace [--format text|json]
 * [--case NAME] [--suppressions FILE]... [--no-default-suppressions]`: per
 * case, the sites whose growth, leaks, peak or allocations changed, matched
 * by their function stack (diff.h). 0 success (changes or not), 1 a trace
 * or suppression file cannot be read, 2 usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "../common/output_file.h"
#include "../report/report.h"

struct diff_options {
    const char *paths[2]; /* OLD, NEW */
    bool json;
    const char *case_name;
    struct option_list suppression_files;
    bool no_default_suppressions;
};

static int parse_format(const char *value, void *destination, char *err, size_t err_size)
{
    if (strcmp(value, "text") != 0 && strcmp(value, "json") != 0) {
        snprintf(err, err_size, "--format takes text or json, not: %s", value);
        return -1;
    }
    *(bool *)destination = strcmp(value, "json") == 0;
    return 0;
}

static const struct option_entry diff_entries[] = {
    OPT_VALUE(0, "format", "text|json", struct diff_options, json, parse_format, "text (default) or JSON"),
    OPT_STRING(0, "case", "NAME", struct diff_options, case_name, "only the case NAME"),
    OPT_LIST(0, "suppressions", "FILE", struct diff_options, suppression_files,
             "leak suppressions to apply to both (repeatable)"),
    OPT_FLAG(0, "no-default-suppressions", struct diff_options, no_default_suppressions,
             "do not apply the default suppressions"),
};

const struct option_table cmd_diff_options = {
    .command = "diff",
    .synopsis = "OLD.trace NEW.trace [options]",
    .mode = OPERANDS_ANYWHERE,
    .entries = diff_entries,
    .entry_count = OPTION_COUNT(diff_entries),
    .notes = "Per case, the sites whose growth per iteration, leaks, peak or allocations changed, matched by\n"
             "their function stack (never by address), largest change first; unchanged sites are left out.\n",
    .failure_status = 1,
};

/* OPTIONS_RUN, or the exit status (options.h). */
static int parse_options(int argc, char **argv, struct diff_options *options)
{
    struct option_operands traces;
    int rc = options_parse(&cmd_diff_options, argc, argv, options, &traces);
    if (rc != OPTIONS_RUN)
        return rc;
    if (traces.count != 2)
        return options_usage_error(&cmd_diff_options, "%s",
                                   traces.count < 2 ? "give two traces, OLD and NEW" : "more than two traces given");
    options->paths[0] = traces.items[0];
    options->paths[1] = traces.items[1];
    if (strcmp(options->paths[0], "-") == 0 && strcmp(options->paths[1], "-") == 0)
        return options_usage_error(&cmd_diff_options, "standard input holds one trace: give OLD or NEW as a file");
    return OPTIONS_RUN;
}

/* The set is to be freed whatever this returns. */
static int load_suppressions(const struct diff_options *options, struct suppressions *set)
{
    char err[1024];
    if (suppressions_init(set) != 0) {
        fputs("memslope diff: out of memory\n", stderr);
        return -1;
    }
    if (suppressions_load_all(set, options->suppression_files.items, options->suppression_files.count,
                              options->no_default_suppressions, err, sizeof err) != 0) {
        fprintf(stderr, "memslope diff: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < set->warning_count; i++)
        fprintf(stderr, "memslope diff: warning: %s\n", set->warnings[i]);
    return 0;
}

/* Reads a trace and builds its report; 0, or -1 after saying why. */
static int load_report(const char *path, const struct suppressions *suppressions, struct trace_model *model,
                       struct report *report)
{
    char err[1024];
    if (trace_read_file(path, model, err, sizeof err) != 0) {
        fprintf(stderr, "memslope diff: %s\n", err);
        return -1;
    }
    if (model->incomplete)
        fprintf(stderr, "memslope diff: warning: %s is incomplete (%s); comparing what it holds\n",
                output_file_input_name(path), model->incomplete_reason);
    struct report_request request = {REPORT_METRIC_GROWTH, NULL, suppressions, NULL};
    if (report_build_request(report, model, path, &request, err, sizeof err) != 0) {
        fprintf(stderr, "memslope diff: %s\n", err);
        trace_model_free(model);
        return -1;
    }
    return 0;
}

static int diff_traces(const struct diff_options *options, const struct suppressions *suppressions)
{
    struct trace_model models[2];
    struct report reports[2];
    if (load_report(options->paths[0], suppressions, &models[0], &reports[0]) != 0)
        return 1;
    int rc = 1;
    if (load_report(options->paths[1], suppressions, &models[1], &reports[1]) == 0) {
        struct report_diff diff;
        char err[1024];
        if (report_diff_build(&diff, &reports[0], &reports[1], options->case_name, err, sizeof err) == 0) {
            if (options->json)
                report_diff_write_json(&diff, stdout);
            else
                report_diff_write_text(&diff, stdout);
            rc = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
            if (rc)
                fputs("memslope diff: cannot write the comparison to stdout\n", stderr);
            report_diff_free(&diff);
        } else {
            fprintf(stderr, "memslope diff: %s\n", err);
        }
        report_free(&reports[1]);
        trace_model_free(&models[1]);
    }
    report_free(&reports[0]);
    trace_model_free(&models[0]);
    return rc;
}

int cmd_diff(int argc, char **argv)
{
    struct diff_options options = {0};
    int rc = parse_options(argc, argv, &options);
    if (rc == OPTIONS_RUN) {
        struct suppressions suppressions;
        rc = load_suppressions(&options, &suppressions) == 0 ? diff_traces(&options, &suppressions) : 1;
        suppressions_free(&suppressions);
    }
    option_list_free(&options.suppression_files);
    return rc;
}

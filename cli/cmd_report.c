/* cmd_report.c - `memslope report FILE [--format FORMAT] [-o OUT]
 * [--metric NAME] [--case NAME] [--suppressions FILE]...
 * [--no-default-suppressions]`: 0 success, 1 failure, 2 usage. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "../common/output_file.h"
#include "../report/report.h"

/* Its own copy of the usage (main.c's is not linked into the unit tests). */
static const char report_usage[] =
    "usage: memslope report FILE [--format text|json|speedscope|collapsed|html|pprof|suppressions] [-o OUT]\n"
    "                       [--metric growth|leaked|peak|allocated|temporary] [--case NAME]\n"
    "                       [--suppressions FILE]... [--no-default-suppressions]\n";

enum report_format {
    FORMAT_TEXT, FORMAT_JSON, FORMAT_SPEEDSCOPE, FORMAT_COLLAPSED, FORMAT_HTML, FORMAT_PPROF, FORMAT_SUPPRESSIONS
};

static const char *const format_names[] = {"text", "json", "speedscope", "collapsed", "html", "pprof", "suppressions"};

struct report_options {
    const char *trace_path;
    const char *output_path; /* NULL: stdout */
    enum report_format format;
    enum report_metric metric;
    const char *case_name;
    const char **suppression_files; /* argc entries */
    size_t suppression_file_count;
    bool no_default_suppressions;
};

__attribute__((format(printf, 1, 2))) static int usage_error(const char *format, ...)
{
    fputs("memslope report: ", stderr);
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    fputs(report_usage, stderr);
    return 2;
}

/* "--name VALUE" or "--name=VALUE"; *value gets VALUE, *i moves past it. */
static int option_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    size_t length = strlen(name);
    if (strncmp(argv[*i], name, length) != 0)
        return 0;
    if (argv[*i][length] == '=') {
        *value = argv[*i] + length + 1;
        return 1;
    }
    if (argv[*i][length] != '\0')
        return 0;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    return 1;
}

static int apply_option(struct report_options *options, const char *name, const char *value)
{
    if (!value)
        return usage_error("%s needs a value", name);
    if (strcmp(name, "--format") == 0) {
        size_t i = 0;
        while (i < sizeof format_names / sizeof *format_names && strcmp(value, format_names[i]) != 0)
            i++;
        if (i == sizeof format_names / sizeof *format_names)
            return usage_error("unknown format '%s' (valid formats: text, json, speedscope, collapsed, html, pprof, "
                               "suppressions)", value);
        options->format = (enum report_format)i;
    } else if (strcmp(name, "--metric") == 0) {
        if (report_metric_parse(value, &options->metric) != 0)
            return usage_error("unknown metric '%s' (valid: growth, leaked, peak, allocated, temporary)", value);
    } else if (strcmp(name, "--case") == 0) {
        options->case_name = value;
    } else if (strcmp(name, "--suppressions") == 0) {
        options->suppression_files[options->suppression_file_count++] = value;
    } else {
        options->output_path = value;
    }
    return 0;
}

static int parse_options(int argc, char **argv, struct report_options *options)
{
    static const char *const valued[] = {"--format", "--metric", "--case", "--suppressions", "--output", "-o"};
    int only_operands = 0;
    for (int i = 1; i < argc; i++) {
        const char *value = NULL;
        int matched = 0;
        for (size_t k = 0; !only_operands && !matched && k < sizeof valued / sizeof *valued; k++)
            if (option_value(argc, argv, &i, valued[k], &value)) {
                matched = 1;
                int rc = apply_option(options, valued[k], value);
                if (rc)
                    return rc;
            }
        if (matched)
            continue;
        if (!only_operands && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
            fputs(report_usage, stdout);
            return -1;
        }
        if (!only_operands && strcmp(argv[i], "--no-default-suppressions") == 0) {
            options->no_default_suppressions = true;
            continue;
        }
        if (!only_operands && strcmp(argv[i], "--") == 0)
            only_operands = 1;
        else if (!only_operands && argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("unknown option '%s'", argv[i]);
        else if (options->trace_path)
            return usage_error("one trace file only ('%s' is extra)", argv[i]);
        else
            options->trace_path = argv[i];
    }
    if (!options->trace_path)
        return usage_error("%s", "which trace? give a trace FILE");
    return 0;
}

/* --- the command ---------------------------------------------------------------------- */

static void warn_if_incomplete(const struct trace_model *model, const char *path)
{
    if (model->incomplete)
        fprintf(stderr,
                "memslope report: warning: %s is incomplete (%s): recording was cut short; "
                "reporting the %llu complete sections before the cut\n",
                path, model->incomplete_reason, (unsigned long long)model->section_count);
}

/* Writes the report in the chosen format; err gets the reason of a failure. */
static int write_format(const struct report_options *options, const struct report *report, FILE *out, char *err,
                        size_t err_size)
{
    switch (options->format) {
    case FORMAT_JSON: report_write_json(report, out); return 0;
    case FORMAT_TEXT: report_write_text(report, out); return 0;
    case FORMAT_SPEEDSCOPE: return report_write_speedscope(report, out, err, err_size);
    case FORMAT_COLLAPSED: return report_write_collapsed(report, options->metric, out, err, err_size);
    case FORMAT_HTML: return report_write_html(report, out, err, err_size);
    case FORMAT_PPROF: return report_write_pprof(report, out, err, err_size);
    case FORMAT_SUPPRESSIONS: return report_write_suppressions(report, out, err, err_size);
    }
    return 0;
}

/* Into -o's path by output_file.h's rule (stdout when none): a regular
 * file is replaced once the report is whole, a device or a FIFO written
 * in place. */
static int write_report(const struct report_options *options, const struct report *report)
{
    struct output_file output;
    char err[512] = "";
    if (output_file_open(&output, options->output_path ? options->output_path : "-", 0, err, sizeof err) != 0) {
        fprintf(stderr, "memslope report: %s\n", err);
        return 1;
    }
    FILE *out = output_file_stream(&output);
    if (!out) {
        fprintf(stderr, "memslope report: cannot write the report: %s\n", strerror(errno));
        output_file_discard(&output);
        return 1;
    }
    if (write_format(options, report, out, err, sizeof err) != 0) {
        fprintf(stderr, "memslope report: %s\n", err);
        output_file_discard(&output);
        return 1;
    }
    if (output_file_close(&output, err, sizeof err) != 0) {
        fprintf(stderr, "memslope report: %s\n", err);
        return 1;
    }
    return 0;
}

/* The set is to be freed whatever this returns. */
static int load_suppressions(const struct report_options *options, struct suppressions *set)
{
    char err[1024];
    if (suppressions_init(set) != 0) {
        fputs("memslope report: out of memory\n", stderr);
        return -1;
    }
    if (suppressions_load_all(set, options->suppression_files, options->suppression_file_count,
                              options->no_default_suppressions, err, sizeof err) != 0) {
        fprintf(stderr, "memslope report: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < set->warning_count; i++)
        fprintf(stderr, "memslope report: warning: %s\n", set->warnings[i]);
    return 0;
}

static int report_trace(const struct report_options *options, const struct suppressions *suppressions)
{
    struct trace_model model;
    char err[512];
    if (trace_read_file(options->trace_path, &model, err, sizeof err) != 0) {
        fprintf(stderr, "memslope report: %s\n", err);
        return 1;
    }
    warn_if_incomplete(&model, options->trace_path);
    struct report report;
    if (report_build_with_suppressions(&report, &model, options->trace_path, options->metric, options->case_name,
                                       suppressions, err, sizeof err) != 0) {
        fprintf(stderr, "memslope report: %s\n", err);
        trace_model_free(&model);
        return 1;
    }
    int rc = write_report(options, &report);
    report_free(&report);
    trace_model_free(&model);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    struct report_options options = {.format = FORMAT_TEXT, .metric = REPORT_METRIC_GROWTH};
    if (!(options.suppression_files = calloc((size_t)argc + 1, sizeof *options.suppression_files))) {
        fputs("memslope report: out of memory\n", stderr);
        return 1;
    }
    int rc = parse_options(argc, argv, &options);
    if (rc == 0) {
        struct suppressions suppressions;
        rc = load_suppressions(&options, &suppressions) == 0 ? report_trace(&options, &suppressions) : 1;
        suppressions_free(&suppressions);
    }
    free(options.suppression_files);
    return rc < 0 ? 0 : rc;
}

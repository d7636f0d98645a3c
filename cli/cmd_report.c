/* cmd_report.c - `memslope report FILE [--format FORMAT] [-o OUT]
 * [--metric NAME] [--case NAME] [--suppressions FILE]...
 * [--no-default-suppressions]`: 0 success, 1 failure, 2 usage. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/options.h"
#include "../common/output_file.h"
#include "../report/report.h"
#include "commands.h"

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
    struct option_list suppression_files;
    bool no_default_suppressions;
};

static int parse_format(const char *value, void *destination, char *err, size_t err_size)
{
    size_t i = 0;
    while (i < sizeof format_names / sizeof *format_names && strcmp(value, format_names[i]) != 0)
        i++;
    if (i == sizeof format_names / sizeof *format_names) {
        snprintf(err, err_size, "unknown format '%s' (valid formats: text, json, speedscope, collapsed, html, pprof, "
                                "suppressions)", value);
        return -1;
    }
    *(enum report_format *)destination = (enum report_format)i;
    return 0;
}

static int parse_metric(const char *value, void *destination, char *err, size_t err_size)
{
    if (report_metric_parse(value, destination) == 0)
        return 0;
    snprintf(err, err_size, "unknown metric '%s' (valid: growth, leaked, peak, allocated, temporary)", value);
    return -1;
}

static const struct option_entry report_entries[] = {
    OPT_VALUE(0, "format", "FORMAT", struct report_options, format, parse_format,
              "text (default) | json | speedscope | collapsed | html | pprof |\n"
              "suppressions"),
    OPT_STRING('o', "output", "OUT", struct report_options, output_path, "write the report to OUT (default stdout)"),
    OPT_VALUE(0, "metric", "METRIC", struct report_options, metric, parse_metric,
              "what sites are listed by: growth (default) | leaked | peak |\n"
              "allocated | temporary"),
    OPT_STRING(0, "case", "NAME", struct report_options, case_name, "only the case NAME"),
    OPT_LIST(0, "suppressions", "FILE", struct report_options, suppression_files,
             "leak suppressions to apply (repeatable)"),
    OPT_FLAG(0, "no-default-suppressions", struct report_options, no_default_suppressions,
             "do not apply the default suppressions"),
};

const struct option_table cmd_report_options = {
    .command = "report",
    .synopsis = "FILE [options]",
    .mode = OPERANDS_ANYWHERE,
    .entries = report_entries,
    .entry_count = OPTION_COUNT(report_entries),
    .notes = "FILE - reads the trace from standard input (memslope record -o - -- CMD | memslope report -).\n"
             "Suppressed loss records (LeakSanitizer's or Valgrind's format) are counted apart; the default\n"
             "suppressions (share/memslope/default.supp) apply unless --no-default-suppressions.\n",
    .failure_status = 1,
};

/* OPTIONS_RUN, or the exit status (options.h). */
static int parse_options(int argc, char **argv, struct report_options *options)
{
    struct option_operands traces;
    int rc = options_parse(&cmd_report_options, argc, argv, options, &traces);
    if (rc != OPTIONS_RUN)
        return rc;
    if (traces.count == 0)
        return options_usage_error(&cmd_report_options, "which trace? give a trace FILE");
    if (traces.count > 1)
        return options_usage_error(&cmd_report_options, "one trace file only ('%s' is extra)", traces.items[1]);
    options->trace_path = traces.items[0];
    return OPTIONS_RUN;
}

/* --- the command ---------------------------------------------------------------------- */

static void warn_if_incomplete(const struct trace_model *model, const char *path)
{
    if (model->incomplete && output_file_being_written(path))
        fprintf(stderr,
                "memslope report: warning: %s is still being written by a memslope record that has not finished: "
                "reporting the %llu sections it holds so far\n",
                output_file_input_name(path), (unsigned long long)model->section_count);
    else if (model->incomplete)
        fprintf(stderr,
                "memslope report: warning: %s is incomplete (%s): recording was cut short; "
                "reporting the %llu complete sections before the cut\n",
                output_file_input_name(path), model->incomplete_reason, (unsigned long long)model->section_count);
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
    if (suppressions_load_all(set, options->suppression_files.items, options->suppression_files.count,
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
    if (output_file_replaces(options->output_path, options->trace_path)) {
        fprintf(stderr, "memslope report: -o %s names the trace being read: the report would replace it; give "
                        "another file\n", options->output_path);
        return 1;
    }
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
    int rc = parse_options(argc, argv, &options);
    if (rc == OPTIONS_RUN) {
        struct suppressions suppressions;
        rc = load_suppressions(&options, &suppressions) == 0 ? report_trace(&options, &suppressions) : 1;
        suppressions_free(&suppressions);
    }
    option_list_free(&options.suppression_files);
    return rc;
}

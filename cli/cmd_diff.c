/*
 * cmd_diff.c - `memslope diff OLD.trace NEW.trace [--format text|json]
 * [--case NAME] [--suppressions FILE]... [--no-default-suppressions]`: per
 * case, the sites whose growth, leaks, peak or allocations changed, matched
 * by their function stack (diff.h). 0 success (changes or not), 1 a trace
 * or suppression file cannot be read, 2 usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "../report/report.h"

struct diff_options {
    const char *paths[2]; /* OLD, NEW */
    bool json;
    const char *case_name;
    const char **suppression_files; /* argc entries */
    size_t suppression_file_count;
    bool no_default_suppressions;
};

static int usage_error(const char *message, const char *argument)
{
    fprintf(stderr, "memslope diff: %s%s%s\n", message, argument ? ": " : "", argument ? argument : "");
    fputs(command_usage("diff"), stderr);
    return 2;
}

enum { OPT_FORMAT = 256, OPT_CASE, OPT_SUPPRESSIONS, OPT_NO_DEFAULT };

static int parse_options(int argc, char **argv, struct diff_options *options)
{
    static const struct option long_options[] = {
        {"format", required_argument, NULL, OPT_FORMAT},
        {"case", required_argument, NULL, OPT_CASE},
        {"suppressions", required_argument, NULL, OPT_SUPPRESSIONS},
        {"no-default-suppressions", no_argument, NULL, OPT_NO_DEFAULT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 1;
    int option;
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (option) {
        case OPT_FORMAT:
            if (strcmp(optarg, "text") != 0 && strcmp(optarg, "json") != 0)
                return usage_error("--format takes text or json, not", optarg);
            options->json = strcmp(optarg, "json") == 0;
            break;
        case OPT_CASE:
            options->case_name = optarg;
            break;
        case OPT_SUPPRESSIONS:
            options->suppression_files[options->suppression_file_count++] = optarg;
            break;
        case OPT_NO_DEFAULT:
            options->no_default_suppressions = true;
            break;
        case 'h':
            fputs(command_usage("diff"), stdout);
            return -1;
        default:
            return usage_error(optopt ? "an option needs a value" : "unknown option", argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return usage_error(argc - optind < 2 ? "give two traces, OLD and NEW" : "more than two traces given", NULL);
    options->paths[0] = argv[optind];
    options->paths[1] = argv[optind + 1];
    return 0;
}

/* The set is to be freed whatever this returns. */
static int load_suppressions(const struct diff_options *options, struct suppressions *set)
{
    char err[1024];
    if (suppressions_init(set) != 0) {
        fputs("memslope diff: out of memory\n", stderr);
        return -1;
    }
    if (suppressions_load_all(set, options->suppression_files, options->suppression_file_count,
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
        fprintf(stderr, "memslope diff: warning: %s is incomplete (%s); comparing what it holds\n", path,
                model->incomplete_reason);
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
    if (!(options.suppression_files = calloc((size_t)argc + 1, sizeof *options.suppression_files))) {
        fputs("memslope diff: out of memory\n", stderr);
        return 1;
    }
    int rc = parse_options(argc, argv, &options);
    if (rc == 0) {
        struct suppressions suppressions;
        rc = load_suppressions(&options, &suppressions) == 0 ? diff_traces(&options, &suppressions) : 1;
        suppressions_free(&suppressions);
    }
    free(options.suppression_files);
    return rc < 0 ? 0 : rc;
}

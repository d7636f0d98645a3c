/*
 * cmd_gate.c - `memslope gate FILE [--max-growth SIZE] [--max-leaked SIZE]
 * [--max-leaked-blocks N] [--case GLOB] [--suppressions FILE]...
 * [--no-default-suppressions]`: a trace's growth and leaks as an exit code
 * for CI (suppressed loss records count toward no limit). 0 within limits,
 * 1 when a limit is exceeded (one line per failure naming the case, the
 * figure, the limit and the top site), 2 on bad usage or an unreadable
 * trace or suppression file.
 */
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tracer/commands.h"
#include "attribution.h"
#include "report_model.h"
#include "suppressions.h"
#include "trace_reader.h"
#include "units.h"

struct gate_limits {
    int has_growth, has_leaked, has_leaked_blocks;
    uint64_t max_growth, max_leaked, max_leaked_blocks;
    const char *case_glob;
    const char *trace_path;
    const char **suppression_files; /* argc entries */
    size_t suppression_file_count;
    bool no_default_suppressions;
};

static int usage_error(const char *message, const char *argument)
{
    fprintf(stderr, "memslope gate: %s%s%s\n", message, argument ? ": " : "", argument ? argument : "");
    fputs(command_usage("gate"), stderr);
    return 2;
}

enum { OPT_MAX_GROWTH = 256, OPT_MAX_LEAKED, OPT_MAX_LEAKED_BLOCKS, OPT_CASE, OPT_SUPPRESSIONS, OPT_NO_DEFAULT };

static int parse_options(int argc, char **argv, struct gate_limits *limits)
{
    static const struct option long_options[] = {
        {"max-growth", required_argument, NULL, OPT_MAX_GROWTH},
        {"max-leaked", required_argument, NULL, OPT_MAX_LEAKED},
        {"max-leaked-blocks", required_argument, NULL, OPT_MAX_LEAKED_BLOCKS},
        {"case", required_argument, NULL, OPT_CASE},
        {"suppressions", required_argument, NULL, OPT_SUPPRESSIONS},
        {"no-default-suppressions", no_argument, NULL, OPT_NO_DEFAULT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(limits, 0, sizeof *limits);
    if (!(limits->suppression_files = calloc((size_t)argc, sizeof *limits->suppression_files))) {
        fputs("memslope gate: out of memory\n", stderr);
        return 2;
    }
    opterr = 0;
    optind = 1;
    int option;
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (option) {
        case OPT_MAX_GROWTH:
            if (units_parse_size(optarg, &limits->max_growth) < 0)
                return usage_error("--max-growth takes a size such as 0, 48B, 4K or 1MiB, not", optarg);
            limits->has_growth = 1;
            break;
        case OPT_MAX_LEAKED:
            if (units_parse_size(optarg, &limits->max_leaked) < 0)
                return usage_error("--max-leaked takes a size such as 0, 48B, 4K or 1MiB, not", optarg);
            limits->has_leaked = 1;
            break;
        case OPT_MAX_LEAKED_BLOCKS:
            if (units_parse_count(optarg, &limits->max_leaked_blocks) < 0)
                return usage_error("--max-leaked-blocks takes a number, not", optarg);
            limits->has_leaked_blocks = 1;
            break;
        case OPT_CASE:
            limits->case_glob = optarg;
            break;
        case OPT_SUPPRESSIONS:
            limits->suppression_files[limits->suppression_file_count++] = optarg;
            break;
        case OPT_NO_DEFAULT:
            limits->no_default_suppressions = true;
            break;
        case 'h':
            fputs(command_usage("gate"), stdout);
            return -1;
        default:
            return usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_error(optind >= argc ? "no trace file given" : "more than one trace file given", NULL);
    limits->trace_path = argv[optind];
    if (!limits->has_growth && !limits->has_leaked && !limits->has_leaked_blocks)
        return usage_error("give at least one limit (--max-growth, --max-leaked or --max-leaked-blocks)", NULL);
    return 0;
}

/* "function (file:line)" of the frame that names a site: its first in the
 * user's code (attribution.h). */
static const char *site_name(const struct report *report, const struct report_site *site, char *buffer, size_t size)
{
    const struct trace_model_frame *frame = NULL;
    if (site)
        attribution_user_frame(report->model, site->stack, &frame);
    if (frame)
        return attribution_frame_name(frame, buffer, size);
    /* A sampled trace whose lost blocks were all unsampled has no such site. */
    snprintf(buffer, size, !site && report_sample_rate(report) ? "none sampled" : "an unknown site");
    return buffer;
}

/* The site that leaks most in the case (its sites may be sorted by growth). */
static const struct report_site *top_leaking_site(const struct report_case *c)
{
    const struct report_site *top = NULL;
    for (size_t i = 0; i < c->site_count; i++)
        if (c->sites[i].leaked_bytes && (!top || c->sites[i].leaked_bytes > top->leaked_bytes))
            top = &c->sites[i];
    return top;
}

static int check_growth(const struct report *report, const struct report_case *c, const struct gate_limits *limits)
{
    char figure[64], limit[64], where[512];
    if (!c->growth.known) {
        fprintf(stderr, "memslope gate: case '%s': growth unknown (fewer than 3 iteration snapshots); "
                        "--max-growth not checked\n", c->name);
        return 0;
    }
    if (c->growth.bytes_per_iteration <= (double)limits->max_growth)
        return 0;
    const struct report_site *top = c->site_count ? &c->sites[0] : NULL;
    printf("memslope gate: FAIL case '%s': growth %s per iteration > limit %s; top site %s (%s%.1f B/iteration)\n",
           c->name, units_format_bytes(c->growth.bytes_per_iteration, figure, sizeof figure),
           units_format_bytes((double)limits->max_growth, limit, sizeof limit), site_name(report, top, where, sizeof where),
           report_estimate_mark(report), top && top->growth.known ? top->growth.bytes_per_iteration : 0.0);
    return 1;
}

static int check_leaks(const struct report *report, const struct report_case *c, const struct gate_limits *limits)
{
    if (!c->leaks) {
        fprintf(stderr, "memslope gate: case '%s': the trace has no leak check (recorded with --leak-check off?); "
                        "leak limits not checked\n", c->name);
        return 0;
    }
    uint64_t bytes = c->leaks->bytes[TRACE_LEAK_DEFINITE] + c->leaks->bytes[TRACE_LEAK_INDIRECT];
    uint64_t blocks = c->leaks->blocks[TRACE_LEAK_DEFINITE] + c->leaks->blocks[TRACE_LEAK_INDIRECT];
    char figure[64], limit[64], where[512];
    const struct report_site *top = top_leaking_site(c);
    const char *mark = report_estimate_mark(report); /* the site's figures, not the case's */
    int failures = 0;
    if (limits->has_leaked && bytes > limits->max_leaked) {
        printf("memslope gate: FAIL case '%s': leaked %s > limit %s; top site %s (%s%" PRIu64 " bytes in %s%" PRIu64
               " blocks)\n", c->name, units_format_bytes((double)bytes, figure, sizeof figure),
               units_format_bytes((double)limits->max_leaked, limit, sizeof limit), site_name(report, top, where, sizeof where),
               mark, top ? top->leaked_bytes : 0, mark, top ? top->leaked_blocks : 0);
        failures++;
    }
    if (limits->has_leaked_blocks && blocks > limits->max_leaked_blocks) {
        printf("memslope gate: FAIL case '%s': leaked %" PRIu64 " blocks > limit %" PRIu64 "; top site %s (%s%" PRIu64
               " blocks)\n", c->name, blocks, limits->max_leaked_blocks, site_name(report, top, where, sizeof where),
               mark, top ? top->leaked_blocks : 0);
        failures++;
    }
    return failures;
}

/* The number of limits exceeded over the cases checked. */
static size_t check_cases(const struct report *report, const struct gate_limits *limits, size_t *checked)
{
    size_t failures = 0;
    *checked = 0;
    for (size_t i = 0; i < report->case_count; i++) {
        const struct report_case *c = &report->cases[i];
        if (limits->case_glob && fnmatch(limits->case_glob, c->name, 0) != 0)
            continue;
        ++*checked;
        if (limits->has_growth)
            failures += (size_t)check_growth(report, c, limits);
        if (limits->has_leaked || limits->has_leaked_blocks)
            failures += (size_t)check_leaks(report, c, limits);
    }
    return failures;
}

/* The set is to be freed whatever this returns. */
static int load_suppressions(const struct gate_limits *limits, struct suppressions *set)
{
    char err[1024];
    if (suppressions_init(set) != 0) {
        fputs("memslope gate: out of memory\n", stderr);
        return -1;
    }
    if (suppressions_load_all(set, limits->suppression_files, limits->suppression_file_count,
                              limits->no_default_suppressions, err, sizeof err) != 0) {
        fprintf(stderr, "memslope gate: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < set->warning_count; i++)
        fprintf(stderr, "memslope gate: warning: %s\n", set->warnings[i]);
    return 0;
}

static int gate_trace(const struct gate_limits *limits, const struct suppressions *suppressions)
{
    struct trace_model model;
    struct report report;
    char err[1024];
    if (trace_read_file(limits->trace_path, &model, err, sizeof err) != 0) {
        fprintf(stderr, "memslope gate: %s\n", err);
        return 2;
    }
    if (model.incomplete)
        fprintf(stderr, "memslope gate: warning: %s is incomplete (%s); checking what it holds\n", limits->trace_path,
                model.incomplete_reason);
    if (report_build_with_suppressions(&report, &model, limits->trace_path, REPORT_METRIC_GROWTH, NULL, suppressions,
                                       err, sizeof err) != 0) {
        fprintf(stderr, "memslope gate: %s\n", err);
        trace_model_free(&model);
        return 2;
    }
    size_t checked;
    size_t failures = check_cases(&report, limits, &checked);
    report_free(&report);
    trace_model_free(&model);
    if (!checked) {
        fprintf(stderr, "memslope gate: no case in %s matches '%s' (memslope report %s lists the cases)\n",
                limits->trace_path, limits->case_glob ? limits->case_glob : "*", limits->trace_path);
        return 2;
    }
    printf("memslope gate: %s: %zu case%s checked, %zu limit%s exceeded\n", failures ? "FAIL" : "ok", checked,
           checked == 1 ? "" : "s", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}

int cmd_gate(int argc, char **argv)
{
    struct gate_limits limits;
    int rc = parse_options(argc, argv, &limits);
    if (rc == 0) {
        struct suppressions suppressions;
        rc = load_suppressions(&limits, &suppressions) == 0 ? gate_trace(&limits, &suppressions) : 2;
        suppressions_free(&suppressions);
    }
    free(limits.suppression_files);
    return rc < 0 ? 0 : rc;
}

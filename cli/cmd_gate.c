/*
 * cmd_gate.c - `memslope gate FILE [--max-growth SIZE] [--max-leaked SIZE]
 * [--max-leaked-blocks N] [--max-peak SIZE] [--baseline OLD.trace
 * [--tolerance PCT|SIZE]] [--case GLOB] [--suppressions FILE]...
 * [--no-default-suppressions]`: a trace's growth, leaks and peak as an exit
 * code for CI. Every case of every traced process is checked (a fork child
 * or an exec'd program leaks as much as the primary process can);
 * suppressed loss records count toward no limit. 0 within limits, 1 when a
 * limit is exceeded (one line per failure naming the case, the figure, the
 * limit, the top site and the process), 2 on bad usage or an unreadable
 * trace or suppression file.
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "../common/output_file.h"
#include "../report/report.h"
#include "../common/units.h"

struct gate_limits {
    int has_growth, has_leaked, has_leaked_blocks, has_peak;
    uint64_t max_growth, max_leaked, max_leaked_blocks, max_peak;
    const char *baseline_path;
    int has_tolerance, tolerance_is_percent;
    double tolerance_percent;
    uint64_t tolerance_bytes;
    const char *case_glob;
    const char *trace_path;
    struct option_list suppression_files;
    bool no_default_suppressions;
};

/* "10%" (of the baseline's figure) or a size ("4K", in the figure's own unit). */
static int parse_tolerance(const char *text, void *destination, char *err, size_t err_size)
{
    struct gate_limits *limits = destination;
    size_t length = strlen(text);
    if (length > 1 && text[length - 1] == '%') {
        char *end;
        double percent = strtod(text, &end);
        if (end != text + length - 1 || !(percent >= 0) || !isfinite(percent))
            goto bad;
        limits->tolerance_is_percent = 1;
        limits->tolerance_percent = percent;
    } else if (units_parse_size(text, &limits->tolerance_bytes) < 0) {
        goto bad;
    }
    limits->has_tolerance = 1;
    return 0;
bad:
    snprintf(err, err_size, "--tolerance takes a percentage of the baseline (10%%) or a size (4K), not: %s", text);
    return -1;
}

static int parse_max_growth(const char *value, void *destination, char *err, size_t err_size)
{
    struct gate_limits *limits = destination;
    limits->has_growth = 1;
    if (units_parse_size(value, &limits->max_growth) == 0)
        return 0;
    snprintf(err, err_size, "--max-growth takes a size such as 0, 48B, 4K or 1MiB, not: %s", value);
    return -1;
}

static int parse_max_leaked(const char *value, void *destination, char *err, size_t err_size)
{
    struct gate_limits *limits = destination;
    limits->has_leaked = 1;
    if (units_parse_size(value, &limits->max_leaked) == 0)
        return 0;
    snprintf(err, err_size, "--max-leaked takes a size such as 0, 48B, 4K or 1MiB, not: %s", value);
    return -1;
}

static int parse_max_leaked_blocks(const char *value, void *destination, char *err, size_t err_size)
{
    struct gate_limits *limits = destination;
    limits->has_leaked_blocks = 1;
    if (units_parse_count(value, &limits->max_leaked_blocks) == 0)
        return 0;
    snprintf(err, err_size, "--max-leaked-blocks takes a number, not: %s", value);
    return -1;
}

static int parse_max_peak(const char *value, void *destination, char *err, size_t err_size)
{
    struct gate_limits *limits = destination;
    limits->has_peak = 1;
    if (units_parse_size(value, &limits->max_peak) == 0)
        return 0;
    snprintf(err, err_size, "--max-peak takes a size such as 64M or 1GiB, not: %s", value);
    return -1;
}

static const struct option_entry gate_entries[] = {
    OPT_ACTION(0, "max-growth", "SIZE", parse_max_growth, "most bytes per iteration a case may grow"),
    OPT_ACTION(0, "max-leaked", "SIZE", parse_max_leaked, "most bytes definitely and indirectly lost"),
    OPT_ACTION(0, "max-leaked-blocks", "N", parse_max_leaked_blocks, "most blocks definitely and indirectly lost"),
    OPT_ACTION(0, "max-peak", "SIZE", parse_max_peak, "most live bytes at a case's peak"),
    OPT_STRING(0, "baseline", "OLD.trace", struct gate_limits, baseline_path,
               "fail a case whose growth, leaks or peak exceed OLD.trace's"),
    OPT_ACTION(0, "tolerance", "PCT|SIZE", parse_tolerance,
               "with --baseline: allow that much more (10% or 4K; default 0)"),
    OPT_STRING(0, "case", "GLOB", struct gate_limits, case_glob, "only the cases whose names match GLOB"),
    OPT_LIST(0, "suppressions", "FILE", struct gate_limits, suppression_files,
             "leak suppressions to apply (repeatable)"),
    OPT_FLAG(0, "no-default-suppressions", struct gate_limits, no_default_suppressions,
             "do not apply the default suppressions"),
};

const struct option_table cmd_gate_options = {
    .command = "gate",
    .synopsis = "FILE [options]",
    .mode = OPERANDS_ANYWHERE,
    .entries = gate_entries,
    .entry_count = OPTION_COUNT(gate_entries),
    .notes = "Checks every case of every traced process. --baseline fails a case whose growth, leaks or peak\n"
             "exceed OLD.trace's (plus the tolerance, 0 by default: 10% or 4K). Exits 0 within limits, 1 when\n"
             "a limit is exceeded, 2 on bad usage or an unreadable trace. Suppressed loss records count\n"
             "toward no limit. FILE - reads the trace from standard input.\n",
    .failure_status = 2, /* 1 is "a limit is exceeded" */
};

/* OPTIONS_RUN, or the exit status (options.h). */
static int parse_options(int argc, char **argv, struct gate_limits *limits)
{
    struct option_operands traces;
    int rc = options_parse(&cmd_gate_options, argc, argv, limits, &traces);
    if (rc != OPTIONS_RUN)
        return rc;
    if (traces.count != 1)
        return options_usage_error(&cmd_gate_options, "%s",
                                   traces.count == 0 ? "no trace file given" : "more than one trace file given");
    limits->trace_path = traces.items[0];
    if (limits->has_tolerance && !limits->baseline_path)
        return options_usage_error(&cmd_gate_options, "--tolerance goes with --baseline OLD.trace");
    if (limits->baseline_path && strcmp(limits->baseline_path, "-") == 0 && strcmp(limits->trace_path, "-") == 0)
        return options_usage_error(&cmd_gate_options,
                                   "standard input holds one trace: give the trace or --baseline as a file");
    if (!limits->has_growth && !limits->has_leaked && !limits->has_leaked_blocks && !limits->has_peak &&
        !limits->baseline_path)
        return options_usage_error(&cmd_gate_options, "give at least one limit (--max-growth, --max-leaked, "
                                                      "--max-leaked-blocks, --max-peak or --baseline)");
    return OPTIONS_RUN;
}

/* --- one process's cases ----------------------------------------------------------- */

/* A figure and the limit it exceeded, readable ("1.5 KiB", "4.0 KiB"); both
 * also exact when the readable forms are equal ("1.0 MiB (1053376 B)"). */
static void format_pair(double figure, double limit, char *figure_text, size_t figure_size, char *limit_text,
                        size_t limit_size)
{
    units_format_bytes(figure, figure_text, figure_size);
    units_format_bytes(limit, limit_text, limit_size);
    if (strcmp(figure_text, limit_text) != 0)
        return;
    size_t used = strlen(figure_text);
    snprintf(figure_text + used, figure_size - used, " (%.0f B)", figure);
    used = strlen(limit_text);
    snprintf(limit_text + used, limit_size - used, " (%.0f B)", limit);
}

/* What a failure line ends with: the process ("; process gcc (pid 8484)"). */
struct gate_context {
    const struct gate_limits *limits;
    const struct report *report;
    const struct trace_model_process *model_process;
    char process[256];
    char case_name[512]; /* the case being checked, as printed (text_escape.h) */
    /* The launched command's process: a figure it lacks fails the gate
     * (exit 2); another process's is a warning (a child the program kills
     * is never checked for leaks, and must not make every run fail). */
    int primary;
    size_t *unknown; /* limits that could not be checked in the primary */
};

/* "function (file:line)" of the frame that names a site: its first in the
 * user's code (attribution.h), with its callers where sites of the case
 * share that frame (site_label.h). */
static const char *site_name(const struct gate_context *g, const struct report_case *c,
                             const struct report_site *site, char *buffer, size_t size)
{
    if (!site) {
        /* A sampled trace whose lost blocks were all unsampled has no such site. */
        snprintf(buffer, size, report_sample_rate(g->report) ? "none sampled" : "an unknown site");
        return buffer;
    }
    /* Named among the case's growing and leaking sites, so that two callers
     * of one allocating line read apart. */
    enum { COMPARED = 64 };
    const struct trace_model_stack *stacks[COMPARED];
    char *labels[COMPARED];
    size_t count = 0;
    stacks[count++] = site->stack;
    for (size_t i = 0; i < c->site_count && count < COMPARED; i++)
        if (&c->sites[i] != site && ((c->sites[i].growth.known && c->sites[i].growth.bytes_per_iteration > 0) ||
                                     c->sites[i].leaked_bytes))
            stacks[count++] = c->sites[i].stack;
    if (site_labels_build(g->report->model, stacks, count, labels) != 0) {
        snprintf(buffer, size, "an unknown site");
        return buffer;
    }
    text_escape(labels[0], buffer, size);
    site_labels_free(labels, count);
    return buffer;
}

static const struct report_site *top_growing_site(const struct report_case *c)
{
    const struct report_site *top = NULL;
    for (size_t i = 0; i < c->site_count; i++)
        if (c->sites[i].growth.known && (!top || c->sites[i].growth.bytes_per_iteration > top->growth.bytes_per_iteration))
            top = &c->sites[i];
    return top;
}

static const struct report_site *top_leaking_site(const struct report_case *c)
{
    const struct report_site *top = NULL;
    for (size_t i = 0; i < c->site_count; i++)
        if (c->sites[i].leaked_bytes && (!top || c->sites[i].leaked_bytes > top->leaked_bytes))
            top = &c->sites[i];
    return top;
}

static const struct report_site *top_peak_site(const struct report_case *c)
{
    const struct report_site *top = NULL;
    for (size_t i = 0; i < c->site_count; i++)
        if (c->sites[i].peak_live_bytes && (!top || c->sites[i].peak_live_bytes > top->peak_live_bytes))
            top = &c->sites[i];
    return top;
}

static int check_growth(const struct gate_context *g, const struct report_case *c)
{
    char figure[64], limit[64], where[1024];
    if (!c->growth.known) {
        /* Other processes (a compiler's helpers) rarely mark iterations. */
        if (g->primary) {
            fprintf(stderr, "memslope gate: case '%s': growth unknown: %" PRIu64 " iteration%s recorded, and growth "
                            "needs 3 iteration snapshots; --max-growth cannot be checked (mark iterations, or "
                            "record with --iteration SYMBOL); process %s\n",
                    g->case_name, c->iterations, c->iterations == 1 ? "" : "s", g->process);
            (*g->unknown)++;
        }
        return 0;
    }
    if (c->growth.bytes_per_iteration <= (double)g->limits->max_growth)
        return 0;
    const struct report_site *top = top_growing_site(c);
    format_pair(c->growth.bytes_per_iteration, (double)g->limits->max_growth, figure, sizeof figure, limit, sizeof limit);
    printf("memslope gate: FAIL case '%s': growth %s per iteration > limit %s; top site %s (%s%.1f B/iteration); "
           "process %s\n", g->case_name, figure, limit, site_name(g, c, top, where, sizeof where),
           report_estimate_mark(g->report), top ? top->growth.bytes_per_iteration : 0.0, g->process);
    return 1;
}

static int check_leaks(const struct gate_context *g, const struct report_case *c)
{
    const struct gate_limits *limits = g->limits;
    /* An image replaced by exec: its heap went with it, nothing to check
     * (a shell's fork that ran a command made a line of each). */
    if (!c->leaks && g->model_process && (g->model_process->info.flags & TRACE_PROC_EXECED))
        return 0;
    if (!c->leaks) {
        fprintf(stderr, "memslope gate: %scase '%s': no leak results (%s); --max-leaked%s cannot be checked; "
                        "process %s\n",
                g->primary ? "" : "warning: ", g->case_name, report_missing_leaks_reason(g->report, g->model_process),
                limits->has_leaked_blocks ? "-blocks" : "", g->process);
        *g->unknown += (size_t)g->primary;
        return 0;
    }
    uint64_t bytes = c->leaks->bytes[TRACE_LEAK_DEFINITE] + c->leaks->bytes[TRACE_LEAK_INDIRECT];
    uint64_t blocks = c->leaks->blocks[TRACE_LEAK_DEFINITE] + c->leaks->blocks[TRACE_LEAK_INDIRECT];
    char figure[64], limit[64], where[1024];
    const struct report_site *top = top_leaking_site(c);
    const char *mark = report_estimate_mark(g->report); /* the site's figures, not the case's */
    int failures = 0;
    if (limits->has_leaked && bytes > limits->max_leaked) {
        format_pair((double)bytes, (double)limits->max_leaked, figure, sizeof figure, limit, sizeof limit);
        printf("memslope gate: FAIL case '%s': leaked %s > limit %s; top site %s (%s%" PRIu64 " bytes in %s%" PRIu64
               " blocks); process %s\n", g->case_name, figure, limit, site_name(g, c, top, where, sizeof where),
               mark, top ? top->leaked_bytes : 0, mark, top ? top->leaked_blocks : 0, g->process);
        failures++;
    }
    if (limits->has_leaked_blocks && blocks > limits->max_leaked_blocks) {
        printf("memslope gate: FAIL case '%s': leaked %" PRIu64 " blocks > limit %" PRIu64 "; top site %s (%s%" PRIu64
               " blocks); process %s\n", g->case_name, blocks, limits->max_leaked_blocks,
               site_name(g, c, top, where, sizeof where), mark, top ? top->leaked_blocks : 0, g->process);
        failures++;
    }
    return failures;
}

static int check_peak(const struct gate_context *g, const struct report_case *c)
{
    char figure[64], limit[64], where[1024];
    if (c->peak_bytes <= g->limits->max_peak)
        return 0;
    const struct report_site *top = top_peak_site(c);
    format_pair((double)c->peak_bytes, (double)g->limits->max_peak, figure, sizeof figure, limit, sizeof limit);
    printf("memslope gate: FAIL case '%s': peak %s > limit %s; top site %s (%s%" PRIu64 " bytes live at the peak); "
           "process %s\n", g->case_name, figure, limit, site_name(g, c, top, where, sizeof where),
           report_estimate_mark(g->report), top ? top->peak_live_bytes : 0, g->process);
    return 1;
}

/* --- against a baseline ------------------------------------------------------------- */

/* The baseline's figure plus the tolerance. */
static double allowed(const struct gate_limits *limits, double baseline)
{
    if (!limits->has_tolerance)
        return baseline;
    if (limits->tolerance_is_percent)
        return baseline + baseline * limits->tolerance_percent / 100.0;
    return baseline + (double)limits->tolerance_bytes;
}

enum baseline_figure { BASELINE_GROWTH, BASELINE_LEAKED, BASELINE_PEAK };

static double site_increase(const struct diff_site *site, enum baseline_figure figure)
{
    switch (figure) {
    case BASELINE_GROWTH:
        return (site->new.growth_known ? site->new.growth : 0) - (site->old.growth_known ? site->old.growth : 0);
    case BASELINE_LEAKED: return (double)site->new.leaked_bytes - (double)site->old.leaked_bytes;
    case BASELINE_PEAK: return (double)site->new.peak_bytes - (double)site->old.peak_bytes;
    }
    return 0;
}

/* The site whose figure rose most, or NULL when none rose. */
static const struct diff_site *top_increase(const struct diff_case *d, enum baseline_figure figure)
{
    const struct diff_site *top = NULL;
    for (size_t i = 0; i < d->site_count; i++)
        if (site_increase(&d->sites[i], figure) > 0 &&
            (!top || site_increase(&d->sites[i], figure) > site_increase(top, figure)))
            top = &d->sites[i];
    return top;
}

static int baseline_failure(const struct gate_context *g, const struct diff_case *d, enum baseline_figure figure,
                            double new_value, double old_value)
{
    static const char *const names[] = {"growth", "leaked", "peak"};
    static const char *const units[] = {" per iteration", "", ""};
    if (new_value <= allowed(g->limits, old_value))
        return 0;
    char now[64], before[64], tolerance[64], increase[64];
    const struct diff_site *top = top_increase(d, figure);
    if (g->limits->tolerance_is_percent)
        snprintf(tolerance, sizeof tolerance, " + %g%%", g->limits->tolerance_percent);
    else if (g->limits->has_tolerance)
        snprintf(tolerance, sizeof tolerance, " + %s", units_format_bytes((double)g->limits->tolerance_bytes, increase,
                                                                           sizeof increase));
    else
        tolerance[0] = '\0';
    units_format_bytes(top ? site_increase(top, figure) : 0, increase, sizeof increase);
    format_pair(new_value, old_value, now, sizeof now, before, sizeof before);
    char label[1024];
    text_escape(top && top->label ? top->label : "none: no single site rose", label, sizeof label);
    printf("memslope gate: FAIL case '%s': %s %s%s > baseline %s%s%s; top site %s (+%s%s); process %s\n", g->case_name,
           names[figure], now, units[figure], before, units[figure], tolerance, label, increase, units[figure],
           g->process);
    return 1;
}

static int check_baseline(const struct gate_context *g, const struct diff_case *d)
{
    int failures = 0;
    if (!d->old.present) {
        fprintf(stderr, "memslope gate: case '%s' (process %s) is not in the baseline: not compared\n", g->case_name,
                g->process);
        return 0;
    }
    if (d->old.growth_known && d->new.growth_known)
        failures += baseline_failure(g, d, BASELINE_GROWTH, d->new.growth, d->old.growth > 0 ? d->old.growth : 0);
    else if (g->primary && (d->old.iterations || d->new.iterations))
        fprintf(stderr, "memslope gate: case '%s': growth unknown on %s side; growth not compared\n", g->case_name,
                d->old.growth_known ? "the new" : d->new.growth_known ? "the baseline's" : "either");
    if (d->old.leaks_known && d->new.leaks_known)
        failures += baseline_failure(g, d, BASELINE_LEAKED, (double)d->new.leaked_bytes, (double)d->old.leaked_bytes);
    failures += baseline_failure(g, d, BASELINE_PEAK, (double)d->new.peak_bytes, (double)d->old.peak_bytes);
    return failures;
}

/* --- every process ------------------------------------------------------------------- */

struct gate_run {
    const struct gate_limits *limits;
    const struct suppressions *suppressions;
    const struct trace_model *model, *baseline; /* baseline NULL without --baseline */
    size_t cases_checked, processes_checked, failures;
    size_t unknown; /* limits the primary's figures could not be checked against */
    int failed; /* out of memory */
};

/* A process worth checking: the primary, or one that allocated or was checked for leaks. */
static int process_checked(const struct trace_model *model, const struct trace_model_process *process)
{
    if (process == report_primary_process(model) || process->info.allocations)
        return 1;
    for (size_t i = 0; i < process->leak_count; i++)
        if (process->leaks[i].case_id == TRACE_NONE)
            return 1;
    return 0;
}

/* Processes of two traces correspond when both are primary, or by their
 * name and their rank among the processes of that name. */
static const struct trace_model_process *baseline_counterpart(const struct trace_model *model,
                                                               const struct trace_model_process *process,
                                                               const struct trace_model *baseline)
{
    const struct trace_model_process *primary = report_primary_process(model);
    if (process == primary)
        return report_primary_process(baseline);
    const char *name = report_process_name(process);
    size_t rank = 0;
    for (const struct trace_model_process *p = model->processes; p && p != process; p = p->hh.next)
        rank += p != primary && strcmp(report_process_name(p), name) == 0;
    const struct trace_model_process *baseline_primary = report_primary_process(baseline);
    for (const struct trace_model_process *p = baseline->processes; p; p = p->hh.next)
        if (p != baseline_primary && strcmp(report_process_name(p), name) == 0 && rank-- == 0)
            return p;
    return NULL;
}

/* "gcc (pid 8484)", "as (pid 8487, exec'd by gcc)", "bench (pid 12, forked by pid 11)". */
static void describe_process_raw(const struct trace_model *model, const struct trace_model_process *process,
                                 char *buffer, size_t size)
{
    const struct trace_model_process *parent = process->info.parent_process_id != TRACE_NONE
                                                   ? trace_model_process(model, process->info.parent_process_id)
                                                   : NULL;
    if (!parent)
        snprintf(buffer, size, "%s (pid %u)", report_process_name(process), process->info.pid);
    else if (parent->info.pid == process->info.pid)
        snprintf(buffer, size, "%s (pid %u, exec'd by %s)", report_process_name(process), process->info.pid,
                 report_process_name(parent));
    else
        snprintf(buffer, size, "%s (pid %u, forked by pid %u)", report_process_name(process), process->info.pid,
                 parent->info.pid);
}

/* describe_process_raw as printed (text_escape.h). */
static void describe_process(const struct trace_model *model, const struct trace_model_process *process, char *buffer,
                             size_t size)
{
    char raw[1024];
    describe_process_raw(model, process, raw, sizeof raw);
    text_escape(raw, buffer, size);
}

static int build(const struct gate_run *run, const struct trace_model *model, const char *path,
                 const struct trace_model_process *process, struct report *report)
{
    char err[1024];
    struct report_request request = {REPORT_METRIC_GROWTH, NULL, run->suppressions, process};
    if (report_build_request(report, model, path, &request, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "memslope gate: %s\n", err);
    return -1;
}

static void check_case(struct gate_run *run, const struct gate_context *process_context,
                       const struct report_case *c, const struct report_diff *diff)
{
    const struct gate_limits *limits = run->limits;
    struct gate_context case_context = *process_context;
    text_escape(c->name, case_context.case_name, sizeof case_context.case_name);
    const struct gate_context *g = &case_context;
    run->cases_checked++;
    if (limits->has_growth)
        run->failures += (size_t)check_growth(g, c);
    if (limits->has_leaked || limits->has_leaked_blocks)
        run->failures += (size_t)check_leaks(g, c);
    if (limits->has_peak)
        run->failures += (size_t)check_peak(g, c);
    const struct diff_case *d = diff ? report_diff_case(diff, c->name) : NULL;
    if (d)
        run->failures += (size_t)check_baseline(g, d);
}

static void check_process(struct gate_run *run, const struct trace_model_process *process)
{
    struct report report, old_report;
    struct report_diff diff;
    int have_diff = 0, have_old = 0;
    if (build(run, run->model, run->limits->trace_path, process, &report) != 0) {
        run->failed = 1;
        return;
    }
    struct gate_context g = {.limits = run->limits, .report = &report, .model_process = process,
                             .primary = process == report_primary_process(run->model), .unknown = &run->unknown};
    describe_process(run->model, process, g.process, sizeof g.process);
    const struct trace_model_process *old = run->baseline ? baseline_counterpart(run->model, process, run->baseline)
                                                          : NULL;
    if (run->baseline && !old)
        fprintf(stderr, "memslope gate: process %s has no counterpart in the baseline: not compared\n", g.process);
    if (old && (have_old = build(run, run->baseline, run->limits->baseline_path, old, &old_report) == 0)) {
        char err[512];
        have_diff = report_diff_build(&diff, &old_report, &report, NULL, err, sizeof err) == 0;
        if (!have_diff) {
            fprintf(stderr, "memslope gate: %s\n", err);
            run->failed = 1;
        }
    }
    int any = 0;
    for (size_t i = 0; i < report.case_count; i++) {
        const struct report_case *c = &report.cases[i];
        if (run->limits->case_glob && fnmatch(run->limits->case_glob, c->name, 0) != 0)
            continue;
        any = 1;
        check_case(run, &g, c, have_diff ? &diff : NULL);
    }
    run->processes_checked += (size_t)any;
    if (have_diff)
        report_diff_free(&diff);
    if (have_old)
        report_free(&old_report);
    report_free(&report);
}

/* The set is to be freed whatever this returns. */
static int load_suppressions(const struct gate_limits *limits, struct suppressions *set)
{
    char err[1024];
    if (suppressions_init(set) != 0) {
        fputs("memslope gate: out of memory\n", stderr);
        return -1;
    }
    if (suppressions_load_all(set, limits->suppression_files.items, limits->suppression_files.count,
                              limits->no_default_suppressions, err, sizeof err) != 0) {
        fprintf(stderr, "memslope gate: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < set->warning_count; i++)
        fprintf(stderr, "memslope gate: warning: %s\n", set->warnings[i]);
    return 0;
}

/* A trace cut short (no END: memslope was killed, or the disk filled)
 * holds partial figures: a gate must not pass on them. */
static int read_trace(const char *path, struct trace_model *model)
{
    char err[1024];
    if (trace_read_file(path, model, err, sizeof err) != 0) {
        fprintf(stderr, "memslope gate: %s\n", err);
        return -1;
    }
    if (model->incomplete) {
        fprintf(stderr, "memslope gate: %s is incomplete (%s): the recording was cut short (memslope killed, or "
                        "the disk full), so its figures are partial and cannot be gated; record again "
                        "(memslope report %s shows what it holds)\n",
                output_file_input_name(path), model->incomplete_reason, strcmp(path, "-") ? path : "FILE");
        trace_model_free(model);
        return -1;
    }
    return 0;
}

/* The primary first, then the others in the trace's order. */
static void check_processes(struct gate_run *run)
{
    const struct trace_model_process *primary = report_primary_process(run->model);
    if (primary)
        check_process(run, primary);
    for (const struct trace_model_process *p = run->model->processes; p && !run->failed; p = p->hh.next)
        if (p != primary && process_checked(run->model, p))
            check_process(run, p);
}

static int gate_trace(const struct gate_limits *limits, const struct suppressions *suppressions)
{
    struct trace_model model, baseline;
    if (read_trace(limits->trace_path, &model) != 0)
        return 2;
    if (limits->baseline_path && read_trace(limits->baseline_path, &baseline) != 0) {
        trace_model_free(&model);
        return 2;
    }
    struct gate_run run = {limits, suppressions, &model, limits->baseline_path ? &baseline : NULL, 0, 0, 0, 0, 0};
    check_processes(&run);
    trace_model_free(&model);
    if (limits->baseline_path)
        trace_model_free(&baseline);
    if (run.failed)
        return 2;
    if (!run.cases_checked) {
        fprintf(stderr, "memslope gate: no case in %s matches '%s' (memslope report %s lists the cases)\n",
                limits->trace_path, limits->case_glob ? limits->case_glob : "*", limits->trace_path);
        return 2;
    }
    /* A limit exceeded is a known failure (1), whatever else could not be
     * checked; with none, a limit that could not be checked is no pass (2). */
    const char *verdict = run.failures ? "FAIL" : run.unknown ? "cannot check" : "ok";
    printf("memslope gate: %s: %zu case%s checked in %zu process%s, %zu limit%s exceeded", verdict, run.cases_checked,
           run.cases_checked == 1 ? "" : "s", run.processes_checked, run.processes_checked == 1 ? "" : "es",
           run.failures, run.failures == 1 ? "" : "s");
    if (run.unknown)
        printf(", %zu figure%s unknown (said above)", run.unknown, run.unknown == 1 ? "" : "s");
    printf("\n");
    return run.failures ? 1 : run.unknown ? 2 : 0;
}

int cmd_gate(int argc, char **argv)
{
    struct gate_limits limits = {0};
    int rc = parse_options(argc, argv, &limits);
    if (rc == OPTIONS_RUN) {
        struct suppressions suppressions;
        rc = load_suppressions(&limits, &suppressions) == 0 ? gate_trace(&limits, &suppressions) : 2;
        suppressions_free(&suppressions);
    }
    option_list_free(&limits.suppression_files);
    return rc;
}

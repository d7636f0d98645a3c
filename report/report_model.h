/*
 * report_model.h - what `memslope report` presents, derived from a trace
 * model: the primary process, its cases, and per case the sites sorted by
 * the chosen metric. Every output format renders this, so they agree.
 */
#ifndef MEMSLOPE_REPORT_MODEL_H
#define MEMSLOPE_REPORT_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace_reader.h"

enum report_metric {
    REPORT_METRIC_GROWTH,    /* growth per iteration, then leaked, live, allocated bytes */
    REPORT_METRIC_LEAKED,    /* leaked bytes, then live, allocated bytes */
    REPORT_METRIC_PEAK,      /* the site's live bytes when the process peaked */
    REPORT_METRIC_ALLOCATED, /* allocated bytes, then allocations */
    REPORT_METRIC_TEMPORARY, /* allocations that were freed again, then allocations */
};

/* Parses a --metric name; -1 when unknown. */
int report_metric_parse(const char *name, enum report_metric *metric);

struct suppressions;

struct report_amount {
    uint64_t bytes, blocks;
};

/* A suppression that took loss records out of the leak check at exit. */
struct report_used_suppression {
    const struct suppression *suppression;
    struct report_amount amount;
};

struct report_growth {
    int known; /* 0: null in JSON (fewer than 3 iteration snapshots, or not estimated) */
    double bytes_per_iteration, blocks_per_iteration;
};

struct report_site {
    uint32_t stack_id;
    const struct trace_model_stack *stack; /* NULL when the trace never defined the stack */
    struct report_growth growth;
    uint64_t setup_bytes;
    uint64_t live_bytes, live_blocks;
    uint64_t leaked_bytes, leaked_blocks; /* definitely + indirectly lost */
    uint64_t allocations, frees, allocated_bytes;
    /* Live bytes when the case peaked: at the snapshot of a marked case
     * with the most live bytes; the process's peak for the whole-process case. */
    uint64_t peak_live_bytes;
};

struct report_case {
    const char *name;
    uint32_t case_id; /* TRACE_NONE for the whole-process case made up by the report */
    const struct trace_case *source; /* the trace's CASE; NULL for the case made up by the report */
    uint64_t iterations;
    int setup_known; /* 0: no iterations, so nothing to tell setup from growth (null in JSON) */
    uint64_t setup_bytes, setup_blocks;
    struct report_growth growth;
    /* The case's leak check less its suppressed loss records (whose figures
     * are taken out of their categories and summed in suppressed, as
     * memcheck's "suppressed:" line); NULL: no leak check for this case. */
    const struct trace_leaks *leaks;
    struct report_amount suppressed;
    struct trace_leaks *owned_leaks; /* what leaks points to, when this case owns it */
    uint64_t peak_bytes;
    struct report_site *sites; /* sorted by the report's metric */
    size_t site_count;
};

/* A traced process image's leak check at exit, less its suppressed loss
 * records (counted in exit_suppressed). */
struct report_process {
    const struct trace_model_process *process;
    const struct trace_leaks *exit_leaks; /* NULL: no check at exit (an image replaced by exec, --leak-check off) */
    struct report_amount exit_suppressed;
    struct trace_leaks *owned_exit_leaks;
};

struct report {
    const struct trace_model *model;
    const char *trace_name;
    /* The process whose cases the report holds: report_primary_process,
     * unless the request named another (gate checks every process). NULL
     * when the trace names no process. */
    const struct trace_model_process *primary;
    const char *case_filter; /* --case NAME, or NULL */
    /* The primary's check at exit, less the suppressed; NULL if none. With
     * case_filter, the selected case's own check instead (the blocks it
     * allocated, checked at its end, or at exit if it never ended). */
    const struct trace_leaks *exit_leaks;
    struct report_amount exit_suppressed;      /* what the suppressions took out of it */
    const struct suppressions *suppressions;   /* NULL: none */
    struct trace_leaks *owned_exit_leaks;      /* what exit_leaks points to */
    struct report_used_suppression *used_suppressions; /* in the order of the set, as memcheck -v lists them */
    size_t used_suppression_count;
    enum report_metric metric;
    struct report_case *cases;
    size_t case_count;
    struct report_process *processes; /* every process image of the trace, in its order */
    size_t process_count;
    struct report_case_data *case_data; /* the primary's snapshots, leak checks and counters by case (uthash) */
};

/* The primary's snapshots of one case id, in file order (*count of them);
 * NULL when it has none. */
const struct trace_snapshot *const *report_case_snapshots(const struct report *report, uint32_t case_id,
                                                          size_t *count);

/* What to build a report of. */
struct report_request {
    enum report_metric metric;
    const char *case_name;                     /* NULL: every case */
    const struct suppressions *suppressions;   /* NULL: none; must outlive the report */
    const struct trace_model_process *process; /* whose cases; NULL: report_primary_process */
};

/* Builds the report; case_name (NULL: all) keeps one case. Returns 0, or -1
 * with a message in err (no such case, out of memory). */
int report_build(struct report *report, const struct trace_model *model, const char *trace_name,
                 enum report_metric metric, const char *case_name, char *err, size_t err_size);
/* The same, with the loss records that match a suppression counted apart:
 * they are no loss record, and count toward no category and no site's
 * leaked figures. suppressions may be NULL; it must outlive the report. */
int report_build_with_suppressions(struct report *report, const struct trace_model *model, const char *trace_name,
                                   enum report_metric metric, const char *case_name,
                                   const struct suppressions *suppressions, char *err, size_t err_size);
/* The general form of the two above. */
int report_build_request(struct report *report, const struct trace_model *model, const char *trace_name,
                         const struct report_request *request, char *err, size_t err_size);
void report_free(struct report *report);

/* How to mark iterations: in a Python program, and in any other. */
#define REPORT_ITERATION_HINT_PYTHON "memslope.iteration() in the Python code, or record --iteration py:FUNCTION"
#define REPORT_ITERATION_HINT_NATIVE "memslope_iteration() or record --iteration SYMBOL"

/* How to mark iterations in the primary's program: the Python module and
 * py:FUNCTION when it ran CPython, memslope_iteration() and a C symbol
 * otherwise. */
const char *report_iteration_hint(const struct report *report);

/* How process ended, as the text and HTML reports say it ("exited 0",
 * "killed by signal 9 (Killed)", "still running when the command ended,
 * 0.2 s in (let go of)", ...), into buffer. */
const char *report_exit_text(const struct trace_model_process *process, char *buffer, size_t size);

/* Why process (an image of the report's trace) has no leak results: the
 * note the tracer wrote, else what the trace tells (--leak-check off, no
 * shim, a trace cut short). */
const char *report_missing_leaks_reason(const struct report *report, const struct trace_model_process *process);

/* qsort order of pointers to loss records: largest first, then by
 * category and stack, so equal sizes come out the same in every run. */
int report_compare_loss_records(const void *left, const void *right);

/* The name a process goes by in messages: its command's base name
 * (argv[0]), else its executable's. */
const char *report_process_name(const struct trace_model_process *process);

/* The process image that did the work: the one with the most iterations
 * marked; else the one with the most allocations, unless the end of the
 * traced command's exec chain did at least a tenth as many. */
const struct trace_model_process *report_primary_process(const struct trace_model *model);

/* The trace's --sample-rate: 0 when every allocation had its backtrace.
 * Otherwise per-site figures (sites, loss records, per-site growth) are
 * estimates scaled up from the sampled allocations; totals, the leak
 * summary and case figures stay exact. */
uint64_t report_sample_rate(const struct report *report);
/* "~" to put before a per-site figure of a sampled trace, else "". */
const char *report_estimate_mark(const struct report *report);

/* A PYTHON record's allocator as the JSON report names it ("pymalloc-wrapped",
 * "malloc", "user", "unwrapped"), and whether every object was recorded. */
const char *report_python_allocator(const struct trace_python *python);
int report_python_objects_recorded(const struct trace_python *python);

/* A frame is shown unless it is an allocator entry point. */
int report_frame_visible(const struct trace_model_frame *frame);

/* The text and JSON renderings (report_text.c, report_json.c). */
void report_write_text(const struct report *report, FILE *out);
void report_write_json(const struct report *report, FILE *out);

struct json_writer;
/* The "frames" member of a site: its visible frames, innermost first. */
void report_write_json_frames(struct json_writer *json, const struct trace_model *model,
                              const struct trace_model_stack *stack);
/* The "warnings" member: the whole trace's, then the primary process's (the
 * JSON report and the HTML page's data share it). */
void report_write_json_warnings(struct json_writer *json, const struct report *report);

#endif

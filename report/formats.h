/*
 * formats.h - the report formats people open in other tools: speedscope,
 * collapsed stacks (flamegraph.pl, inferno), pprof, and a self-contained
 * HTML page. Each renders a built struct report (report_model.h) to the FILE
 * given; cmd_report owns opening the output (stdout or -o via rename).
 *
 * Every writer returns 0, or -1 with one line in err (what is missing and
 * what to do instead) and nothing the caller should keep: cmd_report then
 * removes the temporary output, so an error never leaves a file that looks
 * valid. docs/formats.md describes the outputs.
 *
 * Which figures are split by case: growth and leaks are per case (a case
 * frame at the root when the report holds more than one case); allocations,
 * allocated bytes, live at peak and frees come from the primary process's
 * sites, or with --case (report->case_filter) from the case's: what it
 * allocated while open, and what was live when it peaked.
 */
#ifndef MEMSLOPE_FORMATS_H
#define MEMSLOPE_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report_model.h"

/* speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * one sampled profile per metric that has weight. */
int report_write_speedscope(const struct report *report, FILE *out, char *err, size_t err_size);

/* Collapsed stacks, "root;...;leaf N", weighted by metric. */
int report_write_collapsed(const struct report *report, enum report_metric metric, FILE *out, char *err,
                           size_t err_size);

/* pprof's profile.proto, gzipped. */
int report_write_pprof(const struct report *report, FILE *out, char *err, size_t err_size);

/* One self-contained HTML page: charts, tables, flame graphs; no network. */
int report_write_html(const struct report *report, FILE *out, char *err, size_t err_size);

/* Valgrind-format suppressions for the loss records the text report lists
 * (those at exit, else each case's), to paste into a suppression file:
 * frames by function name, obj: for an unnamed one. */
int report_write_suppressions(const struct report *report, FILE *out, char *err, size_t err_size);

/* --- shared by the writers above (format_stacks.c) ---------------------------------- */

/* What a weighted stack measures. */
enum format_weight {
    FORMAT_WEIGHT_GROWTH,      /* bytes per iteration, per case (only known, positive growth) */
    FORMAT_WEIGHT_LEAKED,      /* definitely + indirectly lost bytes, per case */
    FORMAT_WEIGHT_PEAK,        /* the site's live bytes when the process peaked */
    FORMAT_WEIGHT_ALLOCATED,   /* bytes allocated over the whole run */
    FORMAT_WEIGHT_ALLOCATIONS, /* allocations over the whole run */
    FORMAT_WEIGHT_TEMPORARY,   /* allocations freed again over the whole run */
    FORMAT_WEIGHT_COUNT,
};

struct format_sample {
    const char *case_name; /* NULL: no case frame at the root */
    const struct trace_model_stack *stack; /* NULL when the trace never defined it */
    double weight;         /* > 0 */
};

struct format_samples {
    struct format_sample *items;
    size_t count;
    double total;
};

/* The weighted stacks of a report for one weight; samples with no weight are
 * left out. Returns 0, or -1 when out of memory. Free with format_samples_free. */
int format_collect(const struct report *report, enum format_weight weight, struct format_samples *samples);
void format_samples_free(struct format_samples *samples);

struct format_functions; /* below */

/* The key of a stack's path of functions: case (a pointer, NULL for none),
 * the number of visible frames, then their functions, root first. ids and
 * key: room for the stack's depth + 1 ids, and FORMAT_PATH_KEY_SIZE(depth)
 * bytes. Returns the key's length. */
#define FORMAT_PATH_KEY_SIZE(depth) (sizeof(const char *) + ((size_t)(depth) + 2) * sizeof(uint32_t))
size_t format_function_path_key(const struct trace_model *model, const struct format_functions *functions,
                                const char *case_name, const struct trace_model_stack *stack, uint32_t *ids,
                                unsigned char *key);

/* Makes one sample of those whose stacks' visible frames name the same
 * functions in the same order (and have the same case frame), their
 * weights summed, where the first of them was. A format that draws a frame
 * per function (speedscope, collapsed stacks) draws the same: a Python
 * test suite's 1.17 million sites are 81,000 function paths. 0, or -1
 * when out of memory (the samples as they were). */
int format_samples_merge_functions(const struct report *report, const struct format_functions *functions,
                                   struct format_samples *samples);

/* The report metric's weight (growth -> FORMAT_WEIGHT_GROWTH, ...). */
enum format_weight format_weight_of_metric(enum report_metric metric);

/* Why a weight has no data, for an error message ("no case has growth
 * figures: ... use --metric leaked"). */
const char *format_weight_empty_reason(const struct report *report, enum format_weight weight);

/* The stack's visible frames (allocator frames hidden), root first, as frame
 * ids into report->model->frames. ids holds stack->depth entries; returns the count. */
uint32_t format_visible_frames(const struct trace_model *model, const struct trace_model_stack *stack,
                               uint32_t *ids);

/* A frame's function name, or for an unsymbolized frame "module+0xOFFSET"
 * or "0xADDRESS". Returns buffer. */
const char *format_function_name(const struct trace_model_frame *frame, char *buffer, size_t size);

/* The functions the flame graphs draw: one box per function, whatever line
 * of it made the call, as `memslope perf` draws CPU samples. A function is
 * its name, its module and its source file; a Python frame's module is
 * "python". A frame without a symbol is "[module]" (every unnamed frame of
 * one module is one box, as perf shows them), or "[unknown]" outside every
 * known module. */
struct format_function {
    char *name;
    const char *file;   /* the first file seen for it ("" when none) */
    const char *module; /* module path, "python", or "" */
    uint32_t line;      /* the lowest line seen in it, nearest its start (0: none) */
};

struct format_functions {
    struct format_function *items;
    size_t count;
    uint32_t *of_frame; /* per trace frame id: index into items */
};

/* Every frame of the model mapped to its function. 0, or -1 when out of memory. */
int format_functions_build(const struct trace_model *model, struct format_functions *functions);
void format_functions_free(struct format_functions *functions);

/* A function's name with a Python frame's file ("step (bench.py)"): the
 * qualname alone would merge every script's "<module>". Returns buffer. */
const char *format_function_label(const struct format_function *function, char *buffer, size_t size);

/* The last component of a path. */
const char *format_base_name(const char *path);

#endif

/* format_collapsed.c - collapsed stacks ("root;...;leaf N"), the input of
 * flamegraph.pl and inferno-flamegraph. Frames are functions (formats.h,
 * struct format_function): the line is left out, so a caller that calls
 * from three lines is one frame, as stackcollapse-perf writes them. Counts
 * are whole numbers (inferno reads integers only): growth is rounded, and a
 * growing site that rounds to zero still counts 1 so it stays visible.
 * Identical lines are merged and the output is sorted. */
#include "formats.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct collapsed_line {
    char *stack;
    uint64_t count;
};

/* A frame name must not contain the separator or end the line. */
static void write_sanitized(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++)
        fputc(*p == ';' ? ',' : (*p == '\n' || *p == '\r') ? ' ' : *p, out);
}

/* The sample's stack as one string, root first. NULL when out of memory. */
static char *stack_text(const struct report *report, const struct format_functions *functions,
                        const struct format_sample *sample)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    uint32_t *ids = sample->stack ? malloc(((size_t)sample->stack->depth + 1) * sizeof *ids) : NULL;
    if (!out || (sample->stack && !ids)) {
        if (out)
            fclose(out);
        free(text);
        free(ids);
        return NULL;
    }
    uint32_t count = format_visible_frames(report->model, sample->stack, ids);
    if (sample->case_name) {
        fputs("[case ", out);
        write_sanitized(out, sample->case_name);
        fputs("]", out);
    }
    for (uint32_t i = 0; i < count; i++) {
        char label[1024];
        if (i || sample->case_name)
            fputc(';', out);
        write_sanitized(out, format_function_label(&functions->items[functions->of_frame[ids[i]]], label,
                                                   sizeof label));
    }
    if (count == 0)
        fputs(sample->case_name ? ";[unknown stack]" : "[unknown stack]", out);
    free(ids);
    return fclose(out) == 0 ? text : (free(text), NULL);
}

static int compare_lines(const void *left, const void *right)
{
    return strcmp(((const struct collapsed_line *)left)->stack, ((const struct collapsed_line *)right)->stack);
}

static uint64_t whole_count(double weight)
{
    double rounded = nearbyint(weight);
    return rounded < 1 ? 1 : (uint64_t)rounded;
}

static void free_lines(struct collapsed_line *lines, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(lines[i].stack);
    free(lines);
}

/* Sorted, and identical stacks merged into one line. */
static void write_lines(FILE *out, struct collapsed_line *lines, size_t count)
{
    qsort(lines, count, sizeof *lines, compare_lines);
    for (size_t i = 0; i < count;) {
        uint64_t total = 0;
        size_t j = i;
        for (; j < count && strcmp(lines[j].stack, lines[i].stack) == 0; j++)
            total += lines[j].count;
        fprintf(out, "%s %" PRIu64 "\n", lines[i].stack, total);
        i = j;
    }
}

int report_write_collapsed(const struct report *report, enum report_metric metric, FILE *out, char *err,
                           size_t err_size)
{
    enum format_weight weight = format_weight_of_metric(metric);
    struct format_samples samples;
    if (format_collect(report, weight, &samples) != 0) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    if (samples.count == 0) {
        snprintf(err, err_size, "%s: %s", report->trace_name, format_weight_empty_reason(report, weight));
        return -1;
    }
    struct format_functions functions;
    int have_functions = format_functions_build(report->model, &functions) == 0;
    /* lines name functions: samples with one path of functions are one line
     * (fewer lines to build and sort; write_lines would sum them anyway) */
    int merged = have_functions && format_samples_merge_functions(report, &functions, &samples) == 0;
    struct collapsed_line *lines = merged ? calloc(samples.count, sizeof *lines) : NULL;
    int failed = !lines || !have_functions;
    for (size_t i = 0; !failed && i < samples.count; i++) {
        lines[i].stack = stack_text(report, &functions, &samples.items[i]);
        lines[i].count = whole_count(samples.items[i].weight);
        failed = !lines[i].stack;
    }
    if (!failed)
        write_lines(out, lines, samples.count);
    if (have_functions)
        format_functions_free(&functions);
    if (lines)
        free_lines(lines, samples.count);
    format_samples_free(&samples);
    if (failed)
        snprintf(err, err_size, "out of memory");
    return failed ? -1 : 0;
}

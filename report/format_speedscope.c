/* format_speedscope.c - speedscope's file format: one sampled profile per
 * metric that has weight, samples root first, frames shared by all
 * profiles, one per function (formats.h, struct format_function) as
 * `memslope perf` writes them: file and line are the function's file and
 * lowest line, or its module when it has no source file. */
#include "formats.h"

#include <stdlib.h>
#include <string.h>

#include "../common/json_writer.h"

#ifndef MEMSLOPE_VERSION
#define MEMSLOPE_VERSION "unknown"
#endif

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct profile_spec {
    enum format_weight weight;
    const char *name;
    const char *unit;
};

/* Listed in this order, most telling first; a profile without weight is left out. */
static const struct profile_spec profile_specs[] = {
    {FORMAT_WEIGHT_GROWTH, "growth per iteration", "bytes"},
    {FORMAT_WEIGHT_LEAKED, "leaked", "bytes"},
    {FORMAT_WEIGHT_PEAK, "live at peak", "bytes"},
    {FORMAT_WEIGHT_ALLOCATED, "allocated bytes", "bytes"},
    {FORMAT_WEIGHT_ALLOCATIONS, "allocations", "none"},
};
enum { PROFILE_SPECS = sizeof profile_specs / sizeof *profile_specs };

/* speedscope frame indexes: one per function used, then one per case frame. */
struct frame_table {
    const struct report *report;
    struct format_functions functions;
    int64_t *of_function; /* -1: not used yet */
    int64_t *of_case;     /* -1: not used yet */
    uint32_t *order;      /* function index, or function count + case index, per speedscope index */
    size_t count;
};

static int frame_table_init(struct frame_table *table, const struct report *report)
{
    memset(table, 0, sizeof *table);
    table->report = report;
    if (format_functions_build(report->model, &table->functions) != 0)
        return -1;
    size_t functions = table->functions.count, cases = report->case_count;
    table->of_function = malloc((functions + 1) * sizeof *table->of_function);
    table->of_case = malloc((cases + 1) * sizeof *table->of_case);
    table->order = malloc((functions + cases + 1) * sizeof *table->order);
    if (!table->of_function || !table->of_case || !table->order)
        return -1;
    memset(table->of_function, 0xff, (functions + 1) * sizeof *table->of_function);
    memset(table->of_case, 0xff, (cases + 1) * sizeof *table->of_case);
    return 0;
}

static void frame_table_free(struct frame_table *table)
{
    format_functions_free(&table->functions);
    free(table->of_function);
    free(table->of_case);
    free(table->order);
}

static int64_t index_of_trace_frame(struct frame_table *table, uint32_t frame_id)
{
    uint32_t function = table->functions.of_frame[frame_id];
    if (table->of_function[function] < 0) {
        table->of_function[function] = (int64_t)table->count;
        table->order[table->count++] = function;
    }
    return table->of_function[function];
}

static int64_t index_of_case(struct frame_table *table, const char *case_name)
{
    size_t c = 0;
    while (c + 1 < table->report->case_count && table->report->cases[c].name != case_name)
        c++;
    if (table->of_case[c] < 0) {
        table->of_case[c] = (int64_t)table->count;
        table->order[table->count++] = (uint32_t)table->functions.count + (uint32_t)c;
    }
    return table->of_case[c];
}

static void write_frame(struct json_writer *json, const struct frame_table *table, uint32_t entry)
{
    size_t functions = table->functions.count;
    json_object_begin(json);
    if (entry >= functions) {
        char name[512];
        snprintf(name, sizeof name, "[case %s]", table->report->cases[entry - functions].name);
        json_member_string(json, "name", name);
    } else {
        const struct format_function *function = &table->functions.items[entry];
        char name[1024];
        json_member_string(json, "name", format_function_label(function, name, sizeof name));
        if (*function->file)
            json_member_string(json, "file", function->file);
        else if (*function->module)
            json_member_string(json, "file", function->module);
        if (*function->file && function->line)
            json_member_uint(json, "line", function->line);
    }
    json_object_end(json);
}

static void write_shared_frames(struct json_writer *json, const struct frame_table *table)
{
    json_key(json, "shared");
    json_object_begin(json);
    json_key(json, "frames");
    json_array_begin(json);
    for (size_t i = 0; i < table->count; i++)
        write_frame(json, table, table->order[i]);
    json_array_end(json);
    json_object_end(json);
}

/* One sample: speedscope frame indexes root first; ids is scratch space. */
static void write_sample(struct json_writer *json, struct frame_table *table, const struct format_sample *sample,
                         uint32_t *ids)
{
    uint32_t count = format_visible_frames(table->report->model, sample->stack, ids);
    json_array_begin(json);
    if (sample->case_name)
        json_int(json, index_of_case(table, sample->case_name));
    for (uint32_t i = 0; i < count; i++)
        json_int(json, index_of_trace_frame(table, ids[i]));
    json_array_end(json);
}

static uint32_t deepest_stack(const struct format_samples *samples)
{
    uint32_t deepest = 0;
    for (size_t i = 0; i < samples->count; i++)
        if (samples->items[i].stack && samples->items[i].stack->depth > deepest)
            deepest = samples->items[i].stack->depth;
    return deepest;
}

static int write_profile(struct json_writer *json, struct frame_table *table, const struct profile_spec *spec,
                         const struct format_samples *samples)
{
    uint32_t *ids = malloc(((size_t)deepest_stack(samples) + 1) * sizeof *ids);
    if (!ids)
        return -1;
    json_object_begin(json);
    json_member_string(json, "type", "sampled");
    json_member_string(json, "name", spec->name);
    json_member_string(json, "unit", spec->unit);
    json_member_uint(json, "startValue", 0);
    json_member_double(json, "endValue", samples->total);
    json_key(json, "samples");
    json_array_begin(json);
    for (size_t i = 0; i < samples->count; i++)
        write_sample(json, table, &samples->items[i], ids);
    json_array_end(json);
    json_key(json, "weights");
    json_array_begin(json);
    for (size_t i = 0; i < samples->count; i++)
        json_double(json, samples->items[i].weight);
    json_array_end(json);
    json_object_end(json);
    free(ids);
    return 0;
}

/* The profiles are listed most telling first (growth when there is growth,
 * else leaks, else the peak) and empty ones are left out, so the first is active. */
enum { ACTIVE_PROFILE_INDEX = 0 };

static void write_title(struct json_writer *json, const struct report *report)
{
    const struct trace_model *model = report->model;
    const char *command = model->has_info && model->info.argc ? model->info.argv[0]
                          : report->primary && report->primary->info.argc ? report->primary->info.argv[0]
                                                                           : "";
    char title[512];
    snprintf(title, sizeof title, "memslope %s%s(%s)", format_base_name(command), *command ? " " : "",
             format_base_name(report->trace_name));
    json_member_string(json, "name", title);
}

/* Profiles come before the shared frames (member order does not matter in
 * JSON): the frame table fills as the samples are written. */
static int write_document(const struct report *report, const struct format_samples *collected, FILE *out)
{
    struct frame_table table;
    int rc = frame_table_init(&table, report);
    struct json_writer json;
    json_init(&json, out, 0);
    json_object_begin(&json);
    json_member_string(&json, "$schema", SPEEDSCOPE_SCHEMA);
    json_key(&json, "profiles");
    json_array_begin(&json);
    for (int i = 0; rc == 0 && i < PROFILE_SPECS; i++)
        if (collected[i].count)
            rc = write_profile(&json, &table, &profile_specs[i], &collected[i]);
    json_array_end(&json);
    if (rc == 0)
        write_shared_frames(&json, &table);
    json_member_int(&json, "activeProfileIndex", ACTIVE_PROFILE_INDEX);
    json_member_string(&json, "exporter", "memslope@" MEMSLOPE_VERSION);
    write_title(&json, report);
    json_object_end(&json);
    frame_table_free(&table);
    return rc;
}

int report_write_speedscope(const struct report *report, FILE *out, char *err, size_t err_size)
{
    struct format_samples collected[PROFILE_SPECS];
    struct format_functions functions;
    int have_functions = format_functions_build(report->model, &functions) == 0;
    int rc = have_functions ? 0 : -1, any = 0;
    memset(collected, 0, sizeof collected);
    for (int i = 0; rc == 0 && i < PROFILE_SPECS; i++) {
        /* a frame per function: samples with one path of functions are one */
        rc = format_collect(report, profile_specs[i].weight, &collected[i]);
        if (rc == 0)
            rc = format_samples_merge_functions(report, &functions, &collected[i]);
        any |= collected[i].count > 0;
    }
    if (have_functions)
        format_functions_free(&functions);
    if (rc != 0)
        snprintf(err, err_size, "out of memory");
    else if (!any)
        snprintf(err, err_size, "%s: no allocations with a backtrace were recorded: nothing to draw",
                 report->trace_name);
    else if ((rc = write_document(report, collected, out)) != 0)
        snprintf(err, err_size, "out of memory");
    for (int i = 0; i < PROFILE_SPECS; i++)
        format_samples_free(&collected[i]);
    return rc == 0 && any ? 0 : -1;
}

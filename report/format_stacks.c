/* format_stacks.c - the weighted stacks every flame-graph format draws
 * (formats.h): one place decides which figure a metric weighs and where it
 * comes from, so speedscope, collapsed stacks and pprof agree. */
#include "formats.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

const char *format_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

const char *format_function_name(const struct trace_model_frame *frame, char *buffer, size_t size)
{
    if (*frame->function)
        snprintf(buffer, size, "%s", frame->function);
    else if (frame->module && *frame->module->path)
        snprintf(buffer, size, "%s+0x%" PRIx64, format_base_name(frame->module->path), frame->module_offset);
    else
        snprintf(buffer, size, "0x%" PRIx64, frame->address);
    return buffer;
}

struct function_key_entry {
    char *key; /* name \x1f module \x1f file */
    uint32_t index;
    UT_hash_handle hh;
};

static void flame_name(const struct trace_model_frame *frame, char *buffer, size_t size)
{
    if (*frame->function)
        snprintf(buffer, size, "%s", frame->function);
    else if (frame->module && *frame->module->path)
        snprintf(buffer, size, "[%s]", format_base_name(frame->module->path));
    else
        snprintf(buffer, size, "[unknown]");
}

static int add_function(struct format_functions *functions, const char *name, const char *module,
                        const struct trace_model_frame *frame)
{
    struct format_function *function = &functions->items[functions->count];
    if (!(function->name = strdup(name)))
        return -1;
    function->module = module;
    function->file = frame->file;
    function->line = frame->line;
    return (int)functions->count++;
}

/* A later frame of the function: its first file, its lowest line. */
static void note_frame(struct format_function *function, const struct trace_model_frame *frame)
{
    if (!*function->file)
        function->file = frame->file;
    if (frame->line && (!function->line || frame->line < function->line))
        function->line = frame->line;
}

int format_functions_build(const struct trace_model *model, struct format_functions *functions)
{
    memset(functions, 0, sizeof *functions);
    functions->items = calloc((size_t)model->frame_count + 1, sizeof *functions->items);
    functions->of_frame = calloc((size_t)model->frame_count + 1, sizeof *functions->of_frame);
    struct function_key_entry *keys = NULL, *entry, *next;
    int rc = functions->items && functions->of_frame ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && i < model->frame_count; i++) {
        const struct trace_model_frame *frame = &model->frames[i];
        const char *module = frame->flags & TRACE_FRAME_PYTHON ? "python" : frame->module ? frame->module->path : "";
        char name[512], *key = NULL;
        flame_name(frame, name, sizeof name);
        /* Unnamed frames are one function per module, whatever file. */
        if (asprintf(&key, "%s\x1f%s\x1f%s", name, module, *frame->function ? frame->file : "") < 0) {
            rc = -1;
            break;
        }
        HASH_FIND_STR(keys, key, entry);
        if (entry) {
            free(key);
            note_frame(&functions->items[entry->index], frame);
            functions->of_frame[i] = entry->index;
            continue;
        }
        int index = (entry = calloc(1, sizeof *entry)) ? add_function(functions, name, module, frame) : -1;
        if (index < 0) {
            free(key);
            free(entry);
            rc = -1;
            break;
        }
        entry->key = key;
        entry->index = (uint32_t)index;
        HASH_ADD_KEYPTR(hh, keys, entry->key, strlen(entry->key), entry);
        functions->of_frame[i] = entry->index;
    }
    HASH_ITER(hh, keys, entry, next) {
        HASH_DEL(keys, entry);
        free(entry->key);
        free(entry);
    }
    if (rc != 0)
        format_functions_free(functions);
    return rc;
}

void format_functions_free(struct format_functions *functions)
{
    for (size_t i = 0; functions->items && i < functions->count; i++)
        free(functions->items[i].name);
    free(functions->items);
    free(functions->of_frame);
    memset(functions, 0, sizeof *functions);
}

const char *format_function_label(const struct format_function *function, char *buffer, size_t size)
{
    if (strcmp(function->module, "python") == 0 && *function->file)
        snprintf(buffer, size, "%s (%s)", function->name, format_base_name(function->file));
    else
        snprintf(buffer, size, "%s", function->name);
    return buffer;
}

uint32_t format_visible_frames(const struct trace_model *model, const struct trace_model_stack *stack,
                               uint32_t *ids)
{
    uint32_t count = 0;
    if (!stack)
        return 0;
    /* The stack is innermost first; walking it backwards gives root first. */
    for (uint32_t i = stack->depth; i-- > 0;)
        if (report_frame_visible(&model->frames[stack->frame_ids[i]]))
            ids[count++] = stack->frame_ids[i];
    return count;
}

enum format_weight format_weight_of_metric(enum report_metric metric)
{
    switch (metric) {
    case REPORT_METRIC_GROWTH: return FORMAT_WEIGHT_GROWTH;
    case REPORT_METRIC_LEAKED: return FORMAT_WEIGHT_LEAKED;
    case REPORT_METRIC_PEAK: return FORMAT_WEIGHT_PEAK;
    case REPORT_METRIC_ALLOCATED: return FORMAT_WEIGHT_ALLOCATED;
    case REPORT_METRIC_TEMPORARY: return FORMAT_WEIGHT_TEMPORARY;
    }
    return FORMAT_WEIGHT_ALLOCATED;
}

static int weight_is_per_case(enum format_weight weight)
{
    return weight == FORMAT_WEIGHT_GROWTH || weight == FORMAT_WEIGHT_LEAKED;
}

static double case_site_weight(const struct report_site *site, enum format_weight weight)
{
    if (weight == FORMAT_WEIGHT_GROWTH)
        return site->growth.known && site->growth.bytes_per_iteration > 0 ? site->growth.bytes_per_iteration : 0;
    return (double)site->leaked_bytes;
}

static double process_site_weight(const struct trace_site *site, enum format_weight weight)
{
    switch (weight) {
    case FORMAT_WEIGHT_PEAK: return (double)site->peak_live_bytes;
    case FORMAT_WEIGHT_ALLOCATED: return (double)site->allocated_bytes;
    case FORMAT_WEIGHT_ALLOCATIONS: return (double)site->allocations;
    case FORMAT_WEIGHT_TEMPORARY: return (double)site->frees;
    default: return 0;
    }
}

static int add_sample(struct format_samples *samples, size_t *capacity, const char *case_name,
                      const struct trace_model_stack *stack, double weight)
{
    if (!(weight > 0))
        return 0;
    if (samples->count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 64;
        struct format_sample *items = realloc(samples->items, grown * sizeof *items);
        if (!items)
            return -1;
        samples->items = items;
        *capacity = grown;
    }
    samples->items[samples->count++] = (struct format_sample){case_name, stack, weight};
    samples->total += weight;
    return 0;
}

static int collect_per_case(const struct report *report, enum format_weight weight, struct format_samples *samples,
                            size_t *capacity)
{
    for (size_t c = 0; c < report->case_count; c++) {
        const struct report_case *report_case = &report->cases[c];
        /* A case frame only when there is more than one case to tell apart. */
        const char *case_name = report->case_count > 1 ? report_case->name : NULL;
        for (size_t i = 0; i < report_case->site_count; i++) {
            const struct report_site *site = &report_case->sites[i];
            if (add_sample(samples, capacity, case_name, site->stack, case_site_weight(site, weight)) != 0)
                return -1;
        }
    }
    return 0;
}

static double case_site_counter(const struct report_site *site, enum format_weight weight)
{
    switch (weight) {
    case FORMAT_WEIGHT_PEAK: return (double)site->peak_live_bytes;
    case FORMAT_WEIGHT_ALLOCATED: return (double)site->allocated_bytes;
    case FORMAT_WEIGHT_ALLOCATIONS: return (double)site->allocations;
    case FORMAT_WEIGHT_TEMPORARY: return (double)site->frees;
    default: return 0;
    }
}

/* With --case, the case's own counters (report_model.h: the allocations
 * made while it was open, live bytes when it peaked), not the process's. */
static int collect_process_wide(const struct report *report, enum format_weight weight,
                                struct format_samples *samples, size_t *capacity)
{
    for (size_t c = 0; report->case_filter && c < report->case_count; c++)
        for (size_t i = 0; i < report->cases[c].site_count; i++) {
            const struct report_site *site = &report->cases[c].sites[i];
            if (add_sample(samples, capacity, NULL, site->stack, case_site_counter(site, weight)) != 0)
                return -1;
        }
    if (report->case_filter)
        return 0;
    const struct trace_model_process *process = report->primary;
    for (const struct trace_model_site *s = process ? process->sites : NULL; s; s = s->hh.next)
        if (add_sample(samples, capacity, NULL, trace_model_stack(process, s->site.stack_id),
                       process_site_weight(&s->site, weight)) != 0)
            return -1;
    return 0;
}

int format_collect(const struct report *report, enum format_weight weight, struct format_samples *samples)
{
    size_t capacity = 0;
    memset(samples, 0, sizeof *samples);
    int rc = weight_is_per_case(weight) ? collect_per_case(report, weight, samples, &capacity)
                                        : collect_process_wide(report, weight, samples, &capacity);
    if (rc != 0)
        format_samples_free(samples);
    return rc;
}

/* A path of functions seen: its key is the case frame, the number of
 * functions, then the functions. */
struct function_path_seen {
    UT_hash_handle hh;
    size_t sample; /* where its merged sample is */
    unsigned char key[];
};

size_t format_function_path_key(const struct trace_model *model, const struct format_functions *functions,
                                const char *case_name, const struct trace_model_stack *stack, uint32_t *ids,
                                unsigned char *key)
{
    uint32_t count = format_visible_frames(model, stack, ids);
    size_t header = sizeof case_name + sizeof count;
    memcpy(key, &case_name, sizeof case_name);
    memcpy(key + sizeof case_name, &count, sizeof count);
    for (uint32_t f = 0; f < count; f++)
        memcpy(key + header + f * sizeof(uint32_t), &functions->of_frame[ids[f]], sizeof(uint32_t));
    return header + (size_t)count * sizeof(uint32_t);
}

int format_samples_merge_functions(const struct report *report, const struct format_functions *functions,
                                   struct format_samples *samples)
{
    uint32_t deepest = 0;
    for (size_t i = 0; i < samples->count; i++)
        if (samples->items[i].stack && samples->items[i].stack->depth > deepest)
            deepest = samples->items[i].stack->depth;
    uint32_t *ids = malloc(((size_t)deepest + 1) * sizeof *ids);
    unsigned char *key = malloc(FORMAT_PATH_KEY_SIZE(deepest));
    struct format_sample *merged = malloc((samples->count + 1) * sizeof *merged);
    struct function_path_seen *seen = NULL, *path, *next;
    int rc = ids && key && merged ? 0 : -1;
    size_t kept = 0;
    for (size_t i = 0; rc == 0 && i < samples->count; i++) {
        const struct format_sample *sample = &samples->items[i];
        size_t key_length =
            format_function_path_key(report->model, functions, sample->case_name, sample->stack, ids, key);
        HASH_FIND(hh, seen, key, key_length, path);
        if (path) {
            merged[path->sample].weight += sample->weight;
            continue;
        }
        if (!(path = malloc(sizeof *path + key_length))) {
            rc = -1;
            break;
        }
        memcpy(path->key, key, key_length);
        path->sample = kept;
        HASH_ADD(hh, seen, key, key_length, path);
        merged[kept++] = *sample;
    }
    HASH_ITER(hh, seen, path, next) {
        HASH_DEL(seen, path);
        free(path);
    }
    free(ids);
    free(key);
    if (rc != 0) {
        free(merged);
        return -1;
    }
    free(samples->items);
    samples->items = merged;
    samples->count = kept;
    return 0;
}

void format_samples_free(struct format_samples *samples)
{
    free(samples->items);
    memset(samples, 0, sizeof *samples);
}

static int any_growth_known(const struct report *report)
{
    for (size_t c = 0; c < report->case_count; c++) {
        if (report->cases[c].growth.known)
            return 1;
        for (size_t i = 0; i < report->cases[c].site_count; i++)
            if (report->cases[c].sites[i].growth.known)
                return 1;
    }
    return 0;
}

static int any_leak_check(const struct report *report)
{
    for (size_t c = 0; c < report->case_count; c++)
        if (report->cases[c].leaks)
            return 1;
    return report->exit_leaks != NULL;
}

/* The reason for a report without growth figures, told how to mark iterations. */
#define NO_GROWTH_FIGURES(hint)                                                                                    \
    "no growth figures: growth needs a case with at least 3 iteration snapshots (mark iterations with " hint "; or " \
    "try --metric leaked, peak or allocated)"

const char *format_weight_empty_reason(const struct report *report, enum format_weight weight)
{
    switch (weight) {
    case FORMAT_WEIGHT_GROWTH:
        if (any_growth_known(report))
            return "no site grows: every growth figure is zero or negative (try --metric leaked or peak)";
        return report->primary && report->primary->has_python ? NO_GROWTH_FIGURES(REPORT_ITERATION_HINT_PYTHON)
                                                              : NO_GROWTH_FIGURES(REPORT_ITERATION_HINT_NATIVE);
    case FORMAT_WEIGHT_LEAKED:
        return any_leak_check(report) ? "nothing leaked: no block is definitely or indirectly lost (try --metric "
                                        "peak or allocated)"
                                      : "no leak check in this trace (recorded with --leak-check off?); try "
                                        "--metric peak or allocated";
    case FORMAT_WEIGHT_PEAK: return "no site was live when the process peaked (no allocations recorded?)";
    case FORMAT_WEIGHT_TEMPORARY: return "no allocation was freed again in this trace (try --metric allocated)";
    default: return "no allocations with a backtrace were recorded in this trace";
    }
}

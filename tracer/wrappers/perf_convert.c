/* perf_convert.c - perf samples to speedscope JSON and collapsed stacks; see
 * perf_script.h. */
#include "perf_script.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/json_writer.h"

#ifndef MEMSLOPE_VERSION
#define MEMSLOPE_VERSION "unknown"
#endif

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

/* Fills frames[] with the frame indexes of the path ending at node, root
 * first, and returns how many. The parser caps depth, so max is enough. */
static size_t stack_root_first(const struct perf_profile *profile, uint32_t node, uint32_t *frames,
                               size_t max)
{
    size_t depth = 0;
    for (uint32_t n = node; n != PERF_NO_NODE && depth < max; n = profile->nodes[n].parent)
        frames[depth++] = profile->nodes[n].frame;
    for (size_t i = 0; i < depth / 2; i++) {
        uint32_t swap = frames[i];
        frames[i] = frames[depth - 1 - i];
        frames[depth - 1 - i] = swap;
    }
    return depth;
}

/* Sample indexes grouped by thread, each group in time order; first[t] is
 * where thread t's group starts (first[thread_count] == sample_count). */
static size_t *samples_by_thread(const struct perf_profile *profile, size_t **first_out)
{
    size_t *order = malloc((profile->sample_count + 1) * sizeof *order);
    size_t *first = calloc(profile->thread_count + 1, sizeof *first);
    size_t *next = calloc(profile->thread_count + 1, sizeof *next);
    if (!order || !first || !next) {
        free(order);
        free(first);
        free(next);
        return NULL;
    }
    for (size_t t = 0; t < profile->thread_count; t++)
        first[t + 1] = first[t] + profile->threads[t].samples;
    memcpy(next, first, (profile->thread_count + 1) * sizeof *next);
    for (size_t i = 0; i < profile->sample_count; i++)
        order[next[profile->samples[i].thread]++] = i;
    free(next);
    *first_out = first;
    return order;
}

static void write_frames(struct json_writer *json, const struct perf_profile *profile)
{
    char buffer[512];
    json_key(json, "shared");
    json_object_begin(json);
    json_key(json, "frames");
    json_array_begin(json);
    for (size_t i = 0; i < profile->frame_count; i++) {
        const struct perf_frame *frame = &profile->frames[i];
        json_object_begin(json);
        json_member_string(json, "name", perf_frame_display_name(frame, buffer, sizeof buffer));
        /* speedscope shows file:line; without a srcline the module is the
         * most useful place to name. */
        if (frame->file) {
            json_member_string(json, "file", frame->file);
            if (frame->line > 0)
                json_member_uint(json, "line", frame->line);
        } else if (frame->module) {
            json_member_string(json, "file", frame->module);
        }
        json_object_end(json);
    }
    json_array_end(json);
    json_object_end(json);
}

struct run {
    uint32_t node;
    uint64_t weight;
};

/* Consecutive samples with the same stack become one weighted sample,
 * which keeps speedscope's time-order view and shrinks the file. */
static size_t merge_runs(const struct perf_profile *profile, const size_t *order, size_t count,
                         struct run *runs)
{
    size_t run_count = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t node = profile->samples[order[i]].node;
        if (run_count > 0 && runs[run_count - 1].node == node) {
            runs[run_count - 1].weight++;
            continue;
        }
        runs[run_count++] = (struct run){node, 1};
    }
    return run_count;
}

static void write_thread_name(struct json_writer *json, const struct perf_thread *thread)
{
    char name[512];
    if (thread->pid >= 0 && thread->pid != thread->tid)
        snprintf(name, sizeof name, "%s (pid %ld, tid %ld)", thread->name, thread->pid, thread->tid);
    else
        snprintf(name, sizeof name, "%s (pid %ld)", thread->name, thread->tid);
    json_member_string(json, "name", name);
}

static int write_profile(struct json_writer *json, const struct perf_profile *profile, size_t thread,
                         const size_t *order, size_t count)
{
    struct run *runs = malloc((count + 1) * sizeof *runs);
    uint32_t *stack = malloc(PERF_MAX_STACK_DEPTH * sizeof *stack);
    if (!runs || !stack) {
        free(runs);
        free(stack);
        return -1;
    }
    size_t run_count = merge_runs(profile, order, count, runs);
    json_object_begin(json);
    json_member_string(json, "type", "sampled");
    write_thread_name(json, &profile->threads[thread]);
    json_member_string(json, "unit", "none");
    json_member_uint(json, "startValue", 0);
    json_member_uint(json, "endValue", count);
    json_key(json, "samples");
    json_array_begin(json);
    for (size_t r = 0; r < run_count; r++) {
        size_t depth = stack_root_first(profile, runs[r].node, stack, PERF_MAX_STACK_DEPTH);
        json_array_begin(json);
        for (size_t i = 0; i < depth; i++)
            json_uint(json, stack[i]);
        json_array_end(json);
    }
    json_array_end(json);
    json_key(json, "weights");
    json_array_begin(json);
    for (size_t r = 0; r < run_count; r++)
        json_uint(json, runs[r].weight);
    json_array_end(json);
    json_object_end(json);
    free(runs);
    free(stack);
    return 0;
}

static size_t busiest_thread(const struct perf_profile *profile)
{
    size_t busiest = 0;
    for (size_t t = 1; t < profile->thread_count; t++)
        if (profile->threads[t].samples > profile->threads[busiest].samples)
            busiest = t;
    return busiest;
}

int perf_write_speedscope(const struct perf_profile *profile, const char *name, FILE *out)
{
    size_t *first = NULL;
    size_t *order = samples_by_thread(profile, &first);
    if (!order)
        return -1;
    struct json_writer json;
    json_init(&json, out, 0);
    json_object_begin(&json);
    json_member_string(&json, "$schema", SPEEDSCOPE_SCHEMA);
    json_member_string(&json, "name", name);
    json_member_string(&json, "exporter", "memslope@" MEMSLOPE_VERSION); /* as memslope report writes it */
    json_member_uint(&json, "activeProfileIndex", busiest_thread(profile));
    write_frames(&json, profile);
    json_key(&json, "profiles");
    json_array_begin(&json);
    int failed = 0;
    for (size_t t = 0; t < profile->thread_count && !failed; t++)
        failed = write_profile(&json, profile, t, order + first[t], first[t + 1] - first[t]);
    json_array_end(&json);
    json_object_end(&json);
    fputc('\n', out);
    free(order);
    free(first);
    if (failed) {
        errno = ENOMEM;
        return -1;
    }
    return ferror(out) ? -1 : 0;
}

/* ---- collapsed stacks --------------------------------------------------- */

struct keyed_sample {
    uint32_t group; /* threads with one command name share a group */
    uint32_t node;
};

static int compare_keyed(const void *a, const void *b)
{
    const struct keyed_sample *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* ';' separates frames and a newline ends the line, so neither may appear
 * inside a name. */
static void put_collapsed_name(const char *name, FILE *out)
{
    for (const char *c = name; *c; c++)
        fputc(*c == ';' ? ':' : (*c == '\n' || *c == '\r') ? ' ' : *c, out);
}

/* One line's text without its count: "comm;outer;...;leaf". */
static char *collapsed_text(const struct perf_profile *profile, const char *thread_name, uint32_t node,
                            uint32_t *stack)
{
    char *text = NULL, buffer[512];
    size_t size = 0;
    FILE *line = open_memstream(&text, &size);
    if (!line)
        return NULL;
    put_collapsed_name(thread_name, line);
    size_t depth = stack_root_first(profile, node, stack, PERF_MAX_STACK_DEPTH);
    for (size_t i = 0; i < depth; i++) {
        fputc(';', line);
        put_collapsed_name(perf_frame_display_name(&profile->frames[stack[i]], buffer, sizeof buffer), line);
    }
    if (fclose(line) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

struct counted_line {
    char *text;
    uint64_t count;
};

static int compare_lines(const void *a, const void *b)
{
    return strcmp(((const struct counted_line *)a)->text, ((const struct counted_line *)b)->text);
}

/* Distinct stacks can print alike (the same function name in two modules,
 * or two threads with one name): sort by text and add up equal lines. */
static int print_merged_lines(struct counted_line *lines, size_t count, FILE *out)
{
    qsort(lines, count, sizeof *lines, compare_lines);
    for (size_t i = 0; i < count;) {
        uint64_t total = 0;
        size_t j = i;
        for (; j < count && strcmp(lines[i].text, lines[j].text) == 0; j++)
            total += lines[j].count;
        fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)total);
        i = j;
    }
    return 0;
}

static uint32_t *thread_groups(const struct perf_profile *profile)
{
    uint32_t *group = malloc((profile->thread_count + 1) * sizeof *group);
    if (!group)
        return NULL;
    for (size_t t = 0; t < profile->thread_count; t++) {
        group[t] = (uint32_t)t;
        for (size_t u = 0; u < t; u++)
            if (strcmp(profile->threads[u].name, profile->threads[t].name) == 0) {
                group[t] = group[u];
                break;
            }
    }
    return group;
}

/* Counts samples per (thread name, stack) and renders each as a line. */
static size_t count_stacks(const struct perf_profile *profile, const uint32_t *group,
                           struct keyed_sample *keyed, struct counted_line *lines, uint32_t *stack)
{
    for (size_t i = 0; i < profile->sample_count; i++)
        keyed[i] = (struct keyed_sample){group[profile->samples[i].thread], profile->samples[i].node};
    qsort(keyed, profile->sample_count, sizeof *keyed, compare_keyed);
    size_t line_count = 0;
    for (size_t i = 0; i < profile->sample_count;) {
        size_t j = i + 1;
        while (j < profile->sample_count && compare_keyed(&keyed[i], &keyed[j]) == 0)
            j++;
        char *text = collapsed_text(profile, profile->threads[keyed[i].group].name, keyed[i].node, stack);
        if (!text)
            return SIZE_MAX;
        lines[line_count++] = (struct counted_line){text, j - i};
        i = j;
    }
    return line_count;
}

int perf_write_collapsed(const struct perf_profile *profile, FILE *out)
{
    uint32_t *group = thread_groups(profile);
    struct keyed_sample *keyed = malloc((profile->sample_count + 1) * sizeof *keyed);
    struct counted_line *lines = calloc(profile->sample_count + 1, sizeof *lines);
    uint32_t *stack = malloc(PERF_MAX_STACK_DEPTH * sizeof *stack);
    size_t line_count = SIZE_MAX;
    if (group && keyed && lines && stack)
        line_count = count_stacks(profile, group, keyed, lines, stack);
    if (line_count != SIZE_MAX)
        print_merged_lines(lines, line_count, out);
    for (size_t i = 0; lines && i < profile->sample_count && lines[i].text; i++)
        free(lines[i].text);
    free(group);
    free(keyed);
    free(lines);
    free(stack);
    if (line_count == SIZE_MAX) {
        errno = ENOMEM;
        return -1;
    }
    return ferror(out) ? -1 : 0;
}

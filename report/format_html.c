/* format_html.c - one self-contained HTML page: the template
 * (html_template.h) with the report's figures embedded as JSON in a
 * <script type="application/json"> element, which the page's own script
 * draws: heap over time, live bytes per iteration with the fitted line,
 * tables of growing and leaking sites, and a zoomable icicle graph.
 * Nothing is loaded from the network. */
#include "formats.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "attribution.h"
#include "html_template.h"
#include "../common/json_writer.h"

#ifndef MEMSLOPE_VERSION
#define MEMSLOPE_VERSION "unknown"
#endif

/* Frames the page refers to by index: only visible frames that some stack
 * uses; each names its function (formats.h), which the flame graph draws. */
struct html_frames {
    const struct trace_model *model;
    int64_t *index_of;  /* per trace frame; -1: not used yet */
    uint32_t *order;    /* trace frame id per page index */
    size_t count;
    struct format_functions functions;
    int64_t *function_index; /* per function; -1: not used yet */
    uint32_t *function_order; /* function per page function index */
    size_t function_count;
    uint32_t *scratch;  /* one stack's frame ids */
    unsigned char *path_key; /* one stack's format_function_path_key */
    uint32_t scratch_capacity; /* the depth both have room for */
    int failed;
};

static double ms_since(uint64_t time_ns, uint64_t start_ns)
{
    return time_ns >= start_ns ? (double)(time_ns - start_ns) / 1e6 : 0;
}

static int64_t frame_index(struct html_frames *frames, uint32_t frame_id)
{
    if (frames->index_of[frame_id] < 0) {
        frames->index_of[frame_id] = (int64_t)frames->count;
        frames->order[frames->count++] = frame_id;
    }
    return frames->index_of[frame_id];
}

static int64_t function_index(struct html_frames *frames, uint32_t frame_id)
{
    uint32_t function = frames->functions.of_frame[frame_id];
    if (frames->function_index[function] < 0) {
        frames->function_index[function] = (int64_t)frames->function_count;
        frames->function_order[frames->function_count++] = function;
    }
    return frames->function_index[function];
}

/* Room in scratch and path_key for a stack (NULL: none) of any depth up
 * to its own; 0, or -1 (and failed set) when out of memory. */
static int scratch_room(struct html_frames *frames, const struct trace_model_stack *stack)
{
    uint32_t depth = stack ? stack->depth : 0;
    if (frames->scratch && depth <= frames->scratch_capacity)
        return 0;
    uint32_t *grown = realloc(frames->scratch, ((size_t)depth + 1) * sizeof *grown);
    if (grown)
        frames->scratch = grown;
    unsigned char *key = grown ? realloc(frames->path_key, FORMAT_PATH_KEY_SIZE(depth)) : NULL;
    if (!key) {
        frames->failed = 1;
        return -1;
    }
    frames->path_key = key;
    frames->scratch_capacity = depth;
    return 0;
}

/* "stack": page frame indexes, root first. Returns how many. */
static uint32_t write_stack(struct json_writer *json, struct html_frames *frames, const struct trace_model_stack *stack)
{
    json_key(json, "stack");
    json_array_begin(json);
    uint32_t count = scratch_room(frames, stack) != 0 || frames->failed
                         ? 0
                         : format_visible_frames(frames->model, stack, frames->scratch);
    for (uint32_t i = 0; i < count; i++)
        json_int(json, frame_index(frames, frames->scratch[i]));
    json_array_end(json);
    return count;
}

/* "frames": [name, file, line, module, function, "module+0xOFFSET"] each
 * (the last tells two calls on one line apart); "functions": [label, file,
 * lowest line, module] each. */
static void write_frames(struct json_writer *json, struct html_frames *frames)
{
    json_key(json, "frames");
    json_array_begin(json);
    for (size_t i = 0; i < frames->count; i++) {
        const struct trace_model_frame *frame = &frames->model->frames[frames->order[i]];
        char name[512];
        json_array_begin(json);
        json_string(json, format_function_name(frame, name, sizeof name));
        json_string(json, frame->file);
        json_uint(json, frame->line);
        json_string(json, frame->flags & TRACE_FRAME_PYTHON ? "python"
                          : frame->module                  ? format_base_name(frame->module->path)
                                                           : "");
        json_int(json, function_index(frames, frames->order[i]));
        char where[600];
        if (frame->module)
            snprintf(where, sizeof where, "%s+0x%llx", format_base_name(frame->module->path),
                     (unsigned long long)frame->module_offset);
        else
            snprintf(where, sizeof where, "0x%llx", (unsigned long long)frame->address);
        json_string(json, where);
        json_array_end(json);
    }
    json_array_end(json);
    json_key(json, "functions");
    json_array_begin(json);
    for (size_t i = 0; i < frames->function_count; i++) {
        const struct format_function *function = &frames->functions.items[frames->function_order[i]];
        char label[1024];
        json_array_begin(json);
        json_string(json, format_function_label(function, label, sizeof label));
        json_string(json, function->file);
        json_uint(json, function->line);
        json_string(json, strcmp(function->module, "python") == 0 ? "python" : format_base_name(function->module));
        json_array_end(json);
    }
    json_array_end(json);
}

static void write_pair(struct json_writer *json, const char *key, uint64_t bytes, uint64_t blocks)
{
    json_key(json, key);
    json_array_begin(json);
    json_uint(json, bytes);
    json_uint(json, blocks);
    json_array_end(json);
}

/* The categories less the suppressed loss records, and the suppressed. */
static void write_leaks(struct json_writer *json, const char *key, const struct trace_leaks *leaks,
                        const struct report_amount *suppressed)
{
    json_key(json, key);
    if (!leaks) {
        json_null(json);
        return;
    }
    json_object_begin(json);
    for (int c = 0; c < TRACE_LEAK_CATEGORIES; c++)
        write_pair(json, trace_leak_category_name((uint32_t)c), leaks->bytes[c], leaks->blocks[c]);
    write_pair(json, "suppressed", suppressed->bytes, suppressed->blocks);
    json_object_end(json);
}

static void write_growth(struct json_writer *json, const char *key, const struct report_growth *growth)
{
    json_key(json, key);
    if (growth->known)
        json_double(json, growth->bytes_per_iteration);
    else
        json_null(json);
}

/* --- the process ------------------------------------------------------------------------ */

static void write_command(struct json_writer *json, const struct report *report)
{
    const struct trace_model *model = report->model;
    uint32_t argc = model->has_info ? model->info.argc : 0;
    const char *const *argv = model->has_info ? model->info.argv : NULL;
    if (argc == 0 && report->primary) {
        argc = report->primary->info.argc;
        argv = report->primary->info.argv;
    }
    json_key(json, "command");
    json_array_begin(json);
    for (uint32_t i = 0; i < argc; i++)
        json_string(json, argv[i]);
    json_array_end(json);
}

static void write_totals(struct json_writer *json, const struct report *report)
{
    struct trace_process zero = {0};
    const struct trace_process *info = report->primary ? &report->primary->info : &zero;
    json_key(json, "totals");
    json_object_begin(json);
    json_member_uint(json, "allocations", info->allocations);
    json_member_uint(json, "frees", info->frees);
    json_member_uint(json, "allocated_bytes", info->allocated_bytes);
    json_member_uint(json, "peak_bytes", info->peak_bytes);
    json_member_double(json, "peak_ms", ms_since(info->peak_time_ns, info->start_ns));
    json_member_uint(json, "live_bytes", info->live_bytes);
    json_member_double(json, "end_ms", ms_since(info->end_ns, info->start_ns));
    json_member_uint(json, "sample_rate", report_sample_rate(report)); /* 0: sites exact */
    json_object_end(json);
}

/* The time window the heap chart covers: the whole run, or with --case the
 * case's own span. */
struct time_window {
    uint64_t from_ns, to_ns;
};

static int in_window(const struct time_window *window, uint64_t time_ns)
{
    return time_ns >= window->from_ns && time_ns <= window->to_ns;
}

/* Heap over time: the periodic timeline points and every snapshot, [ms, bytes]. */
static void write_timeline(struct json_writer *json, const struct trace_model_process *process,
                           const struct time_window *window)
{
    json_key(json, "timeline");
    json_array_begin(json);
    for (size_t i = 0; process && i < process->timeline_count; i++) {
        if (!in_window(window, process->timeline[i].time_ns))
            continue;
        json_array_begin(json);
        json_double(json, ms_since(process->timeline[i].time_ns, process->info.start_ns));
        json_uint(json, process->timeline[i].live_bytes);
        json_array_end(json);
    }
    /* A short run may end before the first periodic sample: the snapshots still draw its shape. */
    for (size_t i = 0; process && i < process->snapshot_count; i++) {
        if (!in_window(window, process->snapshots[i].time_ns))
            continue;
        json_array_begin(json);
        json_double(json, ms_since(process->snapshots[i].time_ns, process->info.start_ns));
        json_uint(json, process->snapshots[i].live_bytes);
        json_array_end(json);
    }
    json_array_end(json);
}

/* With --case, the case's own figures (what it allocated while open, live
 * when it peaked). */
static void write_filtered_case_sites(struct json_writer *json, struct html_frames *frames,
                                      const struct report *report)
{
    for (size_t c = 0; c < report->case_count; c++)
        for (size_t i = 0; i < report->cases[c].site_count; i++) {
            const struct report_site *site = &report->cases[c].sites[i];
            json_object_begin(json);
            write_stack(json, frames, site->stack);
            json_member_uint(json, "allocations", site->allocations);
            json_member_uint(json, "allocated", site->allocated_bytes);
            json_member_uint(json, "frees", site->frees);
            json_member_uint(json, "live", site->live_bytes);
            json_member_uint(json, "peak", site->peak_live_bytes);
            json_object_end(json);
        }
}

/* The process's sites as the flame graph draws them: a node per function
 * on a path, so sites whose visible frames name the same functions in the
 * same order draw the same nodes and go in as one entry, their figures
 * summed, the stack of the one that allocated most standing for all (its
 * lines are the ones a node lists). A Python test suite has a site for
 * every distinct line on the way to an allocation: 1.17 million of them,
 * 75,000 function paths. */
struct function_path {
    UT_hash_handle hh;
    const struct trace_model_site *largest;
    uint64_t allocations, allocated, frees, live, peak;
    unsigned char key[]; /* format_function_path_key's */
};

/* The entry of a stack's function path in *paths, made if new (NULL when
 * out of memory). */
static struct function_path *path_of_site(struct html_frames *frames, struct function_path **paths,
                                          const struct trace_model_stack *stack)
{
    if (scratch_room(frames, stack) != 0)
        return NULL;
    unsigned char *key = frames->path_key;
    size_t key_length = format_function_path_key(frames->model, &frames->functions, NULL, stack, frames->scratch, key);
    struct function_path *path;
    HASH_FIND(hh, *paths, key, key_length, path);
    if (!path && (path = calloc(1, sizeof *path + key_length))) {
        memcpy(path->key, key, key_length);
        HASH_ADD(hh, *paths, key, key_length, path);
    }
    return path;
}

static void write_process_sites(struct json_writer *json, struct html_frames *frames, const struct report *report)
{
    const struct trace_model_process *process = report->case_filter ? NULL : report->primary;
    json_key(json, "process_sites");
    json_array_begin(json);
    if (report->case_filter)
        write_filtered_case_sites(json, frames, report);
    struct function_path *paths = NULL, *path, *next;
    for (const struct trace_model_site *s = process ? process->sites : NULL; s && !frames->failed; s = s->hh.next) {
        if (!(path = path_of_site(frames, &paths, trace_model_stack(process, s->site.stack_id)))) {
            frames->failed = 1;
            break;
        }
        if (!path->largest || s->site.allocated_bytes > path->largest->site.allocated_bytes)
            path->largest = s;
        path->allocations += s->site.allocations;
        path->allocated += s->site.allocated_bytes;
        path->frees += s->site.frees;
        path->live += s->site.live_bytes;
        path->peak += s->site.peak_live_bytes;
    }
    HASH_ITER(hh, paths, path, next) {
        json_object_begin(json);
        write_stack(json, frames, trace_model_stack(process, path->largest->site.stack_id));
        json_member_uint(json, "allocations", path->allocations);
        json_member_uint(json, "allocated", path->allocated);
        json_member_uint(json, "frees", path->frees);
        json_member_uint(json, "live", path->live);
        json_member_uint(json, "peak", path->peak);
        json_object_end(json);
        HASH_DEL(paths, path);
        free(path);
    }
    json_array_end(json);
}

/* --- cases -------------------------------------------------------------------------------- */

static void write_iteration_snapshot(struct json_writer *json, const struct trace_snapshot *s)
{
    if (s->kind != TRACE_SNAP_ITERATION)
        return;
    json_array_begin(json);
    json_uint(json, s->iteration);
    json_uint(json, s->live_bytes);
    json_array_end(json);
}

/* [iteration, live bytes] of the case's iteration snapshots (any case's for
 * the whole-process case the report makes up). */
static void write_iteration_snapshots(struct json_writer *json, const struct report *report, uint32_t case_id)
{
    const struct trace_model_process *process = report->primary;
    json_key(json, "snapshots");
    json_array_begin(json);
    if (case_id == TRACE_NONE) {
        for (size_t i = 0; process && i < process->snapshot_count; i++)
            write_iteration_snapshot(json, &process->snapshots[i]);
    } else {
        size_t count;
        const struct trace_snapshot *const *snapshots = report_case_snapshots(report, case_id, &count);
        for (size_t i = 0; i < count; i++)
            write_iteration_snapshot(json, snapshots[i]);
    }
    json_array_end(json);
}

/* "stack" and "user": the frame the tables name the site by (attribution.h),
 * as an index into stack (root first). */
static void write_named_stack(struct json_writer *json, struct html_frames *frames,
                              const struct trace_model_stack *stack)
{
    const struct trace_model_frame *user;
    int user_frame = attribution_user_frame(frames->model, stack, &user);
    uint32_t depth = write_stack(json, frames, stack);
    json_member_int(json, "user", user_frame >= 0 && (uint32_t)user_frame < depth ? (int64_t)depth - 1 - user_frame : -1);
}

static void write_case_site(struct json_writer *json, struct html_frames *frames, const struct report_site *site)
{
    json_object_begin(json);
    write_named_stack(json, frames, site->stack);
    write_growth(json, "growth", &site->growth);
    json_member_uint(json, "setup", site->setup_bytes);
    json_member_uint(json, "live", site->live_bytes);
    json_member_uint(json, "leaked", site->leaked_bytes);
    json_member_uint(json, "leaked_blocks", site->leaked_blocks);
    json_member_uint(json, "allocations", site->allocations);
    json_member_uint(json, "allocated", site->allocated_bytes);
    json_object_end(json);
}

static void write_case(struct json_writer *json, struct html_frames *frames, const struct report *report,
                       const struct report_case *report_case)
{
    const struct trace_model_process *process = report->primary;
    const struct trace_case *trace_case = report_case->source;
    uint64_t start_ns = process ? process->info.start_ns : 0;
    json_object_begin(json);
    json_member_string(json, "name", report_case->name);
    json_member_uint(json, "iterations", report_case->iterations);
    json_key(json, "setup_bytes"); /* null without iterations */
    if (report_case->setup_known)
        json_uint(json, report_case->setup_bytes);
    else
        json_null(json);
    json_member_uint(json, "setup_blocks", report_case->setup_blocks);
    write_growth(json, "growth", &report_case->growth);
    write_leaks(json, "leaks", report_case->leaks, &report_case->suppressed);
    json_member_uint(json, "peak_bytes", report_case->peak_bytes);
    json_member_double(json, "begin_ms", trace_case ? ms_since(trace_case->begin_ns, start_ns) : 0);
    json_member_double(json, "end_ms", trace_case ? ms_since(trace_case->end_ns, start_ns)
                                                  : process ? ms_since(process->info.end_ns, start_ns) : 0);
    write_iteration_snapshots(json, report, report_case->case_id);
    /* The page shows a case's sites that grow or leak (its tables and the
     * flame graph's growth and leaked views); a large program's other
     * sites, a million for a Python test suite, would only weigh it down. */
    json_key(json, "sites");
    json_array_begin(json);
    for (size_t i = 0; i < report_case->site_count; i++) {
        const struct report_site *site = &report_case->sites[i];
        if ((site->growth.known && site->growth.bytes_per_iteration > 0) || site->leaked_bytes > 0)
            write_case_site(json, frames, site);
    }
    json_array_end(json);
    json_object_end(json);
}

static int compare_records(const void *left, const void *right)
{
    const struct trace_loss_record *a = *(const struct trace_loss_record *const *)left;
    const struct trace_loss_record *b = *(const struct trace_loss_record *const *)right;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? 1 : -1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* The lost loss records of a process's check at exit, largest first. */
static void write_loss_records(struct json_writer *json, struct html_frames *frames, const struct report_process *entry)
{
    const struct trace_leaks *leaks = entry->exit_leaks;
    const struct trace_loss_record **lost = calloc((size_t)(leaks ? leaks->count : 0) + 1, sizeof *lost);
    size_t n = 0;
    if (!lost)
        frames->failed = 1;
    for (uint32_t i = 0; lost && leaks && i < leaks->count; i++)
        if (leaks->records[i].category < TRACE_LEAK_REACHABLE)
            lost[n++] = &leaks->records[i];
    if (n)
        qsort(lost, n, sizeof *lost, compare_records);
    json_key(json, "loss_records");
    json_array_begin(json);
    for (size_t i = 0; i < n; i++) {
        json_object_begin(json);
        json_member_string(json, "category", trace_leak_category_name(lost[i]->category));
        json_member_uint(json, "bytes", lost[i]->bytes);
        json_member_uint(json, "blocks", lost[i]->blocks);
        write_named_stack(json, frames, trace_model_stack(entry->process, lost[i]->stack_id));
        json_object_end(json);
    }
    json_array_end(json);
    free(lost);
}

/* Every process but the primary, with its own leak check at exit. */
static void write_other_processes(struct json_writer *json, struct html_frames *frames, const struct report *report)
{
    char exit_buffer[128];
    json_key(json, "processes");
    json_array_begin(json);
    for (size_t i = 0; !report->case_filter && i < report->process_count; i++) {
        const struct report_process *entry = &report->processes[i];
        const struct trace_model_process *p = entry->process;
        if (p == report->primary)
            continue;
        json_object_begin(json);
        json_member_uint(json, "pid", p->info.pid);
        json_member_string(json, "exe", p->info.exe);
        json_member_string(json, "exit", report_exit_text(p, exit_buffer, sizeof exit_buffer));
        json_member_uint(json, "allocations", p->info.allocations);
        json_member_uint(json, "allocated_bytes", p->info.allocated_bytes);
        json_member_uint(json, "peak_bytes", p->info.peak_bytes);
        write_leaks(json, "leaks_at_exit", entry->exit_leaks, &entry->exit_suppressed);
        write_loss_records(json, frames, entry);
        json_object_end(json);
    }
    json_array_end(json);
}

/* The whole run, or the span of the case --case selected. */
static struct time_window case_window(const struct report *report)
{
    struct time_window window = {0, UINT64_MAX};
    const struct trace_case *trace_case =
        report->case_filter && report->case_count ? report->cases[0].source : NULL;
    if (trace_case && !(trace_case->flags & TRACE_CASE_IMPLICIT))
        window = (struct time_window){trace_case->begin_ns, trace_case->end_ns ? trace_case->end_ns : UINT64_MAX};
    return window;
}

/* The page's data; frames last, since the stacks above decide which are used. */
static void write_data(struct json_writer *json, struct html_frames *frames, const struct report *report)
{
    char exit_buffer[128];
    struct time_window window = case_window(report);
    json_object_begin(json);
    json_member_string(json, "version", MEMSLOPE_VERSION);
    json_member_string(json, "trace", report->trace_name);
    write_command(json, report);
    json_member_string(json, "exit", report_exit_text(report->primary, exit_buffer, sizeof exit_buffer));
    write_totals(json, report);
    if (report->case_filter)
        json_member_string(json, "case_filter", report->case_filter);
    write_leaks(json, "leaks_at_exit", report->exit_leaks, &report->exit_suppressed);
    write_timeline(json, report->primary, &window);
    json_key(json, "cases");
    json_array_begin(json);
    for (size_t i = 0; i < report->case_count; i++)
        write_case(json, frames, report, &report->cases[i]);
    json_array_end(json);
    write_process_sites(json, frames, report);
    write_other_processes(json, frames, report);
    report_write_json_warnings(json, report);
    write_frames(json, frames);
    json_object_end(json);
}

/* JSON inside <script>: "<" only occurs in strings, where \u003c means the
 * same, so no "</script>" or "<!--" in a function name can end the element. */
static void write_script_safe(FILE *out, const char *text, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        if (text[i] == '<')
            fputs("\\u003c", out);
        else
            fputc(text[i], out);
    }
}

static int frames_init(struct html_frames *frames, const struct trace_model *model)
{
    memset(frames, 0, sizeof *frames);
    frames->model = model;
    frames->index_of = malloc(((size_t)model->frame_count + 1) * sizeof *frames->index_of);
    frames->order = malloc(((size_t)model->frame_count + 1) * sizeof *frames->order);
    if (!frames->index_of || !frames->order || format_functions_build(model, &frames->functions) != 0)
        return -1;
    memset(frames->index_of, 0xff, ((size_t)model->frame_count + 1) * sizeof *frames->index_of);
    size_t functions = frames->functions.count + 1;
    frames->function_index = malloc(functions * sizeof *frames->function_index);
    frames->function_order = malloc(functions * sizeof *frames->function_order);
    if (!frames->function_index || !frames->function_order)
        return -1;
    memset(frames->function_index, 0xff, functions * sizeof *frames->function_index);
    return 0;
}

static void frames_free(struct html_frames *frames)
{
    format_functions_free(&frames->functions);
    free(frames->function_index);
    free(frames->function_order);
    free(frames->index_of);
    free(frames->order);
    free(frames->scratch);
    free(frames->path_key);
}

int report_write_html(const struct report *report, FILE *out, char *err, size_t err_size)
{
    struct html_frames frames;
    char *data = NULL;
    size_t length = 0;
    FILE *buffer = NULL;
    int rc = frames_init(&frames, report->model) == 0 && (buffer = open_memstream(&data, &length)) ? 0 : -1;
    if (rc == 0) {
        struct json_writer json;
        json_init(&json, buffer, 0);
        write_data(&json, &frames, report);
        rc = fclose(buffer) == 0 && !frames.failed ? 0 : -1;
    }
    if (rc == 0) {
        fputs(html_template_before_data, out);
        write_script_safe(out, data, length);
        fputs(html_template_after_data, out);
    } else {
        snprintf(err, err_size, "out of memory");
    }
    free(data);
    frames_free(&frames);
    return rc;
}

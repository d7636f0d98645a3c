/* format_html.c - one self-contained HTML page: the template
 * (html_template.h) with the report's figures embedded as JSON in a
 * <script type="application/json"> element, which the page's own script
 * draws: heap over time, live bytes per iteration with the fitted line,
 * tables of growing and leaking sites, and a zoomable icicle graph.
 * Nothing is loaded from the network. */
#include "formats.h"

#include <stdlib.h>
#include <string.h>

#include "attribution.h"
#include "html_template.h"
#include "json_writer.h"

#ifndef MEMSLOPE_VERSION
#define MEMSLOPE_VERSION "unknown"
#endif

/* Frames the page refers to by index: only visible frames that some stack uses. */
struct html_frames {
    const struct trace_model *model;
    int64_t *index_of;  /* per trace frame; -1: not used yet */
    uint32_t *order;    /* trace frame id per page index */
    size_t count;
    uint32_t *scratch;  /* one stack's frame ids */
    uint32_t scratch_capacity;
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

/* "stack": page frame indexes, root first. Returns how many. */
static uint32_t write_stack(struct json_writer *json, struct html_frames *frames, const struct trace_model_stack *stack)
{
    json_key(json, "stack");
    json_array_begin(json);
    if (stack && stack->depth > frames->scratch_capacity) {
        uint32_t *grown = realloc(frames->scratch, (size_t)stack->depth * sizeof *grown);
        if (!grown)
            frames->failed = 1;
        else {
            frames->scratch = grown;
            frames->scratch_capacity = stack->depth;
        }
    }
    uint32_t count = frames->failed ? 0 : format_visible_frames(frames->model, stack, frames->scratch);
    for (uint32_t i = 0; i < count; i++)
        json_int(json, frame_index(frames, frames->scratch[i]));
    json_array_end(json);
    return count;
}

static void write_frames(struct json_writer *json, const struct html_frames *frames)
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

static const char *exit_text(const struct trace_model_process *process, char *buffer, size_t size)
{
    if (!process || !process->has_info)
        snprintf(buffer, size, "exit unknown");
    else if (process->info.flags & TRACE_PROC_SIGNALED)
        snprintf(buffer, size, "killed by signal %d (%s)", process->info.exit_signal,
                 strsignal(process->info.exit_signal));
    else if (process->info.flags & TRACE_PROC_EXITED)
        snprintf(buffer, size, "exited %d", process->info.exit_status);
    else
        snprintf(buffer, size, "did not finish");
    return buffer;
}

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

/* Heap over time: the periodic timeline points and every snapshot, [ms, bytes]. */
static void write_timeline(struct json_writer *json, const struct trace_model_process *process)
{
    json_key(json, "timeline");
    json_array_begin(json);
    for (size_t i = 0; process && i < process->timeline_count; i++) {
        json_array_begin(json);
        json_double(json, ms_since(process->timeline[i].time_ns, process->info.start_ns));
        json_uint(json, process->timeline[i].live_bytes);
        json_array_end(json);
    }
    /* A short run may end before the first periodic sample: the snapshots still draw its shape. */
    for (size_t i = 0; process && i < process->snapshot_count; i++) {
        json_array_begin(json);
        json_double(json, ms_since(process->snapshots[i].time_ns, process->info.start_ns));
        json_uint(json, process->snapshots[i].live_bytes);
        json_array_end(json);
    }
    json_array_end(json);
}

static void write_process_sites(struct json_writer *json, struct html_frames *frames,
                                const struct trace_model_process *process)
{
    json_key(json, "process_sites");
    json_array_begin(json);
    for (const struct trace_model_site *s = process ? process->sites : NULL; s; s = s->hh.next) {
        json_object_begin(json);
        write_stack(json, frames, trace_model_stack(process, s->site.stack_id));
        json_member_uint(json, "allocations", s->site.allocations);
        json_member_uint(json, "allocated", s->site.allocated_bytes);
        json_member_uint(json, "frees", s->site.frees);
        json_member_uint(json, "live", s->site.live_bytes);
        json_member_uint(json, "peak", s->site.peak_live_bytes);
        json_object_end(json);
    }
    json_array_end(json);
}

/* --- cases -------------------------------------------------------------------------------- */

static const struct trace_case *trace_case_of(const struct trace_model_process *process, uint32_t case_id)
{
    for (size_t i = 0; process && case_id != TRACE_NONE && i < process->case_count; i++)
        if (process->cases[i].case_id == case_id)
            return &process->cases[i];
    return NULL;
}

/* [iteration, live bytes] of the case's iteration snapshots (any case's for the whole-process case). */
static void write_iteration_snapshots(struct json_writer *json, const struct trace_model_process *process,
                                      uint32_t case_id)
{
    json_key(json, "snapshots");
    json_array_begin(json);
    for (size_t i = 0; process && i < process->snapshot_count; i++) {
        const struct trace_snapshot *s = &process->snapshots[i];
        if (s->kind != TRACE_SNAP_ITERATION || (case_id != TRACE_NONE && s->case_id != case_id))
            continue;
        json_array_begin(json);
        json_uint(json, s->iteration);
        json_uint(json, s->live_bytes);
        json_array_end(json);
    }
    json_array_end(json);
}

static void write_case_site(struct json_writer *json, struct html_frames *frames, const struct report_site *site)
{
    const struct trace_model_frame *user;
    int user_frame = attribution_user_frame(frames->model, site->stack, &user);
    json_object_begin(json);
    uint32_t depth = write_stack(json, frames, site->stack);
    /* The frame the tables name the site by (attribution.h), as an index into stack (root first). */
    json_member_int(json, "user", user_frame >= 0 && (uint32_t)user_frame < depth ? (int64_t)depth - 1 - user_frame : -1);
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
    const struct trace_case *trace_case = trace_case_of(process, report_case->case_id);
    uint64_t start_ns = process ? process->info.start_ns : 0;
    json_object_begin(json);
    json_member_string(json, "name", report_case->name);
    json_member_uint(json, "iterations", report_case->iterations);
    json_member_uint(json, "setup_bytes", report_case->setup_bytes);
    json_member_uint(json, "setup_blocks", report_case->setup_blocks);
    write_growth(json, "growth", &report_case->growth);
    write_leaks(json, "leaks", report_case->leaks, &report_case->suppressed);
    json_member_uint(json, "peak_bytes", report_case->peak_bytes);
    json_member_double(json, "begin_ms", trace_case ? ms_since(trace_case->begin_ns, start_ns) : 0);
    json_member_double(json, "end_ms", trace_case ? ms_since(trace_case->end_ns, start_ns)
                                                  : process ? ms_since(process->info.end_ns, start_ns) : 0);
    write_iteration_snapshots(json, process, report_case->case_id);
    json_key(json, "sites");
    json_array_begin(json);
    for (size_t i = 0; i < report_case->site_count; i++)
        write_case_site(json, frames, &report_case->sites[i]);
    json_array_end(json);
    json_object_end(json);
}

/* The page's data; frames last, since the stacks above decide which are used. */
static void write_data(struct json_writer *json, struct html_frames *frames, const struct report *report)
{
    char exit_buffer[128];
    json_object_begin(json);
    json_member_string(json, "version", MEMSLOPE_VERSION);
    json_member_string(json, "trace", report->trace_name);
    write_command(json, report);
    json_member_string(json, "exit", exit_text(report->primary, exit_buffer, sizeof exit_buffer));
    write_totals(json, report);
    write_leaks(json, "leaks_at_exit", report->exit_leaks, &report->exit_suppressed);
    write_timeline(json, report->primary);
    json_key(json, "cases");
    json_array_begin(json);
    for (size_t i = 0; i < report->case_count; i++)
        write_case(json, frames, report, &report->cases[i]);
    json_array_end(json);
    write_process_sites(json, frames, report->primary);
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
    if (!frames->index_of || !frames->order)
        return -1;
    memset(frames->index_of, 0xff, ((size_t)model->frame_count + 1) * sizeof *frames->index_of);
    return 0;
}

static void frames_free(struct html_frames *frames)
{
    free(frames->index_of);
    free(frames->order);
    free(frames->scratch);
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

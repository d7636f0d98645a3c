/* report_json.c - the JSON report, version 1 (design.md, "JSON report"). */
#include <stdlib.h>

#include "attribution.h"
#include "../common/json_writer.h"
#include "report_model.h"
#include "suppressions.h"

static void write_argv(struct json_writer *json, uint32_t argc, const char *const *argv)
{
    json_array_begin(json);
    for (uint32_t i = 0; i < argc; i++)
        json_string(json, argv[i]);
    json_array_end(json);
}

static void write_command(struct json_writer *json, const struct report *report)
{
    const struct trace_model *model = report->model;
    json_key(json, "command");
    if (model->has_info)
        write_argv(json, model->info.argc, model->info.argv);
    else if (report->primary)
        write_argv(json, report->primary->info.argc, report->primary->info.argv);
    else
        write_argv(json, 0, NULL);
}

static void write_exit(struct json_writer *json, const struct trace_model_process *process)
{
    json_key(json, "exit");
    if (!process || !(process->info.flags & (TRACE_PROC_SIGNALED | TRACE_PROC_EXITED))) {
        json_null(json);
        return;
    }
    json_object_begin(json);
    if (process->info.flags & TRACE_PROC_SIGNALED)
        json_member_int(json, "signal", process->info.exit_signal);
    else
        json_member_int(json, "status", process->info.exit_status);
    json_object_end(json);
}

static void write_totals(struct json_writer *json, const struct trace_model_process *process)
{
    struct trace_process zero = {0};
    const struct trace_process *info = process ? &process->info : &zero;
    json_key(json, "totals");
    json_object_begin(json);
    json_member_uint(json, "allocations", info->allocations);
    json_member_uint(json, "frees", info->frees);
    json_member_uint(json, "allocated_bytes", info->allocated_bytes);
    json_member_uint(json, "peak_bytes", info->peak_bytes);
    json_object_end(json);
}

/* Present only for a sampled trace: the sites' figures are then estimates. */
static void write_sampling(struct json_writer *json, const struct report *report)
{
    uint64_t rate = report_sample_rate(report);
    if (!rate)
        return;
    json_key(json, "sampling");
    json_object_begin(json);
    json_member_uint(json, "mean_interval_bytes", rate);
    json_member_string(json, "site_figures", "estimated");
    json_object_end(json);
}

static void write_amount(struct json_writer *json, const char *key, uint64_t bytes, uint64_t blocks)
{
    json_key(json, key);
    json_object_begin(json);
    json_member_uint(json, "bytes", bytes);
    json_member_uint(json, "blocks", blocks);
    json_object_end(json);
}

/* memcheck's four categories, less the suppressed loss records, and the
 * suppressed ones (memcheck's "suppressed:" line). */
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
        write_amount(json, trace_leak_category_name((uint32_t)c), leaks->bytes[c], leaks->blocks[c]);
    write_amount(json, "suppressed", suppressed->bytes, suppressed->blocks);
    json_object_end(json);
}

/* The suppressions that took loss records out of the check at exit, with
 * what they took. */
static void write_used_suppressions(struct json_writer *json, const struct report *report)
{
    json_key(json, "suppressions_used");
    json_array_begin(json);
    for (size_t i = 0; i < report->used_suppression_count; i++) {
        const struct report_used_suppression *used = &report->used_suppressions[i];
        json_object_begin(json);
        json_member_string(json, "name", used->suppression->name);
        json_member_string(json, "file", used->suppression->file);
        json_member_uint(json, "line", used->suppression->line);
        json_key(json, "default");
        json_bool(json, used->suppression->is_default);
        json_member_uint(json, "bytes", used->amount.bytes);
        json_member_uint(json, "blocks", used->amount.blocks);
        json_object_end(json);
    }
    json_array_end(json);
}

static void write_frames(struct json_writer *json, const struct report *report, const struct trace_model_stack *stack)
{
    report_write_json_frames(json, report->model, stack);
}

void report_write_json_frames(struct json_writer *json, const struct trace_model *model,
                              const struct trace_model_stack *stack)
{
    json_key(json, "frames");
    json_array_begin(json);
    for (uint32_t i = 0; stack && i < stack->depth; i++) {
        const struct trace_model_frame *frame = &model->frames[stack->frame_ids[i]];
        if (!report_frame_visible(frame))
            continue;
        int python = (frame->flags & TRACE_FRAME_PYTHON) != 0;
        json_object_begin(json);
        json_member_string(json, "function", frame->function);
        json_member_string(json, "file", frame->file);
        json_member_uint(json, "line", frame->line);
        json_member_string(json, "module", python ? "python" : frame->module ? frame->module->path : "");
        json_member_uint(json, "address", frame->address);
        json_member_uint(json, "module_offset", frame->module_offset);
        if (frame->flags & TRACE_FRAME_INLINED) {
            json_key(json, "inlined");
            json_bool(json, 1);
        }
        if (python) {
            json_key(json, "python");
            json_bool(json, 1);
        }
        json_object_end(json);
    }
    json_array_end(json);
}

/* The frame that names a stack: the first in the user's code (attribution.h). */
static void write_user_frame(struct json_writer *json, int user_frame)
{
    json_key(json, "user_frame");
    if (user_frame >= 0)
        json_int(json, user_frame);
    else
        json_null(json);
}

static void write_site(struct json_writer *json, const struct report *report, const struct report_case *c,
                       const struct report_site *site)
{
    const struct trace_model_frame *user;
    int user_frame = attribution_user_frame(report->model, site->stack, &user);
    json_object_begin(json);
    write_frames(json, report, site->stack);
    write_user_frame(json, user_frame);
    json_key(json, "growth_bytes_per_iteration");
    if (site->growth.known)
        json_double(json, site->growth.bytes_per_iteration);
    else
        json_null(json);
    json_key(json, "setup_bytes");
    if (c->setup_known)
        json_uint(json, site->setup_bytes);
    else
        json_null(json);
    json_member_uint(json, "live_bytes", site->live_bytes);
    json_member_uint(json, "peak_live_bytes", site->peak_live_bytes);
    json_member_uint(json, "leaked_bytes", site->leaked_bytes);
    json_member_uint(json, "leaked_blocks", site->leaked_blocks);
    json_member_uint(json, "allocations", site->allocations);
    json_member_uint(json, "allocated_bytes", site->allocated_bytes);
    json_object_end(json);
}

/* Sites listed per case: the first JSON_TOP_SITES by the report's metric
 * (growth first, by default), and every other one with lost blocks. A
 * Python process has some ten thousand sites before its first line runs,
 * four thousand of them holding setup: listing each with its frames made
 * reports of 40 MB to a gigabyte. Case totals count every site;
 * sites_omitted says how many are left out. */
#define JSON_TOP_SITES 100

static int site_listed(const struct report_site *site, size_t rank)
{
    return rank < JSON_TOP_SITES || site->leaked_bytes;
}

static void write_case(struct json_writer *json, const struct report *report, const struct report_case *c)
{
    json_object_begin(json);
    json_member_string(json, "name", c->name);
    json_member_uint(json, "iterations", c->iterations);
    /* null without iterations: nothing tells setup from growth then */
    if (c->setup_known)
        write_amount(json, "setup", c->setup_bytes, c->setup_blocks);
    else {
        json_key(json, "setup");
        json_null(json);
    }
    json_key(json, "growth");
    if (c->growth.known) {
        json_object_begin(json);
        json_member_double(json, "bytes_per_iteration", c->growth.bytes_per_iteration);
        json_member_double(json, "blocks_per_iteration", c->growth.blocks_per_iteration);
        json_object_end(json);
    } else {
        json_null(json);
    }
    write_leaks(json, "leaks", c->leaks, &c->suppressed);
    json_member_uint(json, "peak_bytes", c->peak_bytes);
    json_key(json, "sites");
    json_array_begin(json);
    size_t omitted = 0;
    for (size_t i = 0; i < c->site_count; i++) {
        if (site_listed(&c->sites[i], i))
            write_site(json, report, c, &c->sites[i]);
        else
            omitted++;
    }
    json_array_end(json);
    json_member_uint(json, "sites_omitted", omitted);
    json_object_end(json);
}

static void write_strings(struct json_writer *json, const char *key, const char *const *items, size_t count)
{
    json_key(json, key);
    json_array_begin(json);
    for (size_t i = 0; i < count; i++)
        json_string(json, items[i]);
    json_array_end(json);
}

/* "python": the CPython an image ran and how its objects were recorded;
 * null for an image without one. */
static void write_python(struct json_writer *json, const struct trace_model_process *p)
{
    json_key(json, "python");
    if (!p || !p->has_python) {
        json_null(json);
        return;
    }
    char version[32];
    snprintf(version, sizeof version, "%u.%u.%u", p->python.version >> 24, (p->python.version >> 16) & 0xff,
             (p->python.version >> 8) & 0xff);
    json_object_begin(json);
    json_member_string(json, "version", version);
    json_member_string(json, "allocator", report_python_allocator(&p->python));
    json_key(json, "objects_recorded");
    json_bool(json, report_python_objects_recorded(&p->python));
    json_key(json, "frames");
    json_bool(json, (p->python.flags & TRACE_PYTHON_FRAMES) != 0);
    json_object_end(json);
}

/* A process's definitely and indirectly lost loss records at exit, the
 * JSON_LOSS_RECORDS largest (loss_records_omitted counts the rest).
 * Possibly lost ones are only counted in leaks_at_exit: a Python process
 * has a thousand of them, with deep stacks. */
#define JSON_LOSS_RECORDS 100

static void write_loss_records(struct json_writer *json, const struct report *report,
                               const struct report_process *entry)
{
    const struct trace_leaks *leaks = entry->exit_leaks;
    const struct trace_loss_record **lost = calloc((size_t)leaks->count + 1, sizeof *lost);
    size_t n = 0;
    for (uint32_t i = 0; lost && i < leaks->count; i++)
        if (leaks->records[i].category == TRACE_LEAK_DEFINITE || leaks->records[i].category == TRACE_LEAK_INDIRECT)
            lost[n++] = &leaks->records[i];
    if (lost)
        qsort(lost, n, sizeof *lost, report_compare_loss_records);
    json_key(json, "loss_records");
    json_array_begin(json);
    for (size_t i = 0; i < n && i < JSON_LOSS_RECORDS; i++) {
        const struct trace_model_stack *stack = trace_model_stack(entry->process, lost[i]->stack_id);
        const struct trace_model_frame *user;
        json_object_begin(json);
        json_member_string(json, "category", trace_leak_category_name(lost[i]->category));
        json_member_uint(json, "bytes", lost[i]->bytes);
        json_member_uint(json, "blocks", lost[i]->blocks);
        write_frames(json, report, stack);
        write_user_frame(json, attribution_user_frame(report->model, stack, &user));
        json_object_end(json);
    }
    json_array_end(json);
    json_member_uint(json, "loss_records_omitted", n > JSON_LOSS_RECORDS ? n - JSON_LOSS_RECORDS : 0);
    free(lost);
}

static void write_process(struct json_writer *json, const struct report *report, const struct report_process *entry)
{
    const struct trace_model_process *p = entry->process;
    int primary = p == report->primary;
    json_object_begin(json);
    json_member_uint(json, "pid", p->info.pid);
    json_member_string(json, "exe", p->info.exe);
    json_key(json, "argv");
    write_argv(json, p->info.argc, p->info.argv);
    json_key(json, "primary");
    json_bool(json, primary);
    json_key(json, "execed");
    json_bool(json, (p->info.flags & TRACE_PROC_EXECED) != 0);
    write_exit(json, p);
    if (p->info.flags & TRACE_PROC_CHECKPOINT) /* the figures stood so at memslope's last checkpoint */
        json_member_double(json, "checkpoint_seconds", (double)(p->info.end_ns - p->info.start_ns) / 1e9);
    if (p->info.flags & TRACE_PROC_LET_GO) /* still running when the command ended: the figures stood so then */
        json_member_double(json, "let_go_seconds", (double)(p->info.end_ns - p->info.start_ns) / 1e9);
    write_totals(json, p);
    write_amount(json, "live_at_exit", p->info.live_bytes, p->info.live_blocks);
    /* Never filtered by --case: a process's own check at exit. */
    write_leaks(json, "leaks_at_exit", entry->exit_leaks, &entry->exit_suppressed);
    if (entry->exit_leaks)
        write_loss_records(json, report, entry);
    write_python(json, p);
    write_strings(json, "warnings", p->warnings, p->warning_count);
    json_object_end(json);
}

static void write_processes(struct json_writer *json, const struct report *report)
{
    json_key(json, "processes");
    json_array_begin(json);
    for (size_t i = 0; i < report->process_count; i++)
        write_process(json, report, &report->processes[i]);
    json_array_end(json);
}

void report_write_json_warnings(struct json_writer *json, const struct report *report)
{
    const struct trace_model *model = report->model;
    json_key(json, "warnings");
    json_array_begin(json);
    if (model->incomplete)
        json_string(json, model->incomplete_reason);
    for (size_t i = 0; i < model->warning_count; i++)
        json_string(json, model->warnings[i]);
    for (size_t i = 0; report->primary && i < report->primary->warning_count; i++)
        json_string(json, report->primary->warnings[i]);
    json_array_end(json);
}

void report_write_json(const struct report *report, FILE *out)
{
    struct json_writer json;
    json_init(&json, out, 1);
    json_object_begin(&json);
    json_member_string(&json, "format", "memslope-report");
    json_member_uint(&json, "version", 1);
    if (report->case_filter)
        json_member_string(&json, "case_filter", report->case_filter);
    write_command(&json, report);
    write_exit(&json, report->primary);
    write_totals(&json, report->primary);
    write_sampling(&json, report);
    write_python(&json, report->primary);
    write_leaks(&json, "leaks_at_exit", report->exit_leaks, &report->exit_suppressed);
    write_used_suppressions(&json, report);
    json_key(&json, "cases");
    json_array_begin(&json);
    for (size_t i = 0; i < report->case_count; i++)
        write_case(&json, report, &report->cases[i]);
    json_array_end(&json);
    write_processes(&json, report);
    if (report->model->incomplete) {
        json_key(&json, "incomplete");
        json_bool(&json, 1);
    }
    report_write_json_warnings(&json, report);
    json_object_end(&json);
}

/* report_text.c - the human-readable report, for an 80-100 column terminal. */
#include "report_model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "attribution.h"
#include "suppressions.h"

enum { TOP_SITES = 10, FRAMES_SHOWN = 5, COMMAND_WIDTH = 24 };

static const char *const category_names[TRACE_LEAK_CATEGORIES] = {"definitely lost", "indirectly lost",
                                                                   "possibly lost", "still reachable"};

/* 1234567 -> "1,234,567", as memcheck prints counts. */
static const char *with_commas(uint64_t value, char *buffer, size_t size)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, value);
    size_t out = 0;
    for (int i = 0; i < n && out + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buffer[out++] = ',';
        buffer[out++] = digits[i];
    }
    buffer[out] = '\0';
    return buffer;
}

/* The command as typed, with a long program path cut to its base name. */
static void write_command(FILE *out, const struct report *report)
{
    const struct trace_model *model = report->model;
    uint32_t argc = model->has_info ? model->info.argc : 0;
    const char *const *argv = model->has_info ? model->info.argv : NULL;
    if (argc == 0 && report->primary) {
        argc = report->primary->info.argc;
        argv = report->primary->info.argv;
    }
    if (argc == 0) {
        fputs("(unknown command)", out);
        return;
    }
    const char *program = argv[0], *slash = strrchr(program, '/');
    if (strlen(program) > COMMAND_WIDTH / 2 && slash)
        program = slash + 1;
    int width = fprintf(out, "%.*s", COMMAND_WIDTH, program);
    for (uint32_t i = 1; i < argc && width < COMMAND_WIDTH; i++)
        width += fprintf(out, " %.*s", COMMAND_WIDTH - width, argv[i]);
    if (width >= COMMAND_WIDTH)
        fputs("...", out);
}

/* "1 allocation", "2 allocations" (memcheck's own lines keep "1 blocks"). */
static const char *plural(uint64_t count, const char *word, char *buffer, size_t size)
{
    char digits[32];
    snprintf(buffer, size, "%s %s%s", with_commas(count, digits, sizeof digits), word, count == 1 ? "" : "s");
    return buffer;
}

static void write_exit(FILE *out, const struct trace_model_process *process)
{
    if (!process || !process->has_info)
        fputs("exit unknown", out);
    else if (process->info.flags & TRACE_PROC_SIGNALED)
        fprintf(out, "killed by signal %d (%s)", process->info.exit_signal, strsignal(process->info.exit_signal));
    else if (process->info.flags & TRACE_PROC_EXITED)
        fprintf(out, "exited %d", process->info.exit_status);
    else if (process->info.flags & TRACE_PROC_EXECED)
        fputs("replaced by exec", out);
    else
        fputs("did not finish", out);
}

static void write_summary(FILE *out, const struct report *report)
{
    const struct trace_model_process *p = report->primary;
    struct trace_process zero = {0};
    const struct trace_process *info = p ? &p->info : &zero;
    char a[32], f[32], allocated[32], peak[32], live[32];
    write_command(out, report);
    fputs(": ", out);
    write_exit(out, p);
    fprintf(out, "; %s allocs, %s frees; %s allocated, peak %s, %s live at exit\n",
            with_commas(info->allocations, a, sizeof a), with_commas(info->frees, f, sizeof f),
            report_human_bytes(info->allocated_bytes, allocated, sizeof allocated),
            report_human_bytes(info->peak_bytes, peak, sizeof peak),
            report_human_bytes(info->live_bytes, live, sizeof live));
}

/* One line on the interpreter, for a process that ran CPython. */
static void write_python(FILE *out, const struct trace_model_process *p)
{
    if (!p || !p->has_python)
        return;
    const struct trace_python *python = &p->python;
    static const char *const how[] = {
        [TRACE_PYTHON_WRAPPED] = "every object recorded (pymalloc's allocator wrapped)",
        [TRACE_PYTHON_MALLOC] = "every object recorded (PYTHONMALLOC=malloc)",
        [TRACE_PYTHON_UNRECORDED] = "objects served by pymalloc NOT recorded (the user chose the allocator)",
        [TRACE_PYTHON_NOT_WRAPPED] = "objects served by pymalloc NOT recorded (an interpreter before 3.7)",
    };
    fprintf(out, "Python %u.%u.%u: %s; %s\n", python->version >> 24, (python->version >> 16) & 0xff,
            (python->version >> 8) & 0xff,
            python->allocator < sizeof how / sizeof *how && how[python->allocator] ? how[python->allocator]
                                                                                  : "objects recorded as malloc sees them",
            (python->flags & TRACE_PYTHON_FRAMES) ? "Python frames shown" : "Python frames not read");
}

static void write_frame(FILE *out, const struct trace_model_frame *frame, int first)
{
    const char *function = *frame->function ? frame->function : "???";
    fprintf(out, "    %s %s", first ? "at" : "by", function);
    if (*frame->file && frame->line)
        fprintf(out, " (%s:%u)", frame->file, frame->line);
    else if (frame->flags & TRACE_FRAME_PYTHON)
        fprintf(out, " (%s)", *frame->file ? frame->file : "python");
    else if (frame->module)
        fprintf(out, " (%s+0x%" PRIx64 ")", strrchr(frame->module->path, '/') ? strrchr(frame->module->path, '/') + 1
                                                                              : frame->module->path,
                frame->module_offset);
    else
        fprintf(out, " (0x%" PRIx64 ")", frame->address);
    if (frame->flags & TRACE_FRAME_INLINED)
        fputs(" [inlined]", out);
    fputc('\n', out);
}

/* Up to FRAMES_SHOWN visible frames of a stack, innermost first; when the
 * first frame of the user's code (attribution.h) lies deeper, the frames
 * between the allocation's caller and it are summed up on one line, so
 * that the code to look at is always shown. */
static void write_stack(FILE *out, const struct report *report, uint32_t stack_id)
{
    const struct trace_model_stack *stack = report->primary ? trace_model_stack(report->primary, stack_id) : NULL;
    const struct trace_model_frame *user;
    int user_index = attribution_user_frame(report->model, stack, &user);
    int elide_from = user_index >= FRAMES_SHOWN ? 1 : -1, visible = 0, shown = 0;
    for (uint32_t i = 0; stack && i < stack->depth && shown < FRAMES_SHOWN; i++) {
        const struct trace_model_frame *frame = &report->model->frames[stack->frame_ids[i]];
        if (!report_frame_visible(frame))
            continue;
        int index = visible++;
        if (index >= elide_from && index < user_index && elide_from >= 0) {
            if (index == elide_from)
                fprintf(out, "    ... %d frames in the interpreter and system libraries ...\n", user_index - elide_from);
            continue;
        }
        write_frame(out, frame, shown++ == 0);
    }
    if (!stack)
        fprintf(out, "    (stack %u is not in the trace)\n", stack_id);
    else if (shown == 0)
        fputs("    (no frames outside the allocator)\n", out);
}

/* --- leaks: memcheck-style loss records and summary ------------------------------ */

static int compare_records(const void *left, const void *right)
{
    const struct trace_loss_record *a = *(const struct trace_loss_record *const *)left;
    const struct trace_loss_record *b = *(const struct trace_loss_record *const *)right;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? 1 : -1;
    return a->category < b->category ? -1 : a->category > b->category;
}

static void write_leak_summary(FILE *out, const struct trace_leaks *leaks, const struct report_amount *suppressed)
{
    char bytes[32], blocks[32];
    fputs("LEAK SUMMARY:\n", out);
    for (int c = 0; c < TRACE_LEAK_CATEGORIES; c++)
        fprintf(out, "   %15s: %s bytes in %s blocks\n", category_names[c], with_commas(leaks->bytes[c], bytes, 32),
                with_commas(leaks->blocks[c], blocks, 32));
    fprintf(out, "   %15s: %s bytes in %s blocks\n", "suppressed", with_commas(suppressed->bytes, bytes, 32),
            with_commas(suppressed->blocks, blocks, 32));
}

/* Which suppressions took what (memcheck -v's "used_suppression" lines). */
static void write_used_suppressions(FILE *out, const struct report *report)
{
    char bytes[32], blocks[32];
    for (size_t i = 0; i < report->used_suppression_count; i++) {
        const struct report_used_suppression *used = &report->used_suppressions[i];
        const char *file = strrchr(used->suppression->file, '/');
        fprintf(out, "   used suppression: %s bytes in %s blocks: %s (%s:%u)\n",
                with_commas(used->amount.bytes, bytes, 32), with_commas(used->amount.blocks, blocks, 32),
                used->suppression->name, file ? file + 1 : used->suppression->file, used->suppression->line);
    }
}

/* The line under a heading of per-site figures, for a sampled trace. */
static void write_sampling_note(FILE *out, const struct report *report)
{
    char rate[32];
    if (report_sample_rate(report))
        fprintf(out, "(~: estimated from allocations sampled every %s on average; totals are exact)\n\n",
                report_human_bytes(report_sample_rate(report), rate, sizeof rate));
}

/* Loss records that are lost (still reachable ones are only summed), largest first. */
static void write_loss_records(FILE *out, const struct report *report, const struct trace_leaks *leaks)
{
    const struct trace_loss_record **lost = calloc((size_t)leaks->count + 1, sizeof *lost);
    size_t n = 0;
    for (uint32_t i = 0; lost && i < leaks->count; i++)
        if (leaks->records[i].category != TRACE_LEAK_REACHABLE)
            lost[n++] = &leaks->records[i];
    if (lost)
        qsort(lost, n, sizeof *lost, compare_records);
    char bytes[32], blocks[32];
    const char *mark = report_estimate_mark(report);
    for (size_t i = 0; i < n && i < TOP_SITES; i++) {
        fprintf(out, "%s%s bytes in %s%s blocks are %s in loss record %zu of %zu\n", mark,
                with_commas(lost[i]->bytes, bytes, 32), mark, with_commas(lost[i]->blocks, blocks, 32),
                category_names[lost[i]->category], i + 1, n);
        write_stack(out, report, lost[i]->stack_id);
        fputc('\n', out);
    }
    if (n > TOP_SITES)
        fprintf(out, "(%zu more loss records; --format json lists every site)\n\n", n - TOP_SITES);
    uint64_t lost_blocks =
        leaks->blocks[TRACE_LEAK_DEFINITE] + leaks->blocks[TRACE_LEAK_INDIRECT] + leaks->blocks[TRACE_LEAK_POSSIBLE];
    if (n == 0 && lost_blocks == 0)
        fputs("No leaks: every block still allocated at exit was reachable.\n\n", out);
    else if (n == 0 && report_sample_rate(report))
        fputs("No lost block was sampled: the summary below counts them all.\n\n", out);
    free(lost);
}

/* --- site tables ---------------------------------------------------------------- */

static int compare_by_live(const void *left, const void *right)
{
    const struct trace_site *a = *(const struct trace_site *const *)left, *b = *(const struct trace_site *const *)right;
    if (a->live_bytes != b->live_bytes)
        return a->live_bytes < b->live_bytes ? 1 : -1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static int compare_by_allocations(const void *left, const void *right)
{
    const struct trace_site *a = *(const struct trace_site *const *)left, *b = *(const struct trace_site *const *)right;
    if (a->allocations != b->allocations)
        return a->allocations < b->allocations ? 1 : -1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* The primary's sites, sorted; NULL when there are none. */
static const struct trace_site **sorted_sites(const struct trace_model_process *process, size_t *count,
                                              int (*compare)(const void *, const void *))
{
    *count = 0;
    if (!process || process->site_count == 0)
        return NULL;
    const struct trace_site **sites = calloc(process->site_count, sizeof *sites);
    for (const struct trace_model_site *s = process->sites; sites && s; s = s->hh.next)
        sites[(*count)++] = &s->site;
    if (sites)
        qsort(sites, *count, sizeof *sites, compare);
    return sites;
}

/* Why no site has bytes live at exit: a process the shim never entered (a
 * static binary) recorded nothing at all, which is not "freed". */
static const char *nothing_live(const struct trace_model_process *process)
{
    if (!process || !(process->info.flags & TRACE_PROC_SHIM_SEEN))
        return "Nothing was recorded in this process: memslope's shim was not loaded into it (see the warning "
               "below).";
    if (process->info.allocations == 0)
        return "The process allocated nothing.";
    return "Every allocation was freed.";
}

static void write_not_freed(FILE *out, const struct report *report)
{
    size_t n;
    const struct trace_site **sites = sorted_sites(report->primary, &n, compare_by_live);
    char live[32], blocks[48], allocations[48];
    fputs("Top sites by bytes not freed at exit\n\n", out);
    write_sampling_note(out, report);
    const char *mark = report_estimate_mark(report);
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < TOP_SITES && sites[i]->live_bytes; i++, shown++) {
        fprintf(out, "%s%s in %s%s not freed, from %s%s\n", mark, report_human_bytes(sites[i]->live_bytes, live, 32),
                mark, plural(sites[i]->live_blocks, "block", blocks, 32), mark,
                plural(sites[i]->allocations, "allocation", allocations, 32));
        write_stack(out, report, sites[i]->stack_id);
        fputc('\n', out);
    }
    if (shown == 0)
        fprintf(out, "%s\n\n", nothing_live(report->primary));
    free(sites);
}

static void write_top_allocations(FILE *out, const struct report *report)
{
    size_t n;
    const struct trace_site **sites = sorted_sites(report->primary, &n, compare_by_allocations);
    char allocations[48], allocated[32], live[32];
    fputs("Top sites by allocations\n\n", out);
    write_sampling_note(out, report);
    const char *mark = report_estimate_mark(report);
    for (size_t i = 0; i < n && i < TOP_SITES && sites[i]->allocations; i++) {
        fprintf(out, "%s%s, %s%s allocated, %s%s live at exit\n", mark,
                plural(sites[i]->allocations, "allocation", allocations, sizeof allocations), mark,
                report_human_bytes(sites[i]->allocated_bytes, allocated, 32), mark,
                report_human_bytes(sites[i]->live_bytes, live, 32));
        write_stack(out, report, sites[i]->stack_id);
        fputc('\n', out);
    }
    if (n == 0)
        fputs("No allocation sites were recorded.\n\n", out);
    free(sites);
}

/* --- cases, other processes, warnings ---------------------------------------------- */

/* The site that grows most in a case, when one grows. */
static const struct report_site *top_growing_site(const struct report_case *c)
{
    const struct report_site *top = NULL;
    for (size_t i = 0; i < c->site_count; i++)
        if (c->sites[i].growth.known && c->sites[i].growth.bytes_per_iteration > 0 &&
            (!top || c->sites[i].growth.bytes_per_iteration > top->growth.bytes_per_iteration))
            top = &c->sites[i];
    return top;
}

static void write_cases(FILE *out, const struct report *report)
{
    int marked = 0;
    for (size_t i = 0; report->primary && i < report->primary->case_count; i++)
        marked |= !(report->primary->cases[i].flags & TRACE_CASE_IMPLICIT);
    if (!marked)
        return; /* the whole process is the only case: the summary line said it all */
    char setup[32], blocks[48], iterations[48];
    fputs("Cases\n\n", out);
    for (size_t i = 0; i < report->case_count; i++) {
        const struct report_case *c = &report->cases[i];
        fprintf(out, "%s: %s, retained %s in %s, ", c->name, plural(c->iterations, "iteration", iterations, 48),
                report_human_bytes(c->setup_bytes, setup, 32), plural(c->setup_blocks, "block", blocks, 48));
        const struct report_site *top = c->growth.known ? top_growing_site(c) : NULL;
        const struct trace_model_frame *frame = NULL;
        char where[512];
        if (top)
            attribution_user_frame(report->model, top->stack, &frame);
        if (c->growth.known)
            fprintf(out, "growth %.1f B/iteration", c->growth.bytes_per_iteration);
        if (frame)
            fprintf(out, ", top site %s", attribution_frame_name(frame, where, sizeof where));
        if (!c->growth.known)
            fputs("growth not estimated", out);
        if (c->leaks)
            fprintf(out, ", %s definitely lost", report_human_bytes(c->leaks->bytes[TRACE_LEAK_DEFINITE], setup, 32));
        fputc('\n', out);
    }
    fputc('\n', out);
}

static void write_other_processes(FILE *out, const struct report *report)
{
    if (report->model->process_count < 2)
        return;
    char allocated[32], allocations[48];
    fputs("Other processes\n\n", out);
    for (const struct trace_model_process *p = report->model->processes; p; p = p->hh.next) {
        if (p == report->primary)
            continue;
        fprintf(out, "pid %u %s: ", p->info.pid, *p->info.exe ? p->info.exe : "(unknown)");
        write_exit(out, p);
        fprintf(out, "; %s, %s allocated\n", plural(p->info.allocations, "allocation", allocations, 48),
                report_human_bytes(p->info.allocated_bytes, allocated, 32));
    }
    fputc('\n', out);
}

static void write_warning_list(FILE *out, const char *const *warnings, size_t count)
{
    for (size_t i = 0; i < count; i++)
        fprintf(out, "warning: %s\n", warnings[i]);
}

void report_write_text(const struct report *report, FILE *out)
{
    write_summary(out, report);
    write_python(out, report->primary);
    fputc('\n', out);
    if (report->exit_leaks) {
        fputs("Leaks at exit, largest first (memcheck's categories)\n\n", out);
        write_sampling_note(out, report);
        write_loss_records(out, report, report->exit_leaks);
        write_leak_summary(out, report->exit_leaks, &report->exit_suppressed);
        write_used_suppressions(out, report);
        fputc('\n', out);
    } else {
        write_not_freed(out, report);
    }
    write_top_allocations(out, report);
    write_cases(out, report);
    write_other_processes(out, report);
    write_warning_list(out, report->model->warnings, report->model->warning_count);
    if (report->primary)
        write_warning_list(out, report->primary->warnings, report->primary->warning_count);
}

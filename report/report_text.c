/* report_text.c - the human-readable report, for an 80-100 column terminal. */
#include "report_model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/units.h"
#include "attribution.h"
#include "formats.h"
#include "site_label.h"
#include "suppressions.h"
#include "text_escape.h"

enum { TOP_SITES = 10, FRAMES_SHOWN = 5, COMMAND_WIDTH = 24, OTHER_PROCESS_RECORDS = 5 };

static const char *const category_names[TRACE_LEAK_CATEGORIES] = {"definitely lost", "indirectly lost",
                                                                   "possibly lost", "still reachable"};

/* An argument a shell would split or expand is shown quoted: `sh -c 'ls |
 * sort'` read as a pipeline unquoted. */
static int needs_quotes(const char *arg)
{
    return !*arg || strpbrk(arg, " \t\n|&;<>()$`\\\"'*?[#~") != NULL;
}

/* An argument vector on one line, a long program path cut to its base name,
 * the whole cut at COMMAND_WIDTH. */
static void write_argv(FILE *out, uint32_t argc, const char *const *argv)
{
    const char *program = argv[0], *slash = strrchr(program, '/');
    if (strlen(program) > COMMAND_WIDTH / 2 && slash)
        program = slash + 1;
    int width = text_put_width(out, program, COMMAND_WIDTH), cut = 0;
    for (uint32_t i = 1; i < argc && width < COMMAND_WIDTH && !cut; i++) {
        int quoted = needs_quotes(argv[i]);
        int budget = COMMAND_WIDTH - width - 1 - 2 * quoted; /* room for the quotes too */
        if (budget < 1) {
            cut = 1;
            break;
        }
        fputs(quoted ? " '" : " ", out);
        width += 1 + quoted;
        int written = text_put_width(out, argv[i], budget);
        width += written;
        cut = written < text_escaped_width(argv[i]);
        if (quoted && !cut) { /* a cut one stays open: the "..." follows */
            fputc('\'', out);
            width++;
        }
    }
    if (cut || width >= COMMAND_WIDTH)
        fputs("...", out);
}

/* The same command, the program named by a path or not (a version
 * manager's shim execs its interpreter by full path, same arguments). */
static int same_argv(uint32_t argc, const char *const *argv, uint32_t other_argc, const char *const *other)
{
    if (argc != other_argc || strcmp(format_base_name(argv[0]), format_base_name(other[0])) != 0)
        return 0;
    for (uint32_t i = 1; i < argc; i++)
        if (strcmp(argv[i], other[i]) != 0)
            return 0;
    return 1;
}

/* The command the figures are of: the primary's own, followed by the
 * recorded command when that is another (a child that did the work, or
 * the launched process cut from the trace). */
static void write_command(FILE *out, const struct report *report)
{
    const struct trace_model *model = report->model;
    uint32_t argc = model->has_info ? model->info.argc : 0;
    const char *const *argv = model->has_info ? model->info.argv : NULL;
    const struct trace_model_process *p = report->primary;
    if (p && p->info.argc && (argc == 0 || !same_argv(argc, argv, p->info.argc, p->info.argv))) {
        write_argv(out, p->info.argc, p->info.argv);
        if (argc) {
            fprintf(out, " (pid %u, under ", p->info.pid);
            write_argv(out, argc, argv);
            fputc(')', out);
        }
        return;
    }
    if (argc == 0) {
        fputs("(unknown command)", out);
        return;
    }
    write_argv(out, argc, argv);
}

/* "1 allocation", "2 allocations" (memcheck's own lines keep "1 blocks"). */
static const char *plural(uint64_t count, const char *word, char *buffer, size_t size)
{
    char digits[32];
    snprintf(buffer, size, "%s %s%s", units_format_count(count, digits, sizeof digits), word, count == 1 ? "" : "s");
    return buffer;
}

static void write_exit(FILE *out, const struct trace_model_process *process)
{
    char text[160];
    fputs(report_exit_text(process, text, sizeof text), out);
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
    fprintf(out, "; %s allocs, %s frees; %s allocated, peak %s, %s live %s\n",
            units_format_count(info->allocations, a, sizeof a), units_format_count(info->frees, f, sizeof f),
            units_format_bytes((double)info->allocated_bytes, allocated, sizeof allocated),
            units_format_bytes((double)info->peak_bytes, peak, sizeof peak),
            units_format_bytes((double)info->live_bytes, live, sizeof live),
            info->flags & (TRACE_PROC_CHECKPOINT | TRACE_PROC_LET_GO) ? "then" : "at exit");
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

static void write_frame(FILE *out, const struct trace_model_frame *frame, int first, const char *indent)
{
    const char *function = *frame->function ? frame->function : "???";
    fprintf(out, "%s    %s ", indent, first ? "at" : "by");
    text_put(out, function);
    if (*frame->file && frame->line) {
        fputs(" (", out);
        text_put(out, frame->file);
        fprintf(out, ":%u)", frame->line);
    } else if (frame->flags & TRACE_FRAME_PYTHON) {
        fputs(" (", out);
        text_put(out, *frame->file ? frame->file : "python");
        fputc(')', out);
    } else if (frame->module) {
        const char *slash = strrchr(frame->module->path, '/');
        fputs(" (", out);
        text_put(out, slash ? slash + 1 : frame->module->path);
        fprintf(out, "+0x%" PRIx64 ")", frame->module_offset);
    } else
        fprintf(out, " (0x%" PRIx64 ")", frame->address);
    if (frame->flags & TRACE_FRAME_INLINED)
        fputs(" [inlined]", out);
    fputc('\n', out);
}

/* Up to FRAMES_SHOWN visible frames of a stack, innermost first; when the
 * first frame of the user's code (attribution.h) lies deeper, the frames
 * between the allocation's caller and it are summed up on one line, so
 * that the code to look at is always shown. */
static void write_stack(FILE *out, const struct report *report, const struct trace_model_process *process,
                        uint32_t stack_id, const char *indent)
{
    const struct trace_model_stack *stack = process ? trace_model_stack(process, stack_id) : NULL;
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
                fprintf(out, "%s    ... %d frames in the interpreter and system libraries ...\n", indent,
                        user_index - elide_from);
            continue;
        }
        write_frame(out, frame, shown++ == 0, indent);
    }
    if (!stack)
        fprintf(out, "%s    (stack %u is not in the trace)\n", indent, stack_id);
    else if (shown == 0)
        fprintf(out, "%s    (no frames outside the allocator)\n", indent);
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
        fprintf(out, "   %15s: %s bytes in %s blocks\n", category_names[c], units_format_count(leaks->bytes[c], bytes, 32),
                units_format_count(leaks->blocks[c], blocks, 32));
    fprintf(out, "   %15s: %s bytes in %s blocks\n", "suppressed", units_format_count(suppressed->bytes, bytes, 32),
            units_format_count(suppressed->blocks, blocks, 32));
}

/* Which suppressions took what (memcheck -v's "used_suppression" lines). */
static void write_used_suppressions(FILE *out, const struct report *report)
{
    char bytes[32], blocks[32];
    for (size_t i = 0; i < report->used_suppression_count; i++) {
        const struct report_used_suppression *used = &report->used_suppressions[i];
        const char *file = strrchr(used->suppression->file, '/');
        fprintf(out, "   used suppression: %s bytes in %s blocks: ", units_format_count(used->amount.bytes, bytes, 32),
                units_format_count(used->amount.blocks, blocks, 32));
        text_put(out, used->suppression->name);
        fputs(" (", out);
        text_put(out, file ? file + 1 : used->suppression->file);
        fprintf(out, ":%u)\n", used->suppression->line);
    }
}

/* The line under a heading of per-site figures, for a sampled trace. */
static void write_sampling_note(FILE *out, const struct report *report)
{
    char rate[32];
    if (report_sample_rate(report))
        fprintf(out, "(~: estimated from allocations sampled every %s on average; totals are exact)\n\n",
                units_format_bytes((double)report_sample_rate(report), rate, sizeof rate));
}

/* Loss records that are lost (still reachable ones are only summed), the
 * largest `limit` first, each line after indent. */
static void write_loss_records(FILE *out, const struct report *report, const struct trace_model_process *process,
                               const struct trace_leaks *leaks, size_t limit, const char *indent)
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
    for (size_t i = 0; i < n && i < limit; i++) {
        fprintf(out, "%s%s%s bytes in %s%s blocks are %s in loss record %zu of %zu\n", indent, mark,
                units_format_count(lost[i]->bytes, bytes, 32), mark, units_format_count(lost[i]->blocks, blocks, 32),
                category_names[lost[i]->category], i + 1, n);
        write_stack(out, report, process, lost[i]->stack_id, indent);
        fputc('\n', out);
    }
    if (n > limit)
        fprintf(out, "%s(%zu more loss records; --format json lists every one)\n\n", indent, n - limit);
    uint64_t lost_blocks =
        leaks->blocks[TRACE_LEAK_DEFINITE] + leaks->blocks[TRACE_LEAK_INDIRECT] + leaks->blocks[TRACE_LEAK_POSSIBLE];
    if (n == 0 && lost_blocks == 0)
        fprintf(out, "%sNo leaks: every block still allocated %s was reachable.\n\n", indent,
                report->case_filter && process == report->primary ? "by the case" : "at exit");
    else if (n == 0 && report_sample_rate(report))
        fprintf(out, "%sNo lost block was sampled: the summary counts them all.\n\n", indent);
    free(lost);
}

/* --- cases ------------------------------------------------------------------------ */

/* "1,048,576 bytes (1.0 MiB)": exact, as memcheck prints, and readable. */
static const char *bytes_text(uint64_t bytes, const char *mark, char *buffer, size_t size)
{
    char exact[32], human[32];
    units_format_count(bytes, exact, sizeof exact);
    if (bytes < 1024)
        snprintf(buffer, size, "%s%s bytes", mark, exact);
    else
        snprintf(buffer, size, "%s%s bytes (%s)", mark, exact, units_format_bytes((double)bytes, human, sizeof human));
    return buffer;
}

static void write_case_figures(FILE *out, const struct report *report, const struct report_case *c)
{
    char iterations[48], peak[64], setup[64], blocks[48], lost[64], suppressed[64];
    text_put(out, c->name);
    fprintf(out, ": %s; peak %s\n",
            c->iterations ? plural(c->iterations, "iteration", iterations, sizeof iterations) : "no iterations",
            bytes_text(c->peak_bytes, "", peak, sizeof peak));
    if (!c->setup_known)
        fprintf(out, "  setup, growth: not estimated (they need iterations: mark them with\n"
                     "                 %s)\n", report_iteration_hint(report));
    else
        fprintf(out, "  setup:  %s in %s\n", bytes_text(c->setup_bytes, "", setup, sizeof setup),
                plural(c->setup_blocks, "block", blocks, sizeof blocks));
    if (c->setup_known && c->growth.known)
        fprintf(out, "  growth: %.1f B per iteration (%.1f blocks)\n", c->growth.bytes_per_iteration,
                c->growth.blocks_per_iteration);
    else if (c->setup_known)
        fputs("  growth: not estimated (fewer than 3 iteration snapshots)\n", out);
    if (!c->leaks) {
        fprintf(out, "  leaked: not checked (%s)\n", report_missing_leaks_reason(report, report->primary));
        return;
    }
    uint64_t bytes = c->leaks->bytes[TRACE_LEAK_DEFINITE] + c->leaks->bytes[TRACE_LEAK_INDIRECT];
    uint64_t count = c->leaks->blocks[TRACE_LEAK_DEFINITE] + c->leaks->blocks[TRACE_LEAK_INDIRECT];
    fprintf(out, "  leaked: %s in %s (definitely and indirectly lost)", bytes_text(bytes, "", lost, sizeof lost),
            plural(count, "block", blocks, sizeof blocks));
    if (c->suppressed.blocks)
        fprintf(out, "; %s suppressed", bytes_text(c->suppressed.bytes, "", suppressed, sizeof suppressed));
    fputc('\n', out);
}

/* A list of a case's sites: the first TOP_SITES with a figure, in the case's order or by leaks. */
struct site_list {
    const struct report_site *sites[TOP_SITES];
    size_t count;
};

static double metric_figure(const struct report_site *site, enum report_metric metric)
{
    switch (metric) {
    case REPORT_METRIC_GROWTH:
        return site->growth.known && site->growth.bytes_per_iteration >= 0.05 ? site->growth.bytes_per_iteration : 0;
    case REPORT_METRIC_LEAKED: return (double)site->leaked_bytes;
    case REPORT_METRIC_PEAK: return (double)site->peak_live_bytes;
    case REPORT_METRIC_ALLOCATED: return (double)site->allocated_bytes;
    case REPORT_METRIC_TEMPORARY: return (double)site->frees;
    }
    return 0;
}

/* By the figure, then in the case's own order (sites is one array). */
static int compare_figure_desc(const void *left, const void *right, void *context)
{
    enum report_metric metric = *(const enum report_metric *)context;
    const struct report_site *x = *(const struct report_site *const *)left, *y = *(const struct report_site *const *)right;
    double a = metric_figure(x, metric), b = metric_figure(y, metric);
    if (a != b)
        return a < b ? 1 : -1;
    return x < y ? -1 : x > y;
}

/* The top sites of a case by a metric (those whose figure is not zero). */
static void select_sites(const struct report_case *c, enum report_metric metric, struct site_list *list)
{
    list->count = 0;
    for (size_t i = 0; i < c->site_count; i++) {
        const struct report_site *site = &c->sites[i];
        if (metric_figure(site, metric) <= 0)
            continue;
        if (list->count < TOP_SITES) {
            list->sites[list->count++] = site;
        } else if (metric_figure(site, metric) > metric_figure(list->sites[TOP_SITES - 1], metric)) {
            list->sites[TOP_SITES - 1] = site; /* the case is sorted by another metric */
        } else {
            continue;
        }
        qsort_r(list->sites, list->count, sizeof *list->sites, compare_figure_desc, &metric);
    }
}

static const char *const metric_titles[] = {
    [REPORT_METRIC_GROWTH] = "growth per iteration",
    [REPORT_METRIC_LEAKED] = "bytes leaked (definitely and indirectly lost)",
    [REPORT_METRIC_PEAK] = "live bytes at the peak",
    [REPORT_METRIC_ALLOCATED] = "bytes allocated",
    [REPORT_METRIC_TEMPORARY] = "temporary allocations (freed again)",
};

static const char *site_figure(const struct report *report, const struct report_site *site,
                               enum report_metric metric, char *buffer, size_t size)
{
    const char *mark = report_estimate_mark(report);
    char bytes[32], count[48];
    switch (metric) {
    case REPORT_METRIC_GROWTH:
        snprintf(buffer, size, "%s%.1f B/iteration", mark, site->growth.bytes_per_iteration);
        break;
    case REPORT_METRIC_LEAKED:
        snprintf(buffer, size, "%s%s B in %s%s", mark, units_format_count(site->leaked_bytes, bytes, sizeof bytes), mark,
                 plural(site->leaked_blocks, "block", count, sizeof count));
        break;
    case REPORT_METRIC_PEAK:
        snprintf(buffer, size, "%s%s B", mark, units_format_count(site->peak_live_bytes, bytes, sizeof bytes));
        break;
    case REPORT_METRIC_ALLOCATED:
        snprintf(buffer, size, "%s%s B in %s%s", mark, units_format_count(site->allocated_bytes, bytes, sizeof bytes), mark,
                 plural(site->allocations, "allocation", count, sizeof count));
        break;
    case REPORT_METRIC_TEMPORARY:
        snprintf(buffer, size, "%s%s of %s%s freed", mark, units_format_count(site->frees, bytes, sizeof bytes), mark,
                 plural(site->allocations, "allocation", count, sizeof count));
        break;
    }
    return buffer;
}

/* Why a list is empty. */
static const char *empty_reason(const struct report_case *c, enum report_metric metric)
{
    switch (metric) {
    case REPORT_METRIC_GROWTH: return "no site grows";
    case REPORT_METRIC_LEAKED: return c->leaks ? "nothing leaked" : "no leak check";
    case REPORT_METRIC_PEAK: return "no site was live at the peak";
    case REPORT_METRIC_ALLOCATED: return "no allocation with a backtrace";
    case REPORT_METRIC_TEMPORARY: return "no allocation was freed again";
    }
    return "none";
}

/* The label of site among the listed ones (labels[i] for listed[i]). */
static const char *label_of(const struct report_site *site, const struct report_site *const *listed,
                            char *const *labels, size_t count)
{
    for (size_t i = 0; labels && i < count; i++)
        if (listed[i] == site)
            return labels[i];
    return "[unknown stack]";
}

struct case_lists {
    enum report_metric metric; /* the list's metric: the report's, or peak for a case without growth */
    struct site_list top, leaking;
    const struct report_site *listed[2 * TOP_SITES];
    const struct trace_model_stack *stacks[2 * TOP_SITES];
    char *labels[2 * TOP_SITES];
    size_t listed_count;
};

static void write_site_list(FILE *out, const struct report *report, const struct case_lists *lists,
                            const struct site_list *list, enum report_metric metric)
{
    char figure[128];
    for (size_t i = 0; i < list->count; i++) {
        fprintf(out, "    %-28s ", site_figure(report, list->sites[i], metric, figure, sizeof figure));
        text_put(out, label_of(list->sites[i], lists->listed, lists->labels, lists->listed_count));
        fputc('\n', out);
    }
}

static void collect_listed(struct case_lists *lists, const struct site_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        size_t j = 0;
        while (j < lists->listed_count && lists->listed[j] != list->sites[i])
            j++;
        if (j == lists->listed_count) {
            lists->stacks[lists->listed_count] = list->sites[i]->stack;
            lists->listed[lists->listed_count++] = list->sites[i];
        }
    }
}

static void write_case_sites(FILE *out, const struct report *report, const struct report_case *c)
{
    struct case_lists lists = {.metric = report->metric};
    int growth_unknown = report->metric == REPORT_METRIC_GROWTH && !c->growth.known;
    if (growth_unknown)
        lists.metric = REPORT_METRIC_PEAK;
    select_sites(c, lists.metric, &lists.top);
    if (lists.metric != REPORT_METRIC_LEAKED)
        select_sites(c, REPORT_METRIC_LEAKED, &lists.leaking);
    collect_listed(&lists, &lists.top);
    collect_listed(&lists, &lists.leaking);
    if (site_labels_build(report->model, lists.stacks, lists.listed_count, lists.labels) != 0)
        memset(lists.labels, 0, sizeof lists.labels);
    fprintf(out, "  Top sites by %s%s\n", metric_titles[lists.metric],
            growth_unknown ? " (no growth figures for this case)" : "");
    write_site_list(out, report, &lists, &lists.top, lists.metric);
    if (!lists.top.count)
        fprintf(out, "    (%s)\n", report->model->incomplete && !c->site_count
                                          ? "no site in what the trace holds: it may have been cut short before "
                                            "them"
                                          : empty_reason(c, lists.metric));
    if (lists.leaking.count) {
        fprintf(out, "  Leaking sites (definitely and indirectly lost)\n");
        write_site_list(out, report, &lists, &lists.leaking, REPORT_METRIC_LEAKED);
    }
    site_labels_free(lists.labels, lists.listed_count);
}

static void write_cases(FILE *out, const struct report *report)
{
    fputs(report->case_count == 1 ? "Case\n\n" : "Cases\n\n", out);
    write_sampling_note(out, report);
    for (size_t i = 0; i < report->case_count; i++) {
        write_case_figures(out, report, &report->cases[i]);
        write_case_sites(out, report, &report->cases[i]);
        fputc('\n', out);
    }
}

/* --- other processes, warnings ------------------------------------------------------ */

static void write_process_leaks(FILE *out, const struct report *report, const struct report_process *entry)
{
    const struct trace_leaks *leaks = entry->exit_leaks;
    char bytes[32], blocks[32];
    fputs("  leaks at exit:", out);
    for (int c = 0; c < TRACE_LEAK_CATEGORIES; c++)
        fprintf(out, "%s %s: %s bytes in %s blocks", c == 2 ? ",\n                " : c ? "," : "",
                category_names[c], units_format_count(leaks->bytes[c], bytes, 32), units_format_count(leaks->blocks[c], blocks, 32));
    if (entry->exit_suppressed.blocks)
        fprintf(out, ",\n                 suppressed: %s bytes in %s blocks",
                units_format_count(entry->exit_suppressed.bytes, bytes, 32),
                units_format_count(entry->exit_suppressed.blocks, blocks, 32));
    fputs("\n\n", out);
    write_loss_records(out, report, entry->process, leaks, OTHER_PROCESS_RECORDS, "  ");
}

/* The other processes' warnings, each text once with the pids it was
 * given for (a make that runs itself, a loop of one static program): at
 * most OTHER_WARNINGS texts and OTHER_WARNING_PIDS pids a text. */
#define OTHER_WARNINGS 10
#define OTHER_WARNING_PIDS 5

struct grouped_warning {
    const char *text;
    uint32_t pids[OTHER_WARNING_PIDS];
    size_t pid_count; /* all, shown or not */
};

static void group_warning(struct grouped_warning *groups, size_t *group_count, size_t *left_out, const char *text,
                          uint32_t pid)
{
    size_t i = 0;
    while (i < *group_count && strcmp(groups[i].text, text) != 0)
        i++;
    if (i == *group_count) {
        if (*group_count == OTHER_WARNINGS) {
            (*left_out)++;
            return;
        }
        groups[(*group_count)++] = (struct grouped_warning){.text = text};
    }
    if (groups[i].pid_count < OTHER_WARNING_PIDS)
        groups[i].pids[groups[i].pid_count] = pid;
    groups[i].pid_count++;
}

static void write_other_warnings(FILE *out, const struct report *report)
{
    struct grouped_warning groups[OTHER_WARNINGS];
    size_t group_count = 0, left_out = 0;
    for (size_t i = 0; i < report->process_count; i++) {
        const struct trace_model_process *p = report->processes[i].process;
        for (size_t w = 0; p != report->primary && w < p->warning_count; w++)
            group_warning(groups, &group_count, &left_out, p->warnings[w], p->info.pid);
    }
    for (size_t i = 0; i < group_count; i++) {
        fputs("warning (pid", out);
        for (size_t k = 0; k < groups[i].pid_count && k < OTHER_WARNING_PIDS; k++)
            fprintf(out, "%s %u", k ? "," : "", groups[i].pids[k]);
        if (groups[i].pid_count > OTHER_WARNING_PIDS)
            fprintf(out, " and %zu more", groups[i].pid_count - OTHER_WARNING_PIDS);
        fputs("): ", out);
        text_put(out, groups[i].text);
        fputc('\n', out);
    }
    if (left_out)
        fprintf(out, "... and %zu more warnings of other processes (memslope report --format json lists each "
                     "process's)\n", left_out);
    if (group_count)
        fputc('\n', out);
}

static void write_other_processes(FILE *out, const struct report *report)
{
    if (report->process_count < 2 || report->case_filter)
        return;
    char allocated[32], allocations[48], peak[32];
    fputs("Other processes\n\n", out);
    for (size_t i = 0; i < report->process_count; i++) {
        const struct report_process *entry = &report->processes[i];
        const struct trace_model_process *p = entry->process;
        if (p == report->primary)
            continue;
        fprintf(out, "pid %u ", p->info.pid);
        text_put(out, *p->info.exe ? p->info.exe : "(unknown)");
        fputs(": ", out);
        write_exit(out, p);
        fprintf(out, "; %s, %s allocated, peak %s\n", plural(p->info.allocations, "allocation", allocations, 48),
                units_format_bytes((double)p->info.allocated_bytes, allocated, 32),
                units_format_bytes((double)p->info.peak_bytes, peak, 32));
        if (entry->exit_leaks)
            write_process_leaks(out, report, entry);
    }
    fputc('\n', out);
    write_other_warnings(out, report);
}

static void write_warning_list(FILE *out, const char *const *warnings, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        fputs("warning: ", out);
        text_put(out, warnings[i]);
        fputc('\n', out);
    }
}

static void write_leaks(FILE *out, const struct report *report)
{
    if (report->case_filter) {
        fputs("Leaks of case ", out);
        text_put(out, report->case_filter);
        fputs(": the blocks it allocated, largest first (memcheck's categories)\n\n", out);
    }
    else
        fputs("Leaks at exit, largest first (memcheck's categories)\n\n", out);
    write_sampling_note(out, report);
    write_loss_records(out, report, report->primary, report->exit_leaks, TOP_SITES, "");
    write_leak_summary(out, report->exit_leaks, &report->exit_suppressed);
    write_used_suppressions(out, report);
    fputc('\n', out);
}

void report_write_text(const struct report *report, FILE *out)
{
    if (report->model->process_count == 0) {
        /* A header and no image: there is no command, exit or case to
         * describe, and made-up ones would read as a real process. */
        fputs("No process was recorded: the trace holds no process image (it was cut short before the first\n"
              "one ended or was checkpointed).\n", out);
        write_warning_list(out, report->model->warnings, report->model->warning_count);
        return;
    }
    write_summary(out, report);
    write_python(out, report->primary);
    fputc('\n', out);
    if (report->exit_leaks)
        write_leaks(out, report);
    else if (report->primary && !(report->primary->info.flags & TRACE_PROC_SHIM_SEEN))
        fputs("Nothing was recorded in this process: memslope's shim was not loaded into it (the warning\n"
              "below says why).\n\n", out);
    else if (report->model->incomplete)
        fputs("No leak check in what the trace holds (it was cut short, or recorded with --leak-check off):\n"
              "the cases below list what was live.\n\n", out);
    else
        fputs("No leak check (recorded with --leak-check off, or the process did not end): the cases below\n"
              "list what was live.\n\n", out);
    write_cases(out, report);
    write_other_processes(out, report);
    write_warning_list(out, report->model->warnings, report->model->warning_count);
    if (report->primary)
        write_warning_list(out, report->primary->warnings, report->primary->warning_count);
}

/* report_model.c - see report_model.h. */
#include "report_model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int report_metric_parse(const char *name, enum report_metric *metric)
{
    static const char *const names[] = {"growth", "leaked", "peak", "allocated", "temporary"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) {
            *metric = (enum report_metric)i;
            return 0;
        }
    return -1;
}

const char *report_human_bytes(uint64_t bytes, char *buffer, size_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buffer, size, "%" PRIu64 " B", bytes);
        return buffer;
    }
    double value = (double)bytes / 1024;
    size_t unit = 0;
    while (value >= 1024 && unit + 1 < sizeof units / sizeof *units) {
        value /= 1024;
        unit++;
    }
    snprintf(buffer, size, "%.1f %s", value, units[unit]);
    return buffer;
}

int report_frame_visible(const struct trace_model_frame *frame)
{
    return !(frame->flags & TRACE_FRAME_ALLOCATOR);
}

const struct trace_model_process *report_primary_process(const struct trace_model *model)
{
    const struct trace_model_process *best = NULL;
    for (const struct trace_model_process *p = model->processes; p; p = p->hh.next)
        if (!best || p->info.allocations > best->info.allocations)
            best = p;
    return best;
}

struct report_growth report_estimate_growth(const struct trace_snapshot *const *iteration_snapshots, size_t count)
{
    struct report_growth none = {0};
    (void)iteration_snapshots;
    if (count < 3)
        return none; /* a slope needs at least three points to be told from noise */
    /* TODO(growth estimator): warm-up detection and a Theil-Sen slope over
     * iteration_snapshots[i]->live_bytes / live_blocks. Until then: unknown. */
    return none;
}

/* --- site accumulation ---------------------------------------------------------- */

struct site_entry {
    struct report_site site;
    UT_hash_handle hh;
};

struct site_table {
    struct site_entry *entries; /* uthash by site.stack_id */
    size_t count;
    int failed;
};

static struct report_site *table_site(struct site_table *table, const struct trace_model_process *process,
                                      uint32_t stack_id)
{
    struct site_entry *entry;
    HASH_FIND(hh, table->entries, &stack_id, sizeof stack_id, entry);
    if (entry)
        return &entry->site;
    if (!(entry = calloc(1, sizeof *entry))) {
        table->failed = 1;
        return NULL;
    }
    entry->site.stack_id = stack_id;
    entry->site.stack = trace_model_stack(process, stack_id);
    HASH_ADD(hh, table->entries, site.stack_id, sizeof entry->site.stack_id, entry);
    table->count++;
    return &entry->site;
}

/* Adds the process-wide counters of SITES (allocations are not split by case). */
static void add_process_counters(struct report_site *site, const struct trace_model_process *process)
{
    const struct trace_model_site *counters = trace_model_site(process, site->stack_id);
    if (!counters)
        return;
    site->allocations = counters->site.allocations;
    site->frees = counters->site.frees;
    site->allocated_bytes = counters->site.allocated_bytes;
    site->peak_live_bytes = counters->site.peak_live_bytes;
}

static void add_loss_records(struct site_table *table, const struct trace_model_process *process,
                             const struct trace_leaks *leaks)
{
    for (uint32_t i = 0; leaks && i < leaks->count; i++) {
        const struct trace_loss_record *record = &leaks->records[i];
        if (record->category != TRACE_LEAK_DEFINITE && record->category != TRACE_LEAK_INDIRECT)
            continue;
        struct report_site *site = table_site(table, process, record->stack_id);
        if (site) {
            site->leaked_bytes += record->bytes;
            site->leaked_blocks += record->blocks;
        }
    }
}

static int compare_u64_desc(uint64_t a, uint64_t b) { return a < b ? 1 : a > b ? -1 : 0; }

static int compare_growth(const struct report_site *a, const struct report_site *b)
{
    if (a->growth.known != b->growth.known)
        return a->growth.known ? -1 : 1;
    if (a->growth.bytes_per_iteration != b->growth.bytes_per_iteration)
        return a->growth.bytes_per_iteration > b->growth.bytes_per_iteration ? -1 : 1;
    return 0;
}

static int compare_sites(const void *left, const void *right, void *context)
{
    const struct report_site *a = left, *b = right;
    enum report_metric metric = *(const enum report_metric *)context;
    int order = 0;
    switch (metric) {
    case REPORT_METRIC_GROWTH: order = compare_growth(a, b); break;
    case REPORT_METRIC_LEAKED: break;
    case REPORT_METRIC_PEAK: order = compare_u64_desc(a->peak_live_bytes, b->peak_live_bytes); break;
    case REPORT_METRIC_ALLOCATED: order = compare_u64_desc(a->allocated_bytes, b->allocated_bytes); break;
    case REPORT_METRIC_TEMPORARY: order = compare_u64_desc(a->frees, b->frees); break;
    }
    if (!order)
        order = compare_u64_desc(a->leaked_bytes, b->leaked_bytes);
    if (!order)
        order = compare_u64_desc(a->live_bytes, b->live_bytes);
    if (!order)
        order = compare_u64_desc(a->allocated_bytes, b->allocated_bytes);
    if (!order)
        order = compare_u64_desc(a->allocations, b->allocations);
    if (!order)
        order = a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
    return order;
}

/* Moves the table into the case's sorted array; frees the table. */
static int finish_sites(struct site_table *table, struct report_case *report_case, enum report_metric metric)
{
    struct site_entry *entry, *next;
    size_t n = 0;
    report_case->sites = table->failed ? NULL : calloc(table->count + 1, sizeof *report_case->sites);
    HASH_ITER(hh, table->entries, entry, next)
    {
        if (report_case->sites)
            report_case->sites[n++] = entry->site;
        HASH_DEL(table->entries, entry);
        free(entry);
    }
    if (!report_case->sites)
        return -1;
    report_case->site_count = n;
    qsort_r(report_case->sites, n, sizeof *report_case->sites, compare_sites, &metric);
    return 0;
}

/* --- cases ------------------------------------------------------------------------ */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The name of the case a trace without markers gets: the command's name. */
static const char *process_case_name(const struct trace_model *model, const struct trace_model_process *process)
{
    if (process && process->info.argc > 0 && *process->info.argv[0])
        return base_name(process->info.argv[0]);
    if (model->has_info && model->info.argc > 0 && *model->info.argv[0])
        return base_name(model->info.argv[0]);
    if (process && *process->info.exe)
        return base_name(process->info.exe);
    return "process";
}

/* The iteration snapshots of a case (TRACE_NONE: of any case), in order. */
static const struct trace_snapshot **iteration_snapshots(const struct trace_model_process *process,
                                                         uint32_t case_id, size_t *count)
{
    const struct trace_snapshot **found = calloc(process->snapshot_count + 1, sizeof *found);
    *count = 0;
    for (size_t i = 0; found && i < process->snapshot_count; i++) {
        const struct trace_snapshot *s = &process->snapshots[i];
        if (s->kind == TRACE_SNAP_ITERATION && (case_id == TRACE_NONE || s->case_id == case_id))
            found[(*count)++] = s;
    }
    return found;
}

static int set_case_growth(struct report_case *report_case, const struct trace_model_process *process)
{
    size_t count;
    const struct trace_snapshot **snapshots = iteration_snapshots(process, report_case->case_id, &count);
    if (!snapshots)
        return -1;
    report_case->growth = report_estimate_growth(snapshots, count);
    free(snapshots);
    return 0;
}

/* The whole process as one case: the trace has no markers. */
static int build_process_case(struct report_case *report_case, const struct report *report)
{
    const struct trace_model_process *process = report->primary;
    struct site_table table = {0};
    report_case->leaks = report->exit_leaks;
    if (!process)
        return finish_sites(&table, report_case, report->metric);
    /* Setup is what stayed live at exit until the growth estimator splits it. */
    report_case->setup_bytes = process->info.live_bytes;
    report_case->setup_blocks = process->info.live_blocks;
    report_case->peak_bytes = process->info.peak_bytes;
    for (const struct trace_model_site *s = process->sites; s; s = s->hh.next) {
        struct report_site *site = table_site(&table, process, s->site.stack_id);
        if (site) {
            site->live_bytes = s->site.live_bytes;
            site->live_blocks = s->site.live_blocks;
            site->setup_bytes = s->site.live_bytes;
        }
    }
    add_loss_records(&table, process, report->exit_leaks);
    for (struct site_entry *e = table.entries; e; e = e->hh.next)
        add_process_counters(&e->site, process);
    if (set_case_growth(report_case, process) != 0)
        table.failed = 1;
    return finish_sites(&table, report_case, report->metric);
}

static const struct trace_leaks *last_leaks(const struct trace_model_process *process, uint32_t case_id)
{
    const struct trace_leaks *found = NULL;
    for (size_t i = 0; process && i < process->leak_count; i++)
        if (process->leaks[i].case_id == case_id)
            found = &process->leaks[i];
    return found;
}

/* The case's first and last snapshots (NULL when it has none). */
static void case_bounds(const struct trace_model_process *process, uint32_t case_id,
                        const struct trace_snapshot **first, const struct trace_snapshot **last, uint64_t *peak)
{
    *first = *last = NULL;
    *peak = 0;
    for (size_t i = 0; i < process->snapshot_count; i++) {
        const struct trace_snapshot *s = &process->snapshots[i];
        if (s->case_id != case_id)
            continue;
        if (!*first)
            *first = s;
        *last = s;
        if (s->live_bytes > *peak)
            *peak = s->live_bytes;
    }
}

static uint64_t clamped_difference(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

static int compare_entry_stack(const void *left, const void *right)
{
    const struct trace_snapshot_entry *a = left, *b = right;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* Per site: what the case retained between its first and last snapshot. */
static int add_case_retained(struct site_table *table, const struct trace_model_process *process,
                             const struct trace_snapshot *first, const struct trace_snapshot *last)
{
    if (!last || first == last)
        return 0;
    /* A sorted copy of the first snapshot, so each look-up is a bsearch. */
    struct trace_snapshot_entry *begins = malloc(((size_t)first->count + 1) * sizeof *begins);
    if (!begins)
        return -1;
    memcpy(begins, first->entries, (size_t)first->count * sizeof *begins);
    qsort(begins, first->count, sizeof *begins, compare_entry_stack);
    for (uint32_t i = 0; i < last->count; i++) {
        const struct trace_snapshot_entry *end = &last->entries[i];
        const struct trace_snapshot_entry *begin = bsearch(end, begins, first->count, sizeof *begins, compare_entry_stack);
        uint64_t bytes = clamped_difference(end->live_bytes, begin ? begin->live_bytes : 0);
        struct report_site *site = bytes ? table_site(table, process, end->stack_id) : NULL;
        if (site) {
            site->live_bytes = site->setup_bytes = bytes;
            site->live_blocks = clamped_difference(end->live_blocks, begin ? begin->live_blocks : 0);
        }
    }
    free(begins);
    return 0;
}

/* A case named by markers: figures from its own snapshots and leak check. */
static int build_marked_case(struct report_case *report_case, const struct report *report,
                             const struct trace_case *trace_case)
{
    const struct trace_model_process *process = report->primary;
    const struct trace_snapshot *first, *last;
    struct site_table table = {0};
    report_case->leaks = last_leaks(process, trace_case->case_id);
    case_bounds(process, trace_case->case_id, &first, &last, &report_case->peak_bytes);
    if (first && last && first != last) {
        report_case->setup_bytes = clamped_difference(last->live_bytes, first->live_bytes);
        report_case->setup_blocks = clamped_difference(last->live_blocks, first->live_blocks);
    }
    if (add_case_retained(&table, process, first, last) != 0)
        table.failed = 1;
    add_loss_records(&table, process, report_case->leaks);
    for (struct site_entry *e = table.entries; e; e = e->hh.next)
        add_process_counters(&e->site, process);
    if (set_case_growth(report_case, process) != 0)
        table.failed = 1;
    return finish_sites(&table, report_case, report->metric);
}

static int build_case(struct report_case *report_case, const struct report *report,
                      const struct trace_case *trace_case)
{
    memset(report_case, 0, sizeof *report_case);
    if (!trace_case || (trace_case->flags & TRACE_CASE_IMPLICIT)) {
        report_case->name = trace_case && *trace_case->name ? trace_case->name
                                                             : process_case_name(report->model, report->primary);
        report_case->case_id = trace_case ? trace_case->case_id : TRACE_NONE;
        report_case->iterations = trace_case ? trace_case->iterations : 0;
        return build_process_case(report_case, report);
    }
    report_case->name = trace_case->name;
    report_case->case_id = trace_case->case_id;
    report_case->iterations = trace_case->iterations;
    return build_marked_case(report_case, report, trace_case);
}

static int case_selected(const struct report *report, const struct trace_case *trace_case, const char *case_name)
{
    if (!case_name)
        return 1;
    const char *name = trace_case && *trace_case->name ? trace_case->name
                                                       : process_case_name(report->model, report->primary);
    return strcmp(name, case_name) == 0;
}

static void no_such_case(const struct report *report, const char *case_name, char *err, size_t err_size)
{
    const struct trace_model_process *process = report->primary;
    int used = snprintf(err, err_size, "%s: no case named '%s' (cases:", report->trace_name, case_name);
    size_t count = process && process->case_count ? process->case_count : 1;
    for (size_t i = 0; i < count && used >= 0 && (size_t)used < err_size; i++) {
        const char *name = process && process->case_count && *process->cases[i].name
                               ? process->cases[i].name
                               : process_case_name(report->model, process);
        used += snprintf(err + used, err_size - (size_t)used, " %s", name);
    }
    if (used >= 0 && (size_t)used < err_size)
        snprintf(err + used, err_size - (size_t)used, ")");
}

static int build_cases(struct report *report, const char *case_name, char *err, size_t err_size)
{
    const struct trace_model_process *process = report->primary;
    size_t trace_cases = process ? process->case_count : 0;
    report->cases = calloc(trace_cases + 1, sizeof *report->cases);
    if (!report->cases) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < (trace_cases ? trace_cases : 1); i++) {
        const struct trace_case *trace_case = trace_cases ? &process->cases[i] : NULL;
        if (!case_selected(report, trace_case, case_name))
            continue;
        if (build_case(&report->cases[report->case_count++], report, trace_case) != 0) {
            snprintf(err, err_size, "out of memory");
            return -1;
        }
    }
    if (report->case_count == 0) {
        no_such_case(report, case_name, err, err_size);
        return -1;
    }
    return 0;
}

int report_build(struct report *report, const struct trace_model *model, const char *trace_name,
                 enum report_metric metric, const char *case_name, char *err, size_t err_size)
{
    memset(report, 0, sizeof *report);
    report->model = model;
    report->trace_name = trace_name;
    report->metric = metric;
    report->primary = report_primary_process(model);
    report->exit_leaks = last_leaks(report->primary, TRACE_NONE);
    if (build_cases(report, case_name, err, err_size) != 0) {
        report_free(report);
        return -1;
    }
    return 0;
}

void report_free(struct report *report)
{
    for (size_t i = 0; i < report->case_count; i++)
        free(report->cases[i].sites);
    free(report->cases);
    memset(report, 0, sizeof *report);
}

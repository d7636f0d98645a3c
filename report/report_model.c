/* report_model.c - see report_model.h. */
#include "report_model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "growth.h"
#include "suppressions.h"

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

int report_frame_visible(const struct trace_model_frame *frame)
{
    return !(frame->flags & TRACE_FRAME_ALLOCATOR);
}

static uint64_t process_iterations(const struct trace_model_process *process)
{
    uint64_t iterations = 0;
    for (size_t i = 0; i < process->case_count; i++)
        iterations += process->cases[i].iterations;
    return iterations;
}

/* The last image of the exec chain that starts at the traced command (the
 * image with no parent): a wrapper script execs the real program. */
static const struct trace_model_process *exec_chain_end(const struct trace_model *model)
{
    const struct trace_model_process *image = NULL;
    for (const struct trace_model_process *p = model->processes; p && !image; p = p->hh.next)
        if (p->has_info && p->info.parent_process_id == TRACE_NONE)
            image = p;
    /* At most one step per process: a corrupt trace may link images in a
     * cycle (found by fuzz_trace_reader). */
    for (size_t steps = 0; image && (image->info.flags & TRACE_PROC_EXECED) && steps < model->process_count; steps++) {
        const struct trace_model_process *next = NULL;
        for (const struct trace_model_process *p = model->processes; p && !next; p = p->hh.next)
            if (p != image && p->info.parent_process_id == image->process_id && p->info.pid == image->info.pid)
                next = p;
        if (!next)
            break;
        image = next;
    }
    return image;
}

/* The launched command's own process as the tracer flagged it: the last
 * image of its exec chain (the newest flagged image). */
static const struct trace_model_process *flagged_primary(const struct trace_model *model)
{
    const struct trace_model_process *last = NULL;
    for (const struct trace_model_process *p = model->processes; p; p = p->hh.next)
        if (p->has_info && (p->info.flags & TRACE_PROC_PRIMARY) && (!last || p->process_id > last->process_id))
            last = p;
    return last;
}

/* The headline image. The tracer knows the exec chain and flags the
 * launched command's images (TRACE_PROC_PRIMARY): the last of them, never
 * a fork child. Traces written before the flag: the image that marked the
 * most iterations (or cases); else the one with the most allocations,
 * unless the end of the traced command's exec chain did at least a tenth
 * as many: then that one. */
const struct trace_model_process *report_primary_process(const struct trace_model *model)
{
    const struct trace_model_process *best = flagged_primary(model);
    if (best)
        return best;
    for (const struct trace_model_process *p = model->processes; p; p = p->hh.next) {
        if (!p->case_count)
            continue;
        if (!best || process_iterations(p) > process_iterations(best) ||
            (process_iterations(p) == process_iterations(best) && p->case_count > best->case_count))
            best = p;
    }
    if (best)
        return best;
    for (const struct trace_model_process *p = model->processes; p; p = p->hh.next)
        if (!best || p->info.allocations > best->info.allocations)
            best = p;
    const struct trace_model_process *chain_end = exec_chain_end(model);
    if (best && chain_end && chain_end->info.allocations > 0 && chain_end->info.allocations * 10 >= best->info.allocations)
        return chain_end;
    return best;
}

/* --- each case's own data ------------------------------------------------------ */

/* What one case id of the primary holds: its snapshots in file order, its
 * last leak check, its CASE_SITES records. Gathered once per report, so a
 * case is built from its own data rather than by scanning every case's
 * (a trace of 100,000 cases took 150 s to report). */
struct report_case_data {
    uint32_t case_id;
    const struct trace_snapshot **snapshots;
    size_t snapshot_count, snapshot_capacity;
    const struct trace_leaks *last_leaks;
    const struct trace_case_sites **site_records;
    size_t site_record_count, site_record_capacity;
    UT_hash_handle hh;
};

static struct report_case_data *case_data_find(const struct report *report, uint32_t case_id)
{
    struct report_case_data *data;
    HASH_FIND(hh, report->case_data, &case_id, sizeof case_id, data);
    return data;
}

static struct report_case_data *case_data_get(struct report *report, uint32_t case_id)
{
    struct report_case_data *data = case_data_find(report, case_id);
    if (data || !(data = calloc(1, sizeof *data)))
        return data;
    data->case_id = case_id;
    HASH_ADD(hh, report->case_data, case_id, sizeof data->case_id, data);
    return data;
}

static int append_pointer(const void ***items, size_t *count, size_t *capacity, const void *item)
{
    if (*count == *capacity) {
        size_t grown_capacity = *capacity ? *capacity * 2 : 4;
        const void **grown = realloc(*items, grown_capacity * sizeof *grown);
        if (!grown)
            return -1;
        *items = grown;
        *capacity = grown_capacity;
    }
    (*items)[(*count)++] = item;
    return 0;
}

static int index_cases(struct report *report)
{
    const struct trace_model_process *process = report->primary;
    struct report_case_data *data;
    for (size_t i = 0; process && i < process->snapshot_count; i++)
        if (!(data = case_data_get(report, process->snapshots[i].case_id)) ||
            append_pointer((const void ***)&data->snapshots, &data->snapshot_count, &data->snapshot_capacity,
                           &process->snapshots[i]) != 0)
            return -1;
    for (size_t i = 0; process && i < process->leak_count; i++) {
        if (!(data = case_data_get(report, process->leaks[i].case_id)))
            return -1;
        data->last_leaks = &process->leaks[i];
    }
    for (size_t i = 0; process && i < process->case_sites_count; i++)
        if (!(data = case_data_get(report, process->case_sites[i].case_id)) ||
            append_pointer((const void ***)&data->site_records, &data->site_record_count,
                           &data->site_record_capacity, &process->case_sites[i]) != 0)
            return -1;
    return 0;
}

const struct trace_snapshot *const *report_case_snapshots(const struct report *report, uint32_t case_id,
                                                          size_t *count)
{
    const struct report_case_data *data = case_data_find(report, case_id);
    *count = data ? data->snapshot_count : 0;
    return data ? data->snapshots : NULL;
}

static void free_case_data(struct report *report)
{
    struct report_case_data *data, *next;
    HASH_ITER(hh, report->case_data, data, next) {
        HASH_DEL(report->case_data, data);
        free(data->snapshots);
        free(data->site_records);
        free(data);
    }
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

/* A named case's own share of the counters (CASE_SITES), where the trace
 * has it: allocations made while the case was open and their frees. Each
 * site's figures are those of the last record that has it (a checkpoint
 * writes the counters that changed; the image's end the rest). A site the
 * case never allocated from counts 0 there. Traces without it keep the
 * whole-process figures. */
static void add_case_counters(struct site_table *table, const struct trace_model_process *process,
                              const struct report_case_data *data)
{
    if (!data || !data->site_record_count)
        return;
    for (struct site_entry *e = table->entries; e; e = e->hh.next)
        e->site.allocations = e->site.allocated_bytes = e->site.frees = 0;
    /* Every site the case allocated from belongs in its table. */
    for (size_t i = 0; i < data->site_record_count; i++)
        for (uint32_t j = 0; j < data->site_records[i]->count; j++) {
            const struct trace_case_site *counters = &data->site_records[i]->sites[j];
            struct report_site *site = table_site(table, process, counters->stack_id);
            if (site) {
                site->allocations = counters->allocations;
                site->allocated_bytes = counters->allocated_bytes;
                site->frees = counters->frees;
            }
        }
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

/* --- suppressions ----------------------------------------------------------------- */

static uint64_t clamped_difference(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* What each suppression took out of a leak check. */
struct used_list {
    struct report_used_suppression *items;
    size_t count;
};

static int count_use(struct used_list *used, const struct suppression *suppression,
                     const struct trace_loss_record *record)
{
    size_t i = 0;
    while (i < used->count && used->items[i].suppression != suppression)
        i++;
    if (i == used->count) {
        struct report_used_suppression *grown = realloc(used->items, (i + 1) * sizeof *used->items);
        if (!grown)
            return -1;
        used->items = grown;
        grown[used->count++] = (struct report_used_suppression){suppression, {0, 0}};
    }
    used->items[i].amount.bytes += record->bytes;
    used->items[i].amount.blocks += record->blocks;
    return 0;
}

static int compare_used(const void *left, const void *right)
{
    const struct report_used_suppression *a = left, *b = right;
    return a->suppression < b->suppression ? -1 : a->suppression > b->suppression;
}

/* A copy of a leak check without the loss records that match a
 * suppression; their figures come off their categories (clamped: in a
 * sampled trace they are estimates) and add up in *suppressed, and per
 * suppression in *used unless it is NULL. Returns 0 (*copy NULL when leaks
 * is), or -1 when out of memory. */
static int unsuppressed_leaks(const struct report *report, const struct trace_model_process *process,
                              const struct trace_leaks *leaks, struct used_list *used, struct trace_leaks **copy,
                              struct report_amount *suppressed)
{
    *copy = NULL;
    *suppressed = (struct report_amount){0, 0};
    if (!leaks)
        return 0;
    struct trace_leaks *kept = malloc(sizeof *kept);
    struct trace_loss_record *records = malloc(((size_t)leaks->count + 1) * sizeof *records);
    if (!kept || !records) {
        free(kept);
        free(records);
        return -1;
    }
    *kept = *leaks;
    kept->count = 0;
    kept->records = records;
    *copy = kept;
    for (uint32_t i = 0; i < leaks->count; i++) {
        const struct trace_loss_record *record = &leaks->records[i];
        const struct trace_model_stack *stack = trace_model_stack(process, record->stack_id);
        const struct suppression *match = record->category < TRACE_LEAK_CATEGORIES
                                              ? suppressions_match(report->suppressions, report->model, stack,
                                                                   record->category)
                                              : NULL;
        if (!match) {
            records[kept->count++] = *record;
            continue;
        }
        kept->bytes[record->category] = clamped_difference(kept->bytes[record->category], record->bytes);
        kept->blocks[record->category] = clamped_difference(kept->blocks[record->category], record->blocks);
        suppressed->bytes += record->bytes;
        suppressed->blocks += record->blocks;
        if (used && count_use(used, match, record) != 0)
            return -1;
    }
    /* The set's items are one array: pointer order is the order of the files and entries. */
    if (used && used->count)
        qsort(used->items, used->count, sizeof *used->items, compare_used);
    return 0;
}

static void free_leaks(struct trace_leaks *leaks)
{
    if (leaks)
        free((void *)leaks->records);
    free(leaks);
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

/* A case's snapshots as a growth series: x is the number of iterations
 * completed when the snapshot was taken (the snapshot at iteration marker
 * k has k - 1; the case's end has them all). */
struct case_series {
    const struct trace_snapshot *begin; /* CASE_BEGIN, or NULL (live 0 before it) */
    const struct trace_snapshot **points;
    double *x;
    size_t count;
};

static int case_series_collect(const struct report_case_data *data, uint64_t iterations, struct case_series *series)
{
    memset(series, 0, sizeof *series);
    size_t snapshot_count = data ? data->snapshot_count : 0;
    series->points = malloc((snapshot_count + 1) * sizeof *series->points);
    series->x = malloc((snapshot_count + 1) * sizeof *series->x);
    if (!series->points || !series->x)
        return -1;
    for (size_t i = 0; i < snapshot_count; i++) {
        const struct trace_snapshot *s = data->snapshots[i];
        if (s->kind == TRACE_SNAP_CASE_BEGIN) {
            series->begin = s;
        } else if (s->kind == TRACE_SNAP_ITERATION && s->iteration > 0) {
            series->x[series->count] = (double)(s->iteration - 1);
            series->points[series->count++] = s;
        } else if (s->kind == TRACE_SNAP_CASE_END && iterations > 0) {
            series->x[series->count] = (double)iterations;
            series->points[series->count++] = s;
        }
    }
    return 0;
}

static void case_series_free(struct case_series *series)
{
    free(series->points);
    free(series->x);
}

static int compare_entry_by_stack(const void *left, const void *right)
{
    const struct trace_snapshot_entry *a = left, *b = right;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* A stack's live bytes in the case-begin snapshot (entries sorted by stack). */
static uint64_t entry_bytes(const struct trace_snapshot_entry *sorted, size_t count, uint32_t stack_id)
{
    struct trace_snapshot_entry key = {.stack_id = stack_id};
    const struct trace_snapshot_entry *found = sorted ? bsearch(&key, sorted, count, sizeof key, compare_entry_by_stack)
                                                      : NULL;
    return found ? found->live_bytes : 0;
}

/* Fits one series; setup is the intercept less the value at case begin. */
static struct growth_fit fit_series(const struct case_series *series, const double *y, struct growth_point *scratch)
{
    for (size_t i = 0; i < series->count; i++)
        scratch[i] = (struct growth_point){series->x[i], y[i]};
    return growth_estimate(scratch, series->count);
}

static uint64_t setup_from(const struct growth_fit *fit, uint64_t at_begin)
{
    double setup = fit->intercept - (double)at_begin;
    if (!(setup > 0.5)) /* also NaN */
        return 0;
    /* A fit over wild figures (a corrupt trace) can exceed any uint64_t. */
    return setup < 18446744073709549568.0 ? (uint64_t)(setup + 0.5) : UINT64_MAX;
}

struct stack_series {
    uint32_t stack_id;
    double *bytes, *blocks;
    UT_hash_handle hh;
};

/* Per-site growth and setup over the case's series. */
static int add_site_growth(struct site_table *table, const struct trace_model_process *process,
                           const struct case_series *series, struct growth_point *scratch)
{
    struct stack_series *stacks = NULL, *stack, *next;
    int rc = 0;
    for (size_t p = 0; p < series->count && rc == 0; p++) {
        for (uint32_t e = 0; e < series->points[p]->count; e++) {
            const struct trace_snapshot_entry *entry = &series->points[p]->entries[e];
            HASH_FIND(hh, stacks, &entry->stack_id, sizeof entry->stack_id, stack);
            if (!stack) {
                stack = calloc(1, sizeof *stack);
                if (!stack || !(stack->bytes = calloc(series->count, sizeof(double))) ||
                    !(stack->blocks = calloc(series->count, sizeof(double)))) {
                    if (stack)
                        free(stack->bytes);
                    free(stack);
                    rc = -1;
                    break;
                }
                stack->stack_id = entry->stack_id;
                HASH_ADD(hh, stacks, stack_id, sizeof stack->stack_id, stack);
            }
            stack->bytes[p] = (double)entry->live_bytes;
            stack->blocks[p] = (double)entry->live_blocks;
        }
    }
    size_t begin_count = series->begin ? series->begin->count : 0;
    struct trace_snapshot_entry *begin = malloc((begin_count + 1) * sizeof *begin);
    if (begin && begin_count) {
        memcpy(begin, series->begin->entries, begin_count * sizeof *begin);
        qsort(begin, begin_count, sizeof *begin, compare_entry_by_stack);
    }
    HASH_ITER(hh, stacks, stack, next) {
        struct growth_fit bytes = fit_series(series, stack->bytes, scratch);
        uint64_t setup = setup_from(&bytes, entry_bytes(begin, begin_count, stack->stack_id));
        if (rc == 0 && (bytes.slope != 0.0 || setup > 0)) {
            struct growth_fit blocks = fit_series(series, stack->blocks, scratch);
            struct report_site *site = table_site(table, process, stack->stack_id);
            if (site) {
                site->growth = (struct report_growth){bytes.known && blocks.known, bytes.slope, blocks.slope};
                site->setup_bytes = setup;
            }
        }
        HASH_DEL(stacks, stack);
        free(stack->bytes);
        free(stack->blocks);
        free(stack);
    }
    free(begin);
    return rc;
}

/* Growth and setup of the case and of its sites, when it has at least
 * GROWTH_MIN_POINTS iteration snapshots; otherwise growth stays unknown. */
static int set_case_growth(struct report_case *report_case, struct site_table *table, const struct report *report)
{
    const struct trace_model_process *process = report->primary;
    struct case_series series;
    if (case_series_collect(case_data_find(report, report_case->case_id), report_case->iterations, &series) != 0) {
        case_series_free(&series);
        return -1;
    }
    int rc = 0;
    if (series.count >= GROWTH_MIN_POINTS) {
        struct growth_point *scratch = calloc(series.count, sizeof *scratch);
        double *bytes = calloc(series.count, sizeof *bytes), *blocks = calloc(series.count, sizeof *blocks);
        if (!scratch || !bytes || !blocks) {
            rc = -1;
        } else {
            for (size_t i = 0; i < series.count; i++) {
                bytes[i] = (double)series.points[i]->live_bytes;
                blocks[i] = (double)series.points[i]->live_blocks;
            }
            struct growth_fit fit_bytes = fit_series(&series, bytes, scratch);
            struct growth_fit fit_blocks = fit_series(&series, blocks, scratch);
            report_case->growth = (struct report_growth){fit_bytes.known && fit_blocks.known, fit_bytes.slope,
                                                         fit_blocks.slope};
            report_case->setup_bytes = setup_from(&fit_bytes, series.begin ? series.begin->live_bytes : 0);
            report_case->setup_blocks = setup_from(&fit_blocks, series.begin ? series.begin->live_blocks : 0);
            rc = add_site_growth(table, process, &series, scratch);
        }
        free(scratch);
        free(bytes);
        free(blocks);
    }
    case_series_free(&series);
    return rc;
}

/* The whole process as one case: the trace has no markers, or only
 * iterations outside any named case (--iteration SYMBOL). */
static int build_process_case(struct report_case *report_case, const struct report *report)
{
    const struct trace_model_process *process = report->primary;
    struct site_table table = {0};
    report_case->leaks = report->exit_leaks;
    report_case->suppressed = report->exit_suppressed;
    if (!process)
        return finish_sites(&table, report_case, report->metric);
    /* With iterations, setup is what stayed live at exit until the growth
     * estimator splits it; without, there is nothing to tell it from growth. */
    report_case->setup_known = report_case->iterations > 0;
    if (report_case->setup_known) {
        report_case->setup_bytes = process->info.live_bytes;
        report_case->setup_blocks = process->info.live_blocks;
    }
    report_case->peak_bytes = process->info.peak_bytes;
    for (const struct trace_model_site *s = process->sites; s; s = s->hh.next) {
        struct report_site *site = table_site(&table, process, s->site.stack_id);
        if (site) {
            site->live_bytes = s->site.live_bytes;
            site->live_blocks = s->site.live_blocks;
            site->setup_bytes = report_case->setup_known ? s->site.live_bytes : 0;
        }
    }
    add_loss_records(&table, process, report->exit_leaks);
    if (set_case_growth(report_case, &table, report) != 0)
        table.failed = 1;
    for (struct site_entry *e = table.entries; e; e = e->hh.next)
        add_process_counters(&e->site, process);
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

/* The case's first, last and fullest snapshots (NULL when it has none). */
struct case_bounds {
    const struct trace_snapshot *first, *last, *peak;
};

static struct case_bounds case_bounds(const struct report_case_data *data)
{
    struct case_bounds bounds = {NULL, NULL, NULL};
    for (size_t i = 0; data && i < data->snapshot_count; i++) {
        const struct trace_snapshot *s = data->snapshots[i];
        if (!bounds.first)
            bounds.first = s;
        bounds.last = s;
        if (!bounds.peak || s->live_bytes > bounds.peak->live_bytes)
            bounds.peak = s;
    }
    return bounds;
}

/* Each site's live bytes at the snapshot where the case peaked, sites
 * live then but untouched by the case included (the case's peak counts
 * them too). */
static void add_case_peak(struct site_table *table, const struct trace_model_process *process,
                          const struct trace_snapshot *peak)
{
    for (struct site_entry *e = table->entries; e; e = e->hh.next)
        e->site.peak_live_bytes = 0;
    for (uint32_t i = 0; peak && i < peak->count; i++) {
        struct report_site *site = table_site(table, process, peak->entries[i].stack_id);
        if (site)
            site->peak_live_bytes = peak->entries[i].live_bytes;
    }
}

static int compare_entry_stack(const void *left, const void *right)
{
    const struct trace_snapshot_entry *a = left, *b = right;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* Per site: what the case retained between its first and last snapshot
 * (its setup too, with setup_known, until the growth estimator splits it). */
static int add_case_retained(struct site_table *table, const struct trace_model_process *process,
                             const struct trace_snapshot *first, const struct trace_snapshot *last, int setup_known)
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
            site->live_bytes = bytes;
            site->setup_bytes = setup_known ? bytes : 0;
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
    const struct report_case_data *data = case_data_find(report, trace_case->case_id);
    struct site_table table = {0};
    if (unsuppressed_leaks(report, process, data ? data->last_leaks : NULL, NULL, &report_case->owned_leaks,
                           &report_case->suppressed) != 0)
        return -1;
    report_case->leaks = report_case->owned_leaks;
    struct case_bounds bounds = case_bounds(data);
    report_case->peak_bytes = bounds.peak ? bounds.peak->live_bytes : 0;
    /* Until the growth estimator splits it, setup is all the case retained. */
    report_case->setup_known = report_case->iterations > 0;
    if (report_case->setup_known && bounds.first && bounds.last != bounds.first) {
        report_case->setup_bytes = clamped_difference(bounds.last->live_bytes, bounds.first->live_bytes);
        report_case->setup_blocks = clamped_difference(bounds.last->live_blocks, bounds.first->live_blocks);
    }
    if (add_case_retained(&table, process, bounds.first, bounds.last, report_case->setup_known) != 0)
        table.failed = 1;
    add_loss_records(&table, process, report_case->leaks);
    if (set_case_growth(report_case, &table, report) != 0)
        table.failed = 1;
    for (struct site_entry *e = table.entries; e; e = e->hh.next)
        add_process_counters(&e->site, process);
    add_case_peak(&table, process, bounds.peak);
    add_case_counters(&table, process, data);
    return finish_sites(&table, report_case, report->metric);
}

static int build_case(struct report_case *report_case, const struct report *report,
                      const struct trace_case *trace_case)
{
    memset(report_case, 0, sizeof *report_case);
    report_case->source = trace_case;
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
    return report_build_with_suppressions(report, model, trace_name, metric, case_name, NULL, err, err_size);
}

int report_build_with_suppressions(struct report *report, const struct trace_model *model, const char *trace_name,
                                   enum report_metric metric, const char *case_name,
                                   const struct suppressions *suppressions, char *err, size_t err_size)
{
    struct report_request request = {metric, case_name, suppressions, NULL};
    return report_build_request(report, model, trace_name, &request, err, err_size);
}

/* Every process's check at exit, less the suppressed. */
static int build_processes(struct report *report)
{
    report->processes = calloc(report->model->process_count + 1, sizeof *report->processes);
    if (!report->processes)
        return -1;
    for (const struct trace_model_process *p = report->model->processes; p; p = p->hh.next) {
        struct report_process *entry = &report->processes[report->process_count++];
        entry->process = p;
        /* The primary's check at exit is matched against the suppressions once. */
        if (p == report->primary && !report->case_filter) {
            entry->exit_leaks = report->exit_leaks;
            entry->exit_suppressed = report->exit_suppressed;
            continue;
        }
        if (unsuppressed_leaks(report, p, last_leaks(p, TRACE_NONE), NULL, &entry->owned_exit_leaks,
                               &entry->exit_suppressed) != 0)
            return -1;
        entry->exit_leaks = entry->owned_exit_leaks;
    }
    return 0;
}

/* The marked case --case selects in the primary, or TRACE_NONE (no filter,
 * or the whole-process case: its check is the one at exit). */
static uint32_t filtered_case_id(const struct report *report)
{
    const struct trace_model_process *process = report->primary;
    for (size_t i = 0; report->case_filter && process && i < process->case_count; i++) {
        const struct trace_case *trace_case = &process->cases[i];
        if (!(trace_case->flags & TRACE_CASE_IMPLICIT) && case_selected(report, trace_case, report->case_filter))
            return trace_case->case_id;
    }
    return TRACE_NONE;
}

/* The leak check the report leads with (report->exit_leaks) and what each
 * suppression took out of it. */
static int build_exit_leaks(struct report *report)
{
    struct used_list used = {NULL, 0};
    const struct trace_leaks *check = last_leaks(report->primary, filtered_case_id(report));
    int rc = unsuppressed_leaks(report, report->primary, check, &used, &report->owned_exit_leaks,
                                &report->exit_suppressed);
    report->used_suppressions = used.items;
    report->used_suppression_count = used.count;
    report->exit_leaks = report->owned_exit_leaks;
    return rc;
}

int report_build_request(struct report *report, const struct trace_model *model, const char *trace_name,
                         const struct report_request *request, char *err, size_t err_size)
{
    memset(report, 0, sizeof *report);
    report->model = model;
    report->trace_name = trace_name;
    report->metric = request->metric;
    report->suppressions = request->suppressions;
    report->case_filter = request->case_name;
    report->primary = request->process ? request->process : report_primary_process(model);
    if (index_cases(report) != 0 || build_exit_leaks(report) != 0 || build_processes(report) != 0) {
        snprintf(err, err_size, "out of memory");
        report_free(report);
        return -1;
    }
    if (build_cases(report, request->case_name, err, err_size) != 0) {
        report_free(report);
        return -1;
    }
    return 0;
}

void report_free(struct report *report)
{
    for (size_t i = 0; i < report->case_count; i++) {
        free(report->cases[i].sites);
        free_leaks(report->cases[i].owned_leaks);
    }
    free(report->cases);
    for (size_t i = 0; i < report->process_count; i++)
        free_leaks(report->processes[i].owned_exit_leaks);
    free(report->processes);
    free_leaks(report->owned_exit_leaks);
    free(report->used_suppressions);
    free_case_data(report);
    memset(report, 0, sizeof *report);
}

const char *report_process_name(const struct trace_model_process *process)
{
    if (process->info.argc > 0 && *process->info.argv[0])
        return base_name(process->info.argv[0]);
    if (*process->info.exe)
        return base_name(process->info.exe);
    return "process";
}

uint64_t report_sample_rate(const struct report *report)
{
    return report->model->has_info ? report->model->info.sample_rate : 0;
}

const char *report_estimate_mark(const struct report *report)
{
    return report_sample_rate(report) ? "~" : "";
}

const char *report_python_allocator(const struct trace_python *python)
{
    switch (python->allocator) {
    case TRACE_PYTHON_WRAPPED: return "pymalloc-wrapped";
    case TRACE_PYTHON_MALLOC: return "malloc";
    case TRACE_PYTHON_UNRECORDED: return "user";
    case TRACE_PYTHON_NOT_WRAPPED: return "unwrapped";
    default: return "unknown";
    }
}

int report_python_objects_recorded(const struct trace_python *python)
{
    return python->allocator == TRACE_PYTHON_WRAPPED || python->allocator == TRACE_PYTHON_MALLOC;
}

int report_compare_loss_records(const void *left, const void *right)
{
    const struct trace_loss_record *a = *(const struct trace_loss_record *const *)left;
    const struct trace_loss_record *b = *(const struct trace_loss_record *const *)right;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? 1 : -1;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

const char *report_exit_text(const struct trace_model_process *process, char *buffer, size_t size)
{
    if (!process || !process->has_info)
        snprintf(buffer, size, "exit unknown");
    else if (process->info.flags & TRACE_PROC_SIGNALED)
        snprintf(buffer, size, "killed by signal %d (%s)", process->info.exit_signal,
                 strsignal(process->info.exit_signal));
    else if (process->info.flags & TRACE_PROC_EXITED)
        snprintf(buffer, size, "exited %d", process->info.exit_status);
    else if (process->info.flags & TRACE_PROC_EXECED)
        snprintf(buffer, size, "replaced by exec");
    else if (process->info.flags & TRACE_PROC_CHECKPOINT)
        snprintf(buffer, size, "still running at memslope's last checkpoint, %.1f s in",
                 (double)(process->info.end_ns - process->info.start_ns) / 1e9);
    else if (process->info.flags & TRACE_PROC_LET_GO)
        snprintf(buffer, size, "still running when the command ended, %.1f s in (let go of)",
                 (double)(process->info.end_ns - process->info.start_ns) / 1e9);
    else
        snprintf(buffer, size, "did not finish");
    return buffer;
}

const char *report_missing_leaks_reason(const struct report *report, const struct trace_model_process *process)
{
    if (report->model->has_info && report->model->info.leak_check == TRACE_LEAK_CHECK_OFF)
        return "recorded with --leak-check off";
    if (process && !(process->info.flags & TRACE_PROC_SHIM_SEEN))
        return "memslope's shim was not loaded into it, so nothing was recorded (its warnings in memslope report say why)";
    for (size_t i = 0; process && i < process->warning_count; i++)
        if (strncmp(process->warnings[i], "no leak check", 13) == 0)
            return process->warnings[i];
    if (report->model->incomplete)
        return "no leak check in what the trace holds: it was cut short";
    return "the trace holds no leak check for it";
}

const char *report_iteration_hint(const struct report *report)
{
    return report->primary && report->primary->has_python ? REPORT_ITERATION_HINT_PYTHON
                                                          : REPORT_ITERATION_HINT_NATIVE;
}

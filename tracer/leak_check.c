/* leak_check.c - see leak_check.h. */
#include "leak_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../leakscan/leakscan.h"

/* A scanned block with what the recorder knows of its allocation. */
struct checked_block {
    uint32_t case_id, stack_id, category;
    uint32_t iteration;
    uint64_t size;
    double weight; /* blocks it stands for in loss records (--sample-rate); 0: in none, only in totals */
};

static int compare_checked(const void *a, const void *b)
{
    const struct checked_block *x = a, *y = b;
    if (x->case_id != y->case_id)
        return x->case_id < y->case_id ? -1 : 1;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return x->category < y->category ? -1 : x->category > y->category;
}

/* Loss records of the blocks in [first, last) (sorted by stack, category).
 * The category totals count every block exactly; with --sample-rate a
 * record's figures are its sampled blocks scaled by their weights. */
static int build_check(const struct checked_block *blocks, size_t first, size_t last, struct trace_leaks *check)
{
    struct trace_loss_record *records = calloc(last - first + 1, sizeof *records);
    double *scaled = calloc(2 * (last - first + 1), sizeof *scaled); /* bytes, blocks per record */
    if (!records || !scaled) {
        free(records);
        free(scaled);
        return -1;
    }
    uint32_t count = 0;
    int any_scaled = 0;
    for (size_t i = first; i < last; i++) {
        const struct checked_block *block = &blocks[i];
        check->bytes[block->category] += block->size;
        check->blocks[block->category]++;
        if (block->weight == 0)
            continue;
        struct trace_loss_record *record = count ? &records[count - 1] : NULL;
        if (!record || record->stack_id != block->stack_id || record->category != block->category) {
            record = &records[count++];
            record->stack_id = block->stack_id;
            record->category = block->category;
            record->first_iteration = block->iteration;
        }
        record->bytes += block->size; /* exact sums, kept when nothing is scaled */
        record->blocks++;
        scaled[2 * (count - 1)] += block->weight * (double)block->size;
        scaled[2 * (count - 1) + 1] += block->weight;
        any_scaled |= block->weight != 1.0;
        if (block->iteration < record->first_iteration)
            record->first_iteration = block->iteration;
    }
    for (uint32_t r = 0; any_scaled && r < count; r++) {
        records[r].bytes = scaled[2 * r] > 0 ? (uint64_t)llround(scaled[2 * r]) : 0;
        records[r].blocks = scaled[2 * r + 1] > 0 ? (uint64_t)llround(scaled[2 * r + 1]) : 0;
    }
    free(scaled);
    /* Room was made for a record per block; the check keeps them until
     * the trace is written. */
    struct trace_loss_record *fitted = realloc(records, ((size_t)count + 1) * sizeof *records);
    check->records = fitted ? fitted : records;
    check->count = count;
    return 0;
}

/* One check of the open case's blocks (at its end, or at an iteration). */
static int check_open_case(struct checked_block *blocks, size_t count, const struct recorder *recorder,
                           uint32_t when, uint64_t time_ns, struct leak_results *results)
{
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (blocks[i].case_id == recorder->open_case)
            blocks[kept++] = blocks[i];
    qsort(blocks, kept, sizeof *blocks, compare_checked);
    results->checks = calloc(1, sizeof *results->checks);
    if (!results->checks)
        return -1;
    results->count = 1;
    results->checks[0].case_id = recorder->open_case;
    results->checks[0].when = when;
    results->checks[0].time_ns = time_ns;
    results->checks[0].iteration = recorder->iteration;
    return build_check(blocks, 0, kept, &results->checks[0]);
}

/* Orders blocks by stack and category only: the whole image's records. */
static int compare_checked_by_stack(const void *a, const void *b)
{
    const struct checked_block *x = a, *y = b;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return x->category < y->category ? -1 : x->category > y->category;
}

static int group_by_case(struct checked_block *blocks, size_t count, uint32_t when, uint64_t time_ns,
                         const unsigned char *skip_cases, size_t skip_count, struct leak_results *results)
{
    /* Cases checked at their own end keep that check. */
    for (size_t i = 0; i < count; i++) {
        uint32_t c = blocks[i].case_id;
        if (c != TRACE_NONE && skip_cases && c < skip_count && skip_cases[c])
            blocks[i].case_id = TRACE_NONE - 1; /* in the whole-image check only */
    }
    qsort(blocks, count, sizeof *blocks, compare_checked);
    size_t cases = 0;
    for (size_t i = 0; i < count; i++)
        cases += blocks[i].case_id < TRACE_NONE - 1 && (i == 0 || blocks[i].case_id != blocks[i - 1].case_id);
    results->checks = calloc(cases + 1, sizeof *results->checks);
    if (!results->checks)
        return -1;
    for (size_t i = 0; i <= cases; i++) {
        results->checks[i].case_id = TRACE_NONE;
        results->checks[i].when = when;
        results->checks[i].time_ns = time_ns;
    }
    results->count = cases + 1;
    int rc = 0;
    size_t c = 1;
    for (size_t first = 0; rc == 0 && first < count;) {
        size_t last = first;
        while (last < count && blocks[last].case_id == blocks[first].case_id)
            last++;
        if (blocks[first].case_id < TRACE_NONE - 1) {
            results->checks[c].case_id = blocks[first].case_id;
            rc = build_check(blocks, first, last, &results->checks[c++]);
        }
        first = last;
    }
    /* The whole image: every block, regrouped by stack in place rather than
     * in a sorted copy (32 bytes a block). glibc's qsort is a stable merge
     * sort, so a record's blocks keep the order the copy gave them. */
    qsort(blocks, count, sizeof *blocks, compare_checked_by_stack);
    return rc == 0 ? build_check(blocks, 0, count, &results->checks[0]) : rc;
}

/* Where the scan reads the process: stopped under ptrace (tids), or
 * through what it handed over (handover, no-ptrace mode). */
struct scan_source {
    pid_t pid;
    const pid_t *tids;
    size_t tid_count;
    const struct leakscan_handover *handover;
    const struct leakscan_shim_memory *shim;
};

static int scan(const struct scan_source *source, struct leakscan_block *blocks, size_t count,
                struct leakscan_totals *totals, char *err, size_t err_size)
{
    if (source->handover)
        return leakscan_process_handover(source->pid, source->handover, blocks, count, totals, NULL, err, err_size);
    return leakscan_process_ex(source->pid, source->tids, source->tid_count, source->shim, blocks, count, totals,
                               NULL, err, err_size);
}

/* The scan's view of the live blocks: address and size, and in stack_id
 * the block's position in the live table's walk. */
struct leakscan_block *leak_check_blocks(const struct recorder *recorder, size_t *count)
{
    struct leakscan_block *blocks = calloc(recorder->live.count + 1, sizeof *blocks);
    size_t n = 0, position = 0;
    struct live_block block;
    while (blocks && live_table_next(&recorder->live, &position, &block)) {
        blocks[n] = (struct leakscan_block){block.address, block.size, (uint32_t)n, 0};
        n++;
    }
    *count = n;
    return blocks;
}

/* What the recorder knows of each scanned block, with the category the
 * scan gave it. Built after the scan, so that the scan does not run with
 * this array held too (32 bytes a block; docs/performance.md). */
static struct checked_block *checked_blocks(const struct recorder *recorder, const struct leakscan_block *scanned,
                                            size_t count)
{
    struct checked_block *checked = calloc(count + 1, sizeof *checked);
    size_t n = 0, position = 0;
    struct live_block block;
    while (checked && n < count && live_table_next(&recorder->live, &position, &block)) {
        const struct recorder_site *site = &recorder->sites[block.site];
        double weight = !recorder_site_shown(site) ? 0 : recorder_sample_weight(recorder->sample_rate, block.size);
        checked[n++] = (struct checked_block){block.case_id, site->stack_id, 0, block.iteration, block.size, weight};
    }
    /* stack_id carried our index through the scan, whatever order it used. */
    for (size_t i = 0; checked && i < count; i++)
        if (scanned[i].stack_id < n)
            checked[scanned[i].stack_id].category = scanned[i].category;
    return checked;
}

int leak_check_results(const struct recorder *recorder, const struct leakscan_block *scanned, size_t count,
                       uint32_t when, uint64_t time_ns, const unsigned char *skip_cases, size_t skip_count,
                       struct leak_results *results)
{
    memset(results, 0, sizeof *results);
    struct checked_block *checked = checked_blocks(recorder, scanned, count);
    int rc = -1;
    if (checked && (when == TRACE_SNAP_CASE_END || when == TRACE_SNAP_ITERATION))
        rc = check_open_case(checked, count, recorder, when, time_ns, results);
    else if (checked)
        rc = group_by_case(checked, count, when, time_ns, skip_cases, skip_count, results);
    free(checked);
    if (rc < 0)
        leak_results_free(results);
    return rc;
}

static int run_check(const struct scan_source *source, const struct recorder *recorder, uint32_t when,
                     uint64_t time_ns, const unsigned char *skip_cases, size_t skip_count,
                     struct leak_results *results, char *err, size_t err_size)
{
    memset(results, 0, sizeof *results);
    size_t n = 0;
    struct leakscan_block *blocks = leak_check_blocks(recorder, &n);
    if (!blocks) {
        snprintf(err, err_size, "out of memory for %zu blocks", recorder->live.count);
        return -1;
    }
    struct leakscan_totals totals;
    int rc = scan(source, blocks, n, &totals, err, err_size);
    if (rc == 0 && (rc = leak_check_results(recorder, blocks, n, when, time_ns, skip_cases, skip_count, results)) < 0)
        snprintf(err, err_size, "out of memory grouping %zu blocks", n);
    free(blocks);
    return rc;
}

int leak_check_run(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                   const struct recorder *recorder, uint32_t when, uint64_t time_ns, const unsigned char *skip_cases,
                   size_t skip_count, struct leak_results *results, char *err, size_t err_size)
{
    struct scan_source source = {pid, tids, tid_count, NULL, shim};
    return run_check(&source, recorder, when, time_ns, skip_cases, skip_count, results, err, err_size);
}

int leak_check_run_handover(pid_t pid, const struct leakscan_handover *handover, const struct recorder *recorder,
                            uint64_t time_ns, struct leak_results *results, char *err, size_t err_size)
{
    struct scan_source source = {pid, NULL, 0, handover, handover->shim};
    return run_check(&source, recorder, TRACE_SNAP_EXIT, time_ns, NULL, 0, results, err, err_size);
}

void leak_results_free(struct leak_results *results)
{
    for (size_t i = 0; i < results->count; i++)
        free((void *)results->checks[i].records);
    free(results->checks);
    memset(results, 0, sizeof *results);
}

int leak_results_append(struct leak_results *results, struct leak_results *more)
{
    struct trace_leaks *grown = realloc(results->checks, (results->count + more->count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    memcpy(grown + results->count, more->checks, more->count * sizeof *grown);
    results->checks = grown;
    results->count += more->count;
    free(more->checks);
    memset(more, 0, sizeof *more);
    return 0;
}

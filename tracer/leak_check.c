/* leak_check.c - see leak_check.h. */
#include "leak_check.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "../common/huge_pages.h"
#include "../leakscan/leakscan.h"

/* A loss record being summed: the blocks of one stack and category in
 * one check. */
struct record_sum {
    struct record_key {
        uint32_t check; /* 0: the whole image (or the open case); case c: c + 1 */
        uint32_t stack_id, category;
    } key;
    struct trace_loss_record record;
    double scaled_bytes, scaled_blocks; /* with --sample-rate: what the blocks stand for */
    UT_hash_handle hh;
};

/* A check's totals (every block, exactly) while its records are summed. */
struct check_sum {
    uint32_t check; /* as record_key.check */
    uint64_t bytes[TRACE_LEAK_CATEGORIES], blocks[TRACE_LEAK_CATEGORIES];
    int any_scaled; /* a record's blocks weigh other than 1: records hold the scaled sums */
    UT_hash_handle hh;
};

/* Records found by key without hashing it with uthash's function: the
 * blocks of a check come in the live table's order, so consecutive ones
 * rarely share a record, and a HASH_FIND a block was most of the summing
 * of issue 14's driver (its exit check added 420,000 blocks; 147
 * instructions a block, callgrind). A slot holds the record its key last
 * found; a record is still found in the uthash table when its slot holds
 * another. */
#define RECORD_CACHE_SLOTS 4096u /* power of two */

/* The sums of one leak check run, built block by block. */
struct aggregation {
    struct record_sum *records;
    struct check_sum *checks;
    size_t record_count, check_count;
    struct check_sum *last_check; /* blocks of one case tend to come together */
    struct record_sum *record_cache[RECORD_CACHE_SLOTS];
};

static inline struct record_sum **record_cache_slot(struct aggregation *a, const struct record_key *key)
{
    uint64_t mixed = ((uint64_t)key->check << 40 ^ (uint64_t)key->stack_id << 8 ^ key->category) *
                     0x9e3779b97f4a7c15ull;
    return &a->record_cache[mixed >> 52 & (RECORD_CACHE_SLOTS - 1)];
}

static inline bool record_key_equal(const struct record_key *x, const struct record_key *y)
{
    return x->check == y->check && x->stack_id == y->stack_id && x->category == y->category;
}

static struct check_sum *check_sum_find(struct aggregation *a, uint32_t check)
{
    struct check_sum *sum;
    HASH_FIND(hh, a->checks, &check, sizeof check, sum);
    if (!sum) {
        if (!(sum = calloc(1, sizeof *sum)))
            return NULL;
        sum->check = check;
        HASH_ADD(hh, a->checks, check, sizeof sum->check, sum);
        a->check_count++;
    }
    return a->last_check = sum;
}

static inline struct check_sum *check_sum_for(struct aggregation *a, uint32_t check)
{
    if (a->last_check && a->last_check->check == check)
        return a->last_check;
    return check_sum_find(a, check);
}

/* Adds one block to a check: its totals, and its loss record unless the
 * block stands for nothing there (weight 0: an unsampled one). Inlined
 * into its three callers: it runs once a block of every check. */
static inline __attribute__((always_inline)) int add_block(struct aggregation *a, uint32_t check,
                                                           const struct live_block *block, uint32_t stack_id,
                                                           uint32_t category, double weight)
{
    struct check_sum *sum = check_sum_for(a, check);
    if (!sum)
        return -1;
    sum->bytes[category] += block->size;
    sum->blocks[category]++;
    if (weight == 0)
        return 0;
    struct record_key key = {check, stack_id, category};
    struct record_sum **cached = record_cache_slot(a, &key), *record = *cached;
    if (!record || !record_key_equal(&record->key, &key))
        HASH_FIND(hh, a->records, &key, sizeof key, record);
    if (!record) {
        if (!(record = calloc(1, sizeof *record)))
            return -1;
        record->key = key;
        record->record = (struct trace_loss_record){stack_id, category, 0, 0, block->iteration};
        HASH_ADD(hh, a->records, key, sizeof record->key, record);
        a->record_count++;
    }
    *cached = record;
    record->record.bytes += block->size; /* exact sums, kept when nothing is scaled */
    record->record.blocks++;
    record->scaled_bytes += weight * (double)block->size;
    record->scaled_blocks += weight;
    sum->any_scaled |= weight != 1.0;
    if (block->iteration < record->record.first_iteration)
        record->record.first_iteration = block->iteration;
    return 0;
}

static void free_aggregation(struct aggregation *a)
{
    struct record_sum *record, *next_record;
    HASH_ITER(hh, a->records, record, next_record) {
        HASH_DEL(a->records, record);
        free(record);
    }
    struct check_sum *sum, *next_sum;
    HASH_ITER(hh, a->checks, sum, next_sum) {
        HASH_DEL(a->checks, sum);
        free(sum);
    }
}

static int compare_records(const void *a, const void *b)
{
    const struct record_sum *x = *(struct record_sum *const *)a, *y = *(struct record_sum *const *)b;
    if (x->key.check != y->key.check)
        return x->key.check < y->key.check ? -1 : 1;
    if (x->key.stack_id != y->key.stack_id)
        return x->key.stack_id < y->key.stack_id ? -1 : 1;
    return x->key.category < y->key.category ? -1 : x->key.category > y->key.category;
}

static int compare_checks(const void *a, const void *b)
{
    const struct check_sum *x = *(struct check_sum *const *)a, *y = *(struct check_sum *const *)b;
    return x->check < y->check ? -1 : x->check > y->check;
}

/* Fills check with its totals and its records, sorted[first, last) (of
 * this check, by stack and category). */
static int fill_check(const struct check_sum *sum, struct record_sum *const *sorted, size_t first, size_t last,
                      struct trace_leaks *check)
{
    struct trace_loss_record *records = calloc(last - first + 1, sizeof *records);
    if (!records)
        return -1;
    for (size_t r = first; r < last; r++) {
        records[r - first] = sorted[r]->record;
        if (sum->any_scaled) {
            records[r - first].bytes = sorted[r]->scaled_bytes > 0 ? (uint64_t)llround(sorted[r]->scaled_bytes) : 0;
            records[r - first].blocks = sorted[r]->scaled_blocks > 0 ? (uint64_t)llround(sorted[r]->scaled_blocks) : 0;
        }
    }
    memcpy(check->bytes, sum->bytes, sizeof check->bytes);
    memcpy(check->blocks, sum->blocks, sizeof check->blocks);
    check->records = records;
    check->count = (uint32_t)(last - first);
    return 0;
}

/* The checks in order (the first always, then the cases that had blocks,
 * by case id), each with its records sorted by stack and category. */
static int build_checks(struct aggregation *a, uint32_t when, uint64_t time_ns, uint32_t first_case,
                        uint64_t first_iteration, struct leak_results *results)
{
    struct record_sum **records = malloc((a->record_count + 1) * sizeof *records);
    struct check_sum **checks = malloc((a->check_count + 1) * sizeof *checks);
    int rc = -1;
    if (!records || !checks || check_sum_for(a, 0) == NULL)
        goto out;
    size_t n = 0;
    for (struct record_sum *r = a->records; r; r = r->hh.next)
        records[n++] = r;
    qsort(records, n, sizeof *records, compare_records);
    size_t c = 0;
    for (struct check_sum *sum = a->checks; sum; sum = sum->hh.next)
        checks[c++] = sum;
    qsort(checks, c, sizeof *checks, compare_checks);
    if (!(results->checks = calloc(c + 1, sizeof *results->checks)))
        goto out;
    results->count = c;
    size_t first = 0;
    rc = 0;
    for (size_t i = 0; rc == 0 && i < c; i++) {
        size_t last = first;
        while (last < n && records[last]->key.check == checks[i]->check)
            last++;
        struct trace_leaks *check = &results->checks[i];
        check->case_id = i == 0 ? first_case : checks[i]->check - 1;
        check->when = when;
        check->time_ns = time_ns;
        check->iteration = i == 0 ? first_iteration : 0;
        rc = fill_check(checks[i], records, first, last, check);
        first = last;
    }
out:
    free(records);
    free(checks);
    return rc;
}

/* The checks of the blocks whose categories the scan found: walks the
 * live table again in the order the scan's blocks were taken. */
static int aggregate(const struct recorder *recorder, const uint8_t *categories, size_t count, int open_case_only,
                     const unsigned char *skip_cases, size_t skip_count, struct aggregation *a)
{
    size_t n = 0, position = 0;
    struct live_block block;
    while (n < count && live_table_next(&recorder->live, &position, &block)) {
        uint32_t category = categories[n++];
        uint32_t c = block.case_id;
        if (open_case_only && c != recorder->open_case)
            continue; /* before the site is looked at: most blocks at a late case's end are older */
        const struct recorder_site *site = &recorder->sites[block.site];
        double weight = !recorder_site_shown(site) ? 0 : recorder_sample_weight(recorder->sample_rate, block.size);
        if (open_case_only) {
            if (add_block(a, 0, &block, site->stack_id, category, weight) < 0)
                return -1;
            continue;
        }
        if (add_block(a, 0, &block, site->stack_id, category, weight) < 0)
            return -1;
        /* Cases checked at their own end keep that check. */
        int own_check = c != TRACE_NONE && !(skip_cases && c < skip_count && skip_cases[c]);
        if (own_check && add_block(a, c + 1, &block, site->stack_id, category, weight) < 0)
            return -1;
    }
    return 0;
}

/* Where the scan reads the process: stopped under ptrace (tids), or
 * through what it handed over (handover, no-ptrace mode). */
struct scan_source {
    pid_t pid;
    const pid_t *tids;
    size_t tid_count;
    const struct leakscan_handover *handover;
    const struct leakscan_shim_memory *shim;
    uint64_t copy_limit; /* copy what the scan reads first, up to this (0: in place) */
    struct leak_check_spare *spare; /* for the copy and the list, and what they were after */
};

/* An open case's block as it was when the check began (the live table
 * moves on while the scan runs): what add_block reads, and where the
 * scan's list has it (its category). 24 bytes, where the whole live_block
 * and the position took 40: one for each of the case's blocks, faulted in
 * at the first check (issue 14's driver: 376,000 blocks, 15 MB then). */
struct pending_block {
    uint64_t size;
    uint32_t site, iteration;
    uint32_t position;
};

/* Readying a spare for the next check (leak_check_spare_ready). */
#define READY_MIN_BLOCKS 1024u /* lists never readied for fewer */
#define READY_COPY_MIN_BLOCKS 65536u /* the copy's buffer never readied for fewer (ready_copy) */
#define READY_COPY_STEP_PAGES 16u    /* pages the copy's buffer grows by a page it writes (ready_copy) */

static void free_lists(struct check_lists *lists)
{
    leakscan_buffer_free(&lists->blocks);
    leakscan_buffer_free(&lists->open);
    leakscan_buffer_free(&lists->scratch);
    lists->capacity = 0;
}

void leak_check_spare_free(struct leak_check_spare *spare)
{
    leakscan_buffer_free(&spare->copy);
    free_lists(&spare->lists);
}

/* Room in lists for capacity blocks, what they held kept in place: 0, or
 * -1 when out of memory (the lists as they were, one of them larger).
 * with_scratch: a scratch for the blocks' sort as well, where the sort
 * would use it (a copy is taken, enough blocks); a scratch that cannot be
 * had leaves the sort in place, not the check undone. */
static int grow_lists(struct check_lists *lists, size_t capacity, int with_scratch)
{
    if (capacity <= lists->capacity)
        return 0;
    if (capacity > SIZE_MAX / sizeof(struct leakscan_block) || capacity > SIZE_MAX / sizeof(struct pending_block))
        return -1;
    if (leakscan_buffer_grow(&lists->blocks, capacity * sizeof(struct leakscan_block)) < 0 ||
        leakscan_buffer_grow(&lists->open, capacity * sizeof(struct pending_block)) < 0)
        return -1;
    lists->capacity = capacity;
    if (with_scratch && capacity >= LEAKSCAN_SORT_SCRATCH_MIN_BLOCKS &&
        leakscan_buffer_grow(&lists->scratch, capacity * sizeof(struct leakscan_block)) < 0)
        leakscan_buffer_free(&lists->scratch);
    return 0;
}

/* Lists for needed blocks: spare's, grown if they hold fewer (with room
 * for the heap to grow by half before the next check takes them); spare
 * is left without. with_scratch: as grow_lists'. 0, or -1 when out of
 * memory. */
static int take_lists(struct leak_check_spare *spare, size_t needed, struct check_lists *lists, int with_scratch)
{
    *lists = (struct check_lists){0};
    if (spare) {
        *lists = spare->lists;
        spare->lists = (struct check_lists){0};
    }
    if (lists->capacity >= needed || grow_lists(lists, needed + needed / 2, with_scratch) == 0)
        return 0;
    free_lists(lists);
    return -1;
}

/* Gives lists back: spare keeps the larger ones. */
static void keep_lists(struct leak_check_spare *spare, struct check_lists *lists)
{
    if (spare && lists->capacity > spare->lists.capacity) {
        struct check_lists smaller = spare->lists;
        spare->lists = *lists;
        *lists = smaller;
    }
    free_lists(lists);
}

static struct leakscan_block *list_of_blocks(const struct check_lists *lists)
{
    return (struct leakscan_block *)lists->blocks.bytes;
}

static struct pending_block *list_of_open(const struct check_lists *lists)
{
    return (struct pending_block *)lists->open.bytes;
}

static struct leakscan_block *list_of_scratch(const struct check_lists *lists)
{
    return (struct leakscan_block *)lists->scratch.bytes;
}

/* The copy's buffer, for a copy of the heap as the recorder has it: its
 * live bytes and 16 a block (glibc's header and rounding; issue 14's
 * driver's copies were 1.03-1.06 of that), with a quarter more room,
 * grown when less than an eighth is left; none when that passes the copy's
 * limit (the check will scan in place). Only for a heap of
 * READY_COPY_MIN_BLOCKS or more: the buffer is a bet that a check comes
 * while the heap is that large, and a program that frees its blocks
 * before it exits loses it (malloc_bench -t 1, 4,096 blocks: 7% more
 * CPU, 1.6 MiB more peak, for an exit check with nothing to copy); a
 * Python process holds tens of thousands of objects to its end. Pages
 * left to write: 0 or 1. */
static int ready_copy(struct leak_check_spare *spare, const struct recorder *recorder, uint64_t copy_limit,
                      size_t pages)
{
    uint64_t expected = recorder->live_bytes + 16 * (uint64_t)recorder->live.count;
    if (recorder->live.count < READY_COPY_MIN_BLOCKS)
        return 0;
    if (expected > copy_limit - copy_limit / 8) {
        leakscan_buffer_free(&spare->copy); /* the check will scan in place: nothing to keep it for */
        return 0;
    }
    if (spare->copy.size < expected + expected / 8) {
        /* Grown a step at a time too: growing populates what it adds in
         * one call (0.5-0.8 us a page here), which the drain waits for; a
         * step of READY_COPY_STEP_PAGES a page written (16 MiB for 256
         * pages, 2-3 ms) reaches a 25 MB heap in two calls (four times
         * the pages left the driver's first check with 8-13 of its 21 MB
         * grown) and a 250 MB one without a 120 ms lump. A buffer that
         * would leave its reservation is not grown here (the move
         * populates all of it at once): the check grows it. */
        uint64_t size = expected + expected / 4;
        uint64_t step = spare->copy.size + READY_COPY_STEP_PAGES * (uint64_t)pages * LEAKSCAN_BUFFER_PAGE;
        size = size < step ? size : step;
        /* growth rounds to whole huge pages (leakscan/buffer.c): a size
         * rounded past the limit would be let go of at the check */
        uint64_t cap = copy_limit >= HUGE_PAGE_BYTES ? copy_limit & ~(uint64_t)(HUGE_PAGE_BYTES - 1) : copy_limit;
        size = size < cap ? size : cap;
        if ((spare->copy.bytes && size > spare->copy.reserved) || leakscan_buffer_grow(&spare->copy, size) < 0)
            return 0;
    }
    return leakscan_buffer_copy_ahead(&spare->copy, pages) || spare->copy.size < expected + expected / 8;
}

/* Writes up to pages pages of list ahead; returns how many it wrote (never
 * more than pages), *left set when some remain. */
static size_t write_list_ahead(struct leakscan_buffer *list, size_t pages, int *left)
{
    size_t before = list->written / LEAKSCAN_BUFFER_PAGE;
    *left |= leakscan_buffer_write_ahead(list, pages);
    return list->written / LEAKSCAN_BUFFER_PAGE - before;
}

int leak_check_spare_ready(struct leak_check_spare *spare, const struct recorder *recorder, uint64_t copy_limit,
                           size_t pages)
{
    /* Room for a quarter more blocks than now (a case that adds a sixth to
     * the heap while the last check is classified leaves no drain to grow
     * them in), grown when less than an eighth more is left: a list's
     * pages are all in, where a check's own lists had only those it wrote
     * (2,000,000 blocks: a peak 41 MB higher with room for half more). */
    size_t count = recorder->live.count;
    if (spare->lists.capacity < count + count / 8 + READY_MIN_BLOCKS &&
        grow_lists(&spare->lists, count + count / 4 + READY_MIN_BLOCKS, 1) < 0)
        return 0;
    int left = 0;
    size_t wrote = write_list_ahead(&spare->lists.blocks, pages, &left);
    wrote += write_list_ahead(&spare->lists.open, pages - wrote, &left);
    wrote += write_list_ahead(&spare->lists.scratch, pages - wrote, &left);
    return ready_copy(spare, recorder, copy_limit, pages - wrote) || left;
}

/* The blocks sorted on a thread of their own while the snapshot's copy is
 * taken (the copy does not read them): the sort is a third of a check's
 * classification (12-17 ms for issue 14's driver's 420,000 blocks, in hash
 * order from the live table), and the copy holds the program for 5-30 ms
 * with a processor idle. block_sort_wait returns once they are sorted
 * (sorted by the caller if no thread was started). It may be called again
 * from another thread when a thread creation orders the two calls (the
 * hook during the take, then the classification's thread). A short list
 * is sorted by the waiter: a thread costs more than its sort. */
struct block_sort {
    pthread_t thread;
    struct leakscan_block *blocks, *scratch; /* scratch: the lists' (NULL: sorted in place) */
    size_t count;
    int running;
};

static void *sort_blocks(void *arg)
{
    struct block_sort *sort = arg;
    leakscan_sort_blocks_through(sort->blocks, sort->count, sort->scratch);
    return NULL;
}

#define SORT_THREAD_MIN_BLOCKS 16384u /* sorted in ~0.3 ms: less than a thread's start */

/* The scratch of lists if it holds count blocks, else NULL. */
static struct leakscan_block *scratch_for(const struct check_lists *lists, size_t count)
{
    return lists->scratch.size >= count * sizeof(struct leakscan_block) ? list_of_scratch(lists) : NULL;
}

static void block_sort_start(struct block_sort *sort, struct leakscan_block *blocks, size_t count,
                             struct leakscan_block *scratch)
{
    *sort = (struct block_sort){.blocks = blocks, .scratch = scratch, .count = count};
    sort->running = count >= SORT_THREAD_MIN_BLOCKS && pthread_create(&sort->thread, NULL, sort_blocks, sort) == 0;
}

static void block_sort_wait(void *arg)
{
    struct block_sort *sort = arg;
    if (sort->running)
        pthread_join(sort->thread, NULL);
    else
        leakscan_sort_blocks_through(sort->blocks, sort->count, sort->scratch);
    sort->running = 0;
    sort->count = 0; /* sorted: nothing left to do */
}

/* A copy of what the scan reads, then the classification from it: one
 * read of each range instead of a read per batch (issue 14's driver's
 * exit check: medians 89 against 108 ms in place). 1: the copy would
 * exceed the limit. */
static int scan_copy(const struct scan_source *source, struct leakscan_block *blocks, size_t count,
                     struct leakscan_block *scratch, struct leakscan_totals *totals, char *err, size_t err_size)
{
    struct leakscan_snapshot *snapshot;
    struct block_sort sort;
    block_sort_start(&sort, blocks, count, scratch);
    int rc = leakscan_snapshot_take(source->pid, source->tids, source->tid_count, source->shim, blocks, count,
                                    block_sort_wait, &sort, source->copy_limit,
                                    source->spare ? &source->spare->copy : NULL, &snapshot, err, err_size);
    block_sort_wait(&sort);
    if (rc != 0)
        return rc;
    rc = leakscan_snapshot_classify(snapshot, totals, NULL, err, err_size);
    if (source->spare)
        leakscan_snapshot_release(snapshot, &source->spare->copy);
    leakscan_snapshot_free(snapshot);
    return rc;
}

/* scratch: NULL, or room for count blocks that their sort may write over. */
static int scan(const struct scan_source *source, struct leakscan_block *blocks, size_t count,
                struct leakscan_block *scratch, struct leakscan_totals *totals, char *err, size_t err_size)
{
    /* No live block, nothing to lose: the scan's reading of maps, smaps,
     * registers and roots (3-4 ms for python3 -c pass, whose heap is empty
     * at exit) would find what is known already, while the image waits. */
    if (count == 0) {
        memset(totals, 0, sizeof *totals);
        return 0;
    }
    if (source->handover)
        return leakscan_process_handover(source->pid, source->handover, blocks, count, totals, NULL, err, err_size);
    int rc = source->copy_limit ? scan_copy(source, blocks, count, scratch, totals, err, err_size) : 1;
    if (rc != 1)
        return rc;
    return leakscan_process_ex(source->pid, source->tids, source->tid_count, source->shim, blocks, count, totals,
                               NULL, err, err_size);
}

/* The scan's view of the live blocks: address and size, and in stack_id
 * the block's position in the live table's walk. */
/* Up to capacity live blocks into blocks, as the scan takes them; with
 * open, the open case's blocks apart as well (*open_count of them).
 * Returns how many were listed. */
static size_t list_blocks(const struct recorder *recorder, struct leakscan_block *blocks, size_t capacity,
                          struct pending_block *open, size_t *open_count)
{
    size_t n = 0, position = 0;
    struct live_block block;
    while (n < capacity && live_table_next(&recorder->live, &position, &block)) {
        blocks[n] = (struct leakscan_block){block.address, block.size, (uint32_t)n, 0};
        if (open && block.case_id == recorder->open_case)
            open[(*open_count)++] = (struct pending_block){block.size, block.site, block.iteration, (uint32_t)n};
        n++;
    }
    return n;
}

struct leakscan_block *leak_check_blocks(const struct recorder *recorder, size_t *count)
{
    size_t capacity = recorder->live.count + 1;
    struct leakscan_block *blocks = malloc(capacity * sizeof *blocks);
    *count = blocks ? list_blocks(recorder, blocks, capacity, NULL, NULL) : 0;
    return blocks;
}

/* Each block's category by its position in the walk: stack_id carried
 * that position through the scan, whatever order the scan left them in. */
static uint8_t *categories_by_position(const struct leakscan_block *scanned, size_t count)
{
    uint8_t *categories = calloc(count + 1, 1);
    for (size_t i = 0; categories && i < count; i++)
        if (scanned[i].stack_id < count && scanned[i].category < TRACE_LEAK_CATEGORIES)
            categories[scanned[i].stack_id] = (uint8_t)scanned[i].category;
    return categories;
}

static int results_of(const struct recorder *recorder, const uint8_t *categories, size_t count, uint32_t when,
                      uint64_t time_ns, const unsigned char *skip_cases, size_t skip_count,
                      struct leak_results *results)
{
    memset(results, 0, sizeof *results);
    int open_case_only = when == TRACE_SNAP_CASE_END || when == TRACE_SNAP_ITERATION;
    struct aggregation a = {0};
    int rc = aggregate(recorder, categories, count, open_case_only, skip_cases, skip_count, &a);
    if (rc == 0)
        rc = open_case_only ? build_checks(&a, when, time_ns, recorder->open_case, recorder->iteration, results)
                            : build_checks(&a, when, time_ns, TRACE_NONE, 0, results);
    free_aggregation(&a);
    if (rc < 0)
        leak_results_free(results);
    return rc;
}

int leak_check_results(const struct recorder *recorder, const struct leakscan_block *scanned, size_t count,
                       uint32_t when, uint64_t time_ns, const unsigned char *skip_cases, size_t skip_count,
                       struct leak_results *results)
{
    memset(results, 0, sizeof *results);
    uint8_t *categories = categories_by_position(scanned, count);
    if (!categories)
        return -1;
    int rc = results_of(recorder, categories, count, when, time_ns, skip_cases, skip_count, results);
    free(categories);
    return rc;
}

static int run_check(const struct scan_source *source, const struct recorder *recorder, uint32_t when,
                     uint64_t time_ns, const unsigned char *skip_cases, size_t skip_count,
                     struct leak_results *results, char *err, size_t err_size)
{
    memset(results, 0, sizeof *results);
    struct check_lists lists; /* the open case's list not filled here: kept for the next case check */
    /* the scan sorts through the scratch only where it takes a copy */
    int with_scratch = !source->handover && source->copy_limit;
    if (take_lists(source->spare, recorder->live.count + 1, &lists, with_scratch) < 0) {
        snprintf(err, err_size, "out of memory for %zu blocks", recorder->live.count);
        return -1;
    }
    struct leakscan_block *blocks = list_of_blocks(&lists);
    size_t n = list_blocks(recorder, blocks, lists.capacity, NULL, NULL);
    struct leakscan_totals totals;
    int rc = scan(source, blocks, n, scratch_for(&lists, n), &totals, err, err_size);
    uint8_t *categories = rc == 0 ? categories_by_position(blocks, n) : NULL;
    keep_lists(source->spare, &lists);
    if (rc == 0 && (!categories ||
                    results_of(recorder, categories, n, when, time_ns, skip_cases, skip_count, results) < 0)) {
        snprintf(err, err_size, "out of memory grouping %zu blocks", n);
        rc = -1;
    }
    free(categories);
    return rc;
}

/* ---- a check classified on a thread of its own --------------------------- */

struct leak_check_pending {
    pthread_t thread;
    struct block_sort sort; /* the blocks', begun before the copy, waited for by the thread */
    struct leakscan_snapshot *snapshot;
    struct check_lists lists; /* every live block, scanned; the open case's, summed once classified */
    size_t count, open_count;
    uint32_t when, open_case;
    uint64_t iteration, time_ns;
    uint64_t copy_bytes; /* what the snapshot holds */
    struct leakscan_buffer buffer; /* the copy's, once classified: for the next copy */
    uint8_t *categories; /* by position: the thread's result */
    int rc, done;        /* done: atomic, set when the thread is finished */
    char err[512];
};

/* The scan's list of every live block, and the open case's blocks apart. */
static int list_pending_blocks(struct leak_check_pending *p, const struct recorder *recorder,
                               struct leak_check_spare *spare)
{
    if (take_lists(spare, recorder->live.count + 1, &p->lists, 1) < 0)
        return -1;
    p->count = list_blocks(recorder, list_of_blocks(&p->lists), p->lists.capacity, list_of_open(&p->lists),
                           &p->open_count);
    return 0;
}

static void *classify_pending(void *arg)
{
    struct leak_check_pending *p = arg;
    struct leakscan_totals totals;
    block_sort_wait(&p->sort);
    p->rc = leakscan_snapshot_classify(p->snapshot, &totals, NULL, p->err, sizeof p->err);
    leakscan_snapshot_release(p->snapshot, &p->buffer);
    if (p->rc == 0 && !(p->categories = categories_by_position(list_of_blocks(&p->lists), p->count))) {
        snprintf(p->err, sizeof p->err, "out of memory grouping %zu blocks", p->count);
        p->rc = -1;
    }
    leakscan_snapshot_free(p->snapshot);
    p->snapshot = NULL;
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Frees pending, giving its buffer and lists to keep (may be NULL). */
static void free_pending(struct leak_check_pending *p, struct leak_check_spare *keep)
{
    leakscan_snapshot_free(p->snapshot);
    if (keep)
        leakscan_buffer_keep_larger(&keep->copy, &p->buffer);
    leakscan_buffer_free(&p->buffer);
    keep_lists(keep, &p->lists);
    free(p->categories);
    free(p);
}

int leak_check_start(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                     const struct recorder *recorder, uint32_t when, uint64_t time_ns, uint64_t byte_limit,
                     struct leak_check_spare *spare, struct leak_check_pending **pending, char *err,
                     size_t err_size)
{
    *pending = NULL;
    struct leak_check_pending *p = calloc(1, sizeof *p);
    if (!p || list_pending_blocks(p, recorder, spare) < 0) {
        snprintf(err, err_size, "out of memory for %zu blocks", recorder->live.count);
        if (p)
            free_pending(p, spare);
        return -1;
    }
    p->when = when;
    p->open_case = recorder->open_case;
    p->iteration = recorder->iteration;
    p->time_ns = time_ns;
    block_sort_start(&p->sort, list_of_blocks(&p->lists), p->count, scratch_for(&p->lists, p->count));
    int rc = leakscan_snapshot_take(pid, tids, tid_count, shim, list_of_blocks(&p->lists), p->count, block_sort_wait,
                                    &p->sort, byte_limit, spare ? &spare->copy : NULL, &p->snapshot, err, err_size);
    if (rc == 0)
        p->copy_bytes = leakscan_snapshot_bytes(p->snapshot);
    if (rc == 0 && (errno = pthread_create(&p->thread, NULL, classify_pending, p)) != 0) {
        snprintf(err, err_size, "cannot start the leak scan's thread: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        block_sort_wait(&p->sort); /* it writes into the lists given back */
        free_pending(p, spare);
        return rc;
    }
    *pending = p;
    return 0;
}

uint64_t leak_check_pending_bytes(const struct leak_check_pending *pending)
{
    return pending->copy_bytes;
}

int leak_check_pending_done(const struct leak_check_pending *pending)
{
    return __atomic_load_n(&pending->done, __ATOMIC_ACQUIRE);
}

/* The open case's check from its blocks as they were. */
static int sum_pending(const struct leak_check_pending *p, const struct recorder *recorder,
                       struct leak_results *results)
{
    struct aggregation a = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->open_count; i++) {
        const struct pending_block *pending = &list_of_open(&p->lists)[i];
        struct live_block block = {.size = pending->size, .site = pending->site, .iteration = pending->iteration};
        const struct recorder_site *site = &recorder->sites[block.site];
        double weight = !recorder_site_shown(site) ? 0 : recorder_sample_weight(recorder->sample_rate, block.size);
        rc = add_block(&a, 0, &block, site->stack_id, p->categories[pending->position], weight);
    }
    if (rc == 0)
        rc = build_checks(&a, p->when, p->time_ns, p->open_case, p->iteration, results);
    free_aggregation(&a);
    if (rc < 0)
        leak_results_free(results);
    return rc;
}

int leak_check_finish(struct leak_check_pending *pending, const struct recorder *recorder,
                      struct leak_check_spare *keep, struct leak_results *results, char *err, size_t err_size)
{
    memset(results, 0, sizeof *results);
    pthread_join(pending->thread, NULL);
    int rc = pending->rc;
    if (rc != 0)
        snprintf(err, err_size, "%s", pending->err);
    else if ((rc = sum_pending(pending, recorder, results)) < 0)
        snprintf(err, err_size, "out of memory grouping %zu blocks", pending->open_count);
    free_pending(pending, keep);
    return rc;
}

int leak_check_run(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                   const struct recorder *recorder, uint32_t when, uint64_t time_ns, const unsigned char *skip_cases,
                   size_t skip_count, uint64_t copy_limit, struct leak_check_spare *spare,
                   struct leak_results *results, char *err, size_t err_size)
{
    struct scan_source source = {pid, tids, tid_count, NULL, shim, copy_limit, spare};
    return run_check(&source, recorder, when, time_ns, skip_cases, skip_count, results, err, err_size);
}

int leak_check_run_handover(pid_t pid, const struct leakscan_handover *handover, const struct recorder *recorder,
                            uint64_t time_ns, struct leak_results *results, char *err, size_t err_size)
{
    struct scan_source source = {pid, NULL, 0, handover, handover->shim, 0, NULL};
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

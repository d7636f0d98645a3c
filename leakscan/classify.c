/*
 * classify.c - memcheck's leak classification on an abstract memory image
 * (see leakscan.h). The per-word lookup is the hot loop: one range check
 * rejects most words, then a direct table per region of blocks gives the
 * few blocks that overlap the word's 4 KiB granule, searched by bisection;
 * words go through in batches so that the cache misses overlap.
 */
#include "leakscan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT 12
#define REGION_GAP (1ull << 20) /* a gap this large between blocks starts a new region */
#define BATCH 128
#define PREFETCH_BYTES 2048               /* words resolved together, their loads prefetched */
#define CHUNK_BYTES (1u << 20) /* memory is read and scanned this much at a time */
#define NO_BLOCK UINT32_MAX
#define NO_CLIQUE UINT32_MAX

/* Reachedness, in memcheck's order of upgrades. */
enum state { UNREACHED = 0, POSSIBLE = 1, REACHABLE = 2, INDIRECT = 3 };
#define PENDING 0x80u
#define STATE(s, i) ((s)->state[i] & ~PENDING)

/* A run of blocks with small gaps, indexed by a direct table: first[k]
 * is the first block (sorted index) that ends after granule k's start, so
 * a word in granule k lies in one of blocks first[k] .. first[k + 1].
 * Granules are sized to hold about one block each. */
struct region {
    uint64_t start, end; /* granule-aligned */
    int shift;           /* log2 of the granule size */
    uint32_t *first;     /* granules + 1 entries */
};

/* A block's start and size side by side: one cache line for a lookup. */
struct extent {
    uint64_t start, size;
};

struct scan {
    const struct leakscan_memory *memory;
    size_t count;
    struct extent *blocks; /* sorted by address */
    uint32_t *order;  /* sorted index -> caller's index */
    uint8_t *state;   /* enum state, plus PENDING while on the mark stack */
    uint32_t *stack;
    size_t top;
    uint64_t low, span; /* every block lies in [low, low + span) */
    struct region *regions;
    size_t region_count;
    uint64_t *buffer;   /* CHUNK_BYTES scratch for reads */
    struct leakscan_stats stats;
    bool gone;          /* memory read failed for good */
};

static void set_error(char *err, size_t err_size, const char *format, ...)
{
    if (!err || err_size == 0)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(err, err_size, format, args);
    va_end(args);
}

const char *leakscan_category_name(uint32_t category)
{
    return trace_leak_category_name(category);
}

/* ---- the sorted index ---------------------------------------------------- */

/* qsort has no context argument; qsort_r does (glibc). */
static int compare_by_address(const void *a, const void *b, void *context)
{
    const struct leakscan_block *blocks = context;
    uint64_t x = blocks[*(const uint32_t *)a].address, y = blocks[*(const uint32_t *)b].address;
    return x < y ? -1 : x > y;
}

static int build_sorted(struct scan *s, const struct leakscan_block *blocks, char *err, size_t err_size)
{
    bool sorted = true;
    for (size_t i = 0; i < s->count; i++) {
        s->order[i] = (uint32_t)i;
        if (i > 0 && blocks[i - 1].address > blocks[i].address)
            sorted = false;
    }
    if (!sorted) /* the heap walk hands them over sorted already */
        qsort_r(s->order, s->count, sizeof *s->order, compare_by_address, (void *)blocks);
    for (size_t i = 0; i < s->count; i++) {
        s->blocks[i].start = blocks[s->order[i]].address;
        s->blocks[i].size = blocks[s->order[i]].size;
        if (i > 0 && s->blocks[i - 1].start + s->blocks[i - 1].size > s->blocks[i].start) {
            set_error(err, err_size,
                      "leak scan: heap blocks overlap: 0x%" PRIx64 " (%" PRIu64 " bytes) and 0x%" PRIx64
                      "; the block list is corrupt",
                      s->blocks[i - 1].start, s->blocks[i - 1].size, s->blocks[i].start);
            return -1;
        }
    }
    if (s->count) {
        s->low = s->blocks[0].start;
        uint64_t last = s->count - 1;
        s->span = s->blocks[last].start + (s->blocks[last].size ? s->blocks[last].size : 1) - s->low;
    }
    return 0;
}

/* End of block i for lookups (a zero-size block occupies its start). */
static uint64_t block_end(const struct scan *s, size_t i)
{
    return s->blocks[i].start + (s->blocks[i].size ? s->blocks[i].size : 1);
}

/* Fills region r's table for blocks [low, high). */
static int index_region(struct scan *s, struct region *r, size_t low, size_t high)
{
    uint64_t start = s->blocks[low].start, end = block_end(s, high - 1), blocks = high - low;
    /* About one granule per block: the bisection then has one or two
     * candidates, and the table costs 4 bytes per block. */
    r->shift = 4;
    while (((end - start) >> r->shift) > 2 * blocks + 64)
        r->shift++;
    r->start = start >> r->shift << r->shift;
    r->end = ((end - 1) >> r->shift) + 1;
    uint64_t granules = r->end - (r->start >> r->shift);
    r->end <<= r->shift;
    r->first = malloc((granules + 1) * sizeof *r->first);
    if (!r->first)
        return -1;
    size_t i = low;
    for (uint64_t k = 0; k <= granules; k++) {
        uint64_t granule_start = r->start + (k << r->shift);
        while (i < high && block_end(s, i) <= granule_start)
            i++;
        r->first[k] = (uint32_t)(i < high ? i : high - 1);
    }
    return 0;
}

/* Whether a region ends before sorted block i (the last block, or a gap). */
static bool region_ends_before(const struct scan *s, size_t i)
{
    return i == s->count || s->blocks[i].start - block_end(s, i - 1) >= REGION_GAP;
}

static int build_regions(struct scan *s, char *err, size_t err_size)
{
    /* Counted first: a heap has a handful of regions, not one per block. */
    size_t regions = 0;
    for (size_t i = 1; i <= s->count; i++)
        regions += region_ends_before(s, i);
    s->regions = calloc(regions ? regions : 1, sizeof *s->regions);
    if (!s->regions)
        goto out_of_memory;
    size_t low = 0;
    for (size_t i = 1; i <= s->count; i++) {
        if (!region_ends_before(s, i))
            continue;
        if (index_region(s, &s->regions[s->region_count++], low, i) < 0)
            goto out_of_memory;
        low = i;
    }
    return 0;
out_of_memory:
    set_error(err, err_size, "leak scan: out of memory for the index of %zu blocks", s->count);
    return -1;
}

static const struct region *find_region(const struct scan *s, uint64_t word)
{
    size_t low = 0, high = s->region_count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (word < s->regions[mid].start)
            high = mid;
        else if (word >= s->regions[mid].end)
            low = mid + 1;
        else
            return &s->regions[mid];
    }
    return NULL;
}

/* The block that word points to (start or interior) among the candidates
 * [low, high], or NO_BLOCK. */
static inline uint32_t resolve(const struct scan *s, uint64_t word, uint32_t low, uint32_t high)
{
    while (high - low > 4) { /* last block with start <= word */
        uint32_t mid = low + (high - low + 1) / 2;
        if (s->blocks[mid].start <= word)
            low = mid;
        else
            high = mid - 1;
    }
    while (low < high && s->blocks[low + 1].start <= word)
        low++;
    if (word < s->blocks[low].start)
        return NO_BLOCK;
    uint64_t offset = word - s->blocks[low].start;
    return offset < s->blocks[low].size || offset == 0 ? low : NO_BLOCK;
}

/* ---- reading memory ------------------------------------------------------ */

/* Words of [address, address + length) (address 8-aligned, length a
 * multiple of 8, at most CHUNK_BYTES), or NULL when the memory is gone. */
static const uint64_t *words_at(struct scan *s, uint64_t address, size_t length)
{
    if (s->memory->view) {
        const void *view = s->memory->view(s->memory->context, address, length);
        if (view)
            return view;
    }
    if (s->memory->read(s->memory->context, address, s->buffer, length) < 0) {
        s->gone = true;
        return NULL;
    }
    return s->buffer;
}

static int read_word(struct scan *s, uint64_t address, uint64_t *value)
{
    const uint64_t *word = words_at(s, address, 8);
    if (!word)
        return -1;
    memcpy(value, word, 8);
    return 0;
}

/* ---- memcheck's heuristics ----------------------------------------------- */

/* True when memcheck (default --leak-check-heuristics=all) would count the
 * interior pointer ptr into block i as a start pointer. */
static bool heuristically_reachable(struct scan *s, uint32_t i, uint64_t ptr)
{
    uint64_t data = s->blocks[i].start, size = s->blocks[i].size, word0, word1;
    if (ptr == data + 24 && size >= 24 && read_word(s, data + 8, &word1) == 0 && 24 + word1 + 1 == size &&
        read_word(s, data, &word0) == 0 && word0 <= word1)
        return true; /* stdstring: length, capacity, refcount, chars */
    if (ptr == data + 8 && read_word(s, data, &word0) == 0 && word0 > 0) {
        if (size - 8 == word0)
            return true;  /* length64 */
        if ((size - 8) % word0 == 0)
            return true;  /* newarray: element count before new[]'s array */
    }
    if (s->memory->is_vtable && (ptr & 7) == 0) {
        uint64_t inner, first;
        if (read_word(s, ptr, &inner) == 0 && (inner & 7) == 0 && inner >= 4096 && read_word(s, data, &first) == 0 &&
            (first & 7) == 0 && first >= 4096 && s->memory->is_vtable(s->memory->context, inner) &&
            s->memory->is_vtable(s->memory->context, first))
            return true; /* multipleinheritance */
    }
    return false;
}

/* ---- marking ------------------------------------------------------------- */

static void push(struct scan *s, uint32_t i)
{
    if (!(s->state[i] & PENDING)) {
        s->state[i] |= PENDING;
        s->stack[s->top++] = i;
    }
}

/* memcheck's lc_push_without_clique_if_a_chunk_ptr. */
static void reach_from_roots(struct scan *s, uint32_t i, uint64_t word, bool prior_definite)
{
    if (STATE(s, i) == REACHABLE)
        return;
    bool via_start = word == s->blocks[i].start || heuristically_reachable(s, i, word);
    if (via_start && prior_definite) {
        s->state[i] = (uint8_t)((s->state[i] & PENDING) | REACHABLE);
        push(s, i);
    } else if (STATE(s, i) == UNREACHED) {
        s->state[i] = (uint8_t)((s->state[i] & PENDING) | POSSIBLE);
        push(s, i);
    }
}

/* memcheck's lc_push_with_clique_if_a_chunk_ptr. */
static void reach_from_clique(struct scan *s, uint32_t i, uint32_t leader)
{
    if (STATE(s, i) == UNREACHED && i != leader) {
        push(s, i);
        s->state[i] = PENDING | INDIRECT;
    }
}

static void mark(struct scan *s, uint32_t i, uint64_t word, bool prior_definite, uint32_t clique)
{
    s->stats.pointer_hits++;
    if (clique == NO_CLIQUE)
        reach_from_roots(s, i, word, prior_definite);
    else
        reach_from_clique(s, i, clique);
}

/* Most time goes to cache misses on the index and the block table, so the
 * words are taken BATCH at a time, in three passes whose loads are
 * prefetched by the pass before: granule, candidates, resolution. */
static void scan_words(struct scan *s, const uint64_t *words, size_t n, bool prior_definite, uint32_t clique)
{
    uint64_t hit_word[BATCH];
    const uint32_t *hit_first[BATCH];
    for (size_t base = 0; base < n; base += BATCH) {
        size_t end = n - base < BATCH ? n : base + BATCH, hits = 0;
        for (size_t k = base; k < end; k++) {
            uint64_t word = words[k];
            if (word - s->low >= s->span)
                continue;
            const struct region *r = s->region_count == 1 ? s->regions : find_region(s, word);
            if (!r || word < r->start || word >= r->end)
                continue;
            hit_first[hits] = &r->first[(word - r->start) >> r->shift];
            __builtin_prefetch(hit_first[hits]);
            hit_word[hits++] = word;
        }
        for (size_t h = 0; h < hits; h++) {
            __builtin_prefetch(&s->blocks[hit_first[h][0]]);
            __builtin_prefetch(&s->state[hit_first[h][0]]);
        }
        for (size_t h = 0; h < hits; h++) {
            uint32_t i = resolve(s, hit_word[h], hit_first[h][0], hit_first[h][1]);
            if (i != NO_BLOCK)
                mark(s, i, hit_word[h], prior_definite, clique);
        }
    }
}

/* Scans the aligned words inside [start, end), CHUNK_BYTES at a time. */
static int scan_range(struct scan *s, uint64_t start, uint64_t end, bool prior_definite, uint32_t clique)
{
    uint64_t at = (start + 7) & ~7ull, stop = end & ~7ull;
    while (at < stop) {
        size_t length = stop - at < CHUNK_BYTES ? (size_t)(stop - at) : CHUNK_BYTES;
        const uint64_t *words = words_at(s, at, length);
        if (!words)
            return -1;
        scan_words(s, words, length / 8, prior_definite, clique);
        at += length;
    }
    return 0;
}

/* Starts loading the next block's memory (its first PREFETCH_BYTES) while
 * this one is scanned: blocks come off the stack in no useful order. */
static void prefetch_block(const struct scan *s, uint32_t i)
{
    uint64_t length = s->blocks[i].size < PREFETCH_BYTES ? s->blocks[i].size : PREFETCH_BYTES;
    const char *ahead = length ? s->memory->view(s->memory->context, s->blocks[i].start, length) : NULL;
    for (uint64_t at = 0; ahead && at < length; at += 64)
        __builtin_prefetch(ahead + at);
}

static int process_stack(struct scan *s, uint32_t clique)
{
    while (s->top > 0) {
        uint32_t i = s->stack[--s->top];
        if (s->top > 0 && s->memory->view)
            prefetch_block(s, s->stack[s->top - 1]);
        s->state[i] &= (uint8_t)~PENDING;
        bool prior_definite = s->state[i] != POSSIBLE;
        s->stats.block_bytes += s->blocks[i].size;
        if (scan_range(s, s->blocks[i].start, s->blocks[i].start + s->blocks[i].size, prior_definite, clique) < 0)
            return -1;
    }
    return 0;
}

static int mark_from_roots(struct scan *s, const struct leakscan_image *image)
{
    for (size_t r = 0; r < image->root_count; r++) {
        const struct leakscan_range *root = &image->roots[r];
        if (root->end <= root->start)
            continue;
        s->stats.root_bytes += root->end - root->start;
        if (scan_range(s, root->start, root->end, true, NO_CLIQUE) < 0)
            return -1;
    }
    scan_words(s, image->root_words, image->root_word_count, true, NO_CLIQUE);
    return process_stack(s, NO_CLIQUE);
}

static int gather_cliques(struct scan *s)
{
    for (uint32_t i = 0; i < s->count; i++) {
        if (STATE(s, i) != UNREACHED)
            continue;
        push(s, i);
        if (process_stack(s, i) < 0)
            return -1;
    }
    return 0;
}

/* ---- results ------------------------------------------------------------- */

static uint32_t category_of(uint8_t state)
{
    switch (state) {
    case REACHABLE: return TRACE_LEAK_REACHABLE;
    case POSSIBLE: return TRACE_LEAK_POSSIBLE;
    case INDIRECT: return TRACE_LEAK_INDIRECT;
    default: return TRACE_LEAK_DEFINITE;
    }
}

void leakscan_sum(const struct leakscan_block *blocks, size_t block_count, struct leakscan_totals *totals)
{
    memset(totals, 0, sizeof *totals);
    for (size_t i = 0; i < block_count; i++) {
        uint32_t c = blocks[i].category;
        if (c >= TRACE_LEAK_CATEGORIES)
            continue;
        totals->bytes[c] += blocks[i].size;
        totals->blocks[c]++;
    }
}

static void free_scan(struct scan *s)
{
    free(s->blocks);
    free(s->order);
    free(s->state);
    free(s->stack);
    for (size_t r = 0; r < s->region_count; r++)
        free(s->regions[r].first);
    free(s->regions);
    free(s->buffer);
}

static int alloc_scan(struct scan *s, size_t count, char *err, size_t err_size)
{
    size_t n = count ? count : 1;
    s->blocks = malloc(n * sizeof *s->blocks);
    s->order = malloc(n * sizeof *s->order);
    s->state = calloc(n, 1);
    s->stack = malloc(n * sizeof *s->stack);
    s->buffer = malloc(CHUNK_BYTES);
    if (s->blocks && s->order && s->state && s->stack && s->buffer)
        return 0;
    set_error(err, err_size, "leak scan: out of memory for %zu blocks", count);
    return -1;
}

int leakscan_classify(const struct leakscan_image *image, struct leakscan_block *blocks, size_t block_count,
                      struct leakscan_totals *totals, struct leakscan_stats *stats, char *err, size_t err_size)
{
    if (block_count >= NO_BLOCK) {
        set_error(err, err_size, "leak scan: %zu blocks is more than the %u supported", block_count, NO_BLOCK - 1);
        return -1;
    }
    struct scan s = {.memory = &image->memory, .count = block_count};
    int rc = -1;
    if (alloc_scan(&s, block_count, err, err_size) < 0 || build_sorted(&s, blocks, err, err_size) < 0 ||
        build_regions(&s, err, err_size) < 0)
        goto out;
    if (mark_from_roots(&s, image) < 0 || gather_cliques(&s) < 0) {
        set_error(err, err_size, "the process exited during the leak scan (its memory could not be read any more); "
                                 "nothing was reported");
        goto out;
    }
    for (size_t i = 0; i < block_count; i++)
        blocks[s.order[i]].category = category_of(s.state[i]);
    if (totals)
        leakscan_sum(blocks, block_count, totals);
    if (stats)
        *stats = s.stats;
    rc = 0;
out:
    free_scan(&s);
    return rc;
}

/* ---- per-site aggregation ------------------------------------------------ */

static int compare_records(const void *a, const void *b)
{
    const struct trace_loss_record *x = a, *y = b;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return x->category < y->category ? -1 : x->category > y->category;
}

long leakscan_aggregate(const struct leakscan_block *blocks, size_t block_count, struct trace_loss_record **records)
{
    struct trace_loss_record *all = malloc((block_count ? block_count : 1) * sizeof *all);
    if (!all)
        return -1;
    for (size_t i = 0; i < block_count; i++)
        all[i] = (struct trace_loss_record){.stack_id = blocks[i].stack_id, .category = blocks[i].category,
                                            .bytes = blocks[i].size, .blocks = 1};
    qsort(all, block_count, sizeof *all, compare_records);
    size_t out = 0;
    for (size_t i = 0; i < block_count; i++) {
        if (out > 0 && compare_records(&all[out - 1], &all[i]) == 0) {
            all[out - 1].bytes += all[i].bytes;
            all[out - 1].blocks++;
        } else {
            all[out++] = all[i];
        }
    }
    *records = all;
    return (long)out;
}

/*
 * classify.c - memcheck's leak classification on an abstract memory image
 * (see leakscan.h). The per-word lookup is the hot loop: one range check
 * rejects most words, then a hash of 4 KiB pages gives the few blocks that
 * overlap the word's page, searched by bisection.
 */
#include "leakscan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT 12
#define CHUNK_BYTES (1u << 20) /* memory is read and scanned this much at a time */
#define NO_BLOCK UINT32_MAX
#define NO_CLIQUE UINT32_MAX

/* Reachedness, in memcheck's order of upgrades. */
enum state { UNREACHED = 0, POSSIBLE = 1, REACHABLE = 2, INDIRECT = 3 };

/* One hash slot: the sorted blocks overlapping one page are [first, last]. */
struct page_slot {
    uint64_t page_plus_one; /* 0: empty */
    uint32_t first, last;
};

struct scan {
    const struct leakscan_memory *memory;
    size_t count;
    uint64_t *start;  /* sorted by address */
    uint64_t *size;
    uint32_t *order;  /* sorted index -> caller's index */
    uint8_t *state;
    uint8_t *pending;
    uint32_t *stack;
    size_t top;
    uint64_t low, span; /* every block lies in [low, low + span) */
    struct page_slot *slots;
    uint64_t slot_mask;
    int slot_bits;
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
    static const char *const names[TRACE_LEAK_CATEGORIES] = {"definitely_lost", "indirectly_lost", "possibly_lost",
                                                             "still_reachable"};
    return category < TRACE_LEAK_CATEGORIES ? names[category] : "unknown";
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
    for (size_t i = 0; i < s->count; i++)
        s->order[i] = (uint32_t)i;
    qsort_r(s->order, s->count, sizeof *s->order, compare_by_address, (void *)blocks);
    for (size_t i = 0; i < s->count; i++) {
        s->start[i] = blocks[s->order[i]].address;
        s->size[i] = blocks[s->order[i]].size;
        if (i > 0 && s->start[i - 1] + s->size[i - 1] > s->start[i]) {
            set_error(err, err_size,
                      "leak scan: heap blocks overlap: 0x%" PRIx64 " (%" PRIu64 " bytes) and 0x%" PRIx64
                      "; the block list is corrupt",
                      s->start[i - 1], s->size[i - 1], s->start[i]);
            return -1;
        }
    }
    if (s->count) {
        s->low = s->start[0];
        uint64_t last = s->count - 1;
        s->span = s->start[last] + (s->size[last] ? s->size[last] : 1) - s->low;
    }
    return 0;
}

/* Last byte's page of block i (a zero-size block occupies its start). */
static uint64_t last_page(const struct scan *s, size_t i)
{
    uint64_t length = s->size[i] ? s->size[i] : 1;
    return (s->start[i] + length - 1) >> PAGE_SHIFT;
}

static uint64_t hash_page(const struct scan *s, uint64_t page)
{
    return (page * 0x9e3779b97f4a7c15ull) >> (64 - s->slot_bits);
}

static struct page_slot *find_slot(const struct scan *s, uint64_t page)
{
    uint64_t at = hash_page(s, page);
    for (;;) {
        struct page_slot *slot = &s->slots[at];
        if (slot->page_plus_one == page + 1 || slot->page_plus_one == 0)
            return slot;
        at = (at + 1) & s->slot_mask;
    }
}

static int build_page_hash(struct scan *s, char *err, size_t err_size)
{
    uint64_t pages = 0;
    for (size_t i = 0; i < s->count; i++)
        pages += last_page(s, i) - (s->start[i] >> PAGE_SHIFT) + 1;
    s->slot_bits = 4;
    while ((1ull << s->slot_bits) < 2 * pages + 16)
        s->slot_bits++;
    s->slot_mask = (1ull << s->slot_bits) - 1;
    s->slots = calloc(1ull << s->slot_bits, sizeof *s->slots);
    if (!s->slots) {
        set_error(err, err_size, "leak scan: out of memory for the page index of %" PRIu64 " pages", pages);
        return -1;
    }
    for (size_t i = 0; i < s->count; i++) {
        for (uint64_t page = s->start[i] >> PAGE_SHIFT; page <= last_page(s, i); page++) {
            struct page_slot *slot = find_slot(s, page);
            if (slot->page_plus_one == 0) {
                slot->page_plus_one = page + 1;
                slot->first = (uint32_t)i;
            }
            slot->last = (uint32_t)i;
        }
    }
    return 0;
}

/* The block that word points to (start or interior), or NO_BLOCK. */
static inline uint32_t find_block(const struct scan *s, uint64_t word)
{
    if (word - s->low >= s->span)
        return NO_BLOCK;
    const struct page_slot *slot = find_slot(s, word >> PAGE_SHIFT);
    if (slot->page_plus_one == 0)
        return NO_BLOCK;
    uint32_t low = slot->first, high = slot->last; /* last block with start <= word */
    while (low < high) {
        uint32_t mid = low + (high - low + 1) / 2;
        if (s->start[mid] <= word)
            low = mid;
        else
            high = mid - 1;
    }
    uint64_t offset = word - s->start[low];
    if (word < s->start[low])
        return NO_BLOCK;
    if (offset < s->size[low] || offset == 0)
        return low;
    return NO_BLOCK;
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
    uint64_t data = s->start[i], size = s->size[i], word0, word1;
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
    if (!s->pending[i]) {
        s->pending[i] = 1;
        s->stack[s->top++] = i;
    }
}

/* memcheck's lc_push_without_clique_if_a_chunk_ptr. */
static void reach_from_roots(struct scan *s, uint32_t i, uint64_t word, bool prior_definite)
{
    if (s->state[i] == REACHABLE)
        return;
    bool via_start = word == s->start[i] || heuristically_reachable(s, i, word);
    if (via_start && prior_definite) {
        s->state[i] = REACHABLE;
        push(s, i);
    } else if (s->state[i] == UNREACHED) {
        s->state[i] = POSSIBLE;
        push(s, i);
    }
}

/* memcheck's lc_push_with_clique_if_a_chunk_ptr. */
static void reach_from_clique(struct scan *s, uint32_t i, uint32_t leader)
{
    if (s->state[i] == UNREACHED && i != leader) {
        push(s, i);
        s->state[i] = INDIRECT;
    }
}

static void scan_words(struct scan *s, const uint64_t *words, size_t n, bool prior_definite, uint32_t clique)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t word = words[k];
        if (word - s->low >= s->span)
            continue;
        uint32_t i = find_block(s, word);
        if (i == NO_BLOCK)
            continue;
        s->stats.pointer_hits++;
        if (clique == NO_CLIQUE)
            reach_from_roots(s, i, word, prior_definite);
        else
            reach_from_clique(s, i, clique);
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

static int process_stack(struct scan *s, uint32_t clique)
{
    while (s->top > 0) {
        uint32_t i = s->stack[--s->top];
        s->pending[i] = 0;
        bool prior_definite = s->state[i] != POSSIBLE;
        s->stats.block_bytes += s->size[i];
        if (scan_range(s, s->start[i], s->start[i] + s->size[i], prior_definite, clique) < 0)
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
        if (s->state[i] != UNREACHED)
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
    free(s->start);
    free(s->size);
    free(s->order);
    free(s->state);
    free(s->pending);
    free(s->stack);
    free(s->slots);
    free(s->buffer);
}

static int alloc_scan(struct scan *s, size_t count, char *err, size_t err_size)
{
    size_t n = count ? count : 1;
    s->start = malloc(n * sizeof *s->start);
    s->size = malloc(n * sizeof *s->size);
    s->order = malloc(n * sizeof *s->order);
    s->state = calloc(n, 1);
    s->pending = calloc(n, 1);
    s->stack = malloc(n * sizeof *s->stack);
    s->buffer = malloc(CHUNK_BYTES);
    if (s->start && s->size && s->order && s->state && s->pending && s->stack && s->buffer)
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
        build_page_hash(&s, err, err_size) < 0)
        goto out;
    if (mark_from_roots(&s, image) < 0 || gather_cliques(&s) < 0) {
        set_error(err, err_size, "leak scan: the target's memory could not be read any more (did it exit?)");
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

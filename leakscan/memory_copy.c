/*
 * memory_copy.c - a copy of the memory a scan reads (leakscan_internal.h,
 * struct leakscan_copy): taken while the process is stopped, read after it
 * runs on, so that a leak check holds the process for the copy and not for
 * the classification.
 *
 * What is copied: every root range whole (a shared mapping's page another
 * process wrote holds data without being in this process's page table),
 * and the pages that hold blocks, a page's neighbours merged into one
 * range; of a large block only the pieces whose pages hold data (an
 * untouched gigabyte costs its page table's entries, as in the scan).
 */
#include "leakscan_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/growable_array.h"

#define PAGE 4096ull
#define PIECE (1ull << 20)     /* a large block's pages are asked about this much at a time */
#define READ_BATCH 1024u       /* ranges read in one call (IOV_MAX) */

struct wanted {
    struct leakscan_range *ranges;
    size_t count, capacity;
    uint64_t bytes;
};

static int want(struct wanted *w, uint64_t start, uint64_t end)
{
    if (start >= end)
        return 0;
    if (w->count && start <= w->ranges[w->count - 1].end) {
        struct leakscan_range *last = &w->ranges[w->count - 1];
        if (end > last->end) {
            w->bytes += end - last->end;
            last->end = end;
        }
        return 0;
    }
    if (growable_array_reserve(&w->ranges, &w->capacity, w->count + 1, sizeof *w->ranges) < 0)
        return -1;
    w->ranges[w->count++] = (struct leakscan_range){start, end};
    w->bytes += end - start;
    return 0;
}

static int compare_starts(const void *a, const void *b)
{
    const struct leakscan_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The pages of a block; of a large one, the pieces whose pages hold data. */
static int want_block_pages(struct wanted *w, const struct leakscan_memory *source, const struct leakscan_block *block)
{
    uint64_t start = block->address & ~(PAGE - 1), end = (leakscan_block_end(block) + PAGE - 1) & ~(PAGE - 1);
    if (end - start <= PIECE || !source->holds_data)
        return want(w, start, end);
    for (uint64_t at = start; at < end;) {
        uint64_t stop = (at & ~(PIECE - 1)) + PIECE < end ? (at & ~(PIECE - 1)) + PIECE : end;
        if (source->holds_data(source->context, at, (size_t)(stop - at)) && want(w, at, stop) < 0)
            return -1;
        at = stop;
    }
    return 0;
}

/* Roots and block pages, sorted and merged. */
static int list_wanted(struct wanted *w, const struct leakscan_memory *source, const struct leakscan_range *roots,
                       size_t root_count, const struct leakscan_block *blocks, size_t block_count)
{
    struct wanted listed = {0};
    for (size_t b = 0; b < block_count; b++)
        if (want_block_pages(&listed, source, &blocks[b]) < 0)
            goto out_of_memory;
    for (size_t r = 0; r < root_count; r++) {
        if (growable_array_reserve(&listed.ranges, &listed.capacity, listed.count + 1, sizeof *listed.ranges) < 0)
            goto out_of_memory;
        listed.ranges[listed.count++] = roots[r];
    }
    qsort(listed.ranges, listed.count, sizeof *listed.ranges, compare_starts);
    /* Whole words (a word's page is its start's): the ranges then lie back
     * to back in the buffer with each word 8-aligned, as the scan reads
     * them. */
    for (size_t i = 0; i < listed.count; i++)
        if (want(w, listed.ranges[i].start & ~7ull, (listed.ranges[i].end + 7) & ~7ull) < 0)
            goto out_of_memory;
    free(listed.ranges);
    return 0;
out_of_memory:
    free(listed.ranges);
    return -1;
}

static int read_all(struct leakscan_copy *copy, const struct leakscan_memory *source)
{
    for (size_t r = 0; r < copy->count;) {
        uint8_t *into = copy->bytes + copy->offsets[r];
        if (!source->read_ranges) {
            if (source->read(source->context, copy->ranges[r].start, into,
                             (size_t)(copy->ranges[r].end - copy->ranges[r].start)) < 0)
                return -1;
            r++;
            continue;
        }
        size_t n = copy->count - r < READ_BATCH ? copy->count - r : READ_BATCH;
        if (source->read_ranges(source->context, &copy->ranges[r], n, into) < 0)
            return -1;
        r += n;
    }
    return 0;
}

/* The copy's buffer: the spare one when it is large enough (its pages are
 * in already: populating 23 MB cost 11 ms here, writing into it 1.2 ms)
 * and not four times more than needed, or grown in place when it is too
 * small; else a new mapping populated at once (a fault a page would cost
 * more). Sizes are whole pages; spare is left empty (taken, or unmapped).
 * 0, or -1 when no memory. */
static int take_buffer(struct leakscan_buffer *buffer, uint64_t size, struct leakscan_buffer *spare)
{
    *buffer = (struct leakscan_buffer){0};
    size = LEAKSCAN_PAGE_ROUND(size);
    if (spare && spare->bytes && spare->size / 4 <= size) {
        /* A heap that grew since: the pages in stay, only the rest is new. */
        if (leakscan_buffer_grow(spare, size) == 0) {
            *buffer = *spare;
            *spare = (struct leakscan_buffer){0};
            return 0;
        }
    }
    if (spare)
        leakscan_buffer_free(spare); /* far too large, or not to be grown: not kept beside this one */
    return leakscan_buffer_grow(buffer, size);
}

int leakscan_copy_take(struct leakscan_copy *copy, const struct leakscan_memory *source,
                       const struct leakscan_range *roots, size_t root_count, const struct leakscan_block *blocks,
                       size_t block_count, uint64_t byte_limit, struct leakscan_buffer *spare)
{
    memset(copy, 0, sizeof *copy);
    struct wanted w = {0};
    if (list_wanted(&w, source, roots, root_count, blocks, block_count) < 0)
        return -1;
    if (w.bytes > byte_limit) {
        free(w.ranges);
        return 1;
    }
    if (spare && spare->size > byte_limit)
        leakscan_buffer_free(spare); /* what the copy holds stays under the limit */
    copy->ranges = w.ranges;
    copy->count = w.count;
    copy->size = w.bytes;
    copy->offsets = malloc((w.count + 1) * sizeof *copy->offsets);
    if (!copy->offsets || take_buffer(&copy->buffer, w.bytes, spare) < 0) {
        leakscan_copy_free(copy);
        return -1;
    }
    copy->bytes = copy->buffer.bytes;
    uint64_t at = 0;
    for (size_t r = 0; r < w.count; r++) {
        copy->offsets[r] = at;
        at += w.ranges[r].end - w.ranges[r].start;
    }
    if (read_all(copy, source) < 0) {
        leakscan_copy_free(copy);
        return -2;
    }
    if (copy->buffer.written < LEAKSCAN_PAGE_ROUND(w.bytes))
        copy->buffer.written = LEAKSCAN_PAGE_ROUND(w.bytes);
    return 0;
}

void leakscan_copy_release(struct leakscan_copy *copy, struct leakscan_buffer *keep)
{
    leakscan_buffer_keep_larger(keep, &copy->buffer);
    copy->bytes = NULL;
}

void leakscan_copy_free(struct leakscan_copy *copy)
{
    leakscan_buffer_free(&copy->buffer);
    free(copy->ranges);
    free(copy->offsets);
    memset(copy, 0, sizeof *copy);
}

/* The range holding address, or copy->count. Lookups mostly follow each
 * other through memory: the last one's range is tried first. */
static size_t range_of(struct leakscan_copy *copy, uint64_t address)
{
    size_t last = copy->last;
    if (last < copy->count && copy->ranges[last].start <= address && address < copy->ranges[last].end)
        return last;
    size_t r = leakscan_first_range_ending_after(copy->ranges, copy->count, address);
    if (r < copy->count && copy->ranges[r].start <= address) {
        copy->last = r;
        return r;
    }
    return copy->count;
}

const void *leakscan_copy_view(void *context, uint64_t address, size_t length)
{
    struct leakscan_copy *copy = context;
    size_t r = range_of(copy, address);
    if (r == copy->count || copy->ranges[r].end - address < length)
        return NULL;
    return copy->bytes + copy->offsets[r] + (address - copy->ranges[r].start);
}

const void *leakscan_copy_view_span(void *context, uint64_t address, uint64_t *start, uint64_t *end)
{
    struct leakscan_copy *copy = context;
    size_t r = range_of(copy, address);
    if (r == copy->count)
        return NULL;
    *start = copy->ranges[r].start;
    *end = copy->ranges[r].end;
    return copy->bytes + copy->offsets[r];
}

/* What view cannot serve whole: the copied parts, zeros between them. */
int leakscan_copy_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct leakscan_copy *copy = context;
    uint8_t *out = buffer;
    memset(out, 0, length);
    uint64_t end = address + length;
    for (size_t r = leakscan_first_range_ending_after(copy->ranges, copy->count, address);
         r < copy->count && copy->ranges[r].start < end; r++) {
        uint64_t from = copy->ranges[r].start > address ? copy->ranges[r].start : address;
        uint64_t to = copy->ranges[r].end < end ? copy->ranges[r].end : end;
        memcpy(out + (from - address), copy->bytes + copy->offsets[r] + (from - copy->ranges[r].start),
               (size_t)(to - from));
    }
    return 0;
}

/* Whether any copied byte lies in the range: what was not copied had no
 * data, or was never going to be scanned. */
int leakscan_copy_holds_data(void *context, uint64_t address, size_t length)
{
    struct leakscan_copy *copy = context;
    /* asked of every block the scan reaches, mostly one inside the range
     * the last lookup found */
    size_t last = copy->last;
    if (last < copy->count && copy->ranges[last].start <= address && address < copy->ranges[last].end)
        return 1;
    size_t r = leakscan_first_range_ending_after(copy->ranges, copy->count, address);
    return r < copy->count && copy->ranges[r].start < address + length;
}

void leakscan_copy_as_memory(struct leakscan_copy *copy, struct leakscan_memory *memory)
{
    memset(memory, 0, sizeof *memory);
    memory->read = leakscan_copy_read;
    memory->view = leakscan_copy_view;
    memory->view_span = leakscan_copy_view_span;
    memory->holds_data = leakscan_copy_holds_data;
    memory->context = copy;
}

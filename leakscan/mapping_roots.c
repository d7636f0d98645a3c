/*
 * mapping_roots.c - which parts of one writable mapping are roots
 * (leakscan_mapping_roots, see leakscan.h).
 *
 * memcheck scans every client mapping: its heap lives in Valgrind's own
 * memory, never in the program's mappings. Here the blocks live in the
 * program's mappings, next to whatever the kernel merged with them
 * (adjacent anonymous mappings with the same flags become one): pymalloc's
 * arenas next to CPython's frame stacks, a glibc mmapped chunk next to a
 * buffer the program mapped. So a mapping is scanned as memcheck would see
 * it: whole, minus the memory that allocators own, whose free parts hold
 * stale pointers and whose blocks are scanned when reached.
 */
#include "../common/growable_array.h"
#include "leakscan_internal.h"

#include <stdbool.h>
#include <stdlib.h>

#define PAGE 4096u
#define CHUNK_HEADER 16u   /* glibc: prev_size and size before the user block */
#define IS_MMAPPED 2u
#define NON_MAIN_ARENA 4u
#define CHUNK_FLAGS 7u

struct range_list {
    struct leakscan_range *ranges;
    size_t count, capacity;
};

static int append(struct range_list *list, uint64_t start, uint64_t end)
{
    if (end <= start)
        return 0;
    if (growable_array_reserve(&list->ranges, &list->capacity, list->count + 1, sizeof *list->ranges) < 0)
        return -1;
    list->ranges[list->count++] = (struct leakscan_range){start, end};
    return 0;
}

static bool read_words(const struct leakscan_memory *memory, uint64_t address, uint64_t *words, size_t n)
{
    return memory->read(memory->context, address, words, n * 8) == 0;
}

/* glibc's heap_info at a 64 MiB-aligned address: ar_ptr in the first page
 * of an aligned heap, prev 0 or aligned, size and mprotect_size whole
 * pages, size at most HEAP_MAX and at most mprotect_size. */
static bool is_glibc_heap(const struct leakscan_memory *memory, uint64_t at)
{
    uint64_t info[4];
    /* An untouched page holds no header; reading it would map the zero
     * page into the target, one page per 64 MiB of a large block. */
    if (memory->holds_data && !memory->holds_data(memory->context, at, sizeof info))
        return false;
    if (!read_words(memory, at, info, 4))
        return false;
    uint64_t ar_ptr = info[0], prev = info[1], size = info[2], mprotect_size = info[3];
    return ar_ptr != 0 && ar_ptr % LEAKSCAN_HEAP_MAX < PAGE && prev % LEAKSCAN_HEAP_MAX == 0 && size > 0 &&
           size <= LEAKSCAN_HEAP_MAX && size % PAGE == 0 && mprotect_size % PAGE == 0 && size <= mprotect_size;
}

/* The glibc mmapped chunk that holds the block [start, end): the header
 * before it has IS_MMAPPED (and not NON_MAIN_ARENA), the mapping it was
 * carved from (base = chunk - prev_size, memalign's lead) is whole pages
 * inside mapping, and the block fits the chunk. */
static bool glibc_mmapped_chunk(const struct leakscan_memory *memory, struct leakscan_range mapping, uint64_t start,
                                uint64_t end, struct leakscan_range *chunk_mapping)
{
    uint64_t header[2];
    if (start < mapping.start + CHUNK_HEADER || !read_words(memory, start - CHUNK_HEADER, header, 2))
        return false;
    uint64_t chunk = start - CHUNK_HEADER, lead = header[0], size = header[1] & ~(uint64_t)CHUNK_FLAGS;
    if ((header[1] & (IS_MMAPPED | NON_MAIN_ARENA)) != IS_MMAPPED || lead > chunk - mapping.start ||
        size > mapping.end - chunk)
        return false;
    uint64_t base = chunk - lead, total = lead + size;
    if (base % PAGE != 0 || total % PAGE != 0 || end > chunk + size)
        return false;
    *chunk_mapping = (struct leakscan_range){base, base + total};
    return true;
}

/* Appends the parts of the sorted ranges that lie in mapping, clipped. */
static int clip_into(struct range_list *out, const struct leakscan_range *ranges, size_t count,
                     struct leakscan_range mapping)
{
    for (size_t i = leakscan_first_range_ending_after(ranges, count, mapping.start); i < count && ranges[i].start < mapping.end;
         i++) {
        uint64_t start = ranges[i].start > mapping.start ? ranges[i].start : mapping.start;
        uint64_t end = ranges[i].end < mapping.end ? ranges[i].end : mapping.end;
        if (append(out, start, end) < 0)
            return -1;
    }
    return 0;
}

static int compare_starts(const void *a, const void *b)
{
    const struct leakscan_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts and merges overlapping or touching ranges in place. */
static void normalise(struct range_list *list)
{
    if (list->count < 2)
        return;
    qsort(list->ranges, list->count, sizeof *list->ranges, compare_starts);
    size_t out = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (out > 0 && list->ranges[i].start <= list->ranges[out - 1].end) {
            if (list->ranges[i].end > list->ranges[out - 1].end)
                list->ranges[out - 1].end = list->ranges[i].end;
        } else {
            list->ranges[out++] = list->ranges[i];
        }
    }
    list->count = out;
}

static bool inside(const struct range_list *owned, uint64_t start, uint64_t end)
{
    size_t i = leakscan_first_range_ending_after(owned->ranges, owned->count, start);
    return i < owned->count && owned->ranges[i].start <= start && end <= owned->ranges[i].end;
}

/* What allocators own in mapping, sorted and merged: the shim's ranges and
 * glibc's arena heaps, then a glibc mmapped chunk for every block outside
 * those. Returns 1, 0 when a block belongs to no known allocator, -1 when
 * out of memory. */
static int find_owned(const struct leakscan_memory *memory, struct leakscan_range mapping,
                      const struct leakscan_block *blocks, size_t block_count, const struct leakscan_range *owned,
                      size_t owned_count, struct range_list *found)
{
    if (clip_into(found, owned, owned_count, mapping) < 0)
        return -1;
    /* A heap that merged with the mapping before it starts inside it; one
     * that holds no block matters only at the mapping's start (reads of a
     * large mapping are saved). */
    size_t first_block = leakscan_first_block_ending_after(blocks, block_count, mapping.start);
    bool holds_blocks = first_block < block_count && blocks[first_block].address < mapping.end;
    uint64_t first_aligned = (mapping.start + LEAKSCAN_HEAP_MAX - 1) / LEAKSCAN_HEAP_MAX * LEAKSCAN_HEAP_MAX;
    uint64_t last = holds_blocks ? mapping.end : mapping.start + 1;
    for (uint64_t at = first_aligned; at >= mapping.start && at < last; at += LEAKSCAN_HEAP_MAX) {
        uint64_t end = mapping.end - at > LEAKSCAN_HEAP_MAX ? at + LEAKSCAN_HEAP_MAX : mapping.end;
        if (is_glibc_heap(memory, at) && append(found, at, end) < 0)
            return -1;
    }
    normalise(found);
    size_t known = found->count;
    for (size_t i = first_block; i < block_count && blocks[i].address < mapping.end; i++) {
        struct range_list known_part = {found->ranges, known, known};
        if (inside(&known_part, blocks[i].address, leakscan_block_end(&blocks[i])))
            continue;
        struct leakscan_range chunk;
        if (!glibc_mmapped_chunk(memory, mapping, blocks[i].address, leakscan_block_end(&blocks[i]), &chunk))
            return 0;
        if (append(found, chunk.start, chunk.end) < 0)
            return -1;
    }
    normalise(found);
    return 1;
}

int leakscan_mapping_roots(const struct leakscan_memory *memory, struct leakscan_range mapping,
                           const struct leakscan_block *blocks, size_t block_count,
                           const struct leakscan_range *owned, size_t owned_count, struct leakscan_range **roots,
                           size_t *count, size_t *capacity)
{
    struct range_list found = {0};
    int rc = find_owned(memory, mapping, blocks, block_count, owned, owned_count, &found);
    struct range_list out = {*roots, *count, *capacity};
    uint64_t at = mapping.start;
    for (size_t i = 0; rc == 1 && i < found.count; i++) {
        if (append(&out, at, found.ranges[i].start) < 0)
            rc = -1;
        at = found.ranges[i].end;
    }
    if (rc == 1 && append(&out, at, mapping.end) < 0)
        rc = -1;
    free(found.ranges);
    *roots = out.ranges;
    *count = out.count;
    *capacity = out.capacity;
    return rc < 0 ? -1 : 0;
}

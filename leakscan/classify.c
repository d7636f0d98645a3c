/*
 * classify.c - memcheck's leak classification on an abstract memory image
 * (see leakscan.h and docs/leakscan.md, "How the scan runs").
 *
 * Memory: the caller's blocks, sorted in place by address; a state byte
 * and a pending bit per block; an index of block starts (a bitmap per
 * region of blocks, 16 bytes per 64 granules); buffers of fixed size.
 * Nothing is copied whole: blocks are read as the scan reaches them, a
 * batch at a time.
 *
 * Order: memcheck's marking from the roots reaches the same fixpoint in
 * any order, so blocks waiting to be scanned are kept as bits and swept
 * in address order, a batch of neighbours (within a window of addresses)
 * read in one call; a block marked behind the sweep waits for the next
 * sweep, which runs the other way (so a chain that runs down through
 * memory takes one sweep, not one per link). A small batch reads what
 * lies around it too and keeps it, so that a chain's links, one batch
 * each, are not a read each. Clique leaders go in address order, each
 * clique to its fixpoint before the next leader, as memcheck does.
 *
 * Lookup of a word: one range check rejects most words; the region's
 * bitmap entry (the bits of 64 granules and the number of blocks before
 * them) gives the last block starting at or before the word, without
 * touching the block list when the word is a block's start. Words go
 * through in batches, each step's loads prefetched by the step before.
 */
#include "leakscan.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error_buffer.h"
#define REGION_GAP (1ull << 20)   /* a gap this large between blocks starts a new region */
#define HIT_BATCH 128             /* words resolved together, their loads prefetched */
#define CHUNK_BYTES (1u << 20)    /* roots and large blocks are read and scanned this much at a time */
#define WINDOW_BYTES (1u << 20)   /* blocks read together in a batch, at most */
#define WINDOW_RANGES 1024u       /* ranges read in one call, at most (IOV_MAX) */
#define BATCH_BLOCKS 16384u       /* blocks in a batch, at most */
#define PYTHON_TYPES_SEEN 64u     /* type objects the python heuristic remembers (a power of two) */
#define CACHE_SLOTS 16u           /* windows kept of what small batches read around them */
#define AROUND_MAX (64u << 10)    /* a small batch reads this much around it at most, while that pays */
#define AROUND_MIN 2048u          /* ... and at least this much */
#define NEAR_GAP 512u             /* neighbours this close are read as one range, the gap with them */
#define NEAR_GAP_UNBATCHED 16384u /* the same where every range costs a read of its own */
#define DIRECT_LOOKUP_BYTES (1u << 20) /* index and states this small: words looked up at once */
#define NO_BLOCK SIZE_MAX
#define NO_CLIQUE SIZE_MAX

/* Reachedness, in memcheck's order of upgrades. */
enum state { UNREACHED = 0, POSSIBLE = 1, REACHABLE = 2, INDIRECT = 3 };

/* 64 granules of a region: which hold a block's start, and how many
 * blocks (of the whole list) start before the first of them. */
struct index_entry {
    uint64_t starts;
    uint64_t before;
};

/* A run of blocks with gaps under REGION_GAP. A granule is 2^shift bytes,
 * shift being the alignment all its block starts share, so each granule
 * holds at most one start and a word is a start exactly when it is
 * granule-aligned with its granule's bit set. */
struct region {
    uint64_t start, end; /* the first block's start; the last block's end */
    unsigned shift;
    size_t entry;        /* its first index entry */
};

/* A batch of blocks read together: their bytes in window, back to back. */
struct batch {
    size_t *blocks;  /* sorted indices */
    size_t *offsets; /* each block's scanned words in window (SIZE_MAX: none) */
    size_t count;
    struct leakscan_range *ranges; /* what is read: blocks and the small gaps between them */
    size_t range_count, bytes;
    uint8_t *window;
};

/* What a small batch read around itself, kept for the batches after it:
 * a chain through memory, or one that zigzags between two places, then
 * costs a read per window, not per link. */
struct cached_window {
    uint64_t start, end;
    unsigned hits; /* ranges served since it was read */
    uint64_t used; /* when it last served (or was read) */
    uint8_t *bytes; /* AROUND_MAX */
};

/* A sweep over the pending blocks, in one direction. */
struct sweep {
    bool active, up;
    size_t finger; /* up: every pending block at or above it is ahead; down: every one below it */
    size_t end;    /* the last pending block ahead (inclusive) */
};

struct scan {
    const struct leakscan_memory *memory;
    struct leakscan_block *blocks; /* the caller's, sorted by address */
    size_t count;
    uint8_t *state;    /* enum state */
    uint64_t *pending; /* a bit per block: to be scanned (again) */
    uint64_t *pending_words; /* a bit per word of pending: not zero (sweeps skip 4096 blocks a word) */
    size_t pending_count;
    size_t next_low, next_high; /* bounds of the pending blocks the running sweep will not reach */
    struct sweep sweep;
    uint64_t low, span; /* every block lies in [low, low + span) */
    struct region *regions;
    size_t region_count;
    const struct region *last_region; /* where the last word that fell in one fell */
    bool direct; /* words resolved and marked at once, not through the pipeline */
    struct index_entry *index;
    struct batch batch, leaders;
    struct pipeline *pipeline;
    uint64_t *chunk; /* CHUNK_BYTES scratch for roots and large blocks */
    size_t near_gap;
    struct cached_window cache[CACHE_SLOTS];
    uint64_t cache_clock;
    size_t around; /* bytes a small batch reads around it: doubled by a hit, halved by a window never hit */
    struct leakscan_stats stats;
    bool gone; /* memory read failed for good */
    uint32_t python_version; /* image->python_version */
    /* Type objects python_pre_header has looked at: the address of each
     * (0: none) and its instances' pre-header size (PY_NOT_A_TYPE: not a
     * type). */
    struct python_type_seen {
        uint64_t type, pre_header;
    } python_types[PYTHON_TYPES_SEEN];
    /* The run of memory view_span last gave: [start, end) at base. */
    struct held_span {
        uint64_t start, end;
        const uint8_t *base;
    } held;
};

const char *leakscan_category_name(uint32_t category)
{
    return trace_leak_category_name(category);
}

/* The bits set in x: the POPCNT instruction where the CPU has it (every
 * x86-64 since 2008, but not the baseline the build targets; the test is
 * a load of what libgcc found at start), else the arithmetic. Each word
 * that may point into a block costs one (an index entry's rank). */
static inline unsigned bit_count(uint64_t x)
{
#if defined(__POPCNT__)
    return (unsigned)__builtin_popcountll(x);
#else
#if defined(__x86_64__)
    if (__builtin_expect(__builtin_cpu_supports("popcnt"), 1)) {
        uint64_t bits;
        __asm__("popcntq %1, %0" : "=r"(bits) : "rm"(x));
        return (unsigned)bits;
    }
#endif
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* ---- sorting the caller's blocks in place -------------------------------- */

/* Short runs: insertion sort, a few compares a block. */
static void insertion_sort(struct leakscan_block *b, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct leakscan_block moving = b[i];
        size_t j = i;
        for (; j > 0 && b[j - 1].address > moving.address; j--)
            b[j] = b[j - 1];
        b[j] = moving;
    }
}

#define RADIX_BITS 8
#define RADIX_BUCKETS (1u << RADIX_BITS)
#define RADIX_SMALL 48 /* runs this short are insertion-sorted */
#define RADIX_PREFETCH 8 /* places ahead of a bucket's next one: three cache lines */

/* The bucket of an address: RADIX_BITS of its distance from the run's
 * lowest, from `shift` up. */
static inline unsigned radix_digit(uint64_t address, uint64_t low, unsigned shift)
{
    return (unsigned)((address - low) >> shift);
}

/* Moves every block of the run into its bucket, in place: each block
 * displaced from a bucket's next place is carried on to its own bucket
 * (American flag sort). next[d]: bucket d's next place, its start at
 * first; end[d]: one past its last. */
static void radix_distribute(struct leakscan_block *b, uint64_t low, unsigned shift, size_t *next,
                             const size_t *end)
{
    for (unsigned d = 0; d < RADIX_BUCKETS; d++) {
        while (next[d] < end[d]) {
            struct leakscan_block moving = b[next[d]];
            unsigned digit = radix_digit(moving.address, low, shift);
            while (digit != d) {
                struct leakscan_block displaced = b[next[digit]];
                /* Each bucket is read and written front to back, but the
                 * walk hops between them, each hop's load depending on the
                 * last: ask for a bucket's next places ahead of its turn. */
                __builtin_prefetch(&b[next[digit] + RADIX_PREFETCH]);
                b[next[digit]++] = moving;
                moving = displaced;
                digit = radix_digit(moving.address, low, shift);
            }
            b[next[d]++] = moving;
        }
    }
}

/* The lowest and highest address of b[0, n), n > 0. */
static void address_range(const struct leakscan_block *b, size_t n, uint64_t *low, uint64_t *high)
{
    *low = *high = b[0].address;
    for (size_t i = 1; i < n; i++) {
        *low = b[i].address < *low ? b[i].address : *low;
        *high = b[i].address > *high ? b[i].address : *high;
    }
}

/* Sorts by address with an in-place most-significant-digit radix sort:
 * the digits are taken from the run's own range of addresses, so a heap's
 * few dense clusters (the brk heap, mmap'd arenas) cost a level or two
 * each, not eight. About as many passes over the list as levels, where the
 * quicksort before made ~20 (with 400,000 blocks in hash order its sort
 * was a tenth of a Python driver's recording, perf); in place, since the
 * list is the largest thing the scan holds. */
static void radix_sort(struct leakscan_block *b, size_t n)
{
    if (n <= RADIX_SMALL) {
        insertion_sort(b, n);
        return;
    }
    uint64_t low, high;
    address_range(b, n, &low, &high);
    if (low == high)
        return;
    unsigned span_bits = 64u - (unsigned)__builtin_clzll(high - low);
    unsigned shift = span_bits > RADIX_BITS ? span_bits - RADIX_BITS : 0;
    size_t count[RADIX_BUCKETS] = {0};
    for (size_t i = 0; i < n; i++)
        count[radix_digit(b[i].address, low, shift)]++;
    size_t next[RADIX_BUCKETS], end[RADIX_BUCKETS], at = 0;
    for (unsigned d = 0; d < RADIX_BUCKETS; d++) {
        next[d] = at;
        at += count[d];
        end[d] = at;
    }
    radix_distribute(b, low, shift, next, end);
    if (shift == 0)
        return; /* a bucket's blocks share their address */
    for (unsigned d = 0; d < RADIX_BUCKETS; d++)
        radix_sort(b + end[d] - count[d], count[d]);
}

static bool is_sorted(const struct leakscan_block *blocks, size_t count)
{
    for (size_t i = 1; i < count; i++)
        if (blocks[i - 1].address > blocks[i].address)
            return false;
    return true;
}

void leakscan_sort_blocks(struct leakscan_block *blocks, size_t block_count)
{
    if (!is_sorted(blocks, block_count))
        radix_sort(blocks, block_count);
}

#define LSD_BITS 11
#define LSD_BUCKETS (1u << LSD_BITS)

/* LSD_BITS of an address's distance from the run's lowest, from shift up. */
static inline unsigned lsd_digit(uint64_t address, uint64_t low, unsigned shift)
{
    return radix_digit(address, low, shift) & (LSD_BUCKETS - 1);
}

/* One pass of the LSD sort: from's blocks into to, stably, by their digit
 * at shift. Returns 0, without moving them, when every block has the same
 * digit there. */
static int lsd_pass(const struct leakscan_block *from, struct leakscan_block *to, size_t n, uint64_t low,
                    unsigned shift)
{
    size_t place[LSD_BUCKETS] = {0};
    for (size_t i = 0; i < n; i++)
        place[lsd_digit(from[i].address, low, shift)]++;
    if (place[lsd_digit(from[0].address, low, shift)] == n)
        return 0;
    size_t at = 0;
    for (unsigned d = 0; d < LSD_BUCKETS; d++) {
        size_t count = place[d];
        place[d] = at;
        at += count;
    }
    for (size_t i = 0; i < n; i++)
        to[place[lsd_digit(from[i].address, low, shift)]++] = from[i];
    return 1;
}

/* The digits start above the low bits every key shares (malloc's
 * alignment), and stop at the span's top. */
static void lsd_sort(struct leakscan_block *blocks, size_t n, struct leakscan_block *scratch)
{
    uint64_t low, high, differ = 0;
    address_range(blocks, n, &low, &high);
    for (size_t i = 0; i < n; i++)
        differ |= blocks[i].address - low;
    if (!differ)
        return;
    unsigned first = (unsigned)__builtin_ctzll(differ), top = 64u - (unsigned)__builtin_clzll(high - low);
    struct leakscan_block *from = blocks, *to = scratch;
    for (unsigned shift = first; shift < top; shift += LSD_BITS) {
        if (lsd_pass(from, to, n, low, shift)) {
            struct leakscan_block *sorted = to;
            to = from;
            from = sorted;
        }
    }
    if (from != blocks)
        memcpy(blocks, from, n * sizeof *blocks);
}

void leakscan_sort_blocks_through(struct leakscan_block *blocks, size_t block_count, struct leakscan_block *scratch)
{
    if (is_sorted(blocks, block_count))
        return;
    if (scratch && block_count >= LEAKSCAN_SORT_SCRATCH_MIN_BLOCKS)
        lsd_sort(blocks, block_count, scratch);
    else
        radix_sort(blocks, block_count);
}

/* ---- the index ----------------------------------------------------------- */

/* End of block i for lookups (a zero-size block occupies its start). */
static uint64_t block_end(const struct scan *s, size_t i)
{
    return s->blocks[i].address + (s->blocks[i].size ? s->blocks[i].size : 1);
}

static int check_sorted(struct scan *s, char *err, size_t err_size)
{
    for (size_t i = 1; i < s->count; i++) {
        if (block_end(s, i - 1) > s->blocks[i].address) {
            error_printf(err, err_size,
                      "leak scan: heap blocks overlap: 0x%" PRIx64 " (%" PRIu64 " bytes) and 0x%" PRIx64
                      "; the block list is corrupt",
                      s->blocks[i - 1].address, s->blocks[i - 1].size, s->blocks[i].address);
            return -1;
        }
    }
    if (s->count) {
        s->low = s->blocks[0].address;
        s->span = block_end(s, s->count - 1) - s->low;
    }
    return 0;
}

/* Whether a region ends before block i (the last block, or a gap). */
static bool region_ends_before(const struct scan *s, size_t i)
{
    return i == s->count || s->blocks[i].address - block_end(s, i - 1) >= REGION_GAP;
}

static size_t entries_of(const struct region *r)
{
    return (size_t)(((r->end - r->start - 1) >> r->shift) / 64 + 1);
}

/* The regions and their shifts; then every entry's bits and counts. */
static int build_index(struct scan *s, char *err, size_t err_size)
{
    size_t regions = 0;
    for (size_t i = 1; i <= s->count; i++)
        regions += region_ends_before(s, i);
    s->regions = calloc(regions ? regions : 1, sizeof *s->regions);
    if (!s->regions)
        goto out_of_memory;
    s->last_region = s->regions; /* empty until filled: no word falls in it */
    size_t entries = 0, low = 0;
    unsigned shift = 63;
    for (size_t i = 0; i < s->count; i++) {
        unsigned zeros = (unsigned)__builtin_ctzll(s->blocks[i].address);
        shift = zeros < shift ? zeros : shift;
        if (!region_ends_before(s, i + 1))
            continue;
        struct region *r = &s->regions[s->region_count++];
        *r = (struct region){s->blocks[low].address, block_end(s, i), shift, entries};
        entries += entries_of(r);
        low = i + 1;
        shift = 63;
    }
    s->index = calloc(entries ? entries : 1, sizeof *s->index);
    if (!s->index)
        goto out_of_memory;
    size_t i = 0;
    for (size_t k = 0; k < s->region_count; k++) {
        const struct region *r = &s->regions[k];
        struct index_entry *first = &s->index[r->entry];
        for (; i < s->count && s->blocks[i].address < r->end; i++) {
            uint64_t granule = (s->blocks[i].address - r->start) >> r->shift;
            first[granule / 64].starts |= 1ull << (granule % 64);
        }
    }
    size_t before = 0;
    for (size_t e = 0; e < entries; e++) {
        s->index[e].before = before;
        before += bit_count(s->index[e].starts);
    }
    return 0;
out_of_memory:
    error_printf(err, err_size, "leak scan: out of memory for the index of %zu blocks", s->count);
    return -1;
}

static const struct region *find_region(const struct scan *s, uint64_t word)
{
    if (s->region_count == 1)
        return word < s->regions[0].end ? s->regions : NULL;
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

/* ---- reading blocks ------------------------------------------------------ */

/* Fills buffer with the ranges' bytes, back to back. */
static int read_ranges(struct scan *s, const struct leakscan_range *ranges, size_t count, uint8_t *buffer)
{
    if (s->memory->read_ranges)
        return s->memory->read_ranges(s->memory->context, ranges, count, buffer);
    for (size_t r = 0; r < count; r++) {
        size_t length = (size_t)(ranges[r].end - ranges[r].start);
        if (s->memory->read(s->memory->context, ranges[r].start, buffer, length) < 0)
            return -1;
        buffer += length;
    }
    return 0;
}

/* Words of [address, address + length) (address 8-aligned, length a
 * multiple of 8, at most CHUNK_BYTES), or NULL when the memory is gone. */
static const uint64_t *words_at(struct scan *s, uint64_t address, size_t length)
{
    if (s->memory->view) {
        const void *view = s->memory->view(s->memory->context, address, length);
        if (view)
            return view;
    }
    if (s->memory->read(s->memory->context, address, s->chunk, length) < 0) {
        s->gone = true;
        return NULL;
    }
    return s->chunk;
}

/* One word, apart from the buffers being scanned (a heuristic reads
 * while a chunk of roots is scanned). */
static int read_word(struct scan *s, uint64_t address, uint64_t *value)
{
    const void *view = s->memory->view ? s->memory->view(s->memory->context, address, 8) : NULL;
    if (view) {
        memcpy(value, view, 8);
        return 0;
    }
    if (s->memory->read(s->memory->context, address, value, 8) < 0) {
        s->gone = true;
        return -1;
    }
    return 0;
}

/* The aligned words a block's scan covers: [roundup(start, 8), rounddown(end, 8)). */
static struct leakscan_range scanned_words(const struct scan *s, size_t i)
{
    uint64_t start = (s->blocks[i].address + 7) & ~7ull, end = (s->blocks[i].address + s->blocks[i].size) & ~7ull;
    return (struct leakscan_range){start, end > start ? end : start};
}

static size_t scanned_length(const struct scan *s, size_t i)
{
    struct leakscan_range words = scanned_words(s, i);
    return (size_t)(words.end - words.start);
}

/* A block too large for a batch: scanned alone, a chunk at a time. */
static bool is_large(const struct scan *s, size_t i)
{
    return scanned_length(s, i) > WINDOW_BYTES;
}

/* Adds block i (above the batch's blocks) to the batch if it fits. */
static bool batch_add(struct scan *s, struct batch *b, size_t i)
{
    if (b->count == BATCH_BLOCKS)
        return false;
    struct leakscan_range words = scanned_words(s, i);
    size_t length = (size_t)(words.end - words.start);
    if (length == 0) {
        b->offsets[b->count] = SIZE_MAX;
        b->blocks[b->count++] = i;
        return true;
    }
    struct leakscan_range *last = b->range_count ? &b->ranges[b->range_count - 1] : NULL;
    if (last && words.start >= last->end && words.start - last->end <= s->near_gap) {
        size_t grown = (size_t)(words.end - last->end);
        if (b->bytes + grown > WINDOW_BYTES)
            return false;
        b->offsets[b->count] = b->bytes + (size_t)(words.start - last->end);
        last->end = words.end;
        b->bytes += grown;
    } else {
        if (b->range_count == WINDOW_RANGES || (b->count > 0 && b->bytes + length > WINDOW_BYTES))
            return false;
        b->ranges[b->range_count++] = words;
        b->offsets[b->count] = b->bytes;
        b->bytes += length;
    }
    b->blocks[b->count++] = i;
    return true;
}

static void batch_clear(struct batch *b)
{
    b->count = b->range_count = b->bytes = 0;
}

static struct cached_window *cached(struct scan *s, uint64_t start, uint64_t end)
{
    for (unsigned k = 0; k < CACHE_SLOTS; k++)
        if (start >= s->cache[k].start && end <= s->cache[k].end)
            return &s->cache[k];
    return NULL;
}

/* The window read around a small batch: from its first range down and
 * its last range up over neighbouring blocks (never across a gap wider
 * than near_gap, which may be unmapped), to s->around bytes in all. */
static struct leakscan_range around_batch(const struct scan *s, const struct batch *b)
{
    struct leakscan_range window = {b->ranges[0].start, b->ranges[b->range_count - 1].end};
    size_t spare = s->around > window.end - window.start ? s->around - (size_t)(window.end - window.start) : 0;
    uint64_t up_to = window.end + spare / 2;
    for (size_t i = b->blocks[b->count - 1] + 1; i < s->count; i++) {
        struct leakscan_range words = scanned_words(s, i);
        if (words.end == words.start)
            continue;
        if (words.start - window.end > s->near_gap || words.end > up_to)
            break;
        window.end = words.end;
    }
    spare = s->around > window.end - window.start ? s->around - (size_t)(window.end - window.start) : 0;
    uint64_t down_to = window.start > spare ? window.start - spare : 0;
    for (size_t i = b->blocks[0]; i > 0; i--) {
        struct leakscan_range words = scanned_words(s, i - 1);
        if (words.end == words.start)
            continue;
        if (window.start - words.end > s->near_gap || words.start < down_to)
            break;
        window.start = words.start;
    }
    return window;
}

/* Reads a small batch's window around it into the least recently used
 * slot; a slot replaced without ever serving halves what is read around. */
static struct cached_window *read_around(struct scan *s, struct batch *b)
{
    struct leakscan_range window = around_batch(s, b);
    struct cached_window *slot = &s->cache[0];
    for (unsigned k = 1; k < CACHE_SLOTS; k++)
        if (s->cache[k].used < slot->used)
            slot = &s->cache[k];
    if (slot->end > slot->start && slot->hits == 0 && s->around > AROUND_MIN)
        s->around /= 2;
    if (read_ranges(s, &window, 1, slot->bytes) < 0)
        return NULL;
    slot->start = window.start;
    slot->end = window.end;
    slot->hits = 0;
    slot->used = ++s->cache_clock;
    return slot;
}

/* Copies range r of the batch out of a window that holds it. */
static void copy_cached(struct scan *s, struct batch *b, size_t r, size_t at, struct cached_window *w)
{
    memcpy(b->window + at, w->bytes + (b->ranges[r].start - w->start), (size_t)(b->ranges[r].end - b->ranges[r].start));
    w->hits++;
    w->used = ++s->cache_clock;
}

/* Reads the batch's blocks, unless the memory can be viewed in place:
 * ranges a window holds are copied from it; a small batch that none
 * holds is read with what lies around it; the rest is read in place, one
 * call per run of ranges missing. */
static int batch_read(struct scan *s, struct batch *b)
{
    if (s->memory->view || b->bytes > WINDOW_BYTES || b->range_count == 0)
        return 0; /* a view, one large block scanned a chunk at a time, or nothing to read */
    bool any_cached = false;
    for (size_t r = 0; r < b->range_count && !any_cached; r++)
        any_cached = cached(s, b->ranges[r].start, b->ranges[r].end) != NULL;
    uint64_t span = b->ranges[b->range_count - 1].end - b->ranges[0].start;
    if (!any_cached && b->bytes < s->around && span <= AROUND_MAX / 2) {
        struct cached_window *w = read_around(s, b);
        if (!w)
            goto gone;
        for (size_t r = 0, at = 0; r < b->range_count; at += b->ranges[r].end - b->ranges[r].start, r++)
            copy_cached(s, b, r, at, w);
        w->hits = 0; /* its own batch is no hit */
        return 0;
    }
    size_t run = 0, run_at = 0, at = 0; /* ranges [run, r) are missing, to be read at window + run_at */
    for (size_t r = 0; r <= b->range_count; r++) {
        struct cached_window *w = r < b->range_count ? cached(s, b->ranges[r].start, b->ranges[r].end) : NULL;
        if (r == b->range_count || w) {
            if (r > run && read_ranges(s, &b->ranges[run], r - run, b->window + run_at) < 0)
                goto gone;
            if (w) {
                copy_cached(s, b, r, at, w);
                s->around = s->around < AROUND_MAX / 2 ? 2 * s->around : AROUND_MAX;
            }
            run = r + 1;
            run_at = at + (r < b->range_count ? (size_t)(b->ranges[r].end - b->ranges[r].start) : 0);
        }
        if (r < b->range_count)
            at += (size_t)(b->ranges[r].end - b->ranges[r].start);
    }
    return 0;
gone:
    s->gone = true;
    return -1;
}

/* ---- memcheck's heuristics ----------------------------------------------- */

/* CPython's layout, the same from 3.6 to 3.13 in their default builds
 * (x86-64 and aarch64): a PyObject starts with its reference count and
 * its type; a type object's tp_flags lies 168 bytes in. The GC header
 * before a collected object is two words from 3.8; in 3.6 and 3.7 a union
 * of three words with a long double, 32 bytes. */
#define PY_OBJECT_TYPE 8u
#define PY_TYPE_FLAGS 168u
#define PY_TPFLAGS_MANAGED_WEAKREF (1ull << 3) /* 3.12 on */
#define PY_TPFLAGS_MANAGED_DICT (1ull << 4)    /* 3.11 on */
#define PY_TPFLAGS_HAVE_GC (1ull << 14)
#define PY_TPFLAGS_TYPE_SUBCLASS (1ull << 31) /* its instances are types */
#define PY_GC_HEADER 16u
#define PY_GC_HEADER_BEFORE_3_8 32u
#define PY_NOT_A_TYPE UINT64_MAX

/* The versions whose layout the heuristics know. */
static bool python_layout_known(uint32_t version)
{
    return version >= 0x03060000 && version < 0x030e0000;
}

static uint64_t python_gc_header(const struct scan *s)
{
    return s->python_version < 0x03080000 ? PY_GC_HEADER_BEFORE_3_8 : PY_GC_HEADER;
}

/* Whether `type` is a type object: its type has Py_TPFLAGS_TYPE_SUBCLASS,
 * and the chain of types ends, within two steps, at one that is its own
 * type (`type` itself): a metaclass is an instance of `type`, `type` of
 * itself. A word that is no type needs that self-reference and the flag
 * by chance to pass: heap records linked to each other do not
 * (test_python_immortal_objects_are_roots). Py_TPFLAGS_READY is no test:
 * 3.12's finalization clears it on the static types, and the exit check
 * comes after. */
static bool python_is_type(struct scan *s, uint64_t type, uint64_t *flags)
{
    uint64_t meta, meta_flags, root, root_type;
    if (read_word(s, type + PY_OBJECT_TYPE, &meta) < 0 || meta < 4096 || (meta & 7) ||
        read_word(s, meta + PY_TYPE_FLAGS, &meta_flags) < 0 || !(meta_flags & PY_TPFLAGS_TYPE_SUBCLASS) ||
        read_word(s, meta + PY_OBJECT_TYPE, &root) < 0 || root < 4096 || (root & 7))
        return false;
    if (root != meta && (read_word(s, root + PY_OBJECT_TYPE, &root_type) < 0 || root_type != root))
        return false;
    return read_word(s, type + PY_TYPE_FLAGS, flags) == 0;
}

/* What CPython allocates before an instance of type (its
 * _PyType_PreHeaderSize: the GC header, and from 3.11 the managed dict's
 * two words before that), or PY_NOT_A_TYPE when type is no type object
 * (python_is_type). Remembered per type for the scan: most objects share
 * a few types. */
static uint64_t python_pre_header(struct scan *s, uint64_t type)
{
    if (type < 4096 || (type & 7))
        return PY_NOT_A_TYPE;
    struct python_type_seen *seen = &s->python_types[(type >> 3) % PYTHON_TYPES_SEEN];
    if (seen->type == type)
        return seen->pre_header;
    uint64_t flags, pre_header = PY_NOT_A_TYPE;
    if (python_is_type(s, type, &flags)) {
        uint64_t managed = s->python_version >= 0x030c0000   ? PY_TPFLAGS_MANAGED_DICT | PY_TPFLAGS_MANAGED_WEAKREF
                           : s->python_version >= 0x030b0000 ? PY_TPFLAGS_MANAGED_DICT
                                                             : 0;
        pre_header = (flags & PY_TPFLAGS_HAVE_GC ? python_gc_header(s) : 0) + (flags & managed ? 16u : 0u);
    }
    *seen = (struct python_type_seen){type, pre_header};
    return pre_header;
}

/* CPython 3.11 and 3.12 keep an instance's attribute values apart from
 * its dict (PyDictValues), pointed to past a prefix of slots + 2 bytes
 * rounded up to a word, whose last byte holds the prefix's own size. 3.12
 * tags the object's own pointer to them one byte early (a dict's is
 * plain). The slots are counted from the block's size, which `memslope
 * leaks` knows only as glibc's usable size (up to 24 bytes more). */
static bool python_dict_values(struct scan *s, size_t i, uint64_t ptr)
{
    uint64_t data = s->blocks[i].address, size = s->blocks[i].size, prefix = ptr - data, word;
    if (s->python_version < 0x030b0000 || s->python_version >= 0x030d0000)
        return false;
    if (prefix % 8 == 7 && s->python_version >= 0x030c0000)
        prefix++;
    if (prefix % 8 || prefix < 8 || prefix >= size || prefix > 255)
        return false;
    uint64_t most = (size - prefix) / 8; /* slots, with the usable size's slack */
    bool fits = false;
    for (uint64_t slots = most; slots >= 1 && slots + 3 > most && !fits; slots--)
        fits = ((slots + 2 + 7) & ~7ull) == prefix;
    return fits && read_word(s, data + prefix - 8, &word) == 0 && word >> 56 == prefix;
}

/* The python heuristic (memslope's own; memcheck has none for CPython, so
 * valgrind-python.supp hides what it reports): CPython hands out a
 * pointer to the object, past its GC header, and a GC object that is not
 * in a collector's list (an immutable tuple or dict untracked, a type's
 * MRO) is referenced by such pointers only, as is the header itself of an
 * object with a managed dict (the collector's lists link headers). Both
 * count as start pointers when the object's type says its pre-header
 * puts it there. */
static bool python_object_start(struct scan *s, size_t i, uint64_t ptr)
{
    uint64_t data = s->blocks[i].address, size = s->blocks[i].size, offset = ptr - data, type;
    if (!python_layout_known(s->python_version))
        return false;
    if (python_dict_values(s, i, ptr))
        return true;
    if (offset != PY_GC_HEADER && offset != 2 * PY_GC_HEADER)
        return false;
    if (s->python_version < 0x03080000 && offset != PY_GC_HEADER_BEFORE_3_8)
        return false; /* before 3.8: only past its GC header */
    /* the object at ptr, or the object whose GC header ptr is */
    for (uint64_t object = ptr; object - data <= 2 * PY_GC_HEADER; object += PY_GC_HEADER) {
        if (object - data + 16 > size || read_word(s, object + PY_OBJECT_TYPE, &type) < 0)
            return false;
        if (python_pre_header(s, type) == object - data)
            return true;
    }
    return false;
}

/* True when memcheck (default --leak-check-heuristics=all) would count the
 * interior pointer ptr into block i as a start pointer. Only asked for
 * interior pointers from a definite source into blocks not yet reachable:
 * a few thousand in a scan of a million blocks, each word read alone. */
static bool heuristically_reachable(struct scan *s, size_t i, uint64_t ptr)
{
    uint64_t data = s->blocks[i].address, size = s->blocks[i].size, word0, word1;
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
    return python_object_start(s, i, ptr);
}

/* ---- marking ------------------------------------------------------------- */

static bool is_pending(const struct scan *s, size_t i)
{
    return s->pending[i / 64] >> (i % 64) & 1;
}

/* Block i is to be scanned: by the sweep running when it lies ahead of
 * it, else by the next sweep. */
static void set_pending(struct scan *s, size_t i)
{
    if (is_pending(s, i))
        return;
    s->pending[i / 64] |= 1ull << (i % 64);
    s->pending_words[i / 4096] |= 1ull << (i / 64 % 64);
    s->pending_count++;
    struct sweep *w = &s->sweep;
    if (w->active && (w->up ? i >= w->finger : i < w->finger)) {
        if (w->up ? i > w->end : i < w->end)
            w->end = i;
        return;
    }
    if (s->next_low > s->next_high) {
        s->next_low = s->next_high = i;
    } else {
        s->next_low = i < s->next_low ? i : s->next_low;
        s->next_high = i > s->next_high ? i : s->next_high;
    }
}

static void clear_pending(struct scan *s, size_t i)
{
    s->pending[i / 64] &= ~(1ull << (i % 64));
    if (!s->pending[i / 64])
        s->pending_words[i / 4096] &= ~(1ull << (i / 64 % 64));
    s->pending_count--;
}

/* memcheck's lc_push_without_clique_if_a_chunk_ptr. */
static void reach_from_roots(struct scan *s, size_t i, uint64_t word, bool start, bool prior_definite)
{
    uint8_t state = s->state[i];
    if (state == REACHABLE)
        return;
    /* A heuristic only matters where it can make the block reachable. */
    bool via_start = start || (prior_definite && heuristically_reachable(s, i, word));
    if (via_start && prior_definite) {
        s->state[i] = REACHABLE;
        set_pending(s, i);
    } else if (state == UNREACHED) {
        s->state[i] = POSSIBLE;
        set_pending(s, i);
    }
}

/* memcheck's lc_push_with_clique_if_a_chunk_ptr. */
static void reach_from_clique(struct scan *s, size_t i, size_t leader)
{
    if (s->state[i] == UNREACHED && i != leader) {
        s->state[i] = INDIRECT;
        set_pending(s, i);
    }
}

/* A word that may point into a block, on its way through the pipeline. */
struct hit {
    uint64_t word;
    const struct index_entry *entry;
    const struct region *region;
    size_t block;
    bool start, prior_definite;
};

/* Most of the scan waits for memory: the index entry of a word, then the
 * state of the block it starts (or the extent of the block it may be
 * inside). Words are resolved in three stages of HIT_BATCH candidates,
 * each stage's loads prefetched a whole stage ahead, across blocks: the
 * marks of a block land a little after its scan, which memcheck's
 * fixpoint does not mind, and all have landed at pipeline_flush. */
struct pipeline {
    struct hit stage[3][HIT_BATCH];
    size_t count[3];
    unsigned filling; /* stage being filled; the next one is resolved, the one after marked */
    size_t clique;
};

/* Whether words are looked up at once rather than through the pipeline.
 * The pipeline overlaps the cache misses of a large index: on
 * bench/leakscan's classify_bench, 4 million blocks took 0.59 s through it
 * and 2.2-2.5 s at once, 1 million 0.052 against 0.068-0.073 s. Where the
 * index and the blocks' states fit in a cache (up to ~400,000 blocks),
 * there is little to overlap and its bookkeeping is the cost: 400,000
 * blocks the same either way, 100,000 0.004 against 0.005 s, and issue
 * 14's driver's four checks (420,000 blocks, its pointers mostly near
 * each other) 976 M against 1,090 M instructions, its case checks 31-43
 * against 33-50 ms. */
static bool use_direct_lookup(const struct scan *s, enum leakscan_word_lookup asked)
{
    if (asked != LEAKSCAN_WORDS_AUTO)
        return asked == LEAKSCAN_WORDS_DIRECT;
    size_t entries = 0;
    for (size_t k = 0; k < s->region_count; k++)
        entries += entries_of(&s->regions[k]);
    return entries * sizeof *s->index + s->count <= DIRECT_LOOKUP_BYTES;
}

/* The last block starting at or before a hit's word, and whether the
 * word is its start. */
static inline void resolve_hit(struct hit *hit)
{
    const struct region *r = hit->region;
    uint64_t offset = hit->word - r->start, granule = offset >> r->shift;
    unsigned bit = (unsigned)(granule % 64);
    uint64_t starts = hit->entry->starts;
    uint64_t at_or_before = starts & (bit == 63 ? ~0ull : (2ull << bit) - 1);
    hit->block = hit->entry->before + bit_count(at_or_before) - 1;
    hit->start = (starts >> bit & 1) && (offset & ((1ull << r->shift) - 1)) == 0;
}

/* A resolved hit's mark, if the word lies in the block. */
static inline void mark_hit(struct scan *s, const struct hit *hit, size_t clique)
{
    size_t i = hit->block;
    if (!hit->start && hit->word - s->blocks[i].address >= s->blocks[i].size)
        return; /* past the end of the block before it (a zero-size one is never inside) */
    s->stats.pointer_hits++;
    if (clique == NO_CLIQUE)
        reach_from_roots(s, i, hit->word, hit->start, hit->prior_definite);
    else
        reach_from_clique(s, i, clique);
}

/* Stage 2: resolves each hit; prefetches what stage 3 reads. */
static void resolve_stage(const struct scan *s, struct hit *hits, size_t count)
{
    for (size_t h = 0; h < count; h++) {
        struct hit *hit = &hits[h];
        resolve_hit(hit);
        if (hit->start)
            __builtin_prefetch(&s->state[hit->block]);
        else
            __builtin_prefetch(&s->blocks[hit->block]);
    }
}

/* Stage 3: the marks. */
static void mark_stage(struct scan *s, const struct hit *hits, size_t count, size_t clique)
{
    for (size_t h = 0; h < count; h++)
        mark_hit(s, &hits[h], clique);
}

/* Moves every stage on: marks the oldest, resolves the middle one, and
 * starts filling the emptied one. */
static void pipeline_advance(struct scan *s, struct pipeline *p)
{
    unsigned resolving = (p->filling + 2) % 3, marking = (p->filling + 1) % 3;
    mark_stage(s, p->stage[marking], p->count[marking], p->clique);
    resolve_stage(s, p->stage[resolving], p->count[resolving]);
    p->count[marking] = 0;
    p->filling = marking;
}

/* Lands every mark in flight. */
static void pipeline_flush(struct scan *s, struct pipeline *p)
{
    for (int step = 0; step < 3; step++)
        pipeline_advance(s, p);
}

/* Stage 1: the words that fall in a region, with their index entries
 * prefetched. clique: NO_CLIQUE from the roots, else the leader. */
static void scan_words(struct scan *s, struct pipeline *p, const uint64_t *words, size_t n, bool prior_definite,
                       size_t clique)
{
    if (p->clique != clique) {
        pipeline_flush(s, p);
        p->clique = clique;
    }
    for (size_t k = 0; k < n; k++) {
        uint64_t word = words[k];
        if (word - s->low >= s->span)
            continue;
        const struct region *r = s->last_region;
        if (word - r->start >= r->end - r->start) {
            r = find_region(s, word);
            if (!r || word < r->start)
                continue;
            s->last_region = r;
        }
        uint64_t granule = (word - r->start) >> r->shift;
        if (s->direct) {
            struct hit hit = {.word = word, .entry = &s->index[r->entry + granule / 64], .region = r,
                              .prior_definite = prior_definite};
            resolve_hit(&hit);
            mark_hit(s, &hit, clique);
            continue;
        }
        struct hit *hit = &p->stage[p->filling][p->count[p->filling]++];
        *hit = (struct hit){.word = word, .entry = &s->index[r->entry + granule / 64], .region = r,
                            .prior_definite = prior_definite};
        __builtin_prefetch(hit->entry);
        if (p->count[p->filling] == HIT_BATCH)
            pipeline_advance(s, p);
    }
}

/* A block's words, less glibc's link of a chunk to itself: a chunk alone
 * in its large bin has fd_nextsize and bk_nextsize (16 and 24 bytes in)
 * both holding its own header's address, 16 bytes before the block, and
 * malloc hands it out again without clearing them. Until the program
 * overwrites them they point into the block before whenever that one's
 * request fills its chunk (glibc's prev_size field is its last word), as
 * an interior pointer memcheck never sees (its blocks have red zones). A
 * program's own data does not hold its header's address twice, there. */
static inline void scan_block_words(struct scan *s, const uint64_t *words, size_t n, uint64_t address,
                                    bool prior_definite, size_t clique)
{
    uint64_t header = address - 16;
    if (n >= 4 && words[2] == header && words[3] == header) {
        scan_words(s, s->pipeline, words, 2, prior_definite, clique);
        words += 4;
        n -= 4;
    }
    scan_words(s, s->pipeline, words, n, prior_definite, clique);
}

/* Scans the aligned words inside [start, end), CHUNK_BYTES at a time. A
 * block's chunk none of whose pages holds data is skipped: a heap block is
 * the process's private memory, so a page it never touched reads as zeros.
 * Roots are read whole: a shared mapping's page that another process wrote
 * holds data without being in this process's page table. */
static int scan_range(struct scan *s, uint64_t start, uint64_t end, bool prior_definite, size_t clique,
                      bool is_block)
{
    uint64_t at = (start + 7) & ~7ull, stop = end & ~7ull;
    while (at < stop) {
        /* Chunks end on CHUNK_BYTES boundaries, so no two share a page:
         * reading one maps the zero page in for its untouched pages, which
         * must not make the next chunk look touched. */
        uint64_t room = CHUNK_BYTES - at % CHUNK_BYTES;
        size_t length = stop - at < room ? (size_t)(stop - at) : (size_t)room;
        if (is_block && s->memory->holds_data && !s->memory->holds_data(s->memory->context, at, length)) {
            s->stats.untouched_bytes += length; /* zeros: they point nowhere */
            at += length;
            continue;
        }
        const uint64_t *words = words_at(s, at, length);
        if (!words)
            return -1;
        if (is_block && at == ((start + 7) & ~7ull))
            scan_block_words(s, words, length / 8, start, prior_definite, clique);
        else
            scan_words(s, s->pipeline, words, length / 8, prior_definite, clique);
        at += length;
    }
    return 0;
}

/* The words of a block inside the run of memory held around it, or NULL
 * (no view_span, nothing held there, or the block runs past it). */
static const uint64_t *held_words(struct scan *s, struct leakscan_range words)
{
    struct held_span *h = &s->held;
    if (words.start - h->start >= h->end - h->start) {
        if (!s->memory->view_span)
            return NULL;
        const void *base = s->memory->view_span(s->memory->context, words.start, &h->start, &h->end);
        if (!base) {
            *h = (struct held_span){0, 0, NULL};
            return NULL;
        }
        h->base = base;
    }
    if (words.end > h->end)
        return NULL;
    return (const uint64_t *)(h->base + (words.start - h->start));
}

/* Scans block i where it lies: through the view, or a chunk read at a
 * time. A block inside the run of memory the view last held is scanned
 * without asking the memory again (two calls and two range lookups a
 * block, for blocks of a few words). */
static int scan_block_in_place(struct scan *s, size_t i, size_t clique)
{
    bool prior_definite = s->state[i] != POSSIBLE;
    s->stats.block_bytes += s->blocks[i].size;
    struct leakscan_range words = scanned_words(s, i);
    if (words.end - words.start < 8)
        return 0;
    const uint64_t *held = s->memory->view ? held_words(s, words) : NULL;
    if (held) {
        scan_block_words(s, held, (size_t)(words.end - words.start) / 8, s->blocks[i].address, prior_definite,
                         clique);
        return 0;
    }
    return scan_range(s, words.start, words.end, prior_definite, clique, true);
}

/* Scans block i of a batch that was read (or can be viewed). */
static int scan_block(struct scan *s, const struct batch *b, size_t k, size_t clique)
{
    size_t i = b->blocks[k];
    if (s->memory->view || b->bytes > WINDOW_BYTES)
        return scan_block_in_place(s, i, clique);
    bool prior_definite = s->state[i] != POSSIBLE;
    s->stats.block_bytes += s->blocks[i].size;
    struct leakscan_range words = scanned_words(s, i);
    size_t n = (size_t)(words.end - words.start) / 8;
    if (n == 0)
        return 0;
    scan_block_words(s, (const uint64_t *)(b->window + b->offsets[k]), n, s->blocks[i].address, prior_definite,
                     clique);
    return 0;
}

/* ---- sweeping the pending blocks ----------------------------------------- */

/* The first pending block in [from, last], or NO_BLOCK. */
static size_t first_pending(const struct scan *s, size_t from, size_t last)
{
    size_t w = from / 64;
    uint64_t bits = s->pending[w] & (~0ull << (from % 64));
    while (!bits) {
        size_t next = w + 1, k = next / 64; /* the next word with a pending block, by the words' bits */
        if (k > last / 4096)
            return NO_BLOCK;
        uint64_t words = s->pending_words[k] & (~0ull << (next % 64));
        while (!words) {
            if (k >= last / 4096)
                return NO_BLOCK;
            words = s->pending_words[++k];
        }
        w = k * 64 + (size_t)__builtin_ctzll(words);
        if (w > last / 64)
            return NO_BLOCK;
        bits = s->pending[w];
    }
    size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
    return i <= last ? i : NO_BLOCK;
}

/* The last pending block in [first, to], or NO_BLOCK. */
static size_t last_pending(const struct scan *s, size_t first, size_t to)
{
    size_t w = to / 64;
    uint64_t bits = s->pending[w] & (~0ull >> (63 - to % 64));
    while (!bits) {
        if (w == 0)
            return NO_BLOCK;
        size_t previous = w - 1, k = previous / 64; /* the previous word with a pending block */
        if (k < first / 4096)
            return NO_BLOCK;
        uint64_t words = s->pending_words[k] & (~0ull >> (63 - previous % 64));
        while (!words) {
            if (k <= first / 4096)
                return NO_BLOCK;
            words = s->pending_words[--k];
        }
        w = k * 64 + 63 - (size_t)__builtin_clzll(words);
        if (w < first / 64)
            return NO_BLOCK;
        bits = s->pending[w];
    }
    size_t i = w * 64 + 63 - (size_t)__builtin_clzll(bits);
    return i >= first ? i : NO_BLOCK;
}

/* The next pending block from the finger in the sweep's direction, up to
 * its end; NO_BLOCK when none is left. */
static size_t next_pending(const struct scan *s)
{
    const struct sweep *w = &s->sweep;
    if (w->up)
        return w->finger <= w->end ? first_pending(s, w->finger, w->end) : NO_BLOCK;
    return w->finger > w->end ? last_pending(s, w->end, w->finger - 1) : NO_BLOCK;
}

/* Whether block i lies too far from the batch's first block to join it:
 * the finger moves past a whole batch, so a batch spread wide would leave
 * behind it the blocks its own scan marks between its blocks (a list
 * reached at many places at once then takes a sweep a link). */
static bool too_far(const struct scan *s, const struct batch *b, size_t i)
{
    return b->count > 0 && s->blocks[i].address - s->blocks[b->blocks[0]].address > WINDOW_BYTES;
}

/* Fills the batch with pending blocks from the finger on, and moves the
 * finger past them. Going down, blocks are taken top down within a budget
 * the same blocks laid out bottom up cannot pass, then added bottom up. */
static void gather_pending(struct scan *s, struct batch *b)
{
    batch_clear(b);
    struct sweep *w = &s->sweep;
    size_t i;
    if (w->up) {
        while ((i = next_pending(s)) != NO_BLOCK && !too_far(s, b, i) && batch_add(s, b, i)) {
            w->finger = i + 1;
            if (is_large(s, i))
                break;
        }
        return;
    }
    size_t n = 0, budget = 0;
    while ((i = next_pending(s)) != NO_BLOCK) {
        size_t length = scanned_length(s, i);
        if (n > 0 && (n == WINDOW_RANGES || is_large(s, i) || budget + length + s->near_gap > WINDOW_BYTES ||
                      s->blocks[b->blocks[0]].address - s->blocks[i].address > WINDOW_BYTES))
            break;
        b->blocks[n++] = i;
        budget += length + s->near_gap;
        w->finger = i;
        if (is_large(s, i))
            break;
    }
    for (size_t k = 0; k < n / 2; k++) {
        size_t t = b->blocks[k];
        b->blocks[k] = b->blocks[n - 1 - k];
        b->blocks[n - 1 - k] = t;
    }
    for (size_t k = 0; k < n; k++) {
        size_t block = b->blocks[k];
        batch_add(s, b, block); /* fits: see the budget */
    }
}

static int scan_batch(struct scan *s, struct batch *b, size_t clique)
{
    if (batch_read(s, b) < 0)
        return -1;
    for (size_t k = 0; k < b->count; k++) {
        clear_pending(s, b->blocks[k]);
        if (scan_block(s, b, k, clique) < 0)
            return -1;
    }
    pipeline_flush(s, s->pipeline); /* the batch's marks in, before the next is gathered */
    return 0;
}

/* One sweep over memory that can be viewed: each pending block scanned
 * where it lies, in the sweep's order. Batches group the reads of a live
 * process; a view needs none, and gathering them was a third of what a
 * block cost around its words (issue 14's Python driver: 360,000 small
 * objects reached through the garbage collector's lists, callgrind). The
 * marks still in the pipeline land before the sweep ends: those ahead of
 * the finger extend it, as set_pending says. */
static int sweep_in_view(struct scan *s, size_t clique)
{
    struct sweep *w = &s->sweep;
    for (;;) {
        size_t i;
        while ((i = next_pending(s)) != NO_BLOCK) {
            w->finger = w->up ? i + 1 : i;
            clear_pending(s, i);
            if (scan_block_in_place(s, i, clique) < 0)
                return -1;
        }
        pipeline_flush(s, s->pipeline);
        if (next_pending(s) == NO_BLOCK)
            return 0;
    }
}

/* One sweep over a live process's memory, a batch of blocks read at a
 * time. */
static int sweep_in_batches(struct scan *s, size_t clique)
{
    for (;;) {
        gather_pending(s, &s->batch);
        if (s->batch.count == 0)
            return 0;
        if (scan_batch(s, &s->batch, clique) < 0)
            return -1;
    }
}

/* Scans pending blocks until none is left: sweeps in address order,
 * alternately up and down. */
static int scan_pending(struct scan *s, size_t clique)
{
    bool up = true;
    while (s->pending_count > 0) {
        s->stats.sweeps++;
        s->sweep = (struct sweep){true, up, up ? s->next_low : s->next_high + 1, up ? s->next_high : s->next_low};
        s->next_low = SIZE_MAX;
        s->next_high = 0;
        if ((s->memory->view ? sweep_in_view(s, clique) : sweep_in_batches(s, clique)) < 0)
            return -1;
        s->sweep.active = false;
        up = !up;
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
        if (scan_range(s, root->start, root->end, true, NO_CLIQUE, false) < 0)
            return -1;
    }
    scan_words(s, s->pipeline, image->root_words, image->root_word_count, true, NO_CLIQUE);
    pipeline_flush(s, s->pipeline);
    return scan_pending(s, NO_CLIQUE);
}

/* The word `offset` bytes into block i: from the window of batch b (its
 * block k) when it was read there, else read alone (b NULL: alone). */
static int batch_word(struct scan *s, const struct batch *b, size_t k, size_t i, uint64_t offset, uint64_t *value)
{
    struct leakscan_range words = scanned_words(s, i);
    uint64_t address = s->blocks[i].address + offset;
    bool windowed = b && !s->memory->view && b->bytes <= WINDOW_BYTES && b->offsets[k] != SIZE_MAX;
    if (windowed && address >= words.start && address + 8 <= words.end && (address & 7) == 0) {
        memcpy(value, b->window + b->offsets[k] + (address - words.start), 8);
        return 0;
    }
    return read_word(s, address, value);
}

/* Whether block i (block k of batch b, or b NULL) holds a CPython object
 * that is immortal, at the offset its type's pre-header puts it: 3.12 and
 * 3.13 keep such a count in the low 32 bits (negative as an int32) and
 * never touch the high ones, which a heap address would set. */
static bool python_immortal(struct scan *s, const struct batch *b, size_t k, size_t i)
{
    uint64_t size = s->blocks[i].size, type, references;
    for (uint64_t offset = 0; offset <= 2 * PY_GC_HEADER && offset + 16 <= size; offset += PY_GC_HEADER) {
        if (batch_word(s, b, k, i, offset + PY_OBJECT_TYPE, &type) < 0)
            return false;
        if (python_pre_header(s, type) == offset)
            return batch_word(s, b, k, i, offset, &references) == 0 && references >> 32 == 0 &&
                   (references & 0x80000000u);
    }
    return false;
}

static size_t gather_unreached(struct scan *s, struct batch *b, size_t from);

static void mark_immortal(struct scan *s, const struct batch *b, size_t k, size_t i)
{
    if (python_immortal(s, b, k, i)) {
        s->state[i] = REACHABLE;
        set_pending(s, i);
    }
}

/* CPython 3.12 and 3.13 keep immortal objects (interned strings, small
 * ints, the constants of code it loaded) for the life of the process: its
 * finalization drops every pointer to them and frees none, by design, so
 * memcheck's rules call them definitely lost at exit (python3.13 -c
 * 'import json': 4,393 blocks, memcheck with PYTHONMALLOC=malloc the
 * same). Each one the roots did not reach, or reached through an interior
 * pointer only, is a root itself, as the static object it stands for
 * would be, before the cliques are gathered. The unreached blocks are
 * read in batches, as the cliques read them; the possibly lost ones, few,
 * a word at a time. */
static int mark_python_immortals(struct scan *s)
{
    if (s->python_version < 0x030c0000 || s->python_version >= 0x030e0000)
        return 0;
    for (size_t i = 0; i < s->count; i++)
        if (s->state[i] == POSSIBLE)
            mark_immortal(s, NULL, 0, i);
    for (size_t next = 0; next < s->count;) {
        next = gather_unreached(s, &s->leaders, next);
        if (batch_read(s, &s->leaders) < 0)
            return -1;
        for (size_t k = 0; k < s->leaders.count; k++)
            mark_immortal(s, &s->leaders, k, s->leaders.blocks[k]);
    }
    return scan_pending(s, NO_CLIQUE);
}

/* The unreached blocks from block `from` on, read together: the next
 * clique leaders, in address order. Returns the block after them. */
static size_t gather_unreached(struct scan *s, struct batch *b, size_t from)
{
    batch_clear(b);
    size_t i = from;
    for (; i < s->count; i++) {
        if (s->state[i] != UNREACHED)
            continue;
        if (!batch_add(s, b, i))
            break;
        if (is_large(s, i))
            return i + 1;
    }
    return i;
}

/* memcheck's cliques: each unreached block, in address order, leads the
 * unreached blocks it reaches (indirectly lost), absorbing earlier
 * leaders. */
static int gather_cliques(struct scan *s)
{
    for (size_t next = 0; next < s->count;) {
        next = gather_unreached(s, &s->leaders, next);
        if (batch_read(s, &s->leaders) < 0)
            return -1;
        for (size_t k = 0; k < s->leaders.count; k++) {
            size_t leader = s->leaders.blocks[k];
            if (s->state[leader] != UNREACHED)
                continue; /* in an earlier leader's clique */
            if (scan_block(s, &s->leaders, k, leader) < 0)
                return -1;
            pipeline_flush(s, s->pipeline);
            if (scan_pending(s, leader) < 0)
                return -1;
        }
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

static void free_batch(struct batch *b)
{
    free(b->blocks);
    free(b->offsets);
    free(b->ranges);
    free(b->window);
}

static void free_scan(struct scan *s)
{
    free(s->state);
    free(s->pending);
    free(s->pending_words);
    free(s->regions);
    free(s->index);
    free_batch(&s->batch);
    free_batch(&s->leaders);
    free(s->chunk);
    free(s->pipeline);
    for (unsigned k = 0; k < CACHE_SLOTS; k++)
        free(s->cache[k].bytes);
}

static int alloc_batch(struct batch *b, bool window)
{
    b->blocks = malloc(BATCH_BLOCKS * sizeof *b->blocks);
    b->offsets = malloc(BATCH_BLOCKS * sizeof *b->offsets);
    b->ranges = malloc(WINDOW_RANGES * sizeof *b->ranges);
    b->window = window ? malloc(WINDOW_BYTES) : NULL;
    return b->blocks && b->offsets && b->ranges && (b->window || !window) ? 0 : -1;
}

static int alloc_scan(struct scan *s, size_t count, char *err, size_t err_size)
{
    s->state = calloc(count ? count : 1, 1);
    s->pending = calloc(count / 64 + 1, sizeof *s->pending);
    s->pending_words = calloc(count / 4096 + 1, sizeof *s->pending_words);
    s->chunk = malloc(CHUNK_BYTES);
    s->pipeline = calloc(1, sizeof *s->pipeline);
    if (s->pipeline)
        s->pipeline->clique = NO_CLIQUE;
    bool window = !s->memory->view;
    bool cache = true;
    for (unsigned k = 0; window && k < CACHE_SLOTS; k++)
        cache &= (s->cache[k].bytes = malloc(AROUND_MAX)) != NULL;
    if (s->state && s->pending && s->pending_words && s->chunk && s->pipeline && cache &&
        alloc_batch(&s->batch, window) == 0 && alloc_batch(&s->leaders, window) == 0)
        return 0;
    error_printf(err, err_size, "leak scan: out of memory for %zu blocks", count);
    return -1;
}

int leakscan_classify(const struct leakscan_image *image, struct leakscan_block *blocks, size_t block_count,
                      struct leakscan_totals *totals, struct leakscan_stats *stats, char *err, size_t err_size)
{
    struct scan s = {.memory = &image->memory, .blocks = blocks, .count = block_count, .next_low = SIZE_MAX,
                     .around = AROUND_MIN};
    s.near_gap = image->memory.read_ranges ? NEAR_GAP : NEAR_GAP_UNBATCHED;
    s.python_version = image->python_version;
    leakscan_sort_blocks(blocks, block_count);
    int rc = -1;
    if (alloc_scan(&s, block_count, err, err_size) < 0 || check_sorted(&s, err, err_size) < 0 ||
        build_index(&s, err, err_size) < 0)
        goto out;
    s.direct = use_direct_lookup(&s, image->word_lookup);
    if (mark_from_roots(&s, image) < 0 || mark_python_immortals(&s) < 0 || gather_cliques(&s) < 0) {
        error_printf(err, err_size, "the process exited during the leak scan (its memory could not be read any more); "
                                 "nothing was reported");
        goto out;
    }
    for (size_t i = 0; i < block_count; i++)
        blocks[i].category = category_of(s.state[i]);
    if (totals)
        leakscan_sum(blocks, block_count, totals);
    if (stats)
        *stats = s.stats;
    rc = 0;
out:
    free_scan(&s);
    return rc;
}

/* live_table.c - see live_table.h. */
#include "live_table.h"
#include "../common/populate.h"

#include <stdlib.h>
#include <string.h>

/* A slot's packed word: size, then distance in iterations from the
 * context's first, then the context's index. */
#define SIZE_BITS 22
#define DISTANCE_BITS 18
#define CONTEXT_SHIFT (SIZE_BITS + DISTANCE_BITS)
#define SIZE_MASK ((1ull << SIZE_BITS) - 1)
#define DISTANCE_MASK ((1ull << DISTANCE_BITS) - 1)
/* The slot's size field for a block of SIZE_IN_CONTEXT bytes or more: its
 * context (its own, unshared) holds the size. */
#define SIZE_IN_CONTEXT SIZE_MASK
#define NO_CONTEXT UINT32_MAX

_Static_assert(LIVE_TABLE_ITERATION_SPAN == 1u << DISTANCE_BITS, "the span is what the slot's field holds");
_Static_assert(LIVE_TABLE_MAX_CONTEXTS == 1u << (64 - CONTEXT_SHIFT), "the context index fills the slot's word");

struct live_slot {
    uint64_t address; /* 0 = empty */
    uint64_t packed;  /* size | distance << SIZE_BITS | context << CONTEXT_SHIFT */
};

struct live_context {
    uint32_t site, first_iteration, case_id; /* site and iteration in live_block's order */
    uint32_t refs; /* blocks plus the cache word holding it; 0 = on the free list */
    uint64_t size; /* a big block's size; 0 for a shared context; free: next free index + 1 */
};

static inline uint64_t pack(uint64_t size, uint32_t distance, uint32_t context)
{
    return size | (uint64_t)distance << SIZE_BITS | (uint64_t)context << CONTEXT_SHIFT;
}

static inline uint32_t slot_context(const struct live_slot *slot)
{
    return (uint32_t)(slot->packed >> CONTEXT_SHIFT);
}

static size_t home_slot(const struct live_table *table, uint64_t address)
{
    /* Blocks are 16-byte aligned: drop the constant low bits, then mix. */
    uint64_t h = (address >> 4) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (table->capacity - 1);
}

void live_table_init(struct live_table *table)
{
    memset(table, 0, sizeof *table);
}

static inline __attribute__((always_inline)) void insert_unchecked(struct live_table *table,
                                                                    const struct live_slot *block)
{
    size_t mask = table->capacity - 1;
    size_t i = home_slot(table, block->address);
    while (table->slots[i].address)
        i = (i + 1) & mask;
    table->slots[i] = *block;
    table->count++;
}

/* The load limit of a capacity (live_table.h). */
static size_t count_limit(size_t capacity)
{
    return capacity >= LIVE_TABLE_DENSE_CAPACITY ? capacity / 4 * 3 : capacity / 2;
}

/* A table from this size on has its pages mapped in one call
 * (memory_populate) before the old one is moved into it: the move writes
 * a slot in every page (a quarter or more of the slots are taken, 256 to
 * a page), in hash order, a page fault each at random. The extension
 * driver's `items` case, growing to 1,048,576 slots while the program
 * waited on a full ring, spent 92 ms in its four largest moves; 54 ms
 * with the pages populated first (the case 207 -> 159 ms). */
#define POPULATE_MIN_BYTES (1u << 20)

static int grow(struct live_table *table)
{
    size_t capacity = table->capacity ? table->capacity * 2 : 1024;
    struct live_slot *slots = calloc(capacity, sizeof *slots);
    if (!slots)
        return -1;
    if (capacity * sizeof *slots >= POPULATE_MIN_BYTES)
        memory_populate(slots, capacity * sizeof *slots);
    struct live_slot *old = table->slots;
    size_t old_capacity = table->capacity;
    table->slots = slots;
    table->capacity = capacity;
    table->count_limit = count_limit(capacity);
    table->count = 0;
    /* Re-inserting in old slot order would break the FIFO order of
     * duplicates only if two copies of one address wrapped around the end;
     * walk from a slot that starts a chain (an empty one) to keep order. */
    size_t start = 0;
    while (start < old_capacity && old[start].address)
        start++;
    for (size_t n = 0; n < old_capacity; n++) {
        struct live_slot *block = &old[(start + n) & (old_capacity - 1)];
        if (block->address)
            insert_unchecked(table, block);
    }
    free(old);
    return 0;
}

/* A new context with one reference, or NO_CONTEXT without memory. */
static uint32_t context_new(struct live_table *table, const struct live_block *block, uint64_t own_size)
{
    uint32_t id;
    if (table->free_contexts) {
        id = table->free_contexts - 1;
        table->free_contexts = (uint32_t)table->contexts[id].size;
    } else {
        if (table->context_count == LIVE_TABLE_MAX_CONTEXTS)
            return NO_CONTEXT;
        if (table->context_count == table->context_capacity) {
            uint32_t capacity = table->context_capacity ? table->context_capacity * 2 : 64;
            struct live_context *grown = realloc(table->contexts, capacity * sizeof *grown);
            if (!grown)
                return NO_CONTEXT;
            table->contexts = grown;
            table->context_capacity = capacity;
        }
        id = table->context_count++;
    }
    table->contexts[id] = (struct live_context){block->site, block->iteration, block->case_id, 1, own_size};
    return id;
}

static void context_release(struct live_table *table, uint32_t id)
{
    struct live_context *context = &table->contexts[id];
    if (--context->refs == 0) {
        context->size = table->free_contexts;
        table->free_contexts = id + 1;
    }
}

/* Whether a context covers a block of this site, case and iteration (an
 * iteration before the context's first wraps to a large distance). */
static inline int context_covers(const struct live_context *context, const struct live_block *block,
                                 uint32_t distance)
{
    return context->site == block->site && context->case_id == block->case_id &&
           distance < LIVE_TABLE_ITERATION_SPAN;
}

/* The site's cached context when it covers the block, else a new one,
 * which becomes the cached one. */
static uint32_t shared_context(struct live_table *table, const struct live_block *block, uint32_t *cache)
{
    if (cache && *cache) {
        struct live_context *cached = &table->contexts[*cache - 1];
        if (context_covers(cached, block, block->iteration - cached->first_iteration)) {
            cached->refs++;
            return *cache - 1;
        }
    }
    uint32_t id = context_new(table, block, 0);
    if (id != NO_CONTEXT && cache) {
        if (*cache)
            context_release(table, *cache - 1);
        table->contexts[id].refs++;
        *cache = id + 1;
    }
    return id;
}

/* Everything but the common case: a table to grow, a big block, a block
 * its site's cached context does not cover. */
static __attribute__((noinline)) int insert_slow(struct live_table *table, const struct live_block *block,
                                                 uint32_t *cache)
{
    if (table->count >= table->count_limit && grow(table) < 0)
        return -1;
    int big = block->size >= SIZE_IN_CONTEXT;
    uint32_t context = big ? context_new(table, block, block->size) : shared_context(table, block, cache);
    if (context == NO_CONTEXT)
        return -1;
    uint32_t distance = block->iteration - table->contexts[context].first_iteration;
    struct live_slot slot = {block->address, pack(big ? SIZE_IN_CONTEXT : block->size, distance, context)};
    insert_unchecked(table, &slot);
    return 0;
}

int live_table_insert(struct live_table *table, const struct live_block *block, uint32_t *context_cache)
{
    /* The common case inline: room, a small block, its site's cached
     * context covering it. */
    if (table->count < table->count_limit && block->size < SIZE_IN_CONTEXT && context_cache && *context_cache) {
        uint32_t id = *context_cache - 1;
        struct live_context *cached = &table->contexts[id];
        uint32_t distance = block->iteration - cached->first_iteration;
        if (context_covers(cached, block, distance)) {
            cached->refs++;
            struct live_slot slot = {block->address, pack(block->size, distance, id)};
            insert_unchecked(table, &slot);
            return 0;
        }
    }
    return insert_slow(table, block, context_cache);
}

static void slot_view(const struct live_table *table, const struct live_slot *slot, struct live_block *block)
{
    const struct live_context *context = &table->contexts[slot_context(slot)];
    uint64_t size = slot->packed & SIZE_MASK;
    *block = (struct live_block){
        .address = slot->address,
        .size = size == SIZE_IN_CONTEXT ? context->size : size,
        .site = context->site,
        .iteration = context->first_iteration + (uint32_t)(slot->packed >> SIZE_BITS & DISTANCE_MASK),
        .case_id = context->case_id,
    };
}

/* Backward-shift deletion: pull later members of the chain into the hole. */
static void delete_slot(struct live_table *table, size_t hole)
{
    size_t mask = table->capacity - 1;
    size_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        if (!table->slots[i].address)
            break;
        size_t home = home_slot(table, table->slots[i].address);
        /* Move the entry at i into the hole if its home is not in (hole, i]. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            table->slots[hole] = table->slots[i];
            hole = i;
        }
    }
    memset(&table->slots[hole], 0, sizeof table->slots[hole]);
    table->count--;
}

void live_table_prefetch(const struct live_table *table, uint64_t address)
{
    if (table->capacity)
        __builtin_prefetch(&table->slots[home_slot(table, address)]);
}

int live_table_remove(struct live_table *table, uint64_t address, struct live_block *removed)
{
    if (!table->capacity || !address)
        return 0;
    size_t mask = table->capacity - 1;
    for (size_t i = home_slot(table, address); table->slots[i].address; i = (i + 1) & mask) {
        if (table->slots[i].address == address) {
            if (removed)
                slot_view(table, &table->slots[i], removed);
            context_release(table, slot_context(&table->slots[i]));
            delete_slot(table, i);
            return 1;
        }
    }
    return 0;
}

int live_table_next(const struct live_table *table, size_t *position, struct live_block *block)
{
    for (; *position < table->capacity; (*position)++) {
        if (table->slots[*position].address) {
            slot_view(table, &table->slots[(*position)++], block);
            return 1;
        }
    }
    return 0;
}

int live_table_copy(struct live_table *to, const struct live_table *from)
{
    live_table_init(to);
    if (from->capacity) {
        to->slots = malloc(from->capacity * sizeof *to->slots);
        if (!to->slots)
            return -1;
        memcpy(to->slots, from->slots, from->capacity * sizeof *to->slots);
        to->capacity = from->capacity;
        to->count = from->count;
        to->count_limit = from->count_limit;
    }
    if (from->context_capacity) {
        to->contexts = malloc(from->context_capacity * sizeof *to->contexts);
        if (!to->contexts) {
            live_table_free(to);
            return -1;
        }
        memcpy(to->contexts, from->contexts, from->context_count * sizeof *to->contexts);
        to->context_count = from->context_count;
        to->context_capacity = from->context_capacity;
        to->free_contexts = from->free_contexts;
    }
    return 0;
}

void live_table_free(struct live_table *table)
{
    free(table->slots);
    free(table->contexts);
    live_table_init(table);
}

/* live_table.c - see live_table.h. */
#include "live_table.h"
#include "../common/reservation.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* The slots live in a reservation of address space (common/reservation.h)
 * that the table grows into in place: a table moved into new memory at
 * every doubling paid a page's first write (5-9 us here) for every page
 * of every size it passed through: the extension driver's `items` case
 * spent 70 ms in four growths (5, 14, 19 and 36 ms for 1 MB to 16 MB)
 * while the program waited on a full ring. Grown in place, only the new
 * half is new memory. A table that outgrows its reservation moves to one
 * four times its size. */
#define RESERVE_MIN_SLOTS ((size_t)1 << 22) /* 64 MiB of address space */
/* From this size on the new pages are mapped in one call (memory_populate)
 * before the slots are moved into them: a page fault each at random
 * otherwise (92 -> 54 ms for the driver's growths, before they were in
 * place). */
#define POPULATE_MIN_BYTES (1u << 20)

/* Slots a table of capacity reserves when it takes a new reservation. */
static size_t reservation_slots(size_t capacity)
{
    return capacity * 4 > RESERVE_MIN_SLOTS ? capacity * 4 : RESERVE_MIN_SLOTS;
}

/* slots of a reservation made writable, populated when large. */
static int slots_commit(struct live_slot *at, size_t slots)
{
    return reservation_commit(at, slots * sizeof *at, slots * sizeof *at >= POPULATE_MIN_BYTES);
}

/* A reservation for at least reserved slots, its first capacity mapped
 * (zero). NULL when there is no memory. */
static struct live_slot *slots_map(size_t capacity, size_t reserved)
{
    if (reserved > SIZE_MAX / sizeof(struct live_slot))
        return NULL;
    struct live_slot *base = reservation_create(reserved * sizeof(struct live_slot));
    if (base && slots_commit(base, capacity) != 0) {
        munmap(base, reserved * sizeof(struct live_slot));
        return NULL;
    }
    return base;
}

static void slots_unmap(struct live_slot *slots, size_t reserved)
{
    if (slots)
        munmap(slots, reserved * sizeof *slots);
}

/* An empty slot of the table (one exists: it is never full), from which
 * every chain is walked from its start. */
static size_t first_empty(const struct live_slot *slots, size_t capacity)
{
    size_t i = 0;
    while (i < capacity && slots[i].address)
        i++;
    return i;
}

/* Into a new reservation, every block moved; the old one unmapped. */
static int grow_by_moving(struct live_table *table, size_t capacity)
{
    size_t reserved = reservation_slots(capacity);
    struct live_slot *slots = slots_map(capacity, reserved);
    if (!slots)
        return -1;
    struct live_slot *old = table->slots;
    size_t old_capacity = table->capacity, old_reserved = table->reserved;
    table->slots = slots;
    table->capacity = capacity;
    table->reserved = reserved;
    table->count_limit = count_limit(capacity);
    table->count = 0;
    /* Re-inserting in old slot order would break the FIFO order of
     * duplicates only if two copies of one address wrapped around the end;
     * walk from a slot that starts a chain (an empty one) to keep order. */
    size_t start = old_capacity ? first_empty(old, old_capacity) : 0;
    for (size_t n = 0; n < old_capacity; n++) {
        struct live_slot *block = &old[(start + n) & (old_capacity - 1)];
        if (block->address)
            insert_unchecked(table, block);
    }
    slots_unmap(old, old_reserved);
    return 0;
}

/*
 * Doubling in place. A block's home in the doubled table is its old home
 * or that plus the old capacity (home_slot takes one more bit of the same
 * hash). The old slots are taken in chain order, from just after an empty
 * one, each moved out and placed again at the first empty slot from its
 * new home, without wrapping around the end. That never steps over a slot
 * not yet taken, so every chain the walk leaves behind is whole:
 * - placed from its old home, a block stops at or before the slot it left
 *   (the slots between were all taken before it, their chain being
 *   walked from its start), or for a chain that wrapped around the old
 *   end, in the new half, past the old end;
 * - placed in the new half, it steps over blocks already placed only.
 * A block whose search reaches the end of the doubled table waits in the
 * slots past it (mapped for this, inside the reservation) and is placed
 * with wrapping once every old slot is taken; they are cleared after.
 * Duplicates keep their order: a later copy's search passes the earlier.
 */
static void place_without_wrapping(struct live_table *table, const struct live_slot *block, size_t *overflow)
{
    size_t i = home_slot(table, block->address);
    while (i < table->capacity && table->slots[i].address)
        i++;
    if (i == table->capacity)
        i = table->capacity + (*overflow)++;
    table->slots[i] = *block;
}

static int grow_in_place(struct live_table *table, size_t capacity)
{
    size_t old_capacity = table->capacity, count = table->count;
    /* the new half, and room past it for blocks that wait (at most all;
     * seldom any: not populated) */
    if (slots_commit(table->slots + old_capacity, old_capacity) != 0 ||
        reservation_commit(table->slots + capacity, count * sizeof *table->slots, false) != 0)
        return -1;
    size_t start = first_empty(table->slots, old_capacity), overflow = 0;
    table->capacity = capacity;
    table->count_limit = count_limit(capacity);
    for (size_t n = 1; n <= old_capacity; n++) {
        struct live_slot *slot = &table->slots[(start + n) & (old_capacity - 1)];
        if (!slot->address)
            continue;
        struct live_slot block = *slot;
        memset(slot, 0, sizeof *slot);
        place_without_wrapping(table, &block, &overflow);
    }
    table->count = count - overflow;
    for (size_t i = 0; i < overflow; i++) {
        struct live_slot *waiting = &table->slots[capacity + i];
        insert_unchecked(table, waiting);
        memset(waiting, 0, sizeof *waiting);
    }
    return 0;
}

static int grow(struct live_table *table)
{
    size_t capacity = table->capacity ? table->capacity * 2 : 1024;
    if (table->slots && capacity + table->count <= table->reserved)
        return grow_in_place(table, capacity);
    return grow_by_moving(table, capacity);
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

int live_table_contains(const struct live_table *table, uint64_t address)
{
    if (!table->capacity || !address)
        return 0;
    size_t mask = table->capacity - 1;
    for (size_t i = home_slot(table, address); table->slots[i].address; i = (i + 1) & mask)
        if (table->slots[i].address == address)
            return 1;
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
        size_t reserved = reservation_slots(from->capacity);
        to->slots = slots_map(from->capacity, reserved);
        if (!to->slots)
            return -1;
        memcpy(to->slots, from->slots, from->capacity * sizeof *to->slots);
        to->capacity = from->capacity;
        to->reserved = reserved;
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
    slots_unmap(table->slots, table->reserved);
    free(table->contexts);
    live_table_init(table);
}

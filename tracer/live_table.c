/* live_table.c - see live_table.h. */
#include "live_table.h"

#include <stdlib.h>
#include <string.h>

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

static void insert_unchecked(struct live_table *table, const struct live_block *block)
{
    size_t mask = table->capacity - 1;
    size_t i = home_slot(table, block->address);
    while (table->slots[i].address)
        i = (i + 1) & mask;
    table->slots[i] = *block;
    table->count++;
}

static int grow(struct live_table *table)
{
    size_t capacity = table->capacity ? table->capacity * 2 : 1024;
    struct live_block *slots = calloc(capacity, sizeof *slots);
    if (!slots)
        return -1;
    struct live_block *old = table->slots;
    size_t old_capacity = table->capacity;
    table->slots = slots;
    table->capacity = capacity;
    table->count = 0;
    /* Re-inserting in old slot order would break the FIFO order of
     * duplicates only if two copies of one address wrapped around the end;
     * walk from a slot that starts a chain (an empty one) to keep order. */
    size_t start = 0;
    while (start < old_capacity && old[start].address)
        start++;
    for (size_t n = 0; n < old_capacity; n++) {
        struct live_block *block = &old[(start + n) & (old_capacity - 1)];
        if (block->address)
            insert_unchecked(table, block);
    }
    free(old);
    return 0;
}

int live_table_insert(struct live_table *table, const struct live_block *block)
{
    /* Load factor at most 1/2 keeps probe chains short. */
    if ((table->count + 1) * 2 > table->capacity && grow(table) < 0)
        return -1;
    insert_unchecked(table, block);
    return 0;
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

int live_table_remove(struct live_table *table, uint64_t address, struct live_block *removed)
{
    if (!table->capacity || !address)
        return 0;
    size_t mask = table->capacity - 1;
    for (size_t i = home_slot(table, address); table->slots[i].address; i = (i + 1) & mask) {
        if (table->slots[i].address == address) {
            if (removed)
                *removed = table->slots[i];
            delete_slot(table, i);
            return 1;
        }
    }
    return 0;
}

int live_table_copy(struct live_table *to, const struct live_table *from)
{
    live_table_init(to);
    if (!from->capacity)
        return 0;
    to->slots = malloc(from->capacity * sizeof *to->slots);
    if (!to->slots)
        return -1;
    memcpy(to->slots, from->slots, from->capacity * sizeof *to->slots);
    to->capacity = from->capacity;
    to->count = from->count;
    return 0;
}

void live_table_free(struct live_table *table)
{
    free(table->slots);
    live_table_init(table);
}

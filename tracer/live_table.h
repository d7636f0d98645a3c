/*
 * live_table.h - the tracer's table of live heap blocks, keyed by address:
 * open addressing with linear probing and backward-shift deletion (no
 * tombstones), so memory grows with live blocks, not with events.
 *
 * An address may be present twice for a moment: when the free of a block is
 * stamped in one thread but committed after another thread's allocation of
 * the same address (see tracer/recorder.c). Linear probing keeps duplicates
 * in insertion order, so live_table_remove() removes the oldest one, which is
 * the one the free belongs to.
 */
#ifndef MEMSLOPE_LIVE_TABLE_H
#define MEMSLOPE_LIVE_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct live_block {
    uint64_t address; /* 0 = empty slot (malloc never returns 0 for a live block) */
    uint64_t size;
    uint32_t site;      /* index of the allocating site in the recorder */
    uint32_t iteration; /* iteration of the current case when allocated (0: outside iterations) */
    uint32_t case_id;   /* case open when allocated */
    uint32_t reserved;
};

struct live_table {
    struct live_block *slots;
    size_t capacity; /* power of two, or 0 before the first insert */
    size_t count;
};

void live_table_init(struct live_table *table);
/* Returns 0, or -1 when memory for growing the table is exhausted. */
int live_table_insert(struct live_table *table, const struct live_block *block);
/* Removes the oldest block at address into *removed; returns 1 if found, 0 if not. */
int live_table_remove(struct live_table *table, uint64_t address, struct live_block *removed);
/* Deep copy (a fork child starts with its parent's live blocks). */
int live_table_copy(struct live_table *to, const struct live_table *from);
void live_table_free(struct live_table *table);

/* Iteration over live blocks: for (i = 0; i < t->capacity; i++) if (t->slots[i].address) ... */

#endif

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
 *
 * Every event probes this table at a random place, so its size decides how
 * often that probe misses the cache, and with a million live blocks it is
 * most of the tracer's memory: a slot is 16 bytes, the address and one
 * word packing the size, a context and the iteration's distance from the
 * context's first iteration. A context holds what many blocks share (site,
 * case, first iteration) and is counted by reference; the caller keeps one
 * context per site in a cache word, so an allocation reuses its site's
 * context while the case is unchanged and the iteration within
 * LIVE_TABLE_ITERATION_SPAN of the context's first. A block whose size does
 * not fit the slot (4 MiB - 1 or more) gets a context of its own, which
 * holds it. Memory stays bounded by live blocks plus a few contexts per
 * site, however many iterations leave blocks behind.
 *
 * The table is at most half full while it is small and three quarters
 * full from LIVE_TABLE_DENSE_CAPACITY slots up: the longer probes only
 * cost where the table is too large for the caches anyway.
 */
#ifndef MEMSLOPE_LIVE_TABLE_H
#define MEMSLOPE_LIVE_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* A live block as callers see it. */
struct live_block {
    uint64_t address; /* never 0 (malloc never returns 0 for a live block) */
    uint64_t size;
    uint32_t site;      /* index of the allocating site in the recorder */
    uint32_t iteration; /* iteration of the current case when allocated (0: outside iterations) */
    uint32_t case_id;   /* case open when allocated */
};

struct live_slot;
struct live_context;

/* Iterations one context covers: a block's distance from its context's
 * first iteration is kept in its slot. */
#define LIVE_TABLE_ITERATION_SPAN (1u << 18)
/* Contexts at most (the slot holds the index in 24 bits). */
#define LIVE_TABLE_MAX_CONTEXTS (1u << 24)
/* From this capacity on, the table fills to 3/4 before it doubles. */
#define LIVE_TABLE_DENSE_CAPACITY ((size_t)1 << 20)

struct live_table {
    struct live_slot *slots;
    size_t capacity; /* power of two, or 0 before the first insert */
    size_t count;
    size_t count_limit; /* it grows when count would pass this (its load limit) */
    size_t reserved;    /* slots of address space the table may grow into in place */
    struct live_context *contexts;
    uint32_t context_count, context_capacity;
    uint32_t free_contexts; /* head of the free list, index + 1; 0 = empty */
};

void live_table_init(struct live_table *table);
/* Inserts a block. context_cache: the caller's word for the block's site
 * (0 at first, then left to the table; NULL for none); it holds a reference
 * to the site's latest context until live_table_free. Returns 0, or -1 when
 * memory or contexts (LIVE_TABLE_MAX_CONTEXTS) are exhausted. */
int live_table_insert(struct live_table *table, const struct live_block *block, uint32_t *context_cache);
/* Starts loading the slot where a block at address would be looked for:
 * a table larger than the caches misses on nearly every probe, and a
 * drain that asks a few events ahead overlaps those misses. */
void live_table_prefetch(const struct live_table *table, uint64_t address);
/* Removes the oldest block at address into *removed; returns 1 if found, 0 if not. */
int live_table_remove(struct live_table *table, uint64_t address, struct live_block *removed);
/* Whether a block at address is live. */
int live_table_contains(const struct live_table *table, uint64_t address);
/* Walks the blocks: *position starts at 0; returns 0 after the last one. */
int live_table_next(const struct live_table *table, size_t *position, struct live_block *block);
/* Deep copy (a fork child starts with its parent's live blocks; copying the
 * parent's context_cache words along with it keeps their references). */
int live_table_copy(struct live_table *to, const struct live_table *from);
void live_table_free(struct live_table *table);

#endif

/*
 * growable_array.h - an array that doubles as items are added, held by the
 * caller as a pointer, a count and a capacity.
 */
#ifndef MEMSLOPE_GROWABLE_ARRAY_H
#define MEMSLOPE_GROWABLE_ARRAY_H

#include <stddef.h>

/* items: the address of the caller's array pointer (of item_size bytes an
 * item; NULL while empty). Grows the array, doubling from 16 items, until
 * it holds at least needed items, and updates *capacity. Returns 0, or -1
 * when out of memory, the array then unchanged. */
static inline int growable_array_reserve(void *items, size_t *capacity, size_t needed, size_t item_size);

/* The growing half of growable_array_reserve, out of line. */
int growable_array_grow(void *items, size_t *capacity, size_t needed, size_t item_size);

/* Inline: callers reserve one more item for every item they add, and
 * nearly always there is room (a call each cost `memslope report` 0.5% of
 * its instructions on 20,000 cases). */
static inline int growable_array_reserve(void *items, size_t *capacity, size_t needed, size_t item_size)
{
    return needed <= *capacity ? 0 : growable_array_grow(items, capacity, needed, item_size);
}

#endif

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
int growable_array_reserve(void *items, size_t *capacity, size_t needed, size_t item_size);

#endif

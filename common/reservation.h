/*
 * reservation.h - memory that grows in place: address space reserved
 * first (PROT_NONE, MAP_NORESERVE: no memory until committed), then made
 * readable and writable a range at a time.
 *
 * Why: in this project's VM a page's first write costs 4-9 us even once
 * populated (docs/performance.md, round twelve), and memory moved to a new
 * address (realloc's mremap, or a copy into a new block) pays it for
 * every page again. Grown in place, only the new pages are new. On a
 * machine without that cost this costs nothing: a reservation is address
 * space, not memory. Used by the leak scan's buffers (leakscan/buffer.c)
 * and the tracer's live table (tracer/live_table.c).
 */
#ifndef MEMSLOPE_RESERVATION_H
#define MEMSLOPE_RESERVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/mman.h>

#include "populate.h"

/* bytes of address space, nothing committed; NULL when refused. */
static inline void *reservation_create(size_t bytes)
{
    void *base = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return base == MAP_FAILED ? NULL : base;
}

/* [at, at + bytes), inside a reservation, readable and writable (zero
 * where never committed), its pages mapped in one call when populate
 * (memory_populate). 0, or -1 with the range as it was. */
static inline int reservation_commit(void *at, size_t bytes, bool populate)
{
    if (mprotect(at, bytes, PROT_READ | PROT_WRITE) != 0)
        return -1;
    if (populate)
        memory_populate(at, bytes);
    return 0;
}

#endif

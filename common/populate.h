/*
 * populate.h - mapping the pages of new memory in one call, before it is
 * written all over.
 *
 * A page faulted in as it is first written costs the fault (9 us a page
 * in this project's Firecracker VM, docs/performance.md round twelve);
 * MADV_POPULATE_WRITE maps a range's pages in one system call (0.6 us a
 * page here), which leaves the first write's own cost (4.3 us here).
 * Worth it only for memory about to be written in every page.
 */
#ifndef MEMSLOPE_POPULATE_H
#define MEMSLOPE_POPULATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it and fault the pages in as they are written */
#endif

/* The whole pages inside [memory, memory + bytes), mapped; a kernel that
 * refuses leaves them to fault in as before. */
static inline void memory_populate(void *memory, size_t bytes)
{
    uintptr_t first = ((uintptr_t)memory + 4095) & ~(uintptr_t)4095;
    uintptr_t end = ((uintptr_t)memory + bytes) & ~(uintptr_t)4095;
    if (end > first)
        madvise((void *)first, end - first, MADV_POPULATE_WRITE);
}

#endif

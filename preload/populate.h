/*
 * populate.h - mapping a stretch of the shared region into this process
 * ahead of the writes that would fault it in page by page.
 *
 * Why: the region's append-only parts (a thread's ring on its first lap,
 * the frame pool, the stack table) are written page after page, and each
 * first write takes a page fault. On the 2-vCPU VM of docs/performance.md
 * a fault costs 12.5 us and a page populated ahead 6.5 us (1 us in
 * madvise, 5.5 us at the first touch, the hypervisor filling its page
 * table); `python3 -c pass` takes about 840 faults in the shim's memory.
 * One MADV_POPULATE_WRITE (Linux 5.14) for a 64 KiB chunk as the writes
 * enter it pays the first cost once for 16 pages.
 */
#ifndef MEMSLOPE_POPULATE_H
#define MEMSLOPE_POPULATE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* The stretch populated at once: 16 pages. */
#define POPULATE_CHUNK_BYTES 65536u

/* Set once MADV_POPULATE_WRITE failed (a kernel older than 5.14, or a
 * seccomp filter that allows only some advice): the faults then happen
 * as they did without it. Part of the shim's global state (shim.c). */
extern int populate_unsupported;

/* Populates length bytes from start (rounded out to whole pages),
 * preserving errno: called from allocator wrappers. A syscall, safe in a
 * signal handler. */
static inline void populate_ahead(const void *start, size_t length)
{
    if (populate_unsupported)
        return;
    int saved_errno = errno;
    uintptr_t first = (uintptr_t)start & ~(uintptr_t)4095;
    uintptr_t end = ((uintptr_t)start + length + 4095) & ~(uintptr_t)4095;
    if (madvise((void *)first, end - first, MADV_POPULATE_WRITE) != 0)
        populate_unsupported = 1;
    errno = saved_errno;
}

#endif

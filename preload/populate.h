/*
 * populate.h - mapping a stretch of the shared region into this process
 * ahead of the writes that would fault it in page by page: the shim's
 * counterpart of common/populate.h (the tracer's memory_populate, which
 * maps memory about to be written whole). The shim's keeps errno, rounds
 * out to whole pages, and stops at its first failure.
 *
 * Why: the region's append-only parts (a thread's ring on its first lap,
 * the frame pool, the stack table) are written page after page, and each
 * first write takes a page fault. On the 2-vCPU VM of docs/performance.md
 * a fault costs 12.5 us and a page populated ahead 6.5 us (1 us in
 * madvise, 5.5 us at the first touch, the hypervisor filling its page
 * table); `python3 -c pass` takes about 840 faults in the shim's memory.
 * One MADV_POPULATE_WRITE (Linux 5.14) for a 64 KiB chunk as the writes
 * enter it pays the first cost once for 16 pages.
 *
 * Only from an area's second chunk on: most threads and images write a
 * few events and stacks, and populating their first 64 KiB would cost
 * them 16 pages of memory each (charged to the program) for one or two
 * they touch. An area that grows past its first chunk is one that grows.
 */
#ifndef MEMSLOPE_PRELOAD_POPULATE_H
#define MEMSLOPE_PRELOAD_POPULATE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/auxv.h>

#include "../common/populate.h" /* MADV_POPULATE_WRITE where the headers lack it */

/* The stretch populated at once: 16 pages of 4 KiB. */
#define POPULATE_CHUNK_BYTES 65536u

/* Set (to 1) by the first MADV_POPULATE_WRITE that fails, for the rest of
 * the image: a kernel older than 5.14, a seccomp filter that refuses this
 * advice, a passing ENOMEM. The faults then happen as they did without it.
 * Threads and signal handlers read and set it with relaxed atomics: a set
 * that another thread sees late costs it one more failed madvise. Defined
 * in populate.c; part of the shim's global state (shim.c says why there is
 * any). A filter that kills or traps on this advice instead of refusing it
 * ends the program: docs/user-guide.md says so. */
extern int populate_unsupported;

/* Populates length bytes from start (rounded out to whole pages),
 * preserving errno: called from allocator wrappers. A syscall, safe in a
 * signal handler. */
static inline void populate_ahead(const void *start, size_t length)
{
    if (__atomic_load_n(&populate_unsupported, __ATOMIC_RELAXED))
        return;
    int saved_errno = errno;
    uintptr_t page = (uintptr_t)getauxval(AT_PAGESZ);
    if (page == 0 || (page & (page - 1)) != 0)
        page = 4096;
    uintptr_t first = (uintptr_t)start & ~(page - 1);
    uintptr_t end = ((uintptr_t)start + length + page - 1) & ~(page - 1);
    if (madvise((void *)first, end - first, MADV_POPULATE_WRITE) != 0)
        __atomic_store_n(&populate_unsupported, 1, __ATOMIC_RELAXED);
    errno = saved_errno;
}

#endif

/*
 * huge_pages.h - transparent huge pages for the tracer's large buffers,
 * where the kernel has them free.
 *
 * Why: the leak check's copy of the heap and its lists of blocks are tens
 * of megabytes read at random. In 4 KiB pages, in this project's VM, the
 * first classification of issue 14's driver took 42-58 ms of CPU against
 * 17-25 ms for the same scan of the same buffer later (TLB misses walk
 * the guest's and the host's page tables), and the copy into a buffer
 * never written 36-37 ms; in 2 MiB pages 22-43 ms and 13-20 ms
 * (docs/performance.md, round seventeen).
 *
 * Why only where free: with the kernel's default THP settings a huge page
 * asked for by MADV_HUGEPAGE may be compacted for on the spot, a stall of
 * tens of milliseconds, here inside a stop of the program. A buffer is
 * marked only when /proc/buddyinfo shows free blocks of 2 MiB or more for
 * all of its reservation, which faults take without compaction.
 */
#ifndef MEMSLOPE_HUGE_PAGES_H
#define MEMSLOPE_HUGE_PAGES_H

#include <stddef.h>
#include <stdint.h>

#define HUGE_PAGE_BYTES (2u << 20)

/* Bytes free in blocks of HUGE_PAGE_BYTES or more, summed over the zones
 * of /proc/buddyinfo's text (one line a zone: "Node 0, zone Normal" and
 * the free blocks of each order from 0 up); 0 for text it cannot read. */
uint64_t huge_pages_free_in(const char *buddyinfo, size_t page_size);

/* The same from /proc/buddyinfo; 0 when it cannot be read. */
uint64_t huge_pages_free(void);

/* bytes of address space aligned to HUGE_PAGE_BYTES, nothing committed
 * (common/reservation.h), marked for transparent huge pages when the
 * kernel has at least as many bytes free in blocks of 2 MiB; NULL when
 * refused. Freed with munmap(base, bytes). */
void *huge_pages_reserve(size_t bytes);

#endif

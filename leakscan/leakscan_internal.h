/*
 * leakscan_internal.h - what the files of leakscan/ share among themselves
 * and the rest of memslope does not call: glibc's malloc_state layout, the
 * main arena's search, the roots of one mapping, the target's handed-over
 * and many-range reads. The interface is leakscan.h; unit tests include
 * this header to test the pieces alone.
 */
#ifndef MEMSLOPE_LEAKSCAN_INTERNAL_H
#define MEMSLOPE_LEAKSCAN_INTERNAL_H

#include "leakscan.h"

/* size up to whole buffer pages */
#define LEAKSCAN_PAGE_ROUND(size) (((size) + LEAKSCAN_BUFFER_PAGE - 1) & ~(LEAKSCAN_BUFFER_PAGE - 1))

/*
 * The roots inside one writable mapping [mapping.start, mapping.end),
 * besides its threads' stacks and TLS: the mapping minus the memory
 * allocators own in it, that is the allocator ranges the shim reported
 * (owned: sorted by start, disjoint), glibc's arena heaps (heap_info at a
 * 64 MiB-aligned address, checked) and glibc's mmapped chunks (the chunk
 * header before a block, checked), since their free parts hold stale
 * pointers and their blocks are scanned when reached. A mapping holding a
 * block that none of those holds belongs to an allocator memslope does not
 * know: no part of it is a root. blocks: every block, sorted by address
 * (a block of 0 bytes covers its first byte). Appends the root ranges, in address order, to *roots (grown with
 * realloc; *count and *capacity updated). Returns 0, or -1 when out of
 * memory. memory->read only is used (the headers).
 */
int leakscan_mapping_roots(const struct leakscan_memory *memory, struct leakscan_range mapping,
                           const struct leakscan_block *blocks, size_t block_count,
                           const struct leakscan_range *owned, size_t owned_count, struct leakscan_range **roots,
                           size_t *count, size_t *capacity);

/* Reads through mem_fd (a /proc/PID/mem the process opened itself) only. */
void leakscan_target_open_fd(struct leakscan_target *target, pid_t pid, int mem_fd);

/* From now on, reads through a /proc/PID/mem opened now, while the process
 * is stopped: the descriptor holds on to this address space, so a read
 * after the thread named by pid has exited still works, and after an exec
 * reads nothing rather than the new image. Stays as it was if the file
 * cannot be opened. */
void leakscan_target_hold_memory(struct leakscan_target *target);

/* process_vm_readv over many ranges at once (IOV_MAX at a time); a range
 * it refuses is read as leakscan_target_read reads. */
int leakscan_target_read_ranges(void *context, const struct leakscan_range *ranges, size_t count, void *buffer);

/*
 * A copy of what a scan reads (memory_copy.c): every root range whole, the
 * pages of every block (of a large block, the pieces whose pages hold data,
 * by source->holds_data), merged and sorted. Read through the callbacks
 * below (context: the copy), by one thread at a time: bytes not copied read
 * as zero.
 */
struct leakscan_copy {
    struct leakscan_range *ranges; /* sorted, disjoint */
    uint64_t *offsets;             /* each range's place in bytes */
    size_t count;
    uint8_t *bytes;
    uint64_t size;   /* bytes copied */
    struct leakscan_buffer buffer; /* where they are: at least size bytes */
    size_t last; /* the range the last lookup found */
};

/* blocks: sorted by address. spare: NULL, or a buffer the copy takes
 * (leaving spare empty) when it is large enough. Returns 0; 1 when the
 * copy would exceed byte_limit bytes (nothing copied); -1 out of memory;
 * -2 when the source is gone. */
int leakscan_copy_take(struct leakscan_copy *copy, const struct leakscan_memory *source,
                       const struct leakscan_range *roots, size_t root_count, const struct leakscan_block *blocks,
                       size_t block_count, uint64_t byte_limit, struct leakscan_buffer *spare);
void leakscan_copy_free(struct leakscan_copy *copy);
/* Gives the copy's buffer to keep (leakscan_buffer_keep_larger); the copy
 * reads nothing after. */
void leakscan_copy_release(struct leakscan_copy *copy, struct leakscan_buffer *keep);
const void *leakscan_copy_view(void *context, uint64_t address, size_t length);
const void *leakscan_copy_view_span(void *context, uint64_t address, uint64_t *start, uint64_t *end);
int leakscan_copy_read(void *context, uint64_t address, void *buffer, size_t length);
int leakscan_copy_holds_data(void *context, uint64_t address, size_t length);
/* The copy as a leakscan_memory (no vtable test). */
void leakscan_copy_as_memory(struct leakscan_copy *copy, struct leakscan_memory *memory);

/* glibc's main_arena in the process: found by its contents (every empty bin
 * points at itself, next/system_mem/attached_threads consistent) in the
 * writable file mappings and their anonymous tails, a thread's arena (in a
 * heap that follows one) left aside. 0 if not found. */
struct proc_maps;
uint64_t leakscan_find_main_arena(struct leakscan_target *target, const struct proc_maps *maps);

/* glibc 2.26+ x86-64 struct malloc_state: offsets and size. */
#define LEAKSCAN_MSTATE_FASTBINS 16u
#define LEAKSCAN_MSTATE_NFASTBINS 10u
#define LEAKSCAN_MSTATE_TOP 96u
#define LEAKSCAN_MSTATE_BINS 112u
#define LEAKSCAN_MSTATE_NBINS 127u
#define LEAKSCAN_MSTATE_NEXT 2160u
#define LEAKSCAN_MSTATE_ATTACHED 2176u
#define LEAKSCAN_MSTATE_SYSTEM_MEM 2184u
#define LEAKSCAN_MSTATE_SIZE 2200u
#define LEAKSCAN_HEAP_MAX (64ull << 20) /* HEAP_MAX_SIZE: arena heaps are aligned to it */

/* A block's end in a list sorted by address: a block of 0 bytes covers its
 * first byte, as the scan's lookups take it. */
static inline uint64_t leakscan_block_end(const struct leakscan_block *block)
{
    return block->address + (block->size ? block->size : 1);
}

/* Index of the first block of the sorted list that ends after address. */
static inline size_t leakscan_first_block_ending_after(const struct leakscan_block *blocks, size_t count,
                                                       uint64_t address)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (leakscan_block_end(&blocks[mid]) <= address)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* Index of the first range (sorted by start, disjoint) that ends after address. */
static inline size_t leakscan_first_range_ending_after(const struct leakscan_range *ranges, size_t count,
                                                       uint64_t address)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (ranges[mid].end <= address)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

#endif

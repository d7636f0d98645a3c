/*
 * buffer.c - memory a scan writes into again and again (leakscan.h,
 * struct leakscan_buffer): a copy's buffer, the tracer's lists of blocks.
 *
 * Why not malloc: moving a mapping (mremap, as realloc does for a large
 * block) makes every page cost its first write again at its new address
 * in this VM (common/reservation.h). A buffer therefore holds address
 * space beyond its size and grows into it in place; what was written
 * stays written. The space is 2 MiB-aligned and in huge pages where the
 * kernel has them free (common/huge_pages.h): the copy is read at random.
 */
#include "leakscan_internal.h"
#include "../common/huge_pages.h"
#include "../common/reservation.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define RESERVE_MIN (64ull << 20) /* address space, not memory: PROT_NONE until grown into */

/* A size of 2 MiB or more in whole huge pages: a huge page is mapped only
 * where the range committed and populated at once covers it whole. */
static uint64_t huge_round(uint64_t size)
{
    return (size + HUGE_PAGE_BYTES - 1) & ~(uint64_t)(HUGE_PAGE_BYTES - 1);
}

/* A new reservation of at least size, twice it when it can, its first
 * size bytes mapped; the old one is unmapped, and what it held is not
 * kept. A buffer's users write what they read (a copy, a listing), a
 * page moved would cost its first write again anyway, and mremap of the
 * pages grown in apart (separate mappings) fails before Linux 6.17. Only
 * a buffer outgrowing its reservation comes here. */
static int move_to_reservation(struct leakscan_buffer *buffer, uint64_t size)
{
    uint64_t reserve = size > UINT64_MAX / 4 ? size : huge_round(size * 2);
    reserve = reserve > RESERVE_MIN ? reserve : RESERVE_MIN;
    if (reserve > SIZE_MAX)
        return -1;
    void *base = huge_pages_reserve((size_t)reserve);
    if (!base)
        return -1;
    /* populated: a fault each page as it is written costs twice as much
     * (9 against 4.5 us a page here) */
    if (reservation_commit(base, (size_t)size, true) != 0) {
        munmap(base, (size_t)reserve);
        return -1;
    }
    leakscan_buffer_free(buffer);
    *buffer = (struct leakscan_buffer){.bytes = base, .size = size, .written = 0, .reserved = reserve};
    return 0;
}

int leakscan_buffer_grow(struct leakscan_buffer *buffer, uint64_t size)
{
    if (size > UINT64_MAX / 4)
        return -1;
    size = size >= HUGE_PAGE_BYTES ? huge_round(size) : LEAKSCAN_PAGE_ROUND(size);
    if (size <= buffer->size)
        return 0;
    if (buffer->bytes && size <= buffer->reserved) {
        if (reservation_commit(buffer->bytes + buffer->size, (size_t)(size - buffer->size), true) != 0)
            return -1;
        buffer->size = size;
        return 0;
    }
    return move_to_reservation(buffer, size);
}

int leakscan_buffer_write_ahead(struct leakscan_buffer *buffer, size_t pages)
{
    for (; pages > 0 && buffer->written < buffer->size; pages--) {
        ((volatile uint8_t *)buffer->bytes)[buffer->written] = 0;
        buffer->written += LEAKSCAN_BUFFER_PAGE;
    }
    return buffer->written < buffer->size;
}

/* Pages a process_vm_readv of copy_ahead writes. */
#define COPY_AHEAD_PAGES 64u

int leakscan_buffer_copy_ahead(struct leakscan_buffer *buffer, size_t pages)
{
    static const uint8_t zero_page[LEAKSCAN_BUFFER_PAGE];
    struct iovec from[COPY_AHEAD_PAGES];
    for (size_t i = 0; i < COPY_AHEAD_PAGES; i++)
        from[i] = (struct iovec){(void *)zero_page, sizeof zero_page};
    while (pages > 0 && buffer->written < buffer->size && !buffer->copy_refused) {
        size_t n = (size_t)((buffer->size - buffer->written) / LEAKSCAN_BUFFER_PAGE);
        n = n < pages ? n : pages;
        n = n < COPY_AHEAD_PAGES ? n : COPY_AHEAD_PAGES;
        struct iovec to = {buffer->bytes + buffer->written, n * LEAKSCAN_BUFFER_PAGE};
        if (process_vm_readv(getpid(), &to, 1, from, n, 0) != (ssize_t)to.iov_len) {
            buffer->copy_refused = 1; /* asked no more: as the lists are written */
            break;
        }
        buffer->written += to.iov_len;
        pages -= n;
    }
    if (buffer->copy_refused)
        return leakscan_buffer_write_ahead(buffer, pages);
    return buffer->written < buffer->size;
}

void leakscan_buffer_free(struct leakscan_buffer *buffer)
{
    if (buffer->bytes)
        munmap(buffer->bytes, (size_t)(buffer->reserved > buffer->size ? buffer->reserved : buffer->size));
    *buffer = (struct leakscan_buffer){0};
}

void leakscan_buffer_keep_larger(struct leakscan_buffer *keep, struct leakscan_buffer *buffer)
{
    if (buffer->size > keep->size) {
        struct leakscan_buffer swap = *keep;
        *keep = *buffer;
        *buffer = swap;
    }
    leakscan_buffer_free(buffer);
}

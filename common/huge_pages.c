/*
 * huge_pages.c - transparent huge pages where the kernel has them free
 * (huge_pages.h).
 */
#include "huge_pages.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reservation.h"

/* The free blocks of order 0, 1, ... after "zone NAME" on one line. */
static uint64_t huge_bytes_of_line(const char *line, const char *end, size_t page_size)
{
    const char *zone = strstr(line, "zone");
    if (!zone || zone >= end)
        return 0;
    const char *at = zone + 4;
    while (at < end && *at == ' ')
        at++;
    while (at < end && *at != ' ')
        at++; /* the zone's name */
    uint64_t bytes = 0;
    for (unsigned order = 0; at < end && order < 64; order++) {
        char *next;
        unsigned long long blocks = strtoull(at, &next, 10);
        if (next == at || next > end)
            break;
        uint64_t block_bytes = (uint64_t)page_size << order;
        if (block_bytes >= HUGE_PAGE_BYTES && blocks <= UINT64_MAX / block_bytes &&
            bytes <= UINT64_MAX - blocks * block_bytes)
            bytes += blocks * block_bytes;
        at = next;
    }
    return bytes;
}

uint64_t huge_pages_free_in(const char *buddyinfo, size_t page_size)
{
    uint64_t bytes = 0;
    for (const char *line = buddyinfo; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        uint64_t zone_bytes = huge_bytes_of_line(line, end, page_size);
        bytes = bytes <= UINT64_MAX - zone_bytes ? bytes + zone_bytes : UINT64_MAX;
        line = *end ? end + 1 : end;
    }
    return bytes;
}

uint64_t huge_pages_free(void)
{
    int fd = open("/proc/buddyinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char text[4096]; /* a line a zone: a few hundred bytes on most machines */
    size_t used = 0;
    ssize_t n;
    while (used < sizeof text - 1 && (n = read(fd, text + used, sizeof text - 1 - used)) > 0)
        used += (size_t)n;
    close(fd);
    text[used] = '\0';
    long page_size = sysconf(_SC_PAGESIZE);
    return huge_pages_free_in(text, page_size > 0 ? (size_t)page_size : 4096);
}

void *huge_pages_reserve(size_t bytes)
{
    if (bytes > SIZE_MAX - HUGE_PAGE_BYTES)
        return NULL;
    size_t padded = bytes + HUGE_PAGE_BYTES;
    char *raw = reservation_create(padded);
    if (!raw)
        return NULL;
    char *base = (char *)(((uintptr_t)raw + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1));
    if (base > raw)
        munmap(raw, (size_t)(base - raw));
    size_t tail = (size_t)(raw + padded - (base + bytes));
    if (tail)
        munmap(base + bytes, tail);
    if (bytes >= HUGE_PAGE_BYTES && huge_pages_free() >= bytes)
        madvise(base, bytes, MADV_HUGEPAGE); /* refused (THP off): pages of 4 KiB, as without */
    return base;
}

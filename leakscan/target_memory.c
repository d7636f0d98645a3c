/*
 * target_memory.c - reading a stopped process's memory for the leak scan
 * (see leakscan.h, struct leakscan_target). process_vm_readv moves large
 * ranges in one system call; /proc/PID/mem is the fallback for pages it
 * refuses; bytes neither can read are zero, which points nowhere.
 */
#include "leakscan_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define READ_PIECE (64u << 20) /* one process_vm_readv call moves at most this */
#define READ_RANGES 1024u      /* remote ranges in one process_vm_readv call (IOV_MAX) */
#define PAGE 4096u

void leakscan_target_open(struct leakscan_target *target, pid_t pid)
{
    memset(target, 0, sizeof *target);
    target->pid = pid;
    target->mem_fd = -1;
    target->pagemap_fd = -1;
}

void leakscan_target_open_fd(struct leakscan_target *target, pid_t pid, int mem_fd)
{
    leakscan_target_open(target, pid);
    target->mem_fd = mem_fd;
    target->handed_over = 1;
}

void leakscan_target_close(struct leakscan_target *target)
{
    if (target->mem_fd >= 0 && !target->handed_over)
        close(target->mem_fd);
    target->mem_fd = -1;
    if (target->pagemap_fd >= 0)
        close(target->pagemap_fd);
    target->pagemap_fd = -1;
}

/* One page (or less) through /proc/PID/mem; zero where it fails. */
static void read_page_fallback(struct leakscan_target *target, uint64_t address, uint8_t *buffer, size_t length)
{
    if (target->mem_fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", (int)target->pid);
        target->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (target->mem_fd < 0 && errno == ENOENT)
            target->gone = 1;
    }
    ssize_t n = target->mem_fd >= 0 ? pread(target->mem_fd, buffer, length, (off_t)address) : -1;
    if (n < 0)
        n = 0;
    memset(buffer + n, 0, length - (size_t)n);
}

/* Through a handed-over /proc/PID/mem only: process_vm_readv and opening
 * /proc/PID/mem ourselves are what is denied. Unreadable pages are zero. */
static void read_handed_over(struct leakscan_target *target, uint64_t address, uint8_t *buffer, size_t length)
{
    size_t done = 0;
    while (done < length) {
        uint64_t at = address + done;
        ssize_t n = pread(target->mem_fd, buffer + done, length - done, (off_t)at);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        size_t piece = PAGE - (size_t)(at % PAGE);
        if (piece > length - done)
            piece = length - done;
        memset(buffer + done, 0, piece);
        done += piece;
    }
}

/* Reads what process_vm_readv can, then the rest page by page. */
void leakscan_target_hold_memory(struct leakscan_target *target)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)target->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (target->mem_fd >= 0 && !target->handed_over)
        close(target->mem_fd);
    target->mem_fd = fd;
    target->handed_over = 0;
    target->mem_only = 1;
}

static int read_direct(struct leakscan_target *target, uint64_t address, uint8_t *buffer, size_t length)
{
    if (target->handed_over || target->mem_only) {
        read_handed_over(target, address, buffer, length);
        return 0;
    }
    size_t done = 0;
    while (done < length) {
        size_t want = length - done < READ_PIECE ? length - done : READ_PIECE;
        struct iovec local = {buffer + done, want};
        struct iovec remote = {(void *)(uintptr_t)(address + done), want};
        ssize_t n = process_vm_readv(target->pid, &local, 1, &remote, 1, 0);
        if (n < 0 && errno == ESRCH) {
            target->gone = 1;
            return -1;
        }
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        uint64_t at = address + done;
        if (n < 0 && errno != EFAULT && target->mem_fd >= 0) {
            /* process_vm_readv is not permitted here: /proc/PID/mem. */
            ssize_t m = pread(target->mem_fd, buffer + done, want, (off_t)at);
            if (m > 0) {
                done += (size_t)m;
                continue;
            }
        }
        /* This page is unreadable to process_vm_readv: one page the slow
         * way, then try the fast way again. */
        size_t piece = PAGE - (size_t)(at % PAGE);
        if (piece > length - done)
            piece = length - done;
        read_page_fallback(target, at, buffer + done, piece);
        if (target->gone)
            return -1;
        done += piece;
    }
    return 0;
}

/* The pagemap's entries for up to PAGEMAP_BATCH pages at a time: a 1 MiB
 * chunk is one pread of 2 KiB. */
#define PAGEMAP_BATCH 512u
#define PAGEMAP_HOLDS_DATA (3ull << 62) /* present, or swapped out */

/* Pagemap entries of pages [first, first + n), n <= PAGEMAP_BATCH; -1
 * when the pagemap cannot be read (then every page is read). */
static int read_pagemap(struct leakscan_target *target, uint64_t first, size_t n, uint64_t *entries)
{
    if (target->pagemap_fd == -1) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/pagemap", (int)target->pid);
        target->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (target->pagemap_fd < 0)
            target->pagemap_fd = -2;
    }
    if (target->pagemap_fd < 0)
        return -1;
    ssize_t want = (ssize_t)(n * sizeof *entries);
    return pread(target->pagemap_fd, entries, (size_t)want, (off_t)(first * sizeof *entries)) == want ? 0 : -1;
}

/* Whether [address, address + length) lies in a mapping the target's copy
 * holds (what the process had there when it was stopped). */
static bool in_copy(const struct leakscan_target *target, uint64_t address, size_t length)
{
    if (!target->copy)
        return false;
    size_t r = leakscan_first_range_ending_after(target->copied, target->copied_count, address);
    return r < target->copied_count && target->copied[r].start <= address && address + length <= target->copied[r].end;
}

int leakscan_target_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct leakscan_target *target = context;
    if (in_copy(target, address, length))
        return leakscan_copy_read(target->copy, address, buffer, length);
    return read_direct(context, address, buffer, length);
}

int leakscan_target_holds_data(void *context, uint64_t address, size_t length)
{
    struct leakscan_target *target = context;
    if (length == 0)
        return 1;
    if (in_copy(target, address, length))
        return leakscan_copy_holds_data(target->copy, address, length);
    uint64_t page = address / PAGE, last = (address + length - 1) / PAGE, entries[PAGEMAP_BATCH];
    while (page <= last) {
        size_t n = last - page + 1 < PAGEMAP_BATCH ? (size_t)(last - page + 1) : PAGEMAP_BATCH;
        if (read_pagemap(target, page, n, entries) < 0)
            return 1;
        for (size_t k = 0; k < n; k++)
            if (entries[k] & PAGEMAP_HOLDS_DATA)
                return 1;
        page += n;
    }
    return 0;
}

/* Ranges [first, first + count) in one process_vm_readv; a range it
 * stops at (unmapped, unreadable) is read the slow way. Returns the ranges
 * done, or -1 when the process is gone. */
static long read_some_ranges(struct leakscan_target *target, const struct leakscan_range *ranges, size_t count,
                             uint8_t *buffer)
{
    struct iovec remote[READ_RANGES];
    size_t n = count < READ_RANGES ? count : READ_RANGES, total = 0;
    for (size_t r = 0; r < n; r++) {
        remote[r] = (struct iovec){(void *)(uintptr_t)ranges[r].start, (size_t)(ranges[r].end - ranges[r].start)};
        total += remote[r].iov_len;
    }
    struct iovec local = {buffer, total};
    ssize_t moved = process_vm_readv(target->pid, &local, 1, remote, n, 0);
    if (moved < 0 && errno == ESRCH) {
        target->gone = 1;
        return -1;
    }
    size_t done = moved > 0 ? (size_t)moved : 0, r = 0;
    while (r < n && done >= remote[r].iov_len) {
        done -= remote[r].iov_len;
        buffer += remote[r].iov_len;
        r++;
    }
    if (r == n)
        return (long)n;
    /* The range the call stopped in: the rest of it one page at a time. */
    if (read_direct(target, ranges[r].start + done, buffer + done, remote[r].iov_len - done) < 0)
        return -1;
    return (long)r + 1;
}

int leakscan_target_read_ranges(void *context, const struct leakscan_range *ranges, size_t count, void *buffer)
{
    struct leakscan_target *target = context;
    uint8_t *out = buffer;
    if (target->handed_over) {
        for (size_t r = 0; r < count; r++) {
            size_t length = (size_t)(ranges[r].end - ranges[r].start);
            if (leakscan_target_read(target, ranges[r].start, out, length) < 0)
                return -1;
            out += length;
        }
        return 0;
    }
    for (size_t r = 0; r < count;) {
        long done = read_some_ranges(target, ranges + r, count - r, out);
        if (done < 0)
            return -1;
        for (long k = 0; k < done; k++, r++)
            out += ranges[r].end - ranges[r].start;
    }
    return 0;
}

/*
 * target_memory.c - reading a stopped process's memory for the leak scan
 * (see leakscan.h, struct leakscan_target). process_vm_readv moves large
 * ranges in one system call; /proc/PID/mem is the fallback for pages it
 * refuses; bytes neither can read are zero, which points nowhere.
 */
#include "leakscan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define READ_PIECE (64u << 20) /* one process_vm_readv call moves at most this */
#define PAGE 4096u

void leakscan_target_open(struct leakscan_target *target, pid_t pid)
{
    memset(target, 0, sizeof *target);
    target->pid = pid;
    target->mem_fd = -1;
}

void leakscan_target_open_fd(struct leakscan_target *target, pid_t pid, int mem_fd)
{
    leakscan_target_open(target, pid);
    target->mem_fd = mem_fd;
    target->handed_over = 1;
}

void leakscan_target_close(struct leakscan_target *target)
{
    for (size_t i = 0; i < target->snapshot_count; i++)
        munmap(target->snapshots[i].bytes, target->snapshots[i].end - target->snapshots[i].start);
    free(target->snapshots);
    if (target->mem_fd >= 0 && !target->handed_over)
        close(target->mem_fd);
    target->snapshots = NULL;
    target->snapshot_count = 0;
    target->mem_fd = -1;
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
static int read_direct(struct leakscan_target *target, uint64_t address, uint8_t *buffer, size_t length)
{
    if (target->handed_over) {
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

static const struct leakscan_snapshot *find_snapshot(const struct leakscan_target *target, uint64_t address)
{
    size_t low = 0, high = target->snapshot_count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        const struct leakscan_snapshot *s = &target->snapshots[mid];
        if (address < s->start)
            high = mid;
        else if (address >= s->end)
            low = mid + 1;
        else
            return s;
    }
    return NULL;
}

const void *leakscan_target_view(void *context, uint64_t address, size_t length)
{
    const struct leakscan_snapshot *s = find_snapshot(context, address);
    if (!s || length > s->end - address)
        return NULL;
    return s->bytes + (address - s->start);
}

int leakscan_target_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct leakscan_target *target = context;
    const void *view = leakscan_target_view(target, address, length);
    if (view) {
        memcpy(buffer, view, length);
        return 0;
    }
    return read_direct(target, address, buffer, length);
}

static int insert_snapshot(struct leakscan_target *target, struct leakscan_snapshot snapshot)
{
    struct leakscan_snapshot *grown =
        realloc(target->snapshots, (target->snapshot_count + 1) * sizeof *target->snapshots);
    if (!grown)
        return -1;
    target->snapshots = grown;
    size_t at = target->snapshot_count;
    while (at > 0 && grown[at - 1].start > snapshot.start) {
        grown[at] = grown[at - 1];
        at--;
    }
    grown[at] = snapshot;
    target->snapshot_count++;
    return 0;
}

int leakscan_target_snapshot(struct leakscan_target *target, uint64_t start, uint64_t end)
{
    if (end <= start || find_snapshot(target, start) || find_snapshot(target, end - 1))
        return 0;
    /* mmap, not malloc: the pages are returned to the system at close. */
    void *bytes = mmap(NULL, end - start, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bytes == MAP_FAILED)
        return -1;
    /* Small pages: clearing transparent huge pages on first touch cost five
     * times more CPU than the copy itself (measured on a 256 MiB heap). */
    madvise(bytes, end - start, MADV_NOHUGEPAGE);
    struct leakscan_snapshot snapshot = {start, end, bytes};
    if (read_direct(target, start, bytes, end - start) < 0 || insert_snapshot(target, snapshot) < 0) {
        munmap(bytes, end - start);
        return -1;
    }
    return 0;
}

/*
 * leak_check.h - runs the reachability scan (leakscan/) on a stopped process
 * image and turns it into LEAKS records: one for the whole image and one per
 * case, holding the blocks that case allocated, each loss record with the
 * first iteration that allocated one of its blocks.
 */
#ifndef MEMSLOPE_LEAK_CHECK_H
#define MEMSLOPE_LEAK_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/trace_format.h"
#include "../leakscan/leakscan.h"
#include "recorder.h"

struct leak_results {
    struct trace_leaks *checks; /* [0]: the whole image (case_id TRACE_NONE); then one per case */
    size_t count;
};

/*
 * What a check leaves for the next one to write into again: its copy's
 * buffer and its lists of blocks, each a leakscan_buffer, which grows in
 * place. A page's first write costs a fault (4-9 us in this VM): listing
 * issue 14's driver's 376,000 blocks into new lists took 56 ms of its
 * first case end's stop, into written ones 3 ms. Zeroed before first use;
 * leak_check_spare_free at the image's end.
 */
struct pending_block;
struct check_lists {
    struct leakscan_buffer blocks;  /* struct leakscan_block: every live block */
    struct leakscan_buffer open;    /* struct pending_block: the open case's blocks */
    struct leakscan_buffer scratch; /* struct leakscan_block: what the blocks' sort writes over */
    size_t capacity;                /* entries of each */
};
struct leak_check_spare {
    struct leakscan_buffer copy;
    struct check_lists lists;
};
void leak_check_spare_free(struct leak_check_spare *spare);

/*
 * Gets spare ready, while the program runs, for a check of the heap the
 * recorder has now: lists with room for its blocks, their pages written,
 * and a copy's buffer the size the heap suggests (under copy_limit),
 * written through the kernel as the copy will write it. In this VM a
 * page's first write from user space costs 4-9 us, and the kernel's first
 * write into it ~4.5 us more: the first case end of issue 14's driver
 * listed its 376,000 blocks into new lists in 56 ms of its stop, into
 * written ones in 3 ms, and copied its 21 MB into a buffer the kernel had
 * not written in 35 ms. (Writing the copy's buffer from user space ahead
 * of the check bought nothing, and that is why.) Writes at most pages
 * pages a call, so that the drain keeps up; returns whether work remains.
 * Not while a check pending holds the lists and the copy.
 */
int leak_check_spare_ready(struct leak_check_spare *spare, const struct recorder *recorder, uint64_t copy_limit,
                           size_t pages);

/* Every thread in tids must be stopped. shim: what the process's shim
 * tells about its memory (leakscan.h; may be NULL). when: TRACE_SNAP_EXIT or
 * TRACE_SNAP_SIGNAL (whole image, then every case that skip_cases does
 * not already cover), TRACE_SNAP_CASE_END or TRACE_SNAP_ITERATION (only the
 * open case's blocks: one check). skip_cases: a checked case's id has its
 * entry set (may be NULL; indexed by case id up to skip_count).
 * copy_limit: 0, or the most memory the scan may copy to read each range
 * once (leakscan_snapshot_take; above it the scan reads in place); spare:
 * NULL, or what the check may write into, and which keeps what it wrote.
 * Returns 0, or -1 with a message in err. */
int leak_check_run(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                   const struct recorder *recorder, uint32_t when, uint64_t time_ns, const unsigned char *skip_cases,
                   size_t skip_count, uint64_t copy_limit, struct leak_check_spare *spare,
                   struct leak_results *results, char *err, size_t err_size);

/*
 * A check of the open case (when: TRACE_SNAP_CASE_END or
 * TRACE_SNAP_ITERATION) that holds the process only while what the scan
 * reads is copied (leakscan_snapshot_take); the classification runs on a
 * thread of its own while the process runs on. leak_check_start, with
 * every thread in tids stopped: 0 with *pending set; 1 when the copy would
 * take more than byte_limit bytes (nothing started: check in place with
 * leak_check_run); -1 with a message. leak_check_finish waits for the
 * thread and gives the check leak_check_run would have given at the start
 * (recorder: the same one, any later state), and frees pending: 0, or -1
 * with a message. spare (start) and keep (finish), as leak_check_run's
 * spare: what the check may take, and which keeps the larger buffer and
 * lists after. leak_check_pending_done: whether finish would not wait;
 * leak_check_pending_bytes: the size of its copy's buffer.
 */
struct leak_check_pending;
int leak_check_start(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                     const struct recorder *recorder, uint32_t when, uint64_t time_ns, uint64_t byte_limit,
                     struct leak_check_spare *spare, struct leak_check_pending **pending, char *err,
                     size_t err_size);
int leak_check_pending_done(const struct leak_check_pending *pending);
uint64_t leak_check_pending_bytes(const struct leak_check_pending *pending);
int leak_check_finish(struct leak_check_pending *pending, const struct recorder *recorder,
                      struct leak_check_spare *keep, struct leak_results *results, char *err, size_t err_size);

/* The check at exit of a process that cannot be stopped (no-ptrace mode):
 * it reads what the process handed over (see leakscan.h) while its
 * exiting thread waits. Recorded as leak_check_run's at TRACE_SNAP_EXIT:
 * the whole image, then every case. 0, or -1 with a message in err. */
struct leakscan_handover;
int leak_check_run_handover(pid_t pid, const struct leakscan_handover *handover, const struct recorder *recorder,
                            uint64_t time_ns, struct leak_results *results, char *err, size_t err_size);

/* The two halves of leak_check_run around the scan, apart for tests. The
 * recorder's live blocks as the scan takes them: address and size, and in
 * stack_id the block's position in the live table's walk (NULL when out
 * of memory). */
struct leakscan_block;
struct leakscan_block *leak_check_blocks(const struct recorder *recorder, size_t *count);
/* The checks (as leak_check_run's) of those blocks once scanned (category
 * set; any order). 0, or -1 when out of memory. */
int leak_check_results(const struct recorder *recorder, const struct leakscan_block *scanned, size_t count,
                       uint32_t when, uint64_t time_ns, const unsigned char *skip_cases, size_t skip_count,
                       struct leak_results *results);

/* Appends the checks of more to results (moving them). 0 or -1. */
int leak_results_append(struct leak_results *results, struct leak_results *more);

void leak_results_free(struct leak_results *results);

#endif

/*
 * leakscan.h - reachability of heap blocks, classified exactly as Valgrind
 * memcheck's leak checker does (mc_leakcheck.c), on a stopped process or on
 * a synthetic memory image. docs/leakscan.md is the prose version.
 *
 * This is what the rest of memslope calls; leakscan_internal.h holds what
 * the files of leakscan/ share among themselves (glibc's malloc_state
 * offsets, the main arena's search, the roots of one mapping).
 *
 * The algorithm (leakscan_classify):
 *   - A conservative scan of aligned 8-byte words. A word points to a block
 *     when it equals the block's start (start pointer) or lies strictly
 *     inside [start, start + size) (interior pointer). A zero-size block is
 *     found only by a pointer to its start (memcheck treats it as size 1).
 *   - Roots (ranges and register words) mark blocks Reachable through start
 *     pointers and Possible through interior pointers; a block found from a
 *     Possible block is at best Possible. memcheck's default heuristics
 *     (stdstring, length64, newarray, multipleinheritance) turn some
 *     interior pointers into start pointers, as memcheck does by default.
 *   - The blocks left unreached are lost. In address order, each one still
 *     unreached becomes a clique leader (definitely lost) and every
 *     unreached block reachable from it through start or interior pointers
 *     becomes indirectly lost, absorbing earlier leaders; a dropped cycle is
 *     thus one definitely lost block (its lowest address) and the rest
 *     indirectly lost, as memcheck reports it.
 *   - Only words fully inside a block are scanned: [roundup(start, 8),
 *     rounddown(start + size, 8)).
 */
#ifndef MEMSLOPE_LEAKSCAN_H
#define MEMSLOPE_LEAKSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/trace_format.h"

/* One live heap block. The caller fills address, size and stack_id;
 * leakscan writes category (enum trace_leak_category). Given in any
 * order; the scan sorts the caller's array by address in place (a copy
 * would cost as much memory again), so stack_id is how a caller finds its
 * blocks again. */
struct leakscan_block {
    uint64_t address, size;
    uint32_t stack_id;
    uint32_t category;
};

/* Bytes and blocks per enum trace_leak_category. */
struct leakscan_totals {
    uint64_t bytes[TRACE_LEAK_CATEGORIES];
    uint64_t blocks[TRACE_LEAK_CATEGORIES];
};

/* [start, end) */
struct leakscan_range {
    uint64_t start, end;
};

/* How the algorithm reads the scanned memory. */
struct leakscan_memory {
    /* Fills buffer with length bytes at address; bytes that cannot be read
     * are set to zero (a zero word points nowhere). Returns 0, or -1 when
     * the memory is gone altogether (the process exited): the scan stops. */
    int (*read)(void *context, uint64_t address, void *buffer, size_t length);
    /* Optional: a pointer to length bytes at address held in memory already
     * (a snapshot), or NULL, in which case read is used. Saves a copy. */
    const void *(*view)(void *context, uint64_t address, size_t length);
    /* Optional, with view: the whole run of memory held around address,
     * [*start, *end), and a pointer to its first byte; NULL when address
     * is not held. Every range inside the run can be viewed, and holds
     * data as far as holds_data says. The scan keeps the last run and
     * views the small blocks inside it without a call each. */
    const void *(*view_span)(void *context, uint64_t address, uint64_t *start, uint64_t *end);
    /* Optional: fills buffer with the bytes of count ranges, back to back
     * (unreadable bytes zero), in one go; -1 as read. Without it each
     * range is a read, and the scan reads neighbouring blocks as one
     * range across wider gaps. */
    int (*read_ranges)(void *context, const struct leakscan_range *ranges, size_t count, void *buffer);
    /* Optional: memcheck's vtable test for the multipleinheritance
     * heuristic (address points into a readable file mapping at a table of
     * at least two pointers into executable file mappings). NULL: the
     * heuristic is off. */
    int (*is_vtable)(void *context, uint64_t address);
    /* Optional: whether any page of [address, address + length) may hold
     * data: 0 when none is present in memory or swapped out (never
     * touched, or discarded), so the range reads as zeros and is not
     * read; 1 otherwise, or when it cannot tell. Asked for each chunk of
     * a large block or root range: an untouched 4 GiB block costs its
     * page table's entries, not 4 GiB of reads. */
    int (*holds_data)(void *context, uint64_t address, size_t length);
    void *context;
};

/* How words that may point into a block are looked up (docs/leakscan.md):
 * LEAKSCAN_WORDS_AUTO chooses by the size of the index; the others are
 * for tests and benchmarks, which compare the two. */
enum leakscan_word_lookup { LEAKSCAN_WORDS_AUTO = 0, LEAKSCAN_WORDS_PIPELINED, LEAKSCAN_WORDS_DIRECT };

/* Everything the algorithm looks at besides the blocks. */
struct leakscan_image {
    struct leakscan_memory memory;
    const struct leakscan_range *roots; /* scanned as roots, whole */
    size_t root_count;
    const uint64_t *root_words;         /* register values, each a root word */
    size_t root_word_count;
    enum leakscan_word_lookup word_lookup;
    /* PY_VERSION_HEX of the CPython the process runs (0: none; 3.8 to
     * 3.13 known): turns on the python heuristic, a pointer to a Python
     * object inside its block (past the GC header CPython puts before it)
     * counting as a start pointer, and from 3.12 immortal objects as
     * roots (docs/leakscan.md, "Python objects"). */
    uint32_t python_version;
};

/* Statistics of one scan, for reports and the benchmark. */
struct leakscan_stats {
    uint64_t root_bytes;    /* bytes of root ranges scanned */
    uint64_t block_bytes;   /* bytes of blocks scanned */
    uint64_t pointer_hits;  /* words that pointed into a block */
    uint64_t sweeps;        /* sweeps over the blocks waiting to be scanned (docs/leakscan.md) */
    uint64_t untouched_bytes; /* of block_bytes and root_bytes: skipped, no page of them held data */
};

/* Classifies every block (writes blocks[i].category, after sorting the
 * array by address) and, when totals is not NULL, sums them. Blocks must
 * not overlap. Returns 0, or -1 with a message in err (out of memory,
 * overlapping blocks, memory gone). Besides the blocks it holds about a
 * byte and a bit a block, 1.6% of the span of the blocks' regions for the
 * index, and a few MiB of buffers; blocks are read as the scan reaches
 * them (see docs/leakscan.md). */
int leakscan_classify(const struct leakscan_image *image, struct leakscan_block *blocks, size_t block_count,
                      struct leakscan_totals *totals, struct leakscan_stats *stats, char *err, size_t err_size);

/* Sorts blocks by address in place (no copy; a no-op when sorted). */
void leakscan_sort_blocks(struct leakscan_block *blocks, size_t block_count);

/* The same through scratch, room for block_count blocks that the sort
 * writes over (NULL: in place): a least-significant-digit radix sort,
 * whose passes read and write in order where the in-place one hops
 * between buckets (376,000 blocks of a Python heap: 4 ms against 12).
 * Fewer than LEAKSCAN_SORT_SCRATCH_MIN_BLOCKS are sorted in place, scratch
 * or not (their runs fit the caches, and a pass's 2,048 buckets would cost
 * more than they save). */
#define LEAKSCAN_SORT_SCRATCH_MIN_BLOCKS 16384u
void leakscan_sort_blocks_through(struct leakscan_block *blocks, size_t block_count, struct leakscan_block *scratch);

/* Sums classified blocks per category. */
void leakscan_sum(const struct leakscan_block *blocks, size_t block_count, struct leakscan_totals *totals);

/* memcheck's name of a category: "definitely_lost", "indirectly_lost",
 * "possibly_lost", "still_reachable" ("unknown" otherwise). */
const char *leakscan_category_name(uint32_t category);

/*
 * What memslope's shim tells about the memory of the process it runs in
 * (common/shm_layout.h); a process without it (`memslope leaks PID`) has
 * none of this.
 */
struct leakscan_shim_memory {
    /* Memory an allocator owns whose every block is one of the scan's
     * blocks (pymalloc's arenas while the shim wraps CPython's allocator
     * domains): never a root, free parts included (they hold stale
     * pointers); the blocks in it are scanned when reached. Any order. */
    const struct leakscan_range *allocator_ranges;
    size_t allocator_range_count;
    /* The shim's static TLS block, at tls_offset from every thread's
     * thread pointer (fs_base), tls_size bytes (0: unknown): its caches
     * hold addresses the program has freed since; never a root. */
    int64_t tls_offset;
    uint64_t tls_size;
    /* PY_VERSION_HEX of the CPython the process runs, 0 when none: see
     * leakscan_image.python_version. */
    uint32_t python_version;
};

/*
 * Process scan. Every thread of pid must be stopped by the caller (ptrace)
 * and stay stopped during the call; tids lists them all. Roots: every
 * writable mapping (loaded modules' data and .bss, anonymous mappings:
 * .bss tails, thread stacks of threads that are gone, static TLS, mmap'ed
 * buffers, CPython's frame stacks) minus what allocators own in it (see
 * leakscan_mapping_roots), each thread's registers, each thread's stack
 * from SP - 128 (the red zone) to the end of its mapping, each thread's
 * TLS area around fs_base. Not roots: [heap], a mapping holding a block of
 * an allocator memslope does not know (only reached blocks in it are
 * scanned), /memfd:memslope* (the profiler's shared memory),
 * libmemslope.so's data and TLS, glibc's main_arena (free lists point at
 * chunk headers, which are inside the previous block), [vvar],
 * [vsyscall], device and unreadable mappings. Memory is read with
 * process_vm_readv (fallback /proc/PID/mem), roots a chunk at a time and
 * blocks a batch of neighbours at a time as the scan reaches them. Returns
 * 0, or -1 with a message.
 */
int leakscan_process(pid_t pid, const pid_t *tids, size_t tid_count, struct leakscan_block *blocks,
                     size_t block_count, struct leakscan_totals *totals, char *err, size_t err_size);

/* As leakscan_process, with what the shim tells (shim may be NULL) and
 * optional statistics (stats may be NULL). */
int leakscan_process_ex(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                        struct leakscan_block *blocks, size_t block_count, struct leakscan_totals *totals,
                        struct leakscan_stats *stats, char *err, size_t err_size);

/*
 * The process scan split where the process may run on: while every thread
 * is stopped, leakscan_snapshot_take lists the roots as leakscan_process_ex
 * does and copies what the scan reads (every root range, the pages holding
 * blocks; for a process with a reservation the blocks are sorted first,
 * else classify sorts them); leakscan_snapshot_classify then
 * classifies from the copy, from any thread, while the process runs (it
 * reads the process only for memcheck's vtable test, in read-only file
 * mappings). The same categories as a scan of the stopped process, for as
 * much memory as the copy's buffer (leakscan_snapshot_bytes) until it is
 * freed.
 *
 * take returns 0 with *snapshot set; 1 when the copy would exceed
 * byte_limit bytes or its memory cannot be had (nothing kept: scan in
 * place); -1 with a message.
 * blocks stay the caller's, and must stay valid until classify returns.
 * blocks_sorted: NULL, or where the caller sorts the blocks itself (on
 * another thread, while the copy is taken; take reads them only when the
 * process has a reservation, and then calls blocks_sorted(sorted_arg)
 * first, which returns once they are sorted).
 * spare: NULL, or a buffer of an earlier copy (leakscan_snapshot_release)
 * that the copy takes when it is large enough, its pages being in memory
 * already (populating 23 MB cost 11 ms here, writing into it 1.2 ms).
 */
struct leakscan_snapshot;
struct leakscan_buffer;
int leakscan_snapshot_take(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                           struct leakscan_block *blocks, size_t block_count, void (*blocks_sorted)(void *),
                           void *sorted_arg, uint64_t byte_limit, struct leakscan_buffer *spare,
                           struct leakscan_snapshot **snapshot, char *err, size_t err_size);
int leakscan_snapshot_classify(struct leakscan_snapshot *snapshot, struct leakscan_totals *totals,
                               struct leakscan_stats *stats, char *err, size_t err_size);
uint64_t leakscan_snapshot_bytes(const struct leakscan_snapshot *snapshot);
void leakscan_snapshot_free(struct leakscan_snapshot *snapshot);

/* Memory a scan writes into again and again, populated, growing in place
 * (buffer.c): a copy's buffer kept for the next copy, the tracer's lists
 * of blocks. written: how far from the start a write reached (in this VM
 * a page's first write costs a fault even once populated, 4.3 us, so the
 * tracer writes what it grew ahead of the check that uses it). reserved:
 * the address space it holds from bytes on, 0 for a plain mapping of
 * size bytes. keep_larger keeps the larger of *keep and *buffer in *keep
 * and frees the other. */
struct leakscan_buffer {
    uint8_t *bytes;
    uint64_t size;
    uint64_t written;
    uint64_t reserved;
    int copy_refused; /* process_vm_readv refused copy_ahead (a seccomp filter): write from user space */
};
#define LEAKSCAN_BUFFER_PAGE 4096ull /* the unit of size and written */
/* Grows buffer to size (whole pages): in place, keeping what it holds
 * and written, while its reservation lasts; beyond it, into a new one,
 * holding nothing (written 0). 0, or -1 when no memory (buffer
 * unchanged). */
int leakscan_buffer_grow(struct leakscan_buffer *buffer, uint64_t size);
/* Writes into at most pages more of the pages not written yet; returns
 * whether some remain. write_ahead writes as the lists are written, from
 * user space; copy_ahead as a copy is, through the kernel
 * (process_vm_readv). In this VM the kernel's first write into a page
 * costs ~4.5 us more whoever wrote it before: 25 MiB that the process had
 * written took 34 ms to copy into, 5 ms once the kernel had written it. */
int leakscan_buffer_write_ahead(struct leakscan_buffer *buffer, size_t pages);
int leakscan_buffer_copy_ahead(struct leakscan_buffer *buffer, size_t pages);
/* Moves the snapshot's buffer into keep (keep_larger); classify reads the
 * copy no more after it. */
void leakscan_snapshot_release(struct leakscan_snapshot *snapshot, struct leakscan_buffer *keep);
void leakscan_buffer_keep_larger(struct leakscan_buffer *keep, struct leakscan_buffer *buffer);
void leakscan_buffer_free(struct leakscan_buffer *buffer);

/*
 * Process scan from what a process handed over about itself, where ptrace
 * is denied (memslope record's exit check in no-ptrace mode): descriptors
 * the process opened on its own /proc/self/mem and /proc/self/maps (the
 * kernel checks access when they are opened, and a process may always open
 * its own; reads go through them only), and the stack pointer and
 * register words of the one thread that waits while the scan runs. The
 * other threads run on, unseen: their registers are not roots, and their
 * stacks, being writable anonymous mappings, are scanned whole (from the
 * mapping's start, their stack pointers being unknown; so are the stacks
 * glibc caches for threads that exited). Roots and exclusions are
 * otherwise leakscan_process's. /proc/PID/smaps and /proc/PID/pagemap,
 * which only help skip untouched memory, are read where permitted.
 */
struct leakscan_handover {
    int mem_fd;                  /* the process's /proc/self/mem; not closed here */
    int maps_fd;                 /* its /proc/self/maps, unread yet; not closed here */
    uint64_t stack_pointer;      /* the waiting thread's: its stack is scanned from SP - 128 */
    const uint64_t *root_words;  /* its registers, each a root word */
    size_t root_word_count;
    const struct leakscan_shim_memory *shim; /* may be NULL; threads' TLS found by their TCBs */
};

/* Returns 0, or -1 with a message (maps unreadable, out of memory). */
int leakscan_process_handover(pid_t pid, const struct leakscan_handover *handover, struct leakscan_block *blocks,
                              size_t block_count, struct leakscan_totals *totals, struct leakscan_stats *stats,
                              char *err, size_t err_size);

/*
 * Stopping a process that was never started under memslope
 * (`memslope leaks PID`): PTRACE_SEIZE + PTRACE_INTERRUPT every thread in
 * /proc/PID/task, re-listed until no new thread appears, each stop waited
 * for. leakscan_detach lets every thread go on exactly as before.
 */
struct leakscan_stopped {
    pid_t pid;
    pid_t *tids;
    size_t tid_count;
    int *signals; /* per thread: a signal that arrived while stopping, handed back at detach */
};

/* Returns 0, or -1 with a message (no such process, ptrace refused, the
 * process exited); on failure every thread already attached is detached. */
int leakscan_stop_process(pid_t pid, struct leakscan_stopped *stopped, char *err, size_t err_size);
void leakscan_detach(struct leakscan_stopped *stopped);

/*
 * glibc malloc's heap of a stopped process, walked from outside: the main
 * arena's [heap], other arenas' 64 MiB heaps, mmapped chunks. Every chunk
 * header is validated; free chunks in fastbins and tcache bins and the
 * tcache_perthread_struct chunks are left out. Sizes are usable sizes.
 */
struct leakscan_target;
struct leakscan_heap {
    struct leakscan_block *blocks; /* in-use user blocks, by address */
    size_t block_count;
    uint64_t main_arena;           /* address of main_arena, 0 if not found */
    size_t arena_count;            /* arenas walked, main included */
    size_t mmapped_count;          /* mmapped chunks */
};

/* tids: the stopped threads (their TLS tells which chunks are tcache
 * structures). Returns 0, or -1 with a message saying which header did not
 * validate (the caller then refuses to guess). */
int leakscan_walk_glibc_heap(struct leakscan_target *target, const pid_t *tids, size_t tid_count,
                             struct leakscan_heap *heap, char *err, size_t err_size);
void leakscan_heap_free(struct leakscan_heap *heap);

/*
 * Reading another process's memory (the heap walk's and the scan's, and
 * `memslope leaks PID`'s previews of the blocks). Reads go through
 * process_vm_readv (falling back to /proc/PID/mem page by page).
 * Unreadable bytes read as zero. Nothing is kept: the walk and the scan
 * read what they reach, a window at a time.
 */
struct leakscan_copy;
struct leakscan_target {
    pid_t pid;
    int mem_fd; /* /proc/PID/mem, -1 until needed */
    int gone;   /* the process no longer exists */
    int handed_over; /* mem_fd came from the process itself: the only way in, not ours to close */
    int pagemap_fd;  /* /proc/PID/pagemap; -1 until needed, -2 when it cannot be read */
    /* Internal (a snapshot's plan, process.c): reads and holds_data inside
     * these mappings are served by the copy taken when the process was
     * stopped; NULL: none. */
    struct leakscan_copy *copy;
    const struct leakscan_range *copied; /* sorted, disjoint */
    size_t copied_count;
    int mem_only; /* reads only through mem_fd, ours (leakscan_target_hold_memory) */
};

void leakscan_target_open(struct leakscan_target *target, pid_t pid);
void leakscan_target_close(struct leakscan_target *target);
/* leakscan_memory callbacks; context is a struct leakscan_target. */
int leakscan_target_read(void *context, uint64_t address, void *buffer, size_t length);
/* leakscan_memory.holds_data from /proc/PID/pagemap (bit 63 present, 62
 * swapped); 1 where the pagemap cannot be read. */
int leakscan_target_holds_data(void *context, uint64_t address, size_t length);

/* leakscan_process_ex reading through target (the heap walk's). */
int leakscan_process_target(struct leakscan_target *target, const pid_t *tids, size_t tid_count,
                            struct leakscan_block *blocks, size_t block_count, struct leakscan_totals *totals,
                            struct leakscan_stats *stats, char *err, size_t err_size);

#endif

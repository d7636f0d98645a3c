/* held_floor - what keeping every block in a per-thread set costs a
 * program by itself, with nothing recorded: the floor under memslope's
 * sampled rows (docs/performance.md, "Round twenty-four").
 *
 *   LD_PRELOAD=build/bench/held_floor.so HELD_FLOOR=pass|set PROGRAM...
 *
 * pass: malloc and free only pass through to glibc's (the cost of being
 *       interposed at all);
 * set:  besides, each allocation goes into its thread's set and each free
 *       takes its block out, with the shim's own set (preload/held_set.h:
 *       4,096 buckets of one cache line, five ways of an address and a
 *       size; a block pushed out of a full bucket, which memslope would
 *       send, is dropped).
 *
 * Only malloc and free are wrapped (malloc_bench calls nothing else in its
 * loop); a block from another allocation function is in no set, and its
 * free passes through. Nothing here is shared between threads: a free of
 * another thread's block finds nothing in its own set, which malloc_bench
 * never does. bench/compare.py runs it as the builds floor:pass and
 * floor:set, in turns with memslope's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../preload/held_set.h"

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *pointer);

/* -1: HELD_FLOOR not read yet; 0: pass; 1: set. Read once, by the first
 * call (before any thread but the main one exists in malloc_bench). */
static int mode = -1;
static __thread struct held_set thread_set __attribute__((tls_model("initial-exec")));
/* No tracer takes the sets: the epoch never moves. */
static __thread uint32_t thread_epoch __attribute__((tls_model("initial-exec")));

static int read_mode(void)
{
    const char *wanted = getenv("HELD_FLOOR");
    mode = wanted && strcmp(wanted, "set") == 0;
    return mode;
}

static uint64_t no_clock(void)
{
    return 0;
}

static struct held_set *set_of_thread(void)
{
    if (!thread_set.buckets) {
        void *memory = mmap(NULL, SHM_HELD_BUCKETS * sizeof(struct shm_held_bucket), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED)
            abort();
        thread_set.buckets = memory;
    }
    return &thread_set;
}

void *malloc(size_t size)
{
    void *pointer = __libc_malloc(size);
    if ((mode < 0 ? read_mode() : mode) && pointer && size <= SHM_HELD_MAX_SIZE) {
        struct held_block pushed_out;
        held_set_insert(set_of_thread(), (uint64_t)(uintptr_t)pointer, size, no_clock, &pushed_out);
    }
    return pointer;
}

void free(void *pointer)
{
    uint64_t size;
    if ((mode < 0 ? read_mode() : mode) && pointer)
        held_set_take(set_of_thread(), (uint64_t)(uintptr_t)pointer, &size, &thread_epoch);
    __libc_free(pointer);
}

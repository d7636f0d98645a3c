/* held_floor - what keeping every block in a per-thread set costs a
 * program by itself, with nothing recorded: the floor under memslope's
 * sampled rows (docs/performance.md, "Round twenty-four").
 *
 *   LD_PRELOAD=build/bench/held_floor.so HELD_FLOOR=pass|set PROGRAM...
 *
 * pass: malloc and free only pass through to glibc's (the cost of being
 *       interposed at all);
 * set:  besides, each allocation goes into its thread's set and each free
 *       takes its block out, in memslope's layout (preload/held_set.h: 4,096
 *       buckets of one cache line, five ways of an address and a size), by
 *       the same steps: the insert looks for the address or an empty way
 *       (a full bucket drops a block, which memslope would send), the free
 *       looks for its block and clears the way.
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

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *pointer);

#define WAYS 5u
#define BUCKET_BITS 12u
#define BUCKETS (1u << BUCKET_BITS)
#define MAX_SIZE 65536u

struct bucket {
    _Alignas(64) uint64_t address[WAYS];
    uint32_t size[WAYS];
    uint32_t pad;
};

/* -1: HELD_FLOOR not read yet; 0: pass; 1: set. Read once, by the first
 * call (before any thread but the main one exists in malloc_bench). */
static int mode = -1;
static __thread struct bucket *thread_set __attribute__((tls_model("initial-exec")));
static __thread unsigned thread_victim __attribute__((tls_model("initial-exec")));

static int read_mode(void)
{
    const char *wanted = getenv("HELD_FLOOR");
    mode = wanted && strcmp(wanted, "set") == 0;
    return mode;
}

static struct bucket *bucket_of(uint64_t address)
{
    if (!thread_set) {
        void *memory = mmap(NULL, BUCKETS * sizeof(struct bucket), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED)
            abort();
        thread_set = memory;
    }
    uint64_t h = (address >> 4) * 0x9e3779b97f4a7c15ull;
    return &thread_set[h >> (64 - BUCKET_BITS)];
}

static void set_insert(uint64_t address, size_t size)
{
    struct bucket *bucket = bucket_of(address);
    int way = -1, empty = -1;
    for (unsigned w = 0; w < WAYS; w++) {
        uint64_t there = __atomic_load_n(&bucket->address[w], __ATOMIC_RELAXED);
        if (there == address) {
            way = (int)w;
            break;
        }
        if (there == 0 && empty < 0)
            empty = (int)w;
    }
    if (way < 0)
        way = empty >= 0 ? empty : (int)(thread_victim++ % WAYS);
    bucket->size[way] = (uint32_t)size;
    __atomic_store_n(&bucket->address[way], address, __ATOMIC_RELEASE);
}

static void set_take(uint64_t address)
{
    struct bucket *bucket = bucket_of(address);
    for (unsigned w = 0; w < WAYS; w++)
        if (__atomic_load_n(&bucket->address[w], __ATOMIC_RELAXED) == address) {
            __atomic_store_n(&bucket->address[w], 0, __ATOMIC_RELAXED);
            return;
        }
}

void *malloc(size_t size)
{
    void *pointer = __libc_malloc(size);
    if ((mode < 0 ? read_mode() : mode) && pointer && size <= MAX_SIZE)
        set_insert((uint64_t)(uintptr_t)pointer, size);
    return pointer;
}

void free(void *pointer)
{
    if ((mode < 0 ? read_mode() : mode) && pointer)
        set_take((uint64_t)(uintptr_t)pointer);
    __libc_free(pointer);
}

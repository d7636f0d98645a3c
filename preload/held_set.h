/*
 * held_set.h - a thread's unsampled blocks, kept in its own memory so that
 * an allocation and its free by the same thread send the tracer nothing.
 *
 * With --sample-rate, most allocations carry no backtrace; the tracer still
 * had to see each one and its free to keep the totals and the leak checks
 * exact, and with two threads on two processors that traffic was the cost
 * (docs/performance.md, round nineteen). The set's layout is the shared ABI
 * (struct shm_held_bucket, common/shm_layout.h): the tracer reads it at
 * every stop of the world and takes what it holds into its live table.
 *
 * The owning thread inserts and clears; another thread that frees a block
 * held here takes it out by compare-and-swap (held_set_take_shared); the
 * tracer may clear every address while no thread runs, after bumping the
 * slot's epoch. The owner's free clears its way with a plain store (a
 * locked compare-and-swap there cost the program 6 ns an event) and reads
 * the epoch again: if it moved, the tracer may have taken the block too,
 * and the free crosses to settle it. Pushing a block out, rare, takes it by
 * compare-and-swap. A signal handler may free while its thread is inside a
 * set operation, never insert (busy): the interrupted operation may be
 * writing the way it would pick.
 */
#ifndef MEMSLOPE_HELD_SET_H
#define MEMSLOPE_HELD_SET_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/shm_layout.h"

struct held_set {
    struct shm_held_bucket *buckets; /* NULL until the thread first holds a block */
    uint32_t victim;                 /* the way an insert into a full bucket pushes out next */
    uint8_t busy;                    /* set operations in progress on this thread (signal nesting) */
    uint8_t closed;                  /* the thread is ending: hold nothing more */
};

/* What held_set_take found. */
enum held_take {
    HELD_NOT = 0,   /* not in the set: the free crosses */
    HELD_PAIR,      /* taken out: the pair never crosses */
    HELD_UNSETTLED, /* taken out, but the tracer took the set meanwhile: cross the free, with the size */
};

/* A block as it leaves the set to cross to the tracer, stamped as it
 * leaves (the set keeps no stamps, shm_layout.h). */
struct held_block {
    uint64_t address, size, stamp;
};

/* Reads the clock of event stamps. */
typedef uint64_t held_clock(void);

/* Maps the set's buckets (anonymous memory, not the allocator it wraps).
 * Returns false if the memory could not be had. */
bool held_set_create(struct held_set *set);

/* Unmaps the buckets and forgets them (a fork child's copies of its
 * parent's sets, which no thread of the child looks in). A set of the
 * image's own stays mapped while the image lives: other threads may be
 * looking in it. */
void held_set_destroy(struct held_set *set);

/* Takes out the next block still held, from bucket *cursor on, for a
 * thread's end to send across, stamped stamp: a clock reading taken before
 * the first call. Returns false when none is left. */
bool held_set_take_next(struct held_set *set, uint32_t *cursor, uint64_t stamp, struct held_block *out);

static inline struct shm_held_bucket *held_bucket(const struct held_set *set, uint64_t address)
{
    /* Blocks are 16-byte aligned: the low bits say nothing. Fibonacci
     * hashing takes the product's top bits. */
    uint64_t h = (address >> 4) * 0x9e3779b97f4a7c15ull;
    return &set->buckets[h >> (64 - SHM_HELD_BUCKET_BITS)];
}

/* Swaps address out of way if it is still there; true: the caller owns
 * the block now. */
static inline bool held_way_take(struct shm_held_bucket *bucket, unsigned way, uint64_t address)
{
    uint64_t expected = address;
    return __atomic_compare_exchange_n(&bucket->addr[way], &expected, 0, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}

/* Takes address out of the set (*size: its size). epoch: the slot's
 * held_epoch, which the tracer bumps before it takes the set. */
static inline enum held_take held_set_take(struct held_set *set, uint64_t address, uint64_t *size,
                                           const uint32_t *epoch)
{
    uint32_t before = __atomic_load_n(epoch, __ATOMIC_RELAXED);
    struct shm_held_bucket *bucket = held_bucket(set, address);
    enum held_take found = HELD_NOT;
    set->busy++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    for (unsigned way = 0; way < SHM_HELD_WAYS; way++) {
        if (__atomic_load_n(&bucket->addr[way], __ATOMIC_RELAXED) != address)
            continue;
        *size = bucket->size[way];
        __atomic_store_n(&bucket->addr[way], 0, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        found = __atomic_load_n(epoch, __ATOMIC_RELAXED) == before ? HELD_PAIR : HELD_UNSETTLED;
        break;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    set->busy--;
    return found;
}

/* Takes address out of another thread's set, if it is there: the block
 * is freed by a thread other than the one that holds it. Returns true
 * (with its size) when this thread took it. Only a compare-and-swap may
 * take it: its owner may be pushing it out at the same time. */
static inline bool held_set_take_shared(struct shm_held_bucket *buckets, uint64_t address, uint64_t *size)
{
    struct held_set other = {.buckets = buckets};
    struct shm_held_bucket *bucket = held_bucket(&other, address);
    for (unsigned way = 0; way < SHM_HELD_WAYS; way++) {
        if (__atomic_load_n(&bucket->addr[way], __ATOMIC_ACQUIRE) != address)
            continue;
        *size = __atomic_load_n(&bucket->size[way], __ATOMIC_RELAXED);
        return held_way_take(bucket, way, address);
    }
    return false;
}

/* Puts a block into the set (the caller counts itself in set->busy). A block it pushes out
 * to make room is returned in *out (address 0: none) for the caller to
 * send across, stamped by clock before it is taken out: a thread that
 * misses it here afterwards stamps its free later. So is a stale copy of
 * the same address (freed by a thread that did not look in the sets, whose
 * free crossed before the address came back), stamped 0: older than that
 * free, which it cancels. */
static inline void held_set_insert(struct held_set *set, uint64_t address, uint64_t size, held_clock *clock,
                                   struct held_block *out)
{
    struct shm_held_bucket *bucket = held_bucket(set, address);
    int empty = -1, way = -1;
    for (unsigned w = 0; w < SHM_HELD_WAYS; w++) {
        uint64_t there = __atomic_load_n(&bucket->addr[w], __ATOMIC_RELAXED);
        if (there == address) {
            way = (int)w;
            break;
        }
        if (there == 0 && empty < 0)
            empty = (int)w;
    }
    if (way < 0)
        way = empty >= 0 ? empty : (int)(set->victim++ % SHM_HELD_WAYS);
    out->address = 0;
    uint64_t old = __atomic_load_n(&bucket->addr[way], __ATOMIC_RELAXED);
    if (old) {
        uint64_t old_size = bucket->size[way], stamp = old == address ? 0 : clock();
        if (held_way_take(bucket, (unsigned)way, old))
            *out = (struct held_block){old, old_size, stamp};
    }
    bucket->size[way] = (uint32_t)size; /* at most SHM_HELD_MAX_SIZE */
    __atomic_store_n(&bucket->addr[way], address, __ATOMIC_RELEASE);
}

#endif

/*
 * stack_table.h - deduplicated backtraces in the shared stack table.
 *
 * Producers (every thread of the target) insert lock-free and never wait;
 * the tracer only reads. A new stack takes the next id (fetch-add), its
 * frames are copied into the frame pool (space taken by fetch-add), the
 * entry is published READY (release), and then the id is stored into an
 * empty slot of the hash index (CAS). So the id, the only thing that
 * crosses the ring, always names a complete entry; ids are dense, and the
 * pages touched at random are the index's 4-byte slots only. A 64-bit hash
 * collision costs a probe, never a wrong stack.
 */
#ifndef MEMSLOPE_STACK_TABLE_H
#define MEMSLOPE_STACK_TABLE_H

#include <stdint.h>

#include "../common/shm_layout.h"
#include "near_probe.h"

/* Probes before the table counts as full for this stack: long clusters only
 * happen when the table is nearly full, and a bounded probe keeps the
 * worst case of an allocation bounded too. */
#define STACK_TABLE_MAX_PROBES 256u

/* The index's near part (near_probe.h): a program with fewer stacks than
 * about a quarter of these keeps them on its 64 pages. */
#define STACK_INDEX_NEAR_SLOTS (1u << 16)
#define STACK_INDEX_NEAR_PROBES 16u

/* The frames a thread's next new stacks may share their outer ones with:
 * the last stack it stored whole, a span of the frame pool (count 0: none
 * yet). A new stack with at least half its frames in common with the
 * span's outer end stores only the rest (its entry's tail is that part of
 * the span); one with fewer is stored whole and becomes the span. */
struct stack_tail {
    uint32_t offset, count;
};

/* The index slot a stack of this hash tries probe-th, probe below
 * STACK_INDEX_NEAR_PROBES + STACK_TABLE_MAX_PROBES. */
static inline uint32_t stack_index_slot(uint64_t hash, uint32_t probe)
{
    return near_probe_slot(hash, probe, STACK_INDEX_NEAR_SLOTS, STACK_INDEX_NEAR_PROBES, SHM_STACK_INDEX_SLOTS);
}

/* Hash of a frame array, folded from the outermost frame inwards, so the
 * hash of a backtrace's outer part can be kept and extended by its inner
 * frames (fast_unwind's memo does): stack_hash_fold over frames[depth-1]
 * down to frames[0] from STACK_HASH_SEED, then stack_hash_finish. FNV-1a
 * over whole frames: two operations a frame on the hot path. */
#define STACK_HASH_SEED 0x8f1bbcdcbfa53e0bull

static inline uint64_t stack_hash_fold(uint64_t hash, uint64_t frame)
{
    return (hash ^ frame) * 0x100000001b3ull;
}

/* Mixes in the depth, then the murmur3 finaliser spreads the high bits
 * into the low ones, which index the tables. Never 0 (0 marks an empty
 * entry). */
static inline uint64_t stack_hash_finish(uint64_t hash, uint32_t depth)
{
    hash = stack_hash_fold(hash, depth);
    hash ^= hash >> 33;
    hash *= 0xff51afd7ed558ccdull;
    hash ^= hash >> 33;
    return hash ? hash : 1;
}

/* stack_hash_fold over frames[depth-1] down to frames[0] from the seed:
 * the hash before stack_hash_finish. */
static inline uint64_t stack_hash_unfinished(const uint64_t *frames, uint32_t depth)
{
    uint64_t hash = STACK_HASH_SEED;
    for (uint32_t i = depth; i-- > 0;)
        hash = stack_hash_fold(hash, frames[i]);
    return hash;
}

static inline uint64_t stack_hash(const uint64_t *frames, uint32_t depth)
{
    return stack_hash_finish(stack_hash_unfinished(frames, depth), depth);
}

/*
 * Returns the id of the stack (a table index >= 1), inserting it if new, or
 * SHM_STACK_NONE when the table or the frame pool is full (and then counts
 * header->stacks_dropped). base is the start of the shared region.
 * Async-signal-safe and lock-free, without waiting: two threads inserting
 * the same new stack at once both fill an entry, and the one whose index
 * CAS loses leaves its own unused.
 *
 * tail: the calling thread's (zeroed before its first call), used and
 * updated for a new stack only; NULL stores every new stack whole (a
 * signal handler's capture, which may interrupt one that uses it).
 */
uint32_t stack_table_intern(void *base, uint64_t hash, const uint64_t *frames, uint32_t depth,
                            struct stack_tail *tail);

#endif

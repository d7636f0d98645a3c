/*
 * stack_table.c - lock-free insert into the shared stack table.
 */
#include "stack_table.h"

#include <sched.h>
#include <string.h>

/* Spins (with sched_yield) waiting for another inserter to publish an entry
 * before giving up on it. The inserter is a few stores away from READY
 * unless it was preempted or stopped by the tracer; the bound keeps a thread
 * interrupted by its own signal handler from waiting on itself forever. */
#define STACK_READY_WAIT_SPINS 100000u

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

static uint32_t next_index(uint32_t index)
{
    index = (index + 1) & (SHM_STACK_TABLE_ENTRIES - 1);
    return index ? index : 1; /* index 0 is SHM_STACK_NONE */
}

static int entry_wait_ready(struct shm_stack_entry *entry)
{
    for (uint32_t spin = 0; spin < STACK_READY_WAIT_SPINS; spin++) {
        if (__atomic_load_n(&entry->state, __ATOMIC_ACQUIRE) == SHM_STACK_READY)
            return 1;
        if (spin > 64)
            sched_yield();
        else
            cpu_relax();
    }
    return 0;
}

static void count_dropped(struct shm_header *header)
{
    __atomic_fetch_add(&header->stacks_dropped, 1, __ATOMIC_RELAXED);
}

uint32_t stack_table_intern(void *base, uint64_t hash, const uint64_t *frames, uint32_t depth)
{
    struct shm_header *header = base;
    struct shm_stack_entry *table = shm_stack_table(base);
    uint64_t *pool = shm_frame_pool(base);
    uint32_t index = (uint32_t)hash & (SHM_STACK_TABLE_ENTRIES - 1);
    if (index == 0)
        index = 1;

    for (uint32_t probe = 0; probe < STACK_TABLE_MAX_PROBES; probe++, index = next_index(index)) {
        struct shm_stack_entry *entry = &table[index];
        uint64_t found = __atomic_load_n(&entry->hash, __ATOMIC_ACQUIRE);
        if (found == 0) {
            /* Checked before claiming so a full pool does not burn table
             * entries; the fetch-add below is still the real guard. */
            if (__atomic_load_n(&header->frame_pool_used, __ATOMIC_RELAXED) + (uint64_t)depth >
                SHM_FRAME_POOL_FRAMES) {
                count_dropped(header);
                return SHM_STACK_NONE;
            }
            uint64_t expected = 0;
            if (!__atomic_compare_exchange_n(&entry->hash, &expected, hash, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE)) {
                found = expected; /* lost the race: examine the winner's entry */
            } else {
                __atomic_store_n(&entry->state, SHM_STACK_BUSY, __ATOMIC_RELAXED);
                uint32_t offset = __atomic_fetch_add(&header->frame_pool_used, depth, __ATOMIC_RELAXED);
                if ((uint64_t)offset + depth > SHM_FRAME_POOL_FRAMES) {
                    /* Raced past the end: publish an empty entry (it still
                     * reads as a valid stack of depth 0, and its hash
                     * matches no empty stack) and report this one dropped. */
                    entry->frame_offset = 0;
                    entry->depth = 0;
                    __atomic_store_n(&entry->state, SHM_STACK_READY, __ATOMIC_RELEASE);
                    count_dropped(header);
                    return SHM_STACK_NONE;
                }
                if (depth)
                    memcpy(&pool[offset], frames, (size_t)depth * sizeof(uint64_t));
                entry->frame_offset = offset;
                entry->depth = (uint16_t)depth;
                __atomic_store_n(&entry->state, SHM_STACK_READY, __ATOMIC_RELEASE);
                return index;
            }
        }
        if (found != hash)
            continue;
        if (!entry_wait_ready(entry)) {
            count_dropped(header);
            return SHM_STACK_NONE;
        }
        if (entry->depth == depth &&
            (depth == 0 || memcmp(&pool[entry->frame_offset], frames, (size_t)depth * sizeof(uint64_t)) == 0))
            return index;
        /* same hash, different frames: a collision, keep probing */
    }
    count_dropped(header);
    return SHM_STACK_NONE;
}

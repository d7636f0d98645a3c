/*
 * stack_table.c - lock-free insert into the shared stack table.
 */
#include "stack_table.h"
#include "populate.h"

#include <string.h>

static void count_dropped(struct shm_header *header)
{
    __atomic_fetch_add(&header->stacks_dropped, 1, __ATOMIC_RELAXED);
}

/* Outer frames of frames[0, depth) equal to the span's outer frames, at
 * most the span's count. */
static uint32_t outer_frames_in_common(const uint64_t *pool, const struct stack_tail *tail, const uint64_t *frames,
                                       uint32_t depth)
{
    uint32_t common = 0;
    while (common < depth && common < tail->count &&
           frames[depth - 1 - common] == pool[tail->offset + tail->count - 1 - common])
        common++;
    return common;
}

/* The pool's and the stack table's 64 KiB chunks, from their second on,
 * are populated before the first frames or entry that reach into them are
 * written (populate.h): both are handed out by fetch-and-add, in order, so
 * each chunk is entered once. */
static void populate_entering(uint64_t *pool, uint32_t offset, uint32_t own, struct shm_stack_entry *table,
                              uint32_t id)
{
    const uint32_t chunk = POPULATE_CHUNK_BYTES / sizeof(uint64_t);
    if (own) {
        uint32_t first_new = (offset + chunk - 1) / chunk, last = (offset + own - 1) / chunk;
        if (first_new == 0)
            first_new = 1;
        if (first_new <= last)
            populate_ahead(&pool[(uint64_t)first_new * chunk],
                           (size_t)(last - first_new + 1) * POPULATE_CHUNK_BYTES);
    }
    /* the entry whose last byte is the first in a chunk: 24-byte entries
     * straddle chunks, and one that does writes into the next first */
    uint64_t last_byte = (uint64_t)id * sizeof *table + sizeof *table - 1;
    uint64_t table_bytes = (uint64_t)SHM_STACK_TABLE_ENTRIES * sizeof *table;
    if (last_byte >= POPULATE_CHUNK_BYTES && last_byte % POPULATE_CHUNK_BYTES < sizeof *table) {
        uint64_t from = last_byte - last_byte % POPULATE_CHUNK_BYTES;
        uint64_t length = table_bytes - from < POPULATE_CHUNK_BYTES ? table_bytes - from : POPULATE_CHUNK_BYTES;
        populate_ahead((const char *)table + from, (size_t)length);
    }
}

/* Takes the next stack id and frame pool space, fills the entry and
 * publishes it (READY, release); SHM_STACK_NONE when either is used up.
 * A stack with at least half its frames in common with the outer end of
 * the thread's tail copies only the rest, its outer frames being that
 * part of the tail; one with fewer is copied whole, and becomes the tail. */
static uint32_t new_entry(struct shm_header *header, uint64_t hash, const uint64_t *frames, uint32_t depth,
                          struct stack_tail *tail)
{
    uint64_t *pool = shm_frame_pool(header);
    uint32_t shared = 0;
    if (tail && tail->count && tail->count <= SHM_FRAME_POOL_FRAMES &&
        tail->offset <= SHM_FRAME_POOL_FRAMES - tail->count) {
        shared = outer_frames_in_common(pool, tail, frames, depth);
        if (shared * 2 < depth)
            shared = 0;
    }
    uint32_t own = depth - shared;
    /* Checked before taking anything, so a full table or pool does not
     * burn ids or frames on every later stack; the fetch-adds below are
     * still the real guards. */
    if (__atomic_load_n(&header->stack_entries_used, __ATOMIC_RELAXED) >= SHM_STACK_TABLE_ENTRIES ||
        __atomic_load_n(&header->frame_pool_used, __ATOMIC_RELAXED) + (uint64_t)own > SHM_FRAME_POOL_FRAMES)
        return SHM_STACK_NONE;
    uint32_t id = __atomic_fetch_add(&header->stack_entries_used, 1, __ATOMIC_RELAXED);
    if (id >= SHM_STACK_TABLE_ENTRIES)
        return SHM_STACK_NONE;
    struct shm_stack_entry *entry = &shm_stack_table(header)[id];
    uint32_t offset = __atomic_fetch_add(&header->frame_pool_used, own, __ATOMIC_RELAXED);
    if ((uint64_t)offset + own > SHM_FRAME_POOL_FRAMES)
        return SHM_STACK_NONE; /* raced past the end: the id stays unused */
    populate_entering(pool, offset, own, shm_stack_table(header), id);
    if (own)
        memcpy(&pool[offset], frames, (size_t)own * sizeof(uint64_t));
    entry->hash = hash;
    entry->frame_offset = offset;
    entry->depth = (uint16_t)depth;
    entry->tail_offset = shared ? tail->offset + tail->count - shared : 0;
    entry->tail_count = shared;
    __atomic_store_n(&entry->state, SHM_STACK_READY, __ATOMIC_RELEASE);
    if (tail && !shared && depth)
        *tail = (struct stack_tail){offset, depth};
    return id;
}

static int entry_holds(const struct shm_header *header, uint32_t id, uint64_t hash, const uint64_t *frames,
                       uint32_t depth)
{
    if (id >= SHM_STACK_TABLE_ENTRIES)
        return 0; /* not an id this table gave: the program wrote over the index */
    const struct shm_stack_entry *entry = &shm_stack_table((void *)header)[id];
    /* READY is a given for an id the index got from a CAS; not for a value
     * the program wrote there, which may name an entry being filled */
    if (__atomic_load_n(&entry->state, __ATOMIC_ACQUIRE) != SHM_STACK_READY || entry->hash != hash ||
        entry->depth != depth)
        return 0;
    /* Each field read once: the bounds checked are the bounds used, even if
     * the program writes over the entry meanwhile. */
    uint32_t shared = __atomic_load_n(&entry->tail_count, __ATOMIC_RELAXED), own = depth - shared;
    uint32_t offset = __atomic_load_n(&entry->frame_offset, __ATOMIC_RELAXED);
    uint32_t tail_offset = __atomic_load_n(&entry->tail_offset, __ATOMIC_RELAXED);
    const uint64_t *pool = shm_frame_pool((void *)header);
    if (shared > depth || offset > SHM_FRAME_POOL_FRAMES - own || tail_offset > SHM_FRAME_POOL_FRAMES - shared)
        return 0; /* written over */
    return (own == 0 || memcmp(&pool[offset], frames, (size_t)own * sizeof(uint64_t)) == 0) &&
           (shared == 0 || memcmp(&pool[tail_offset], frames + own, (size_t)shared * sizeof(uint64_t)) == 0);
}

uint32_t stack_table_intern(void *base, uint64_t hash, const uint64_t *frames, uint32_t depth,
                            struct stack_tail *tail)
{
    struct shm_header *header = base;
    uint32_t *index = shm_stack_index(base);
    uint32_t mine = SHM_STACK_NONE; /* an entry this call filled, once it needed one */

    for (uint32_t probe = 0; probe < STACK_INDEX_NEAR_PROBES + STACK_TABLE_MAX_PROBES; probe++) {
        uint32_t slot = stack_index_slot(hash, probe);
        uint32_t id = __atomic_load_n(&index[slot], __ATOMIC_ACQUIRE);
        if (id == SHM_STACK_NONE) {
            if (mine == SHM_STACK_NONE) {
                mine = new_entry(header, hash, frames, depth, tail);
                if (mine == SHM_STACK_NONE)
                    break;
            }
            if (__atomic_compare_exchange_n(&index[slot], &id, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return mine;
            /* another thread took the slot first: examine its stack */
        }
        if (entry_holds(header, id, hash, frames, depth))
            return id; /* mine, if filled, stays unused */
        /* another stack (a collision, or another hash in this cluster): keep probing */
    }
    count_dropped(header);
    return SHM_STACK_NONE;
}

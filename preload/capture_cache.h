/*
 * capture_cache.h - a thread's recent backtraces with Python frames, each
 * kept with every word it was computed from, so that an allocation from
 * the same place costs a check of those words instead of an unwind and a
 * merge.
 *
 * A Python program allocates from a few dozen places over and over, and
 * each backtrace there is a native unwind (fast_unwind: 700 instructions
 * for a pure-Python script under Debian's python3.11) and a walk of the
 * Python frames merged into it (python_runtime: 500 more). Both are
 * functions of the registers the unwind starts from, the innermost Python
 * frame, and the memory they read: the stack words the unwind read
 * (fast_unwind_memo_reads) and the frame and code fields the walk read
 * (python_merge_frames' read set). An entry keeps those words and what
 * they held, and the stack id the capture gave; while they all hold the
 * same, the capture would give the same id again (read_set.h says why the
 * words can be read in order safely).
 *
 * Entries are looked up by the start registers and the Python frame, in
 * sets of two, and a hit is taken only after every word checks. A thread
 * has its cache in its ring slot's part of the image's thread memory
 * (thread_memory.h, not the allocator the shim wraps), emptied when the
 * thread takes the slot; only the outermost capture of a thread uses it,
 * never a signal handler's.
 */
#ifndef MEMSLOPE_CAPTURE_CACHE_H
#define MEMSLOPE_CAPTURE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "read_set.h"

#define CAPTURE_CACHE_SETS 64u /* power of two */
#define CAPTURE_CACHE_WAYS 2u

/* Where a capture starts: the registers of the unwind's first frame, and
 * the thread's innermost Python frame and where it is (its instruction:
 * the entry's words check it again, but it tells apart the allocations of
 * one frame, which share the rest of the key when their native paths are
 * equally deep). */
struct capture_key {
    uint64_t ip, sp, bp;
    uint64_t python_frame, python_instruction;
};

struct capture_entry {
    struct capture_key key; /* key.ip 0: empty */
    uint32_t bp_matters;    /* compare key.bp too */
    uint32_t id;            /* the stack id the capture gave */
    uint32_t count;         /* its words */
    uint32_t last_used;     /* set-local age, for the replacement */
};

/* The entries apart from their words: a lookup reads the entries of one
 * set (a cache line or two of a few pages), and a set's words are touched
 * only when it holds a capture. */
struct capture_cache {
    uint64_t hits, misses; /* statistics */
    uint32_t clock;
    struct capture_entry entries[CAPTURE_CACHE_SETS * CAPTURE_CACHE_WAYS];
    struct read_set_word words[CAPTURE_CACHE_SETS * CAPTURE_CACHE_WAYS][READ_SET_MAX];
};

/* Empties a cache (about 400 KiB, of which the entries, 7 KiB, are
 * written): one whose words name another thread's stack, or a new one of
 * memory that is not zeroed. */
void capture_cache_clear(struct capture_cache *cache);

static inline uint32_t capture_cache_set(const struct capture_key *key)
{
    uint64_t mixed = (key->ip ^ key->sp ^ key->python_frame ^ key->python_instruction) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(mixed >> 40) & (CAPTURE_CACHE_SETS - 1);
}

/* The stack id a capture from key gave, if an entry for key still holds. */
static inline bool capture_cache_find(struct capture_cache *cache, const struct capture_key *key, uint32_t *id)
{
    uint32_t first = capture_cache_set(key) * CAPTURE_CACHE_WAYS;
    for (uint32_t way = 0; way < CAPTURE_CACHE_WAYS; way++) {
        struct capture_entry *entry = &cache->entries[first + way];
        if (entry->key.ip != key->ip || entry->key.sp != key->sp || entry->key.python_frame != key->python_frame ||
            entry->key.python_instruction != key->python_instruction ||
            (entry->bp_matters && entry->key.bp != key->bp))
            continue;
        if (!read_set_holds(cache->words[first + way], entry->count))
            continue;
        entry->last_used = ++cache->clock;
        cache->hits++;
        *id = entry->id;
        return true;
    }
    cache->misses++;
    return false;
}

/* Keeps what a capture from key gave (id), computed from the words in
 * reads, in place of the set's least recently used entry. */
void capture_cache_store(struct capture_cache *cache, const struct capture_key *key, bool bp_matters,
                         const struct read_set *reads, uint32_t id);

#endif

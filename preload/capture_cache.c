/* capture_cache.c - see capture_cache.h. */
#include "capture_cache.h"

#include <string.h>

#include "thread_memory.h"

/* From thread_memory.h: an entry's words hold what the stack and the
 * frames held, stale addresses of blocks the program has freed or lost
 * among them, which the leak scan must not take for roots. A fork child's
 * copy is unmapped by its fork handler: its stack ids are its own. Pages
 * are allocated as entries fill: a thread that allocates from a few places
 * costs a few pages. */
struct capture_cache *capture_cache_create(void)
{
    return thread_memory_map(sizeof(struct capture_cache), "memslope-captures");
}

void capture_cache_destroy(struct capture_cache *cache)
{
    thread_memory_unmap(cache, sizeof *cache);
}

void capture_cache_store(struct capture_cache *cache, const struct capture_key *key, bool bp_matters,
                         const struct read_set *reads, uint32_t id)
{
    if (reads->overflow)
        return;
    uint32_t first = capture_cache_set(key) * CAPTURE_CACHE_WAYS, victim = first;
    for (uint32_t way = 1; way < CAPTURE_CACHE_WAYS; way++)
        if (cache->entries[first + way].last_used < cache->entries[victim].last_used)
            victim = first + way;
    struct capture_entry *entry = &cache->entries[victim];
    entry->key = *key;
    entry->bp_matters = bp_matters;
    entry->id = id;
    entry->count = reads->count;
    memcpy(cache->words[victim], reads->words, reads->count * sizeof reads->words[0]);
    entry->last_used = ++cache->clock;
}

/* capture_cache.c - see capture_cache.h. */
#include "capture_cache.h"

#include <string.h>

void capture_cache_clear(struct capture_cache *cache)
{
    /* an entry with key.ip 0 is empty, and its words are read only after
     * its key matched */
    memset(cache->entries, 0, sizeof cache->entries);
    cache->clock = 0;
    cache->hits = cache->misses = 0;
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

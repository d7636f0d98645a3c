/* capture_cache.c - see capture_cache.h. */
#include "capture_cache.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The memory comes from a memfd named like the shim's region, not from an
 * anonymous mapping: the leak scan leaves /memfd:memslope* out of its
 * roots (leakscan/process.c), and an entry's words hold what the stack and
 * the frames held, stale addresses of blocks the program has freed or
 * lost among them. Not inherited by a fork child, whose stack ids are its
 * own. Pages are allocated as entries fill: a thread that allocates from
 * a few places costs a few pages. */
struct capture_cache *capture_cache_create(void)
{
    int fd = memfd_create("memslope-captures", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *memory = MAP_FAILED;
    if (ftruncate(fd, sizeof(struct capture_cache)) == 0)
        memory = mmap(NULL, sizeof(struct capture_cache), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (memory == MAP_FAILED)
        return NULL;
    if (madvise(memory, sizeof(struct capture_cache), MADV_DONTFORK) != 0) {
        munmap(memory, sizeof(struct capture_cache));
        return NULL;
    }
    return memory;
}

void capture_cache_destroy(struct capture_cache *cache)
{
    if (cache)
        munmap(cache, sizeof *cache);
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

/*
 * held_set.c - the held set's memory and its emptying at a thread's end
 * (the hot operations are inline in held_set.h).
 */
#include "held_set.h"

#include <stddef.h>
#include <sys/mman.h>

#define HELD_SET_BYTES ((size_t)SHM_HELD_BUCKETS * sizeof(struct shm_held_bucket))

bool held_set_create(struct held_set *set)
{
    void *memory = mmap(NULL, HELD_SET_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return false;
    set->buckets = memory;
    set->victim = 0;
    return true;
}

void held_set_destroy(struct held_set *set)
{
    if (set->buckets)
        munmap(set->buckets, HELD_SET_BYTES);
    set->buckets = NULL;
}

bool held_set_take_next(struct held_set *set, uint32_t *cursor, uint64_t stamp, struct held_block *out)
{
    for (; set->buckets && *cursor < SHM_HELD_BUCKETS; ++*cursor) {
        struct shm_held_bucket *bucket = &set->buckets[*cursor];
        for (unsigned way = 0; way < SHM_HELD_WAYS; way++) {
            uint64_t address = __atomic_load_n(&bucket->addr[way], __ATOMIC_RELAXED);
            if (!address)
                continue;
            uint64_t size = bucket->size[way];
            if (held_way_take(bucket, way, address)) {
                *out = (struct held_block){address, size, stamp};
                return true;
            }
        }
    }
    return false;
}

/*
 * held_sets.c - the threads' held sets, read and cleared from the tracer.
 *
 * A set lives in its thread's memory (its address in the thread's slot), so
 * it is read with process_vm_readv, and only while no thread of the image
 * can run (any thread's free may take from any set): a thread stopped at
 * any instruction leaves a set whose every address word is either a held
 * block (its size written before it) or 0. The slot's epoch is
 * bumped first: the owner's free, which clears its way with a plain store,
 * sees it moved and crosses (preload/held_set.h); another thread's take or
 * the owner's push-out is a compare-and-swap, which loses to the clear.
 */
#include "held_sets.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define SET_BYTES ((size_t)SHM_HELD_BUCKETS * sizeof(struct shm_held_bucket))

static int read_set(pid_t pid, uint64_t address, struct shm_held_bucket *buckets)
{
    struct iovec local = {buckets, SET_BYTES}, remote = {(void *)(uintptr_t)address, SET_BYTES};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)SET_BYTES ? 0 : -1;
}

/* Writes the set back into the stopped thread's memory with every address
 * cleared (into cleared, a buffer of its size). Returns whether any block
 * was held, or -1 when the set could not be written. */
static int clear_set(pid_t pid, uint64_t address, const struct shm_held_bucket *buckets,
                     struct shm_held_bucket *cleared)
{
    int any = 0;
    memcpy(cleared, buckets, SET_BYTES);
    for (uint32_t b = 0; b < SHM_HELD_BUCKETS; b++)
        for (unsigned way = 0; way < SHM_HELD_WAYS; way++) {
            any |= cleared[b].addr[way] != 0;
            cleared[b].addr[way] = 0;
        }
    if (!any)
        return 0;
    struct iovec local = {cleared, SET_BYTES}, remote = {(void *)(uintptr_t)address, SET_BYTES};
    return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)SET_BYTES ? 1 : -1;
}

/* The set of slot i (0: none). A slot whose thread has ended keeps its
 * set: empty after a thread's end, full after a raw exit. */
static uint64_t slot_set(void *base, uint32_t i)
{
    return __atomic_load_n(&shm_slot(base, i)->held_table, __ATOMIC_ACQUIRE);
}

/* Hands each block of the set to recorder, at time_ns (inherited: see
 * recorder_held_taken). Returns the blocks and adds their bytes to
 * *bytes. */
static long take_blocks(const struct shm_held_bucket *buckets, struct recorder *recorder, uint64_t time_ns,
                        int inherited, uint64_t *bytes)
{
    long taken = 0;
    for (uint32_t b = 0; b < SHM_HELD_BUCKETS; b++) {
        const struct shm_held_bucket *bucket = &buckets[b];
        for (unsigned way = 0; way < SHM_HELD_WAYS; way++) {
            if (!bucket->addr[way])
                continue;
            recorder_held_taken(recorder, time_ns, bucket->addr[way], bucket->size[way], inherited);
            *bytes += bucket->size[way];
            taken++;
        }
    }
    return taken;
}

/* Takes the set of slot i (at address in the image's memory) into
 * recorder, using the two buffers of SET_BYTES. Returns the blocks, or -1. */
static long take_slot_set(struct shm_consumer *consumer, struct recorder *recorder, pid_t reader, uint64_t time_ns,
                          uint32_t i, uint64_t address, struct shm_held_bucket *buckets,
                          struct shm_held_bucket *cleared)
{
    struct shm_held_seen *seen = shm_consumer_held_seen(consumer, i);
    struct shm_thread_slot *slot = shm_slot(consumer->base, i);
    if (!seen)
        return -1;
    uint64_t in = __atomic_load_n(&slot->held_in_bytes, __ATOMIC_ACQUIRE);
    if (seen->emptied && seen->in_at_take == in)
        return 0; /* empty since the last take: an insert counts itself first */
    __atomic_add_fetch(&slot->held_epoch, 1, __ATOMIC_SEQ_CST);
    if (read_set(reader, address, buckets) < 0)
        return -1;
    /* Cleared in the process before they are taken: a block taken and
     * left in its set would stay live, its thread's free never sent. */
    int held = clear_set(reader, address, buckets, cleared);
    if (held < 0)
        return -1;
    seen->in_at_take = in;
    seen->emptied = 1;
    if (!held)
        return 0;
    uint64_t bytes = 0;
    recorder->source = i; /* the ring of the thread that held them */
    long taken = take_blocks(buckets, recorder, time_ns, 0, &bytes);
    seen->taken_bytes += bytes;
    return taken;
}

long held_sets_take(struct shm_consumer *consumer, struct recorder *recorder, pid_t reader, uint64_t time_ns)
{
    if (!consumer->base)
        return 0;
    struct shm_held_bucket *buckets = NULL, *cleared = NULL;
    long taken = 0;
    int failed = 0;
    for (uint32_t i = 0; i < consumer->seen_high_water; i++) {
        uint64_t address = slot_set(consumer->base, i);
        if (!address)
            continue;
        if (!buckets)
            buckets = malloc(SET_BYTES);
        if (!cleared)
            cleared = malloc(SET_BYTES);
        if (!buckets || !cleared) {
            failed = 1;
            break;
        }
        long n = take_slot_set(consumer, recorder, reader, time_ns, i, address, buckets, cleared);
        failed |= n < 0;
        taken += n > 0 ? n : 0;
    }
    free(buckets);
    free(cleared);
    if (failed)
        return -1;
    struct shm_header *header = consumer->base;
    __atomic_store_n(&header->held_taken_state, __atomic_load_n(&header->case_state, __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
    return taken;
}

long held_sets_inherit(const struct shm_consumer *parent_shm, struct recorder *child, pid_t child_pid,
                       uint64_t time_ns)
{
    if (!parent_shm->base)
        return 0;
    struct shm_held_bucket *buckets = NULL;
    long inherited = 0;
    int failed = 0;
    for (uint32_t i = 0; i < parent_shm->seen_high_water; i++) {
        uint64_t address = slot_set(parent_shm->base, i);
        if (!address)
            continue;
        if ((!buckets && !(buckets = malloc(SET_BYTES))) || read_set(child_pid, address, buckets) < 0) {
            failed = 1;
            continue;
        }
        uint64_t ignored = 0;
        inherited += take_blocks(buckets, child, time_ns, 1, &ignored);
    }
    free(buckets);
    return failed ? -1 : inherited;
}

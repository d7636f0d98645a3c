/*
 * ring_writer.h - the producer side of a thread's event ring.
 *
 * One producer per slot: the thread that owns it. The consumer is the
 * tracer, in another process, through the MAP_SHARED region.
 *
 * Signal safety: a signal handler may allocate while its thread is inside
 * ring_write. Each write takes its index with one instruction (an unlocked
 * xadd on the thread's own counter: atomic with respect to a signal on the
 * same thread, no bus lock), so nested writes never share an index. Only the
 * outermost level publishes write_pos; a nested write is published by the
 * level it interrupted. write_pos never moves backwards: the outer level only
 * reloads and stores it while `nesting` is 1, when no handler publishes, and
 * re-checks after dropping to 0 (see ring_publish).
 *
 * Full ring: the producer sleeps on the slot's read_seq futex (shared, the
 * memory is MAP_SHARED across processes) with a 10 ms timeout and never
 * drops an event; on each timeout it checks the consumer is still alive.
 *
 * What the consumer (the tracer) must do, for the producer to work:
 *   - read write_pos (acquire), copy the events up to it, store read_pos
 *     (release), then bump read_seq (seq_cst) and FUTEX_WAKE read_seq (not
 *     the private variant) if producer_waiting is 1;
 *   - set a RETIRED slot FREE only once read_pos == write_pos, and never
 *     move either position backwards: a new owner carries on from write_pos;
 *   - treat an OWNED slot whose tid has exited like a RETIRED one: a thread
 *     that frees memory after its last pthread key destructor round (glibc
 *     frees thread-local state there) leaves its slot OWNED;
 *   - tolerate tid 0 on an OWNED slot for a moment (claimed, tid not stored).
 */
#ifndef MEMSLOPE_RING_WRITER_H
#define MEMSLOPE_RING_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/shm_layout.h"
#include "populate.h"

/* Per-thread producer state; lives in a thread-local variable. */
struct ring_producer {
    struct shm_thread_slot *slot; /* NULL until the thread claims one */
    uint32_t index;               /* the slot's, once claimed */
    struct shm_header *header;    /* the region of the slot (set with it) */
    uint64_t reserve;             /* next index to hand out (>= write_pos) */
    uint32_t nesting;             /* ring_write levels active on this thread */
};

/* Claims a FREE slot (CAS FREE -> OWNED), sets its tid, counts the thread
 * in header->producers and points the producer at it. Returns false when
 * every slot is taken (and counts header->slots_exhausted). */
bool ring_claim_slot(void *base, struct ring_producer *producer, uint32_t tid);

/* Marks the producer's slot RETIRED (after publishing everything) and
 * forgets it; the consumer drains and frees it. base: the region the slot
 * was claimed in (its header counts the producers). */
void ring_retire_slot(void *base, struct ring_producer *producer);

/* Sleeps until event `index` fits in the ring. Returns false if the consumer
 * process `consumer_pid` no longer exists, or, traced (ring_writer_init), no
 * longer traces this process (then the caller stops recording). */
bool ring_wait_for_space(struct shm_header *header, struct shm_thread_slot *slot, uint64_t index,
                         pid_t consumer_pid);

static inline uint64_t ring_take_index(uint64_t *reserve)
{
#if defined(__x86_64__)
    uint64_t index = 1;
    __asm__ volatile("xaddq %0, %1" : "+r"(index), "+m"(*reserve) : : "memory");
    return index;
#else
    return __atomic_fetch_add(reserve, 1, __ATOMIC_RELAXED);
#endif
}

/* Called with nesting == 1 (the outermost level). */
static inline void ring_publish(struct ring_producer *producer)
{
    struct shm_thread_slot *slot = producer->slot;
    for (;;) {
        uint64_t committed = __atomic_load_n(&producer->reserve, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->write_pos, committed, __ATOMIC_RELEASE);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&producer->nesting, 0, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        /* A handler that ran after the reload above wrote an event the
         * store did not cover; a handler that runs from here on publishes
         * its own (it sees nesting 0). */
        if (__atomic_load_n(&producer->reserve, __ATOMIC_RELAXED) == committed)
            return;
        __atomic_store_n(&producer->nesting, 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
}

/* The events of one chunk that ring_reserve populates (populate.h). */
#define RING_POPULATE_EVENTS (POPULATE_CHUNK_BYTES / sizeof(struct shm_event))

/* How far ahead of the event being written ring_reserve asks for its
 * ring's line for writing: 16 events, 8 lines. */
#define RING_WRITE_AHEAD 16u

/* Whether the processor has PREFETCHW (set once by ring_writer_init, in
 * the shim's constructor, before any event; the shim's state). */
extern bool ring_prefetch_for_write;

/* Reads the processor's features ring_reserve uses; traced: the consumer
 * traces this process (ptrace mode), so that a full ring stops waiting
 * once it no longer does (ring_wait_for_space). */
void ring_writer_init(bool traced);

/* Takes the next event's place in the producer's ring (a slot must be
 * claimed) for the caller to fill in place, then ring_commit. Filling the
 * ring's slot directly, field by field, instead of copying a finished event
 * in: a struct built on the stack and read back whole stalls on store
 * forwarding, which cost a tenth of the free wrapper. Returns NULL only if
 * the ring was full and the consumer is gone (nothing to commit then). */
static inline struct shm_event *ring_reserve(struct ring_producer *producer, pid_t consumer_pid)
{
    struct shm_thread_slot *slot = producer->slot;
    /* A plain increment is safe here: a nested handler restores the value
     * before it returns. */
    producer->nesting++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint64_t index = ring_take_index(&producer->reserve);
    if (__builtin_expect(index - __atomic_load_n(&slot->read_pos, __ATOMIC_ACQUIRE) >= SHM_RING_EVENTS, 0)) {
        if (!ring_wait_for_space(producer->header, slot, index, consumer_pid)) {
            producer->nesting--;
            return NULL;
        }
    }
    /* On the ring's first lap, from its second 64 KiB on, each 64 KiB in
     * one go (populate.h) */
    if (__builtin_expect((index & (RING_POPULATE_EVENTS - 1)) == 0, 0) && index >= RING_POPULATE_EVENTS &&
        index < SHM_RING_EVENTS)
        populate_ahead(&slot->ring[index], POPULATE_CHUNK_BYTES);
#if defined(__x86_64__)
    /* The line a few events ahead, for writing: the tracer has read it
     * (a ring ago), so the first store to it waited for the line to come
     * back exclusive, a stall at every other event (perf put a third of
     * the Python free wrapper's samples on that store). A read prefetch
     * brings it shared and gained nothing. A hint only: no data moves. */
    if (__builtin_expect(ring_prefetch_for_write, 1))
        __asm__ volatile("prefetchw %0" : : "m"(slot->ring[(index + RING_WRITE_AHEAD) & (SHM_RING_EVENTS - 1)]));
#endif
    return &slot->ring[index & (SHM_RING_EVENTS - 1)];
}

/* Publishes the event filled in since ring_reserve (with those nested in
 * it, if this is the outermost level). */
static inline void ring_commit(struct ring_producer *producer)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (producer->nesting == 1)
        ring_publish(producer);
    else
        producer->nesting--;
}

/* Appends a finished event. Returns false only if the ring was full and the
 * consumer is gone. */
static inline bool ring_write(struct ring_producer *producer, const struct shm_event *event,
                              pid_t consumer_pid)
{
    struct shm_event *place = ring_reserve(producer, consumer_pid);
    if (!place)
        return false;
    *place = *event;
    ring_commit(producer);
    return true;
}

#endif

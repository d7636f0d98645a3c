/*
 * ring_writer.c - slow paths of the ring producer: claiming and retiring a
 * slot, waiting for the consumer when the ring is full.
 */
#include "ring_writer.h"
#include "shm_region.h"

#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RING_WAIT_TIMEOUT_NS 10000000L /* 10 ms: how often a sleeper checks the consumer is alive */

bool ring_prefetch_for_write;

/* Whether the consumer traces this process (ptrace mode): a full ring
 * then also gives up once it no longer does. Set once by ring_writer_init
 * before any thread records: global state, as the shim's must be. */
static bool consumer_traces;

void ring_writer_init(bool traced)
{
    consumer_traces = traced;
#if defined(__x86_64__)
    /* PREFETCHW: CPUID 0x80000001, ECX bit 8 (3DNowPrefetch / PRFCHW) */
    unsigned int eax, ebx, ecx, edx;
    ring_prefetch_for_write = __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 8));
#endif
}

/* Before the slot's first event: the tracer looks below the mark only. */
static void raise_high_water(struct shm_header *header, uint32_t mark)
{
    uint32_t seen = __atomic_load_n(&header->slots_high_water, __ATOMIC_RELAXED);
    while (seen < mark && !__atomic_compare_exchange_n(&header->slots_high_water, &seen, mark, 1, __ATOMIC_RELEASE,
                                                       __ATOMIC_RELAXED))
        ;
}

bool ring_claim_slot(void *base, struct ring_producer *producer, uint32_t tid)
{
    struct shm_header *header = base;
    /* The lowest free slot, so that the high-water mark stays at the most
     * threads the image ever had at once: a search that went on from where
     * the last one ended (as it did) spread threads that come and go over
     * all 1,024 slots, and a fork child inherited where its parent's search
     * was, so the tracer read up to 1,024 slot pages again. What it costs:
     * a thread's start reads the state of the slots below its own. */
    for (uint32_t index = 0; index < SHM_MAX_THREADS; index++) {
        struct shm_thread_slot *slot = shm_slot(base, index);
        uint32_t expected = SHM_SLOT_FREE;
        if (__atomic_load_n(&slot->state, __ATOMIC_RELAXED) != SHM_SLOT_FREE)
            continue;
        if (!__atomic_compare_exchange_n(&slot->state, &expected, SHM_SLOT_OWNED, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue;
        raise_high_water(header, index + 1);
        __atomic_store_n(&slot->tid, tid, __ATOMIC_RELEASE);
        __atomic_store_n(&slot->producer_waiting, 0, __ATOMIC_RELAXED);
        /* The consumer frees a slot only once drained (read_pos ==
         * write_pos), so carrying on from write_pos keeps both positions
         * monotonic whether or not the consumer resets them. */
        producer->reserve = __atomic_load_n(&slot->write_pos, __ATOMIC_ACQUIRE);
        producer->nesting = 0;
        producer->header = header;
        producer->index = index;
        __atomic_fetch_add(&header->producers, 1, __ATOMIC_SEQ_CST);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        producer->slot = slot;
        return true;
    }
    __atomic_fetch_add(&header->slots_exhausted, 1, __ATOMIC_RELAXED);
    return false;
}

void ring_retire_slot(void *base, struct ring_producer *producer)
{
    struct shm_header *header = base;
    struct shm_thread_slot *slot = producer->slot;
    if (!slot)
        return;
    producer->slot = NULL;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&slot->write_pos, producer->reserve, __ATOMIC_RELEASE);
    __atomic_store_n(&slot->state, SHM_SLOT_RETIRED, __ATOMIC_RELEASE);
    __atomic_fetch_sub(&header->producers, 1, __ATOMIC_SEQ_CST);
}

static bool ring_has_space(struct shm_thread_slot *slot, uint64_t index)
{
    return index - __atomic_load_n(&slot->read_pos, __ATOMIC_ACQUIRE) < SHM_RING_EVENTS;
}

/* Timeouts a full ring waits before it asks whether the thread was let go
 * of (1 s): a thread memslope still traces is drained within
 * milliseconds, and the question reads /proc. */
#define RING_WAITS_BEFORE_LET_GO_CHECK 100

/* Wakes the tracer, asleep between drains while the rings were quiet,
 * rather than wait out its sleep (shm_layout.h, SHM_TRACER_DOORBELL). */
static void ring_doorbell(struct shm_header *header, pid_t consumer_pid)
{
    if (kill(consumer_pid, SHM_TRACER_DOORBELL) == -1 && errno == EPERM &&
        !__atomic_load_n(&header->doorbell_refused, __ATOMIC_RELAXED))
        __atomic_store_n(&header->doorbell_refused, 1, __ATOMIC_RELAXED);
}

bool ring_wait_for_space(struct shm_header *header, struct shm_thread_slot *slot, uint64_t index,
                         pid_t consumer_pid)
{
    int saved_errno = errno; /* malloc must not change errno when it succeeds */
    unsigned timeouts = 0;
    bool ring = true;
    while (!ring_has_space(slot, index)) {
        /* Dekker-style with the consumer, which advances read_pos, bumps
         * read_seq, then reads producer_waiting: either it sees our flag
         * and wakes us, or we see its new read_seq / read_pos. */
        __atomic_store_n(&slot->producer_waiting, 1, __ATOMIC_SEQ_CST);
        uint32_t seq = __atomic_load_n(&slot->read_seq, __ATOMIC_SEQ_CST);
        if (ring_has_space(slot, index))
            break;
        /* Once a wait, and again at each timeout of it: the drain the
         * doorbell starts looks at every ring, and one that came too
         * early for this ring is followed by a long sleep. */
        if (ring)
            ring_doorbell(header, consumer_pid);
        ring = false;
        struct timespec timeout = {0, RING_WAIT_TIMEOUT_NS};
        long rc = syscall(SYS_futex, &slot->read_seq, FUTEX_WAIT, seq, &timeout, NULL, 0);
        if (rc == -1 && errno == ETIMEDOUT) {
            ring = true;
            /* Gone, or no longer tracing this process: memslope let it go
             * when the command ended (and its pid may be another's now). */
            timeouts++;
            if ((kill(consumer_pid, 0) == -1 && errno == ESRCH) ||
                (consumer_traces && timeouts >= RING_WAITS_BEFORE_LET_GO_CHECK && shm_thread_let_go(consumer_pid))) {
                __atomic_store_n(&slot->producer_waiting, 0, __ATOMIC_RELAXED);
                errno = saved_errno;
                return false;
            }
        }
    }
    __atomic_store_n(&slot->producer_waiting, 0, __ATOMIC_RELAXED);
    errno = saved_errno;
    return true;
}

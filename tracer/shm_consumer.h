/*
 * shm_consumer.h - the tracer's side of the shared-memory ring
 * (common/shm_layout.h): finds a process image's region, drains every
 * thread's ring in time order into a recorder, and wakes producers that wait
 * for room.
 */
#ifndef MEMSLOPE_SHM_CONSUMER_H
#define MEMSLOPE_SHM_CONSUMER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/shm_layout.h"
#include "../leakscan/leakscan.h"
#include "recorder.h"

struct shm_consumer {
    void *base;             /* the mapping, or NULL before the region is found */
    uint64_t size;
    uint64_t inode;         /* the memfd's inode: tells a new image's region from the old */
    uint32_t *active_slots; /* slots seen in use, drained every time (room for all, from the first drain) */
    size_t active_count;
    uint64_t last_full_scan_ns;
    uint64_t events;        /* events consumed so far */
    uint64_t invalid_events; /* events no shim writes (an unknown kind, a stack id past the table):
                                the target scribbled on its region; skipped */
    /* TSC to nanoseconds (regions whose clock_source is SHM_CLOCK_TSC): a
     * (ticks, ns) pair taken at attach, and the latest one with its rate. */
    uint64_t base_ticks, base_ns;
    uint64_t now_ticks, now_ns;
    uint64_t ns_per_tick_q32; /* nanoseconds per tick, 32.32 fixed point; 0 before calibration */
    /* slot_floors[i]: the region's clock (ticks or ns, as its events are
     * stamped) read before the tracer last looked at slot i (its write
     * position, or its state while free or unclaimed). An event found in
     * the slot since was published after that reading, so one whose stamp
     * repeats an earlier one (SHM_EVENT_STAMP_REPEATED) is raised to it.
     * Per slot: a drain that did not look at a ring says nothing of when
     * that ring's events came (a global floor placed a thread's allocation
     * after another thread's free of it). Exact stamps are kept: one
     * published late is what the recorder's pending frees are for. */
    uint64_t *slot_floors;     /* SHM_MAX_THREADS entries; NULL before the first drain */
    uint64_t unclaimed_floor;  /* the floor of slots at or past seen_high_water */
    uint32_t seen_high_water;  /* slots_high_water at the last look at every slot */
    uint32_t seen_producers;   /* producers then: a change means new rings to look at */
    /* Per slot, what the tracer has counted of its held set (common/
     * shm_layout.h, "The held set"); NULL until a slot has one. */
    struct shm_held_seen *held_seen;
    /* The event rate that decides the region's hold_wanted: events (and
     * held pairs, twice) since rate_since_ns. */
    uint64_t rate_since_ns, rate_events;
    /* Slots whose threads did anything since rate_since_ns (events crossed,
     * held pairs or blocks held), one bit a slot: the threads that run, not
     * those that hold a ring (a main thread waiting in pthread_join). */
    uint64_t rate_active[SHM_MAX_THREADS / 64];
    /* Holding is on, and a window over SHM_HOLD_ON_RATE has come since it
     * went on: one crowded window (say, the start's) must not keep it on
     * in the band between the uncrowded rates. */
    int hold_uncrowded;
    uint32_t processors; /* the processors the image may run on (the caller's to set; 0: unknown) */
};

struct shm_held_seen {
    uint64_t pairs, pair_bytes; /* the slot's held_pairs, held_pair_bytes already counted */
    uint64_t taken_bytes;       /* held bytes the tracer took into its live table at stops */
    /* the slot's held_in_bytes when the tracer last emptied its set (valid
     * once emptied): unchanged, nothing went in since, and it is not read */
    uint64_t in_at_take;
    int emptied;
    uint64_t in_seen; /* the slot's held_in_bytes at the last drain */
};

void shm_consumer_init(struct shm_consumer *consumer);

/* Looks for the region of process pid in /proc/PID/fd (a memfd named
 * "memslope" whose header names pid) other than the inode to skip. Returns 1
 * when found and mapped, 0 when not (yet), -1 on a mapping error. */
int shm_consumer_attach(struct shm_consumer *consumer, pid_t pid, uint64_t skip_inode);

/* Maps the region whose memfd the shim sent us (no-ptrace mode, see
 * SHM_ENV_SOCKET); *pid is the process that made it. 1 when mapped, 0 when
 * the descriptor is not a valid region, -1 on a mapping error. The
 * descriptor stays the caller's. */
int shm_consumer_attach_fd(struct shm_consumer *consumer, int fd, pid_t *pid);

/* Applies every committed event to recorder in time order. full: look at
 * every slot (else only the slots known active, plus a full scan now and
 * then). Returns the number of events consumed. */
size_t shm_consumer_drain(struct shm_consumer *consumer, struct recorder *recorder, int full);

/* What the shim counted and decided, as the trace reports it (all 0
 * before the region is found). */
struct shm_counters {
    uint32_t stacks_dropped;        /* allocations without a backtrace: a table was full */
    uint32_t slots_exhausted;       /* threads that found no ring slot */
    uint32_t freeres_outcome;       /* enum shm_freeres_outcome (the target wrote it: any value) */
    uint32_t freeres_other_threads; /* threads that still ran when freeres was skipped for them */
};
struct shm_counters shm_consumer_counters(const struct shm_consumer *consumer);

/* The held-set figures of slot index (allocating them at first use);
 * NULL when out of memory. */
struct shm_held_seen *shm_consumer_held_seen(struct shm_consumer *consumer, uint32_t index);

/* The region's count of threads that hold a ring (written by the target:
 * a hint); 0 before the region is found. */
uint32_t shm_consumer_producers(const struct shm_consumer *consumer);

/* Whether the image's threads should hold their unsampled blocks
 * (shm_layout.h, hold_wanted) after a rate window of rate events a second
 * in which active threads ran, on processors (0: unknown), the answer
 * being wanted so far. *uncrowded says, and is set to, whether holding went
 * on, or has been since, over SHM_HOLD_ON_RATE: only such holding goes on
 * between the uncrowded rates. */
uint32_t shm_hold_next(uint64_t rate, uint32_t active, uint32_t processors, uint32_t wanted, int *uncrowded);

/* Whether the image's threads found their doorbell refused (shm_layout.h). */
int shm_consumer_doorbell_refused(const struct shm_consumer *consumer);

/* What the shim tells the leak scan about the process's memory: its
 * allocator ranges (pymalloc's arenas; copied into *ranges, which memory
 * points at: free it) and its TLS block. Entries are checked, the target
 * writing the region: an empty or wrapping range is left out, an
 * implausible TLS block is unknown. Nothing before the region is found.
 * 0, or -1 when out of memory. */
int shm_consumer_shim_memory(const struct shm_consumer *consumer, struct leakscan_shim_memory *memory,
                             struct leakscan_range **ranges);

void shm_consumer_detach(struct shm_consumer *consumer);

#endif

/*
 * recorder.h - what the tracer knows about one process image: its live
 * blocks, its allocation sites (one per unique backtrace), totals and peak,
 * the heap-over-time timeline, its snapshots and cases. Fed with events in
 * order by the shared-memory consumer; written out by trace_output.c.
 */
#ifndef MEMSLOPE_RECORDER_H
#define MEMSLOPE_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "../common/trace_format.h"
#include "live_table.h"

/* Fields ordered so that none pads (128 bytes; a large Python program has
 * hundreds of thousands of sites). */
struct recorder_site {
    uint32_t stack_id;      /* the shim's id, unique within the process image */
    uint32_t depth;         /* frames in all: recorder_site_frame */
    /* Return addresses (and the shim's Python frame words), innermost
     * first: the inner depth - tail_count in frames, the outer tail_count
     * in tail. Where the lookup found them (the shim's region, mapped
     * until the recorder is freed), or the recorder's copy. */
    const uint64_t *frames, *tail;
    uint32_t tail_count;
    uint32_t live_context; /* the live table's context cache word for this site */
    uint32_t counter_case; /* the case whose counter for this site case_counter is (valid when it is set) */
    uint8_t unsampled;     /* with --sample-rate: the allocations without a backtrace */
    uint8_t touched;       /* its live figures moved since the last snapshot: in recorder.touched */
    uint64_t allocations, allocated_bytes, frees;
    uint64_t live_bytes, live_blocks;
    uint64_t max_live_bytes;
    uint64_t peak_live_bytes; /* live bytes when the process last peaked (valid for peak_epoch) */
    uint64_t peak_epoch;
    struct case_site_counter *case_counter; /* in recorder.case_sites: the last one used, found again at once */
    /* Live figures as the process's last snapshot recorded them ((0, 0)
     * without a live block then): a snapshot holds the sites that differ. */
    uint64_t snapshot_live_bytes, snapshot_live_blocks;
};

/* With --sample-rate, what a site's sampled allocations stand for (see
 * recorder_sample_weight); the site's figures are these, rounded. */
struct site_scaled {
    double allocations, allocated_bytes, frees, live_bytes, live_blocks;
    uint64_t sampled_live; /* sampled blocks still live: at 0 the live sums are exactly 0 */
};

/* A snapshot as a delta: the sites whose live figures changed since the
 * process's previous kept snapshot, sorted by stack_id (the entries of a
 * SNAPSHOT_DELTA section, trace_format.h). header.entries and
 * header.count describe the same entries. */
struct recorder_snapshot {
    struct trace_snapshot header;
    struct trace_snapshot_entry *entries; /* owned */
    int written; /* in the trace already (a checkpoint wrote it): trace_output.c */
};

struct recorder_case {
    struct trace_case info; /* name owned here */
    char *name;
    /* Blocks allocated while the case was open and not freed: at 0 the
     * case's leak check finds nothing, and needs no scan. */
    uint64_t live_blocks;
};

/* A free whose allocation has not been seen yet (see recorder.c). */
struct pending_free;

/* A site's counters within one case: allocations made while the case was
 * open, and the frees of those blocks. */
struct case_site_counter {
    uint64_t key; /* case_id << 32 | site index */
    uint64_t allocations, allocated_bytes, frees;
    int changed; /* since the trace last had it: trace_output.c writes the changed ones */
    double scaled_allocations, scaled_bytes, scaled_frees; /* with --sample-rate; the above rounded */
    UT_hash_handle hh;
};

/* Where the recorder keeps its sites' frames: chunks filled in turn and
 * freed together (one malloc and one free per stack made the tracer's end
 * of python3 -c pass, 10,000 sites, spend 4 M instructions in free). */
struct recorder_frame_chunk;

struct recorder {
    struct live_table live;
    struct recorder_frame_chunk *frame_chunks; /* the newest first */
    struct pending_free *pending_frees; /* uthash by address */
    /* The ring the events being applied come from (shm_consumer sets it
     * for each run of one ring): a free read before its allocation waits
     * for an allocation from another ring, since one from the same ring
     * came after the free (recorder.c, struct pending_free). */
    uint32_t source;
    struct case_site_counter *case_sites; /* uthash by key */
    struct recorder_site *sites;
    size_t site_count, site_capacity;
    /* With --sample-rate, one for each site, in the order of sites (NULL
     * without: 48 bytes a site that only sampling uses). */
    struct site_scaled *scaled;
    size_t scaled_capacity;
    uint32_t *site_by_stack; /* stack_id -> site index + 1; 0 = none yet */
    size_t site_by_stack_size;

    uint64_t allocations, frees, allocated_bytes, unmatched_frees;
    uint64_t live_bytes, live_blocks;
    /* With --sample-rate: the bytes the image's threads hold in their sets
     * (preload/held_set.h), as of the tracer's last look at their slots;
     * counted in the peak and the timeline, not in live_bytes or in
     * snapshots. */
    uint64_t held_bytes;
    uint64_t peak_bytes, peak_blocks, peak_time_ns, peak_epoch;

    uint64_t interval_ns, next_sample_ns;
    struct trace_timeline_point *timeline;
    size_t timeline_count, timeline_capacity;

    struct recorder_snapshot *snapshots;
    size_t snapshot_count, snapshot_capacity;
    /* The entries of dropped snapshots taken after the last kept one
     * (thinning dropped the latest snapshot): merged into the next one. */
    struct trace_snapshot_entry *snapshot_carry;
    size_t snapshot_carry_count;
    /* Sites whose live figures moved since the last snapshot, so a
     * snapshot looks at those, not at every site (a Python process has
     * ten thousand, and a marked iteration may snapshot every time).
     * touched_all: look at every site (after a fork copied its parent's,
     * or when the list could not grow). */
    uint32_t *touched;
    size_t touched_count, touched_capacity;
    int touched_all;

    struct recorder_case *cases;
    size_t case_count, case_capacity;
    uint32_t open_case;       /* TRACE_NONE when no named case is open */
    uint64_t iteration;       /* iteration number within the open case (0 = before the first) */
    uint64_t last_time_ns;
    uint32_t snapshots_limit; /* iteration snapshots kept per case (0: all) */
    uint64_t snapshot_stride; /* keep iterations 1, 1+stride, 1+2*stride, ... of the open case */
    uint64_t iteration_snapshots; /* kept for the open case */
    int out_of_memory;        /* the tracer ran out of memory: figures are incomplete */
    /* --sample-rate (0: every allocation has its backtrace). Totals stay
     * exact; a site's figures are scaled up from its sampled allocations,
     * and the unsampled ones (stack RECORDER_UNSAMPLED) form a site that is
     * not shown (recorder_site_shown). */
    uint64_t sample_rate;
};

/* The stack id of an allocation without a backtrace (the shim's
 * SHM_STACK_NONE): with --sample-rate, the unsampled ones. */
#define RECORDER_UNSAMPLED 0u

/* Looks up the frames of a stack id the first time a site is seen. Returns
 * the depth (0 when unknown); the inner depth - *tail_count frames are at
 * *frames, the outer *tail_count at *tail, innermost first. They stay
 * where they are until the recorder is freed: the recorder keeps the
 * pointers. */
typedef uint32_t (*recorder_stack_lookup)(void *context, uint32_t stack_id, const uint64_t **frames,
                                          const uint64_t **tail, uint32_t *tail_count);

/* Frame i of a site, innermost first (i < depth). */
static inline uint64_t recorder_site_frame(const struct recorder_site *site, uint32_t i)
{
    uint32_t own = site->depth - site->tail_count;
    return i < own ? site->frames[i] : site->tail[i - own];
}

void recorder_init(struct recorder *recorder, uint64_t interval_ns);
/* A fork child starts as a copy of its parent's live heap (counters from 0). */
int recorder_init_fork_child(struct recorder *child, const struct recorder *parent);
void recorder_free(struct recorder *recorder);

/* How many allocations a sampled one of `size` bytes stands for: each byte
 * is a sample point with probability 1/sample_rate, so it was sampled with
 * probability 1 - exp(-size/sample_rate) (pprof scales tcmalloc's samples
 * the same way). 1 without sampling. */
double recorder_sample_weight(uint64_t sample_rate, uint64_t size);

/* Whether a site is shown: with --sample-rate, not the unsampled remainder. */
static inline int recorder_site_shown(const struct recorder_site *site)
{
    return !site->unsampled;
}

void recorder_alloc(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size,
                    uint32_t stack_id, recorder_stack_lookup lookup, void *context);
void recorder_free_block(struct recorder *recorder, uint64_t time_ns, uint64_t address);

/* A block a thread held in its set (preload/held_set.h), made outside any
 * case, that crossed late (flagged SHM_EVENT_HELD), stamped as it left the
 * set. Another thread that missed it there, and sent its free, stamped
 * that free later: a pending free that is not older cancels it. */
void recorder_held_alloc(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size);

/* A block the tracer took from a set at a stop of the world (time_ns: the
 * stop's), made outside any case; inherited: a fork child's, from its copy
 * of the parent's sets, not its own allocation. A set holds only live
 * blocks (a free takes its block out), so no pending free is its own. */
void recorder_held_taken(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size,
                         int inherited);

/* A held block a failed realloc keeps, which the tracer may have taken
 * from its set already (SHM_EVENT_HELD_KEPT): live, once. */
void recorder_held_kept(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size);

/* The free of a block its thread held, stopped by the tracer in the middle
 * of it: if a stop took the block into the live table, an ordinary free;
 * if not, a pair that never crossed. */
void recorder_held_free(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size);

/* Allocations a thread held and freed itself, never crossed: counted in
 * the totals and the unsampled site's. */
void recorder_held_pairs(struct recorder *recorder, uint64_t pairs, uint64_t bytes);

/* The bytes the threads hold now (see held_bytes). */
void recorder_set_held_bytes(struct recorder *recorder, uint64_t bytes, uint64_t time_ns);
/* An allocation or free at address is coming: start loading what it touches. */
static inline void recorder_prefetch(const struct recorder *recorder, uint64_t address)
{
    live_table_prefetch(&recorder->live, address);
}

/* Markers. An iteration outside any named case opens the implicit
 * whole-process case (TRACE_CASE_IMPLICIT, name ""; the report names it
 * after the command). A case_begin while a case is open ends that case;
 * a case_end with no case open is ignored. Iteration snapshots are thinned
 * evenly to at most snapshots_limit per case: every stride-th iteration is
 * kept, and when the limit is passed every other one is dropped and the
 * stride doubles. A dropped snapshot's entries go into the next snapshot
 * where that one has none for the site, so the deltas kept stay exact. */
void recorder_case_begin(struct recorder *recorder, uint64_t time_ns, const char *name, size_t name_length);
void recorder_iteration(struct recorder *recorder, uint64_t time_ns);
void recorder_case_end(struct recorder *recorder, uint64_t time_ns);

/* Blocks the open case allocated that are still live (0 with no case open). */
uint64_t recorder_open_case_live_blocks(const struct recorder *recorder);

/* Records the per-site live heap now as a snapshot of the given kind,
 * held as the change since the previous snapshot (struct recorder_snapshot):
 * a site whose live blocks fell to 0 has an entry with 0. */
void recorder_snapshot(struct recorder *recorder, uint32_t kind, uint64_t time_ns);

#endif

/* recorder.c - see recorder.h. */
#include "recorder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "../common/growable_array.h"

/* The tracer reads the threads' rings one after the other, so a free
 * committed by one thread can be read before the allocation of the same
 * block, committed by another thread an instant earlier (the block went from
 * one to the other between the two reads). Such a free waits here; the
 * allocation it belongs to arrives in a later drain with an earlier stamp,
 * and the two cancel out. Frees of blocks allocated before recording began
 * wait here for ever (there are a handful).
 *
 * Only an allocation from another ring cancels one: the ring of the free
 * holds its thread's events in program order, so an allocation there came
 * after the free, whatever its stamp says (stamps repeat while one thread
 * records, and a block the recording never saw allocated, freed, then
 * handed out again at once by the thread cache, has the same stamp as its
 * free: cancelling hid the new block, and its leak).
 *
 * One address may have several frees waiting: a thread that ends at once
 * after its allocation leaves its ring to be read late, and the blocks it
 * allocated at one address in two rounds were both freed by another thread
 * before either allocation was read (fixtures/handoff_end.c). Kept one an
 * address, the second free replaced the first, and the first allocation
 * cancelled the second's free: its own block stayed live for ever. So an
 * address's frees are kept in stamp order, and an allocation takes the
 * earliest not older than itself. Frees whose allocations were never sent
 * (__libc_malloc's blocks, say) would pile up at a busy address, each
 * looked through by every event there: the chain's latest is kept at
 * hand (a free in stamp order appends, an allocation newer than all stops
 * at once), and an address keeps PENDING_FREES_PER_ADDRESS, the earliest
 * dropped first (still counted unmatched). Not fewer: on a loaded machine
 * the tracer found the ending threads' rings of fixtures/handoff_end.c
 * 70 rounds late, and a bound of 64 dropped frees whose allocations came
 * after, leaving them live. */
struct pending_free {
    uint64_t address;
    uint64_t time_ns;
    uint32_t source;            /* the ring of the free */
    uint32_t count;             /* in the earliest: the address's frees waiting */
    struct pending_free *later; /* the address's later frees, in stamp order */
    struct pending_free *last;  /* in the earliest: the latest */
    UT_hash_handle hh;          /* the earliest of an address's frees is in the hash */
};

#define PENDING_FREES_PER_ADDRESS 4096u

/* How much older than an allocation a free from another ring may be
 * stamped and still be its free. Two processors' TSCs are not read in
 * step to the tick: under load, in this VM, an allocation handed to
 * another thread and freed there at once was stamped 81 ticks (27 ns)
 * after its own free (the TSC check had found them in step at the start),
 * and the free, read first, then waited for ever beside a live block
 * (fixtures/handoff_end.c in make check: 3 blocks). A free of an unknown
 * block that another thread's allocation gets back within this is taken
 * for that allocation's: both are counted, the block is not live. */
#define PENDING_FREE_SKEW_NS 1000u

/* Makes next (first's successor, or NULL) the earliest of the address's
 * frees in first's place. */
static void pending_free_new_first(struct recorder *recorder, struct pending_free *first,
                                   struct pending_free *next)
{
    HASH_DEL(recorder->pending_frees, first);
    if (!next)
        return;
    next->count = first->count - 1;
    next->last = first->last;
    HASH_ADD(hh, recorder->pending_frees, address, sizeof next->address, next);
}

/* Adds a free of address that matched no live block. */
static void pending_free_add(struct recorder *recorder, uint64_t address, uint64_t time_ns)
{
    struct pending_free *added = calloc(1, sizeof *added), *first;
    if (!added)
        return; /* the free stays counted, unmatched: its allocation will be live */
    *added = (struct pending_free){.address = address, .time_ns = time_ns, .source = recorder->source, .count = 1};
    added->last = added;
    HASH_FIND(hh, recorder->pending_frees, &address, sizeof address, first);
    if (first && first->count >= PENDING_FREES_PER_ADDRESS) {
        struct pending_free *next = first->later;
        pending_free_new_first(recorder, first, next);
        free(first);
        first = next;
    }
    if (!first) {
        HASH_ADD(hh, recorder->pending_frees, address, sizeof added->address, added);
    } else if (first->last->time_ns <= time_ns) { /* the usual order */
        first->last->later = added;
        first->last = added;
        first->count++;
    } else if (time_ns < first->time_ns) {
        added->later = first;
        added->last = first->last;
        added->count = first->count + 1;
        HASH_DEL(recorder->pending_frees, first);
        HASH_ADD(hh, recorder->pending_frees, address, sizeof added->address, added);
    } else {
        struct pending_free *before = first;
        while (before->later->time_ns <= time_ns)
            before = before->later;
        added->later = before->later;
        before->later = added;
        first->count++;
    }
}

/* The earliest free waiting at address that matches (see below), taken
 * out of the waiting ones; NULL if none. held: for a held block, which
 * may come from the free's own ring (its thread sent it late) but is the
 * new block if the stamps are equal (the address given back at once). */
static struct pending_free *pending_free_take(struct recorder *recorder, uint64_t address, uint64_t time_ns,
                                              int held)
{
    struct pending_free *first, *before = NULL;
    HASH_FIND(hh, recorder->pending_frees, &address, sizeof address, first);
    if (!first || first->last->time_ns + PENDING_FREE_SKEW_NS < time_ns)
        return NULL; /* every one older: frees of earlier blocks */
    struct pending_free *pending = first;
    for (; pending; before = pending, pending = pending->later) {
        if (pending->time_ns + PENDING_FREE_SKEW_NS < time_ns)
            continue;
        int same_ring = pending->source == recorder->source;
        if (held ? !(same_ring && pending->time_ns == time_ns) : !same_ring)
            break;
    }
    if (!pending)
        return NULL;
    if (!before) {
        pending_free_new_first(recorder, first, first->later);
    } else {
        before->later = pending->later;
        if (first->last == pending)
            first->last = before;
        first->count--;
    }
    pending->later = NULL;
    return pending;
}

void recorder_init(struct recorder *recorder, uint64_t interval_ns)
{
    memset(recorder, 0, sizeof *recorder);
    live_table_init(&recorder->live);
    recorder->interval_ns = interval_ns;
    recorder->open_case = TRACE_NONE;
    recorder->snapshot_stride = 1;
}

#define UNLIKELY_PENDING(recorder) __builtin_expect((recorder)->pending_frees != NULL, 0)

#define FRAME_CHUNK_FRAMES 65536u

struct recorder_frame_chunk {
    struct recorder_frame_chunk *next;
    size_t used, capacity;
    uint64_t frames[];
};

/* Room for depth frames in the recorder's chunks; NULL when out of memory. */
static uint64_t *frame_room(struct recorder *recorder, uint32_t depth)
{
    struct recorder_frame_chunk *chunk = recorder->frame_chunks;
    if (!chunk || chunk->capacity - chunk->used < depth) {
        size_t capacity = depth > FRAME_CHUNK_FRAMES ? depth : FRAME_CHUNK_FRAMES;
        if (!(chunk = malloc(sizeof *chunk + capacity * sizeof chunk->frames[0])))
            return NULL;
        *chunk = (struct recorder_frame_chunk){recorder->frame_chunks, 0, capacity};
        recorder->frame_chunks = chunk;
    }
    uint64_t *kept = chunk->frames + chunk->used;
    chunk->used += depth;
    return kept;
}

static void free_frame_chunks(struct recorder *recorder)
{
    for (struct recorder_frame_chunk *chunk = recorder->frame_chunks, *next; chunk; chunk = next) {
        next = chunk->next;
        free(chunk);
    }
    recorder->frame_chunks = NULL;
}

static struct recorder_site *site_for_stack(struct recorder *recorder, uint32_t stack_id,
                                            recorder_stack_lookup lookup, void *context)
{
    if (stack_id >= recorder->site_by_stack_size) {
        size_t size = recorder->site_by_stack_size ? recorder->site_by_stack_size : 4096;
        while (size <= stack_id)
            size *= 2;
        uint32_t *grown = realloc(recorder->site_by_stack, size * sizeof *grown);
        if (!grown)
            return NULL;
        memset(grown + recorder->site_by_stack_size, 0, (size - recorder->site_by_stack_size) * sizeof *grown);
        recorder->site_by_stack = grown;
        recorder->site_by_stack_size = size;
    }
    uint32_t index = recorder->site_by_stack[stack_id];
    if (index)
        return &recorder->sites[index - 1];

    if (growable_array_reserve(&recorder->sites, &recorder->site_capacity, recorder->site_count + 1,
                               sizeof *recorder->sites) < 0 ||
        (recorder->sample_rate && growable_array_reserve(&recorder->scaled, &recorder->scaled_capacity,
                                                         recorder->site_count + 1, sizeof *recorder->scaled) < 0))
        return NULL;
    if (recorder->sample_rate)
        memset(&recorder->scaled[recorder->site_count], 0, sizeof *recorder->scaled);
    struct recorder_site *site = &recorder->sites[recorder->site_count];
    memset(site, 0, sizeof *site);
    site->stack_id = stack_id;
    site->unsampled = recorder->sample_rate && stack_id == RECORDER_UNSAMPLED;
    const uint64_t *frames = NULL, *tail = NULL;
    uint32_t tail_count = 0;
    uint32_t depth = lookup ? lookup(context, stack_id, &frames, &tail, &tail_count) : 0;
    if (depth && frames && tail_count <= depth && (tail || !tail_count)) {
        site->frames = frames;
        site->tail = tail;
        site->tail_count = tail_count;
        site->depth = depth;
    }
    site->peak_epoch = recorder->peak_epoch;
    recorder->site_by_stack[stack_id] = (uint32_t)++recorder->site_count;
    return site;
}

/* Before a site's live figure changes, save what it was at the last peak:
 * unchanged since then, so its current value is its value at the peak. This
 * gives every site's share of the peak without copying all sites per peak. */
static void site_remember_peak(struct recorder *recorder, struct recorder_site *site)
{
    if (site->peak_epoch != recorder->peak_epoch) {
        site->peak_live_bytes = site->live_bytes;
        site->peak_epoch = recorder->peak_epoch;
    }
}

static void timeline_append(struct recorder *recorder, uint64_t time_ns)
{
    if (growable_array_reserve(&recorder->timeline, &recorder->timeline_capacity, recorder->timeline_count + 1,
                               sizeof *recorder->timeline) < 0) {
        recorder->out_of_memory = 1;
        return;
    }
    recorder->timeline[recorder->timeline_count++] =
        (struct trace_timeline_point){time_ns, recorder->live_bytes + recorder->held_bytes, recorder->live_blocks};
    recorder->next_sample_ns = time_ns - time_ns % recorder->interval_ns + recorder->interval_ns;
}

/* Inline: every event asks, one in thousands appends. */
static inline void sample_timeline(struct recorder *recorder, uint64_t time_ns)
{
    recorder->last_time_ns = time_ns;
    if (recorder->interval_ns && time_ns >= recorder->next_sample_ns)
        timeline_append(recorder, time_ns);
}

/* The counter of a site's share in a case. Every event in a case looks one
 * up, mostly the site's in the open case: the site keeps the last one it
 * used (counters live as long as the recorder). */
static struct case_site_counter *case_site(struct recorder *recorder, uint32_t case_id, struct recorder_site *site)
{
    if (site->case_counter && site->counter_case == case_id)
        return site->case_counter;
    uint64_t key = (uint64_t)case_id << 32 | (uint32_t)(site - recorder->sites);
    struct case_site_counter *counter;
    HASH_FIND(hh, recorder->case_sites, &key, sizeof key, counter);
    if (!counter && (counter = calloc(1, sizeof *counter)) != NULL) {
        counter->key = key;
        HASH_ADD(hh, recorder->case_sites, key, sizeof counter->key, counter);
    }
    if (!counter)
        recorder->out_of_memory = 1;
    site->case_counter = counter;
    site->counter_case = case_id;
    return counter;
}

double recorder_sample_weight(uint64_t sample_rate, uint64_t size)
{
    if (!sample_rate)
        return 1.0;
    /* -expm1(-x) is 1 - exp(-x), exact for small x too */
    double probability = -expm1(-(double)size / (double)sample_rate);
    return probability > 0 ? 1.0 / probability : 1.0;
}

static uint64_t rounded(double value)
{
    return value > 0 ? (uint64_t)llround(value) : 0;
}

/* What one block of `size` bytes at this site counts for in its figures:
 * its sample weight when the site is scaled (--sample-rate, a sampled
 * site), 0 when the site counts exactly. Taken once per event. */
static double block_weight(const struct recorder *recorder, const struct recorder_site *site, uint64_t size)
{
    return recorder->sample_rate && !site->unsampled ? recorder_sample_weight(recorder->sample_rate, size) : 0;
}

static void case_count_in_case(struct recorder *recorder, struct recorder_site *site, uint32_t case_id,
                               uint64_t size, double weight, int allocated, int freed)
{
    if (case_id < recorder->case_count) /* a fork child's inherited blocks name its parent's cases */
        recorder->cases[case_id].live_blocks += (uint64_t)(allocated - freed);
    struct case_site_counter *counter = case_site(recorder, case_id, site);
    if (!counter)
        return;
    counter->changed = 1;
    if (!weight) {
        counter->allocations += (uint64_t)allocated;
        counter->allocated_bytes += allocated ? size : 0;
        counter->frees += (uint64_t)freed;
        return;
    }
    counter->scaled_allocations += allocated * weight;
    counter->scaled_bytes += allocated * weight * (double)size;
    counter->scaled_frees += freed * weight;
    counter->allocations = rounded(counter->scaled_allocations);
    counter->allocated_bytes = rounded(counter->scaled_bytes);
    counter->frees = rounded(counter->scaled_frees);
}

/* site_count for a scaled site: the sums are kept unrounded and rounded
 * into the figures. */
static void site_count_scaled(struct recorder *recorder, struct recorder_site *site, uint64_t size, double weight,
                              int allocated, int live)
{
    struct site_scaled *scaled = &recorder->scaled[site - recorder->sites];
    scaled->allocations += allocated * weight;
    scaled->allocated_bytes += allocated * weight * (double)size;
    scaled->frees += live <= 0 ? weight : 0;
    scaled->sampled_live += (uint64_t)live;
    scaled->live_bytes += live * weight * (double)size;
    scaled->live_blocks += live * weight;
    if (!scaled->sampled_live)
        scaled->live_bytes = scaled->live_blocks = 0; /* no rounding residue once none is left */
    site->allocations = rounded(scaled->allocations);
    site->allocated_bytes = rounded(scaled->allocated_bytes);
    site->frees = rounded(scaled->frees);
    site->live_bytes = rounded(scaled->live_bytes);
    site->live_blocks = rounded(scaled->live_blocks);
}

/* Counts `allocated` allocations and `freed` frees of a block for case
 * case_id's share of the site (nothing outside a case). weight: see
 * block_weight. Inline: most events are outside any case. */
static inline void case_count(struct recorder *recorder, struct recorder_site *site, uint32_t case_id,
                              uint64_t size, double weight, int allocated, int freed)
{
    if (case_id != TRACE_NONE)
        case_count_in_case(recorder, site, case_id, size, weight, allocated, freed);
}

/* A site's figures after one of its blocks was allocated (live: +1), freed
 * (-1), or allocated and freed at once (0). weight: see block_weight.
 * Inline: it runs for every event, with constant allocated and live. */
static inline void site_count(struct recorder *recorder, struct recorder_site *site, uint64_t size, double weight,
                              int allocated, int live)
{
    if (__builtin_expect(weight != 0, 0)) {
        site_count_scaled(recorder, site, size, weight, allocated, live);
    } else {
        site->allocations += (uint64_t)allocated;
        site->allocated_bytes += allocated ? size : 0;
        site->frees += live <= 0;
        site->live_bytes += (uint64_t)live * size; /* wraps back for -1, as unsigned arithmetic does */
        site->live_blocks += (uint64_t)live;
    }
    if (site->live_bytes > site->max_live_bytes)
        site->max_live_bytes = site->live_bytes;
}

/* Notes that a site's live figures moved since the last snapshot. */
static void touch_slow(struct recorder *recorder, struct recorder_site *site)
{
    if (growable_array_reserve(&recorder->touched, &recorder->touched_capacity, recorder->touched_count + 1,
                               sizeof *recorder->touched) < 0) {
        recorder->touched_all = 1; /* the next snapshot looks at every site */
        return;
    }
    site->touched = 1;
    recorder->touched[recorder->touched_count++] = (uint32_t)(site - recorder->sites);
}

static inline void touch(struct recorder *recorder, struct recorder_site *site)
{
    if (__builtin_expect(!site->touched, 0))
        touch_slow(recorder, site);
}

/* An allocation and the free that came before it (pending): both counted,
 * the block never live; in case case_id. */
static void cancel_pair(struct recorder *recorder, struct recorder_site *site, struct pending_free *pending,
                        uint64_t size, uint32_t case_id)
{
    free(pending);
    recorder->unmatched_frees--;
    double weight = block_weight(recorder, site, size);
    site_count(recorder, site, size, weight, 1, 0);
    case_count(recorder, site, case_id, size, weight, 1, 1);
    recorder->allocations++;
    recorder->allocated_bytes += size;
}

/* Whether this allocation's free was already seen: then count both. A
 * held block's (held: see pending_free_take) may meet a free from any ring,
 * since its own thread's later events say nothing of it, and was made
 * outside any case. */
static int cancels_pending_free(struct recorder *recorder, struct recorder_site *site, uint64_t time_ns,
                                uint64_t address, uint64_t size, int held)
{
    struct pending_free *pending = pending_free_take(recorder, address, time_ns, held);
    if (!pending)
        return 0;
    cancel_pair(recorder, site, pending, size, held ? TRACE_NONE : recorder->open_case);
    return 1;
}

/* The peak counts the blocks the threads hold (as of the last drain:
 * recorder_set_held_bytes) with those in the live table. */
static inline void check_peak(struct recorder *recorder, uint64_t time_ns)
{
    if (recorder->live_bytes + recorder->held_bytes > recorder->peak_bytes) {
        recorder->peak_bytes = recorder->live_bytes + recorder->held_bytes;
        recorder->peak_blocks = recorder->live_blocks;
        recorder->peak_time_ns = time_ns;
        recorder->peak_epoch++;
    }
}

/* allocated: 1 for this image's allocation, 0 for a block a fork child
 * inherits (its counters start from 0). */
static inline void add_live_block(struct recorder *recorder, struct recorder_site *site, uint64_t time_ns,
                                  uint64_t address, uint64_t size, uint32_t case_id, uint32_t iteration,
                                  int allocated)
{
    struct live_block block = {
        .address = address,
        .size = size,
        .site = (uint32_t)(site - recorder->sites),
        .iteration = iteration,
        .case_id = case_id,
    };
    if (live_table_insert(&recorder->live, &block, &site->live_context) < 0) {
        recorder->out_of_memory = 1;
        return;
    }
    site_remember_peak(recorder, site);
    double weight = block_weight(recorder, site, size);
    case_count(recorder, site, case_id, size, weight, allocated, 0);
    site_count(recorder, site, size, weight, allocated, 1);
    touch(recorder, site);

    recorder->allocations += (uint64_t)allocated;
    recorder->allocated_bytes += allocated ? size : 0;
    recorder->live_bytes += size;
    recorder->live_blocks++;
    check_peak(recorder, time_ns);
    sample_timeline(recorder, time_ns);
}

void recorder_alloc(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size,
                    uint32_t stack_id, recorder_stack_lookup lookup, void *context)
{
    struct recorder_site *site = site_for_stack(recorder, stack_id, lookup, context);
    if (!site) {
        recorder->out_of_memory = 1;
        return;
    }
    if (UNLIKELY_PENDING(recorder) && cancels_pending_free(recorder, site, time_ns, address, size, 0))
        return;
    add_live_block(recorder, site, time_ns, address, size, recorder->open_case, (uint32_t)recorder->iteration, 1);
}

/* The figures of a block just taken out of the live table by its free. */
static void free_removed_block(struct recorder *recorder, uint64_t time_ns, const struct live_block *block)
{
    struct recorder_site *site = &recorder->sites[block->site];
    site_remember_peak(recorder, site);
    double weight = block_weight(recorder, site, block->size);
    case_count(recorder, site, block->case_id, block->size, weight, 0, 1);
    site_count(recorder, site, block->size, weight, 0, -1);
    touch(recorder, site);
    recorder->live_bytes -= block->size;
    recorder->live_blocks--;
    sample_timeline(recorder, time_ns);
}

void recorder_free_block(struct recorder *recorder, uint64_t time_ns, uint64_t address)
{
    struct live_block block;
    recorder->frees++;
    if (!live_table_remove(&recorder->live, address, &block)) {
        recorder->unmatched_frees++;
        pending_free_add(recorder, address, time_ns);
        return;
    }
    free_removed_block(recorder, time_ns, &block);
}

/* A held block into the live table, made outside any case (own: this
 * recorder's allocation, not a fork child's inheritance). Its stamp may be
 * older than events applied before it: the timeline and the peak take it
 * now. Its bytes leave the held estimate as they come into the live
 * figures (a thread's end sends its whole set: counted in both until the
 * drain's end, the peak read high by the set). */
static void add_held_block(struct recorder *recorder, struct recorder_site *site, uint64_t time_ns,
                           uint64_t address, uint64_t size, int own)
{
    uint64_t now = time_ns > recorder->last_time_ns ? time_ns : recorder->last_time_ns;
    recorder->held_bytes -= size < recorder->held_bytes ? size : recorder->held_bytes;
    add_live_block(recorder, site, now, address, size, TRACE_NONE, 0, own);
}

void recorder_held_alloc(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size)
{
    struct recorder_site *site = site_for_stack(recorder, RECORDER_UNSAMPLED, NULL, NULL);
    if (!site) {
        recorder->out_of_memory = 1;
        return;
    }
    if (UNLIKELY_PENDING(recorder) && cancels_pending_free(recorder, site, time_ns, address, size, 1))
        return;
    add_held_block(recorder, site, time_ns, address, size, 1);
}

void recorder_held_taken(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size,
                         int inherited)
{
    struct recorder_site *site = site_for_stack(recorder, RECORDER_UNSAMPLED, NULL, NULL);
    if (!site) {
        recorder->out_of_memory = 1;
        return;
    }
    if (inherited && live_table_contains(&recorder->live, address))
        return; /* it crossed after the fork instant, before the drain that made the child's copy */
    add_held_block(recorder, site, time_ns, address, size, !inherited);
}

void recorder_held_kept(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size)
{
    if (!live_table_contains(&recorder->live, address))
        recorder_held_taken(recorder, time_ns, address, size, 0);
}

void recorder_held_free(struct recorder *recorder, uint64_t time_ns, uint64_t address, uint64_t size)
{
    struct live_block block;
    if (!live_table_remove(&recorder->live, address, &block)) {
        recorder_held_pairs(recorder, 1, size);
        return;
    }
    recorder->frees++;
    free_removed_block(recorder, time_ns, &block);
}

void recorder_held_pairs(struct recorder *recorder, uint64_t pairs, uint64_t bytes)
{
    struct recorder_site *site = site_for_stack(recorder, RECORDER_UNSAMPLED, NULL, NULL);
    if (!site) {
        recorder->out_of_memory = 1;
        return;
    }
    site->allocations += pairs;
    site->allocated_bytes += bytes;
    site->frees += pairs;
    recorder->allocations += pairs;
    recorder->frees += pairs;
    recorder->allocated_bytes += bytes;
}

void recorder_set_held_bytes(struct recorder *recorder, uint64_t bytes, uint64_t time_ns)
{
    recorder->held_bytes = bytes;
    check_peak(recorder, time_ns);
}

/* Whether a site's live figures differ from what the last snapshot
 * recorded; a site without a live block counts as (0, 0). */
static int site_changed_since_snapshot(const struct recorder_site *site)
{
    uint64_t bytes = site->live_blocks ? site->live_bytes : 0;
    return recorder_site_shown(site) &&
           (bytes != site->snapshot_live_bytes || site->live_blocks != site->snapshot_live_blocks);
}

static int compare_entry_stack(const void *left, const void *right)
{
    const struct trace_snapshot_entry *a = left, *b = right;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* The sites a snapshot looks at: the touched ones, or every one. */
static size_t candidate_count(const struct recorder *recorder)
{
    return recorder->touched_all ? recorder->site_count : recorder->touched_count;
}

static struct recorder_site *candidate(struct recorder *recorder, size_t i)
{
    return &recorder->sites[recorder->touched_all ? i : recorder->touched[i]];
}

/* Fills entries (room for every changed site) with the sites that changed
 * since the last snapshot, sorted by stack_id, and records their figures as
 * the snapshot's; forgets which sites were touched. Returns the count. */
static size_t take_delta(struct recorder *recorder, struct trace_snapshot_entry *entries)
{
    size_t n = 0;
    for (size_t i = 0; i < candidate_count(recorder); i++) {
        struct recorder_site *site = candidate(recorder, i);
        site->touched = 0;
        if (!site_changed_since_snapshot(site))
            continue;
        site->snapshot_live_bytes = site->live_blocks ? site->live_bytes : 0;
        site->snapshot_live_blocks = site->live_blocks;
        entries[n++] = (struct trace_snapshot_entry){site->stack_id, site->snapshot_live_bytes,
                                                     site->snapshot_live_blocks};
    }
    recorder->touched_count = 0;
    recorder->touched_all = 0;
    qsort(entries, n, sizeof *entries, compare_entry_stack);
    return n;
}

/* Merges older (a dropped snapshot's entries) into *newer, which keeps its
 * own entry for a site in both. Frees older and the old *newer. 0, or -1
 * when out of memory (nothing changed). */
static int merge_into(struct trace_snapshot_entry *older, size_t older_count, struct trace_snapshot_entry **newer,
                      size_t *newer_count)
{
    size_t count = trace_snapshot_merge(older, older_count, *newer, *newer_count, 0, NULL);
    struct trace_snapshot_entry *merged = malloc((count ? count : 1) * sizeof *merged);
    if (!merged)
        return -1;
    trace_snapshot_merge(older, older_count, *newer, *newer_count, 0, merged);
    free(older);
    free(*newer);
    *newer = merged;
    *newer_count = count;
    return 0;
}

static void snapshot_set_entries(struct recorder_snapshot *snapshot, struct trace_snapshot_entry *entries,
                                 size_t count)
{
    snapshot->entries = entries;
    snapshot->header.entries = entries;
    snapshot->header.count = (uint32_t)count;
}

void recorder_snapshot(struct recorder *recorder, uint32_t kind, uint64_t time_ns)
{
    if (growable_array_reserve(&recorder->snapshots, &recorder->snapshot_capacity, recorder->snapshot_count + 1,
                               sizeof *recorder->snapshots) < 0) {
        recorder->out_of_memory = 1;
        return;
    }
    size_t changed = 0;
    for (size_t i = 0; i < candidate_count(recorder); i++)
        changed += site_changed_since_snapshot(candidate(recorder, i));
    /* Room for the carry's entries too, so that merging it cannot fail
     * after the sites' figures were taken. */
    struct trace_snapshot_entry *entries = malloc((changed + recorder->snapshot_carry_count + 1) * sizeof *entries);
    if (!entries) {
        recorder->out_of_memory = 1;
        return;
    }
    size_t count = take_delta(recorder, entries);
    if (recorder->snapshot_carry) {
        struct trace_snapshot_entry *delta = entries + recorder->snapshot_carry_count;
        memmove(delta, entries, count * sizeof *entries);
        count = trace_snapshot_merge(recorder->snapshot_carry, recorder->snapshot_carry_count, delta, count, 0,
                                     entries);
        free(recorder->snapshot_carry);
        recorder->snapshot_carry = NULL;
        recorder->snapshot_carry_count = 0;
    }
    struct recorder_snapshot *snapshot = &recorder->snapshots[recorder->snapshot_count++];
    snapshot->header = (struct trace_snapshot){
        .kind = kind,
        .case_id = recorder->open_case,
        .iteration = recorder->iteration,
        .time_ns = time_ns,
        /* not held_bytes: a snapshot's figures are exact, and within a
         * case nothing is held (held_sets.h) */
        .live_bytes = recorder->live_bytes,
        .live_blocks = recorder->live_blocks,
    };
    snapshot->written = 0;
    snapshot_set_entries(snapshot, entries, count);
}

static void case_open(struct recorder *recorder, uint64_t time_ns, const char *name, size_t name_length,
                      uint32_t flags)
{
    if (growable_array_reserve(&recorder->cases, &recorder->case_capacity, recorder->case_count + 1,
                               sizeof *recorder->cases) < 0) {
        recorder->out_of_memory = 1;
        return;
    }
    struct recorder_case *c = &recorder->cases[recorder->case_count];
    memset(c, 0, sizeof *c);
    c->name = strndup(name, name_length);
    if (!c->name) {
        recorder->out_of_memory = 1;
        return;
    }
    c->info.case_id = (uint32_t)recorder->case_count;
    c->info.name = c->name;
    c->info.begin_ns = time_ns;
    c->info.flags = flags;
    recorder->open_case = (uint32_t)recorder->case_count++;
    recorder->iteration = 0;
    recorder->snapshot_stride = 1;
    recorder->iteration_snapshots = 0;
    if (!(flags & TRACE_CASE_IMPLICIT))
        recorder_snapshot(recorder, TRACE_SNAP_CASE_BEGIN, time_ns);
}

void recorder_case_begin(struct recorder *recorder, uint64_t time_ns, const char *name, size_t name_length)
{
    if (recorder->open_case != TRACE_NONE)
        recorder_case_end(recorder, time_ns);
    case_open(recorder, time_ns, name, name_length, 0);
}

/* Drops snapshot i, passing its entries on to the snapshot after it (or to
 * the carry, when it is the latest). 0, or -1 when out of memory: then it
 * stays. */
static int drop_snapshot(struct recorder *recorder, size_t i)
{
    struct recorder_snapshot *dropped = &recorder->snapshots[i];
    if (i + 1 == recorder->snapshot_count)
        return merge_into(dropped->entries, dropped->header.count, &recorder->snapshot_carry,
                          &recorder->snapshot_carry_count);
    struct recorder_snapshot *next = &recorder->snapshots[i + 1];
    struct trace_snapshot_entry *entries = next->entries;
    size_t count = next->header.count;
    if (merge_into(dropped->entries, dropped->header.count, &entries, &count) < 0)
        return -1;
    snapshot_set_entries(next, entries, count);
    return 0;
}

/* Drops every other kept iteration snapshot of the open case. */
static void thin_iteration_snapshots(struct recorder *recorder)
{
    uint64_t stride = recorder->snapshot_stride * 2;
    size_t kept = 0, iterations_kept = 0;
    for (size_t i = 0; i < recorder->snapshot_count; i++) {
        struct recorder_snapshot *snapshot = &recorder->snapshots[i];
        int ours = snapshot->header.kind == TRACE_SNAP_ITERATION && snapshot->header.case_id == recorder->open_case;
        if (ours && (snapshot->header.iteration - 1) % stride != 0) {
            if (drop_snapshot(recorder, i) == 0)
                continue;
            recorder->out_of_memory = 1; /* kept: its figures stay exact */
        }
        iterations_kept += ours;
        recorder->snapshots[kept++] = *snapshot;
    }
    recorder->snapshot_count = kept;
    recorder->snapshot_stride = stride;
    recorder->iteration_snapshots = iterations_kept;
}

void recorder_iteration(struct recorder *recorder, uint64_t time_ns)
{
    if (recorder->open_case == TRACE_NONE)
        case_open(recorder, 0, "", 0, TRACE_CASE_IMPLICIT);
    if (recorder->open_case == TRACE_NONE)
        return;
    recorder->iteration++;
    recorder->cases[recorder->open_case].info.iterations = recorder->iteration;
    if ((recorder->iteration - 1) % recorder->snapshot_stride != 0)
        return;
    recorder_snapshot(recorder, TRACE_SNAP_ITERATION, time_ns);
    recorder->iteration_snapshots++;
    if (recorder->snapshots_limit && recorder->iteration_snapshots > recorder->snapshots_limit)
        thin_iteration_snapshots(recorder);
}

uint64_t recorder_open_case_live_blocks(const struct recorder *recorder)
{
    return recorder->open_case < recorder->case_count ? recorder->cases[recorder->open_case].live_blocks : 0;
}

void recorder_case_end(struct recorder *recorder, uint64_t time_ns)
{
    if (recorder->open_case == TRACE_NONE)
        return;
    recorder_snapshot(recorder, TRACE_SNAP_CASE_END, time_ns);
    struct recorder_case *c = &recorder->cases[recorder->open_case];
    c->info.end_ns = time_ns;
    c->info.flags |= TRACE_CASE_ENDED;
    recorder->open_case = TRACE_NONE;
    recorder->iteration = 0;
}

int recorder_init_fork_child(struct recorder *child, const struct recorder *parent)
{
    recorder_init(child, parent->interval_ns);
    child->snapshots_limit = parent->snapshots_limit;
    child->sample_rate = parent->sample_rate;
    if (live_table_copy(&child->live, &parent->live) < 0)
        goto fail;
    child->sites = calloc(parent->site_count ? parent->site_count : 1, sizeof *child->sites);
    child->site_by_stack = calloc(parent->site_by_stack_size ? parent->site_by_stack_size : 1, sizeof(uint32_t));
    if (parent->scaled) {
        child->scaled = calloc(parent->site_count ? parent->site_count : 1, sizeof *child->scaled);
        child->scaled_capacity = parent->site_count;
    }
    if (!child->sites || !child->site_by_stack || (parent->scaled && !child->scaled))
        goto fail;
    /* The child's stack ids are its own (a new shared region); inherited
     * blocks keep their parent's frames under synthetic ids above the
     * shim's range, so they never collide with the child's. */
    for (size_t i = 0; i < parent->site_count; i++) {
        const struct recorder_site *from = &parent->sites[i];
        struct recorder_site *to = &child->sites[i];
        memset(to, 0, sizeof *to);
        to->stack_id = 0x80000000u | (uint32_t)i;
        to->live_bytes = from->live_bytes;
        to->live_blocks = from->live_blocks;
        to->max_live_bytes = from->live_bytes;
        to->live_context = from->live_context; /* its reference was copied with the table */
        to->unsampled = from->unsampled;
        if (parent->scaled) {
            child->scaled[i] = parent->scaled[i];
            child->scaled[i].allocations = child->scaled[i].allocated_bytes = child->scaled[i].frees = 0;
        }
        if (from->depth) {
            /* a copy: the parent's frames may be in its region, which goes
             * with the parent */
            uint64_t *copy = frame_room(child, from->depth);
            if (!copy)
                goto fail;
            for (uint32_t f = 0; f < from->depth; f++)
                copy[f] = recorder_site_frame(from, f);
            to->frames = copy;
            to->depth = from->depth;
        }
    }
    child->site_count = child->site_capacity = parent->site_count;
    child->touched_all = 1; /* the inherited sites' figures are new to the child's snapshots */
    child->site_by_stack_size = parent->site_by_stack_size;
    child->live_bytes = parent->live_bytes;
    child->live_blocks = parent->live_blocks;
    child->peak_bytes = parent->live_bytes;
    child->peak_blocks = parent->live_blocks;
    return 0;
fail:
    /* Out of memory: the child starts with no inherited heap rather than
     * with blocks that name sites it does not have (the caller marks its
     * figures incomplete). */
    free_frame_chunks(child);
    free(child->sites);
    free(child->site_by_stack);
    free(child->scaled);
    child->sites = NULL;
    child->site_by_stack = NULL;
    child->scaled = NULL;
    live_table_free(&child->live);
    return -1;
}

void recorder_free(struct recorder *recorder)
{
    /* The hash tables go whole: their buckets first (HASH_CLEAR frees
     * only those), then the entries, still linked through hh.next, without
     * unlinking each from its table. */
    struct case_site_counter *counter = recorder->case_sites, *next_counter;
    HASH_CLEAR(hh, recorder->case_sites);
    for (; counter; counter = next_counter) {
        next_counter = counter->hh.next;
        free(counter);
    }
    struct pending_free *pending = recorder->pending_frees, *next_pending;
    HASH_CLEAR(hh, recorder->pending_frees);
    for (; pending; pending = next_pending) {
        next_pending = pending->hh.next;
        for (struct pending_free *later = pending->later, *after; later; later = after) {
            after = later->later;
            free(later);
        }
        free(pending);
    }
    live_table_free(&recorder->live);
    free_frame_chunks(recorder);
    free(recorder->sites);
    free(recorder->scaled);
    free(recorder->site_by_stack);
    free(recorder->touched);
    free(recorder->timeline);
    for (size_t i = 0; i < recorder->snapshot_count; i++)
        free(recorder->snapshots[i].entries);
    free(recorder->snapshots);
    free(recorder->snapshot_carry);
    for (size_t i = 0; i < recorder->case_count; i++)
        free(recorder->cases[i].name);
    free(recorder->cases);
    recorder_init(recorder, 0);
}

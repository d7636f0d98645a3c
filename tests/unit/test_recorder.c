/* The tracer's per-image accounting (tracer/recorder.h, live_table.h):
 * events of several threads arriving out of order, as the ring consumer can
 * deliver them, still give exact figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tracer/recorder.h"

static const uint64_t frames[2] = {0x401000, 0x401100};

static uint32_t lookup(void *context, uint32_t stack_id, const uint64_t **out, const uint64_t **tail,
                       uint32_t *tail_count)
{
    *tail = NULL;
    *tail_count = 0;
    (void)context, (void)stack_id;
    *out = frames;
    return 2;
}

static void in_order(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_alloc(&r, 10, 0x1000, 48, 1, lookup, NULL);
    recorder_alloc(&r, 11, 0x2000, 16, 2, lookup, NULL);
    recorder_free_block(&r, 12, 0x1000);
    assert_int_equal(r.allocations, 2);
    assert_int_equal(r.frees, 1);
    assert_int_equal(r.live_bytes, 16);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.peak_bytes, 64);
    recorder_free(&r);
}

/* Thread A frees a block that thread B allocated an instant before, and
 * A's ring is read before B's: the free arrives first. */
static void free_read_before_its_allocation(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.source = 1;
    recorder_free_block(&r, 20, 0x3000);         /* A: free, stamped 20 */
    assert_int_equal(r.unmatched_frees, 1);
    r.source = 2;
    recorder_alloc(&r, 15, 0x3000, 32, 1, lookup, NULL); /* B: allocated at 15 */
    assert_int_equal(r.unmatched_frees, 0);
    assert_int_equal(r.allocations, 1);
    assert_int_equal(r.frees, 1);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.live_bytes, 0);
    assert_int_equal(r.sites[0].frees, 1);
    /* A later allocation at the same address is a new live block. */
    recorder_alloc(&r, 30, 0x3000, 64, 1, lookup, NULL);
    assert_int_equal(r.live_bytes, 64);
    recorder_free(&r);
}

/* A block a thread held (tracer/held_sets.h) crosses late, after another
 * thread's free of it: the free cancels it, whatever ring it came from. */
static void held_block_cancels_a_later_free_from_any_ring(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 4096;
    r.source = 3;
    recorder_free_block(&r, 10, 0x5000);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_held_alloc(&r, 8, 0x5000, 48); /* from ring 3 too: not older than the free */
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 0);
    assert_int_equal(r.allocations, 1);
    assert_int_equal(r.frees, 1);
    assert_int_equal(r.allocated_bytes, 48);
    /* the same ring's free of an unknown block, stamped as the held block:
     * the address given back at once, a new block */
    recorder_free_block(&r, 20, 0x6000);
    recorder_held_alloc(&r, 20, 0x6000, 16);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.unmatched_frees, 1);
    /* a stale copy (stamped 0 by the set) cancels the free that crossed
     * while it sat in its set, however late that free was */
    recorder_free_block(&r, 50, 0x7000);
    recorder_held_alloc(&r, 0, 0x7000, 8);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_free(&r);
}

/* A block taken from a set at a stop is live whatever free of its address
 * is pending: a set holds only live blocks, so that free was of an older
 * block (one made before recording began, say). */
static void held_block_taken_at_a_stop_cancels_nothing(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 4096;
    r.source = 2;
    recorder_free_block(&r, 40, 0x5000);
    recorder_held_taken(&r, 40, 0x5000, 24, 0);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.live_bytes, 24);
    assert_int_equal(r.allocations, 1);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_free(&r);
}

/* Stamps in tests that compare a free with an allocation of another ring:
 * further apart than two processors' clocks may disagree
 * (PENDING_FREE_SKEW_NS, 1 us). */
#define T(t) ((uint64_t)(t) * 10000u)

/* A block handed to another thread and freed there at once: the free may
 * be stamped a little before its allocation (the two processors' TSCs
 * differ), and read first; it is still the allocation's. */
static void free_stamped_just_before_its_allocation_cancels_it(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.source = 2;
    recorder_free_block(&r, 1000000, 0x5000);
    r.source = 3;
    recorder_alloc(&r, 1000027, 0x5000, 48, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 0);
    /* 5 us before: an older block's free, the allocation's block live */
    r.source = 2;
    recorder_free_block(&r, 2000000, 0x6000);
    r.source = 3;
    recorder_alloc(&r, 2005000, 0x6000, 48, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_free(&r);
}

/* A held block allocated after an old free of its address is live; held
 * blocks were made outside any case, whatever case is open when they
 * cross. */
static void held_block_after_a_free_is_live_and_in_no_case(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 4096;
    recorder_free_block(&r, T(5), 0x5000);
    recorder_case_begin(&r, T(6), "c", 1);
    recorder_held_alloc(&r, T(9), 0x5000, 24);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.live_bytes, 24);
    assert_int_equal(r.unmatched_frees, 1);
    assert_int_equal(recorder_open_case_live_blocks(&r), 0);
    recorder_free_block(&r, T(12), 0x5000);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(recorder_open_case_live_blocks(&r), 0);
    recorder_free(&r);
}

/* Pairs that never crossed count in the totals; bytes held count in the
 * peak, not in the live figures. */
static void held_pairs_and_bytes_count(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 4096;
    recorder_alloc(&r, 1, 0x1000, 100, 1, lookup, NULL);
    recorder_held_pairs(&r, 5, 500);
    assert_int_equal(r.allocations, 6);
    assert_int_equal(r.frees, 5);
    assert_int_equal(r.allocated_bytes, 600);
    assert_int_equal(r.live_bytes, 100);
    recorder_set_held_bytes(&r, 1000, 2);
    assert_int_equal(r.peak_bytes, 1100);
    assert_int_equal(r.live_bytes, 100);
    recorder_set_held_bytes(&r, 0, 3);
    assert_int_equal(r.peak_bytes, 1100);
    recorder_free(&r);
}

/* A free its thread could not settle (the tracer stopped it inside): the
 * block was taken into the live table, or it was not. */
static void held_free_settles_a_block_taken_or_not(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 4096;
    recorder_held_taken(&r, 1, 0x1000, 32, 0); /* taken at a stop */
    recorder_held_free(&r, 2, 0x1000, 32);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.allocations, 1);
    assert_int_equal(r.frees, 1);
    recorder_held_free(&r, 3, 0x2000, 64); /* not taken: a pair */
    assert_int_equal(r.allocations, 2);
    assert_int_equal(r.frees, 2);
    assert_int_equal(r.allocated_bytes, 96);
    assert_int_equal(r.unmatched_frees, 0);
    recorder_free(&r);
}

/* A failed realloc keeps a held block the tracer may have taken meanwhile:
 * live once, whether it was taken or not. */
static void held_block_kept_by_a_failed_realloc_is_live_once(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 4096;
    recorder_held_taken(&r, 1, 0x1000, 32, 0);
    recorder_held_kept(&r, 2, 0x1000, 32); /* taken at the stop: already live */
    recorder_held_kept(&r, 2, 0x2000, 64); /* not taken: live now */
    assert_int_equal(r.live_blocks, 2);
    assert_int_equal(r.live_bytes, 96);
    assert_int_equal(r.allocations, 2);
    recorder_free(&r);
}

/* A fork child gets the blocks its copy of the parent's sets holds, not as
 * its own allocations; one that crossed after the fork instant, before the
 * drain that made the child's copy of the live table, is there once. */
static void fork_child_inherits_held_blocks(void **state)
{
    (void)state;
    struct recorder parent, child;
    recorder_init(&parent, 0);
    parent.sample_rate = 4096;
    recorder_alloc(&parent, 1, 0x1000, 16, 1, lookup, NULL);
    recorder_held_alloc(&parent, 4, 0x3000, 8); /* pushed out of its set after the fork */
    assert_int_equal(recorder_init_fork_child(&child, &parent), 0);
    recorder_held_taken(&child, 6, 0x2000, 40, 1);
    recorder_held_taken(&child, 6, 0x3000, 8, 1);
    assert_int_equal(child.live_blocks, 3);
    assert_int_equal(child.live_bytes, 64);
    assert_int_equal(child.allocations, 0);
    assert_int_equal(child.frees, 0);
    assert_int_equal(parent.live_blocks, 2);
    recorder_free(&child);
    recorder_free(&parent);
}

/* A free of a block allocated before recording began matches nothing: an
 * allocation stamped after it is not cancelled. */
static void old_free_does_not_cancel_a_later_allocation(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_free_block(&r, 5, 0x5000);
    recorder_alloc(&r, 9, 0x5000, 24, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.live_bytes, 24);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_free(&r);
}

/* The frees of two blocks at one address, from one ring, read before
 * either allocation (a thread that ended at once, its ring read late):
 * each allocation cancels its own free, the earliest not older than
 * itself, in whatever order the frees and allocations come; an old free
 * of the address before both waits on. */
static void two_frees_at_one_address_wait_for_their_allocations(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.source = 2;
    recorder_free_block(&r, T(5), 0x5000);  /* a block from before recording */
    recorder_free_block(&r, T(40), 0x5000); /* the second round's */
    recorder_free_block(&r, T(20), 0x5000); /* the first round's */
    assert_int_equal(r.unmatched_frees, 3);
    r.source = 1;
    recorder_alloc(&r, T(10), 0x5000, 48, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 2);
    r.source = 3;
    recorder_alloc(&r, T(30), 0x5000, 48, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 1);
    /* a third allocation, after every free: live */
    recorder_alloc(&r, T(50), 0x5000, 48, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.allocations, 3);
    assert_int_equal(r.frees, 3);
    recorder_free(&r);
}

/* An address keeps its 4,096 latest waiting frees: the earliest go first
 * (still counted unmatched), so a run of frees never sent allocated costs
 * no more than that; the latest stays last as frees come in any order. */
static void waiting_frees_at_one_address_are_bounded(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.source = 2;
    for (uint64_t t = 1; t <= 4132; t++)
        recorder_free_block(&r, T(t * 10), 0x5000);
    recorder_free_block(&r, T(41315), 0x5000); /* between two kept ones */
    assert_int_equal(r.unmatched_frees, 4133);
    r.source = 1;
    recorder_alloc(&r, T(300), 0x5000, 16, 1, lookup, NULL); /* 10..370 dropped: takes 380 */
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 4132);
    recorder_alloc(&r, T(41316), 0x5000, 16, 1, lookup, NULL); /* takes 41320, the last */
    assert_int_equal(r.live_blocks, 0);
    recorder_alloc(&r, T(41310), 0x5000, 16, 1, lookup, NULL); /* takes 41310 */
    recorder_alloc(&r, T(41311), 0x5000, 16, 1, lookup, NULL); /* takes 41315, the last now */
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 4129);
    recorder_alloc(&r, T(41321), 0x5000, 16, 1, lookup, NULL); /* after every one: live */
    assert_int_equal(r.live_blocks, 1);
    recorder_free(&r);
}

/* A free waiting from the allocation's own ring is skipped, not taken:
 * a later one from another ring is the allocation's. */
static void same_ring_free_is_skipped_for_a_later_one(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.source = 1;
    recorder_free_block(&r, 10, 0x5000);
    r.source = 2;
    recorder_free_block(&r, 20, 0x5000);
    r.source = 1;
    recorder_alloc(&r, 10, 0x5000, 16, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_free(&r);
}

/* One thread frees a block the recording never saw allocated, and its
 * next allocation gets the address back with the same (repeated) stamp:
 * that is a new live block, not the free's own allocation read late. */
static void same_ring_allocation_does_not_cancel_a_free(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.source = 3;
    recorder_free_block(&r, 5, 0x5000);
    recorder_alloc(&r, 5, 0x5000, 40, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.live_bytes, 40);
    assert_int_equal(r.unmatched_frees, 1);
    r.source = 4; /* another thread's allocation of the address, stamped no later, still would */
    recorder_free_block(&r, 6, 0x5000);
    recorder_free_block(&r, 9, 0x6000);
    r.source = 3;
    recorder_alloc(&r, 8, 0x6000, 16, 1, lookup, NULL);
    assert_int_equal(r.live_blocks, 0);
    assert_int_equal(r.unmatched_frees, 1);
    recorder_free(&r);
}

/* B's allocation of an address arrives before A's free of its previous
 * block there: the free removes the older block. */
static void reuse_read_before_the_free(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_alloc(&r, 1, 0x7000, 100, 1, lookup, NULL); /* A's block */
    recorder_alloc(&r, 3, 0x7000, 200, 2, lookup, NULL); /* B reuses the address */
    recorder_free_block(&r, 2, 0x7000);                  /* A's free, read late */
    assert_int_equal(r.live_blocks, 1);
    assert_int_equal(r.live_bytes, 200);
    assert_int_equal(r.sites[0].live_bytes, 0);
    assert_int_equal(r.sites[1].live_bytes, 200);
    recorder_free(&r);
}

/* --snapshots N: at most N iteration snapshots per case, evenly spaced,
 * however many iterations run. */
static void iteration_snapshots_are_thinned_evenly(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.snapshots_limit = 10;
    recorder_case_begin(&r, 1, "body", 4);
    for (uint64_t i = 0; i < 1000; i++) {
        recorder_iteration(&r, 2 + i);
        recorder_alloc(&r, 2 + i, 0x10000 + 16 * i, 48, 1, lookup, NULL);
    }
    recorder_case_end(&r, 5000);
    size_t kept = 0;
    uint64_t previous = 0, spacing = 0;
    for (size_t i = 0; i < r.snapshot_count; i++) {
        const struct trace_snapshot *s = &r.snapshots[i].header;
        if (s->kind != TRACE_SNAP_ITERATION)
            continue;
        if (kept == 1)
            spacing = s->iteration - previous;
        else if (kept > 1)
            assert_int_equal(s->iteration - previous, spacing);
        /* each holds the live heap before its iteration: 48 B per iteration so far */
        assert_int_equal(s->live_bytes, 48 * (s->iteration - 1));
        previous = s->iteration;
        kept++;
    }
    assert_true(kept <= 10);
    assert_true(kept >= 5);
    assert_int_equal(r.cases[0].info.iterations, 1000);
    recorder_free(&r);
}

/* Snapshot deltas ---------------------------------------------------------- */

enum { MAX_STACK = 512 }; /* churn's one-time sites: up to 64 + 447 iterations */

/* A process's full per-site heap, indexed by stack id (what a full snapshot
 * lists: the sites with live blocks). */
struct full_heap {
    uint64_t bytes[MAX_STACK], blocks[MAX_STACK];
};

static void heap_now(const struct recorder *r, struct full_heap *heap)
{
    memset(heap, 0, sizeof *heap);
    for (size_t i = 0; i < r->site_count; i++)
        if (r->sites[i].live_blocks) {
            heap->bytes[r->sites[i].stack_id] = r->sites[i].live_bytes;
            heap->blocks[r->sites[i].stack_id] = r->sites[i].live_blocks;
        }
}

/* Applies a snapshot's delta to heap, checking that its entries ascend by
 * stack id. */
static void apply_delta(const struct recorder_snapshot *snapshot, struct full_heap *heap)
{
    assert_ptr_equal(snapshot->header.entries, snapshot->entries);
    for (uint32_t e = 0; e < snapshot->header.count; e++) {
        const struct trace_snapshot_entry *entry = &snapshot->entries[e];
        assert_true(entry->stack_id < MAX_STACK);
        if (e > 0)
            assert_true(entry->stack_id > snapshot->entries[e - 1].stack_id);
        heap->bytes[entry->stack_id] = entry->live_blocks ? entry->live_bytes : 0;
        heap->blocks[entry->stack_id] = entry->live_blocks;
    }
}

/* A snapshot holds the sites that changed since the previous one, sorted by
 * stack id; a site whose blocks were all freed appears with 0; an
 * unchanged heap gives an empty snapshot. */
static void snapshots_hold_what_changed(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_alloc(&r, 1, 0x1000, 48, 9, lookup, NULL); /* site 0: stack 9 */
    recorder_alloc(&r, 2, 0x2000, 16, 3, lookup, NULL); /* site 1: stack 3 */
    recorder_alloc(&r, 3, 0x3000, 16, 3, lookup, NULL);
    recorder_snapshot(&r, TRACE_SNAP_CASE_BEGIN, 4);
    assert_int_equal(r.snapshots[0].header.count, 2);
    assert_int_equal(r.snapshots[0].entries[0].stack_id, 3);
    assert_int_equal(r.snapshots[0].entries[0].live_bytes, 32);
    assert_int_equal(r.snapshots[0].entries[0].live_blocks, 2);
    assert_int_equal(r.snapshots[0].entries[1].stack_id, 9);
    assert_int_equal(r.snapshots[0].entries[1].live_bytes, 48);
    recorder_free_block(&r, 5, 0x1000);                 /* stack 9: none left */
    recorder_alloc(&r, 6, 0x4000, 100, 5, lookup, NULL); /* a new site */
    recorder_alloc(&r, 7, 0x5000, 8, 3, lookup, NULL);   /* stack 3 changes ... */
    recorder_free_block(&r, 8, 0x5000);                  /* ... and changes back */
    recorder_snapshot(&r, TRACE_SNAP_ITERATION, 9);
    const struct recorder_snapshot *second = &r.snapshots[1];
    assert_int_equal(second->header.count, 2);
    assert_int_equal(second->entries[0].stack_id, 5);
    assert_int_equal(second->entries[0].live_bytes, 100);
    assert_int_equal(second->entries[1].stack_id, 9);
    assert_int_equal(second->entries[1].live_bytes, 0);
    assert_int_equal(second->entries[1].live_blocks, 0);
    assert_int_equal(second->header.live_bytes, 132);
    assert_int_equal(second->header.live_blocks, 3);
    recorder_snapshot(&r, TRACE_SNAP_EXIT, 10);
    assert_int_equal(r.snapshots[2].header.count, 0);
    recorder_free(&r);
}

/* One iteration of a workload in which most sites change all the time and
 * some change once: iteration i allocates a block at a site of its own
 * (stack 64 + i) and frees iteration i - 5's, so a snapshot holds sites that
 * no later snapshot names again (dropping it must not lose them). The
 * stack ids are not in the order the sites are first seen. */
static void churn(struct recorder *r, uint64_t iteration, uint64_t *live, size_t *live_count)
{
    static const uint32_t stacks[] = {40, 7, 33, 2, 19, 61, 11, 5};
    uint64_t x = iteration * 2654435761u;
    for (int k = 0; k < 3; k++) {
        x ^= x >> 13, x *= 0x9e3779b97f4a7c15ull, x ^= x >> 29;
        if (*live_count && x % 3 == 0) {
            size_t victim = (size_t)(x >> 8) % *live_count;
            recorder_free_block(r, iteration, live[victim]);
            live[victim] = live[--*live_count];
        } else {
            uint64_t address = 0x100000 + 64 * (iteration * 3 + (uint64_t)k);
            recorder_alloc(r, iteration, address, 8 + x % 200, stacks[(x >> 4) % 8], lookup, NULL);
            live[(*live_count)++] = address;
        }
    }
    recorder_alloc(r, iteration, 0x10000000 + 64 * iteration, 100 + iteration, (uint32_t)(64 + iteration), lookup,
                   NULL);
    if (iteration > 5)
        recorder_free_block(r, iteration, 0x10000000 + 64 * (iteration - 5));
}

/* Thinning drops every other iteration snapshot; what a dropped one
 * recorded goes into the next one kept (or waits for the next one taken),
 * so the deltas kept, applied in order, still give every kept snapshot's
 * full heap exactly. Both an even and an odd limit: with an odd one the
 * snapshot just taken is among those dropped. */
static void check_thinned_deltas_are_exact(uint32_t limit, uint64_t iterations)
{
    struct recorder r;
    recorder_init(&r, 0);
    r.snapshots_limit = limit;
    struct full_heap *truth = calloc(iterations + 1, sizeof *truth);
    uint64_t *live = calloc(3 * iterations + 1, sizeof *live);
    size_t live_count = 0;
    assert_non_null(truth);
    assert_non_null(live);
    recorder_alloc(&r, 0, 0x50, 24, 40, lookup, NULL); /* before the case */
    recorder_case_begin(&r, 1, "body", 4);
    for (uint64_t i = 1; i <= iterations; i++) {
        heap_now(&r, &truth[i]); /* what iteration i's snapshot sees */
        recorder_iteration(&r, 2 + i);
        churn(&r, i, live, &live_count);
    }
    struct full_heap at_end;
    heap_now(&r, &at_end);
    recorder_case_end(&r, 5000);
    struct full_heap heap = {0};
    size_t iteration_snapshots = 0;
    for (size_t i = 0; i < r.snapshot_count; i++) {
        const struct recorder_snapshot *snapshot = &r.snapshots[i];
        apply_delta(snapshot, &heap);
        const struct full_heap *want = snapshot->header.kind == TRACE_SNAP_ITERATION ? &truth[snapshot->header.iteration]
                                       : snapshot->header.kind == TRACE_SNAP_CASE_END ? &at_end
                                                                                       : NULL;
        if (want)
            assert_memory_equal(&heap, want, sizeof heap);
        iteration_snapshots += snapshot->header.kind == TRACE_SNAP_ITERATION;
    }
    assert_true(iteration_snapshots <= limit);
    assert_true(iteration_snapshots >= limit / 2);
    assert_false(r.out_of_memory);
    free(truth);
    free(live);
    recorder_free(&r);
}

static void thinned_deltas_are_exact(void **state)
{
    (void)state;
    check_thinned_deltas_are_exact(10, 400);
    check_thinned_deltas_are_exact(7, 447);
    check_thinned_deltas_are_exact(3, 37);
}

/* The open case's live blocks: what it allocated less what it freed of
 * those (a block from before the case, freed in it, is not its own), also
 * when a free was read before its allocation; a case that freed all its
 * blocks needs no leak scan at its end. */
static void open_case_live_blocks(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    recorder_alloc(&r, 1, 0x1000, 48, 1, lookup, NULL); /* before any case */
    assert_int_equal(recorder_open_case_live_blocks(&r), 0);
    recorder_case_begin(&r, 2, "first", 5);
    recorder_alloc(&r, 3, 0x2000, 16, 1, lookup, NULL);
    recorder_alloc(&r, 4, 0x3000, 16, 2, lookup, NULL);
    recorder_free_block(&r, 5, 0x1000); /* not the case's */
    assert_int_equal(recorder_open_case_live_blocks(&r), 2);
    recorder_free_block(&r, 6, 0x2000);
    assert_int_equal(recorder_open_case_live_blocks(&r), 1);
    r.source = 1;
    recorder_free_block(&r, 8, 0x4000); /* read before its allocation, from another thread's ring */
    r.source = 0;
    recorder_alloc(&r, 7, 0x4000, 16, 2, lookup, NULL);
    assert_int_equal(recorder_open_case_live_blocks(&r), 1);
    recorder_free_block(&r, 9, 0x3000);
    assert_int_equal(recorder_open_case_live_blocks(&r), 0);
    recorder_alloc(&r, 10, 0x5000, 16, 1, lookup, NULL);
    recorder_case_begin(&r, 11, "second", 6); /* ends "first" with one block live */
    assert_int_equal(recorder_open_case_live_blocks(&r), 0);
    recorder_free_block(&r, 12, 0x5000);
    assert_int_equal(r.cases[0].live_blocks, 0);
    recorder_case_end(&r, 13);
    assert_int_equal(recorder_open_case_live_blocks(&r), 0);
    recorder_free(&r);
}

/* A fork child's first snapshot lists every site it inherited. */
static void fork_child_starts_its_own_deltas(void **state)
{
    (void)state;
    struct recorder parent, child;
    recorder_init(&parent, 0);
    recorder_alloc(&parent, 1, 0x1000, 48, 9, lookup, NULL);
    recorder_alloc(&parent, 2, 0x2000, 16, 3, lookup, NULL);
    recorder_snapshot(&parent, TRACE_SNAP_CASE_BEGIN, 3);
    assert_int_equal(recorder_init_fork_child(&child, &parent), 0);
    recorder_snapshot(&child, TRACE_SNAP_EXIT, 4);
    assert_int_equal(child.snapshot_count, 1);
    assert_int_equal(child.snapshots[0].header.count, 2);
    assert_int_equal(child.snapshots[0].entries[0].live_bytes + child.snapshots[0].entries[1].live_bytes, 64);
    recorder_free(&child);
    recorder_free(&parent);
}

/* An allocation of exactly the mean interval is sampled with probability
 * 1 - 1/e; one much larger than it always is. */
static void sample_weight_is_the_inverse_probability(void **state)
{
    (void)state;
    assert_true(fabs(recorder_sample_weight(1024, 1024) - 1.0 / (1.0 - exp(-1.0))) < 1e-12);
    assert_true(fabs(recorder_sample_weight(1 << 20, 16) - (1 << 20) / 16.0) < 1.0);
    assert_true(recorder_sample_weight(1024, 1 << 30) == 1.0);
    assert_true(recorder_sample_weight(0, 48) == 1.0);
}

/* --sample-rate: totals count every block; the sampled site's figures are
 * scaled by their weights; the unsampled remainder (stack 0) is no site
 * that is shown, not in snapshots either; a sampled site whose blocks are
 * all freed goes back to exactly 0 live. */
static void sampled_sites_are_scaled_and_totals_exact(void **state)
{
    (void)state;
    struct recorder r;
    recorder_init(&r, 0);
    r.sample_rate = 256;
    double w48 = recorder_sample_weight(256, 48), w1000 = recorder_sample_weight(256, 1000);
    recorder_alloc(&r, 1, 0x1000, 48, 7, lookup, NULL);   /* sampled */
    recorder_alloc(&r, 2, 0x2000, 48, 0, lookup, NULL);   /* unsampled */
    recorder_alloc(&r, 3, 0x3000, 48, 0, lookup, NULL);   /* unsampled */
    recorder_alloc(&r, 4, 0x4000, 1000, 7, lookup, NULL); /* sampled */
    assert_int_equal(r.allocations, 4);
    assert_int_equal(r.allocated_bytes, 48 * 3 + 1000);
    assert_int_equal(r.live_bytes, 48 * 3 + 1000);
    assert_int_equal(r.site_count, 2);
    const struct recorder_site *sampled = r.sites[0].stack_id == 7 ? &r.sites[0] : &r.sites[1];
    const struct recorder_site *rest = sampled == &r.sites[0] ? &r.sites[1] : &r.sites[0];
    assert_true(recorder_site_shown(sampled));
    assert_false(recorder_site_shown(rest));
    assert_int_equal(sampled->allocations, llround(w48 + w1000));
    assert_int_equal(sampled->allocated_bytes, llround(48 * w48 + 1000 * w1000));
    assert_int_equal(sampled->live_bytes, llround(48 * w48 + 1000 * w1000));
    recorder_snapshot(&r, TRACE_SNAP_EXIT, 5);
    assert_int_equal(r.snapshots[0].header.count, 1);
    assert_int_equal(r.snapshots[0].entries[0].stack_id, 7);
    assert_int_equal(r.snapshots[0].header.live_bytes, 48 * 3 + 1000);
    recorder_free_block(&r, 6, 0x1000);
    recorder_free_block(&r, 7, 0x2000);
    assert_int_equal(sampled->frees, llround(w48));
    assert_int_equal(sampled->live_bytes, llround(1000 * w1000));
    recorder_free_block(&r, 8, 0x4000);
    assert_int_equal(sampled->live_bytes, 0);
    assert_int_equal(sampled->live_blocks, 0);
    assert_int_equal(r.live_bytes, 48);
    assert_int_equal(r.frees, 3);
    recorder_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(in_order),
        cmocka_unit_test(held_block_cancels_a_later_free_from_any_ring),
        cmocka_unit_test(held_block_taken_at_a_stop_cancels_nothing),
        cmocka_unit_test(held_block_kept_by_a_failed_realloc_is_live_once),
        cmocka_unit_test(held_block_after_a_free_is_live_and_in_no_case),
        cmocka_unit_test(free_stamped_just_before_its_allocation_cancels_it),
        cmocka_unit_test(held_pairs_and_bytes_count),
        cmocka_unit_test(held_free_settles_a_block_taken_or_not),
        cmocka_unit_test(fork_child_inherits_held_blocks),
        cmocka_unit_test(free_read_before_its_allocation),
        cmocka_unit_test(old_free_does_not_cancel_a_later_allocation),
        cmocka_unit_test(same_ring_allocation_does_not_cancel_a_free),
        cmocka_unit_test(two_frees_at_one_address_wait_for_their_allocations),
        cmocka_unit_test(same_ring_free_is_skipped_for_a_later_one),
        cmocka_unit_test(waiting_frees_at_one_address_are_bounded),
        cmocka_unit_test(reuse_read_before_the_free),
        cmocka_unit_test(iteration_snapshots_are_thinned_evenly),
        cmocka_unit_test(snapshots_hold_what_changed),
        cmocka_unit_test(thinned_deltas_are_exact),
        cmocka_unit_test(fork_child_starts_its_own_deltas),
        cmocka_unit_test(open_case_live_blocks),
        cmocka_unit_test(sample_weight_is_the_inverse_probability),
        cmocka_unit_test(sampled_sites_are_scaled_and_totals_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

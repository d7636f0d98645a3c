/* The tracer's per-image accounting (tracer/recorder.h, live_table.h):
 * events of several threads arriving out of order, as the ring consumer can
 * deliver them, still give exact figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>

#include "../../tracer/recorder.h"

static const uint64_t frames[2] = {0x401000, 0x401100};

static uint32_t lookup(void *context, uint32_t stack_id, const uint64_t **out)
{
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
    recorder_free_block(&r, 20, 0x3000);         /* A: free, stamped 20 */
    assert_int_equal(r.unmatched_frees, 1);
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
        cmocka_unit_test(free_read_before_its_allocation),
        cmocka_unit_test(old_free_does_not_cancel_a_later_allocation),
        cmocka_unit_test(reuse_read_before_the_free),
        cmocka_unit_test(iteration_snapshots_are_thinned_evenly),
        cmocka_unit_test(sample_weight_is_the_inverse_probability),
        cmocka_unit_test(sampled_sites_are_scaled_and_totals_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

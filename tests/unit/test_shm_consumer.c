/*
 * test_shm_consumer.c - tracer/shm_consumer.c draining a region that a
 * producer (preload/ring_writer.h) fills in this process: the drain floor
 * that places a repeated stamp (the shim's event_stamp, while a process has
 * one recording thread) no earlier than the tracer's previous drain, and
 * the producer count the shim decides that by, and the slots' high-water
 * mark that bounds the look for new rings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <cmocka.h>

#include "../../preload/ring_writer.h"
#include "../../preload/shm_region.h"
#include "../../preload/stack_table.h"
#include "../../tracer/recorder.h"
#include "../../tracer/shm_consumer.h"
#include "test_region.h"

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec pause = {0, ms * 1000000L};
    nanosleep(&pause, NULL);
}

static void write_alloc(struct ring_producer *producer, uint64_t stamp, uint16_t flags, uint64_t address,
                        uint64_t size)
{
    struct shm_event event = {.time_ns = stamp, .addr = address, .size = size, .stack_id = SHM_STACK_NONE,
                              .kind = SHM_EV_ALLOC, .flags = flags};
    assert_true(ring_write(producer, &event, getpid()));
}

static void write_free(struct ring_producer *producer, uint64_t stamp, uint64_t address)
{
    struct shm_event event = {.time_ns = stamp, .addr = address, .stack_id = SHM_STACK_NONE, .kind = SHM_EV_FREE};
    assert_true(ring_write(producer, &event, getpid()));
}

static void consumer_on(struct shm_consumer *consumer, void *base)
{
    shm_consumer_init(consumer);
    consumer->base = base;
    consumer->size = SHM_TOTAL_SIZE;
}

static void consumer_off(struct shm_consumer *consumer)
{
    consumer->base = NULL; /* not the consumer's mapping */
    shm_consumer_detach(consumer);
}

/* What no shim writes (issue 19: one forged allocation with stack id
 * 0xfffffff0 made the tracer grow and zero a map up to that id, 16.8 GB):
 * skipped and counted; the map stays within the stack table's size. */
static void test_forged_events_skipped(void **state)
{
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 200));
    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    struct recorder recorder;
    recorder_init(&recorder, 0);
    struct shm_event forged = {.time_ns = monotonic_ns(), .addr = 0x10000, .size = 64, .stack_id = 0xfffffff0u,
                               .kind = SHM_EV_ALLOC};
    assert_true(ring_write(&producer, &forged, getpid()));
    forged.stack_id = SHM_STACK_NONE;
    forged.kind = 77; /* no such kind */
    assert_true(ring_write(&producer, &forged, getpid()));
    write_alloc(&producer, monotonic_ns(), 0, 0x20000, 100);
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 3);
    assert_int_equal(consumer.invalid_events, 2);
    assert_int_equal(recorder.allocations, 1);
    assert_int_equal(recorder.live_bytes, 100);
    assert_true(recorder.site_by_stack_size <= SHM_STACK_TABLE_ENTRIES);
    recorder_free(&recorder);
    consumer_off(&consumer);
}

/* A stack stored as its inner frames and another stack's outer ones
 * (preload/stack_table.h) reaches the recorder whole. */
static void test_shared_tail_read_whole(void **state)
{
    void *base = *state;
    struct stack_tail tail = {0, 0};
    uint64_t first[4] = {0x401010, 0x402020, 0x403030, 0x404040};
    uint64_t second[3] = {0x405050, 0x403030, 0x404040};
    uint32_t first_id = stack_table_intern(base, stack_hash(first, 4), first, 4, &tail); /* whole: the tail */
    stack_table_intern(base, stack_hash(second, 3), second, 3, &tail);
    uint64_t third[5] = {0x406060, 0x407070, 0x402020, 0x403030, 0x404040};
    uint32_t third_id = stack_table_intern(base, stack_hash(third, 5), third, 5, &tail);
    assert_int_equal(shm_stack_table(base)[third_id].tail_count, 3);
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 300));
    struct shm_event event = {.time_ns = monotonic_ns(), .addr = 0x10000, .size = 16, .stack_id = third_id,
                              .kind = SHM_EV_ALLOC};
    assert_true(ring_write(&producer, &event, getpid()));
    event.addr = 0x20000;
    event.stack_id = first_id;
    assert_true(ring_write(&producer, &event, getpid()));
    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    struct recorder recorder;
    recorder_init(&recorder, 0);
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 2);
    assert_int_equal(recorder.site_count, 2);
    assert_int_equal(recorder.sites[0].depth, 5);
    for (uint32_t f = 0; f < 5; f++)
        assert_int_equal(recorder_site_frame(&recorder.sites[0], f), third[f]);
    assert_int_equal(recorder.sites[0].tail_count, 3); /* the region's span, not a copy */
    assert_true(recorder.sites[0].tail == shm_frame_pool(base) + shm_stack_table(base)[third_id].tail_offset);
    assert_int_equal(recorder.sites[1].depth, 4);
    for (uint32_t f = 0; f < 4; f++)
        assert_int_equal(recorder_site_frame(&recorder.sites[1], f), first[f]);
    recorder_free(&recorder);
    consumer_off(&consumer);
}

/* The drain looks for rings below the slots' high-water mark only: a slot
 * never claimed is a page the tracer must not touch (in the memfd, a read
 * allocates it). Those slots are made unreadable here. */
static void test_slots_above_high_water_untouched(void **state)
{
    void *base = *state;
    const struct shm_header *header = base;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 400));
    uint32_t index = (uint32_t)(((char *)producer.slot - (char *)shm_slot(base, 0)) / SHM_SLOT_SIZE);
    assert_true(header->slots_high_water >= index + 1);
    uint32_t high_water = header->slots_high_water;
    assert_true(high_water < SHM_MAX_THREADS);
    /* Slots are not page-aligned: from the page of the control lines of
     * the slot after the mark (slot high_water's own share a page with the
     * ring of the one before it) to the last page before the stack index. */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    char *first_unclaimed = (char *)((uintptr_t)shm_slot(base, high_water + 1) & ~(page - 1));
    char *end = (char *)((uintptr_t)shm_slot(base, SHM_MAX_THREADS) & ~(page - 1));
    size_t unclaimed = (size_t)(end - first_unclaimed);
    assert_int_equal(mprotect(first_unclaimed, unclaimed, PROT_NONE), 0);

    write_alloc(&producer, monotonic_ns(), 0, 0x30000, 48);
    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    struct recorder recorder;
    recorder_init(&recorder, 0);
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);
    assert_int_equal(recorder.live_bytes, 48);
    recorder_free(&recorder);
    consumer_off(&consumer);
    assert_int_equal(mprotect(first_unclaimed, unclaimed, PROT_READ | PROT_WRITE), 0);
}

/* The mark stays at the most threads an image had at once: threads that
 * come and go reuse the lowest slot the tracer gave back, and a fork
 * child's new region starts at slot 0 whatever its parent had claimed
 * (the slot search used to go on from where the last one ended). */
static void test_high_water_stays_at_most_threads_at_once(void **state)
{
    void *parent = *state, *child;
    const struct shm_header *header = parent;
    struct shm_consumer consumer;
    consumer_on(&consumer, parent);
    struct recorder recorder;
    recorder_init(&recorder, 0);
    for (int i = 0; i < 300; i++) { /* a thread starts, allocates, ends; the tracer drains */
        struct ring_producer producer = {0};
        assert_true(ring_claim_slot(parent, &producer, (uint32_t)(500 + i)));
        write_alloc(&producer, monotonic_ns(), 0, 0x40000 + 0x100 * (uint64_t)i, 16);
        ring_retire_slot(parent, &producer);
        shm_consumer_drain(&consumer, &recorder, 1);
    }
    assert_int_equal(recorder.allocations, 300);
    assert_int_equal(header->slots_high_water, 1);
    recorder_free(&recorder);
    consumer_off(&consumer);

    struct ring_producer held[3] = {{0}};
    for (int i = 0; i < 3; i++) /* threads still running in the parent at the fork */
        assert_true(ring_claim_slot(parent, &held[i], (uint32_t)(900 + i)));
    assert_int_equal(header->slots_high_water, 3);
    assert_int_equal(setup_region(&child), 0);
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(child, &producer, 901));
    assert_int_equal(((const struct shm_header *)child)->slots_high_water, 1);
    teardown_region(&child);
}

static void test_producers_counted(void **state)
{
    void *base = *state;
    const struct shm_header *header = base;
    struct ring_producer first = {0}, second = {0};
    assert_int_equal(header->producers, 0);
    assert_true(ring_claim_slot(base, &first, 100));
    assert_int_equal(header->producers, 1);
    assert_true(ring_claim_slot(base, &second, 101));
    assert_int_equal(header->producers, 2);
    ring_retire_slot(base, &second);
    assert_int_equal(header->producers, 1);
    ring_retire_slot(base, &second); /* already retired: no change */
    assert_int_equal(header->producers, 1);
    ring_retire_slot(base, &first);
    assert_int_equal(header->producers, 0);
}

/* An event found by a drain cannot have happened before the previous
 * drain began: a stamp repeated from earlier is raised to that drain. */
static void test_repeated_stamp_not_before_previous_drain(void **state)
{
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 200));
    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    struct recorder recorder;
    recorder_init(&recorder, 0);

    uint64_t first_stamp = monotonic_ns();
    write_alloc(&producer, first_stamp, 0, 0x10000, 100);
    sleep_ms(20);
    uint64_t before_drain = monotonic_ns();
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);
    assert_int_equal(recorder.peak_time_ns, first_stamp); /* an exact stamp is kept */

    sleep_ms(20);
    write_alloc(&producer, first_stamp, SHM_EVENT_STAMP_REPEATED, 0x20000, 100); /* repeated, 40 ms late */
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);
    assert_true(recorder.peak_time_ns >= before_drain);
    assert_true(recorder.peak_time_ns <= monotonic_ns());
    assert_int_equal(recorder.live_blocks, 2);

    /* An exact stamp published late keeps its time: the pending frees of
     * the recorder depend on it. */
    sleep_ms(5);
    write_alloc(&producer, first_stamp + 1, 0, 0x30000, 100);
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);
    assert_int_equal(recorder.peak_time_ns, first_stamp + 1);

    uint64_t later = monotonic_ns();
    write_alloc(&producer, later, 0, 0x40000, 100); /* exact again */
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);
    assert_int_equal(recorder.peak_time_ns, later);
    recorder_free(&recorder);
    consumer_off(&consumer);
}

/* A drain raises a repeated stamp only to the time it last looked at that
 * ring. Two threads start while the process records (slots 1 and 2): the
 * first allocates with a repeated stamp from before, the second frees that
 * block with an exact stamp. The tracer had not looked at either ring in
 * the drain before; a global floor from that drain placed the allocation
 * after the free, which then freed nothing and left the block live
 * (cxx_threads' std::thread states, under load). */
static void test_repeated_stamp_floor_is_the_rings_own(void **state)
{
    void *base = *state;
    struct ring_producer first = {0}, allocating = {0}, freeing = {0};
    assert_true(ring_claim_slot(base, &first, 200));
    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    struct recorder recorder;
    recorder_init(&recorder, 0);

    uint64_t old_stamp = monotonic_ns();
    write_alloc(&first, old_stamp, 0, 0x10000, 100);
    sleep_ms(2);
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);

    assert_true(ring_claim_slot(base, &allocating, 201));
    write_alloc(&allocating, old_stamp, SHM_EVENT_STAMP_REPEATED, 0x20000, 24);
    sleep_ms(1);
    assert_true(ring_claim_slot(base, &freeing, 202));
    write_free(&freeing, monotonic_ns(), 0x20000);
    sleep_ms(1);
    shm_consumer_drain(&consumer, &recorder, 0);
    shm_consumer_drain(&consumer, &recorder, 1);
    assert_int_equal(recorder.allocations, 2);
    assert_int_equal(recorder.frees, 1);
    assert_int_equal(recorder.unmatched_frees, 0);
    assert_int_equal(recorder.live_blocks, 1);
    recorder_free(&recorder);
    consumer_off(&consumer);
}

/* Two threads' rings, drained together, are applied in stamp order: the
 * peak (the one figure that depends on the order) is that of the
 * interleaving, not of either ring taken whole. Ring A's first three
 * allocations form a run before ring B's head; ring B's two allocations
 * come between ring A's last allocation and its frees. */
static void test_rings_merged_by_stamp(void **state)
{
    void *base = *state;
    struct ring_producer a = {0}, b = {0};
    assert_true(ring_claim_slot(base, &a, 300));
    assert_true(ring_claim_slot(base, &b, 301));
    for (uint64_t i = 0; i < 3; i++)
        write_alloc(&a, 10 + i, 0, 0x1000 + 0x100 * i, 100); /* t 10 11 12 */
    write_alloc(&a, 30, 0, 0x1300, 100);                      /* t 30 */
    for (uint64_t i = 0; i < 4; i++)
        write_free(&a, 40 + i, 0x1000 + 0x100 * i);           /* t 40..43 */
    write_alloc(&b, 20, 0, 0x2000, 1000);                     /* t 20 */
    write_alloc(&b, 35, 0, 0x2100, 1000);                     /* t 35: peak 2,400 B */
    write_free(&b, 50, 0x2000);
    write_free(&b, 51, 0x2100);

    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    struct recorder recorder;
    recorder_init(&recorder, 0);
    assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 12);
    assert_int_equal(recorder.peak_bytes, 2400);
    assert_int_equal(recorder.peak_blocks, 6);
    assert_int_equal(recorder.peak_time_ns, 35);
    assert_int_equal(recorder.live_blocks, 0);
    assert_int_equal(recorder.unmatched_frees, 0);
    recorder_free(&recorder);
    consumer_off(&consumer);
}

#if defined(__x86_64__)
/* With the TSC as the region's clock, stamps become CLOCK_MONOTONIC
 * nanoseconds: an event stamped between two clock readings lands between
 * them (the conversion is calibrated at every drain). */
static void test_tsc_stamps_converted(void **state)
{
    void *base = *state;
    ((struct shm_header *)base)->clock_source = SHM_CLOCK_TSC;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 400));
    struct shm_consumer consumer;
    consumer_on(&consumer, base);
    consumer.base_ns = monotonic_ns();
    consumer.base_ticks = __rdtsc();
    struct recorder recorder;
    recorder_init(&recorder, 0);
    for (uint64_t i = 0; i < 3; i++) {
        sleep_ms(2);
        uint64_t before = monotonic_ns();
        write_alloc(&producer, __rdtsc(), 0, 0x10000 + 0x100 * i, 100);
        uint64_t after = monotonic_ns();
        sleep_ms(2);
        assert_int_equal(shm_consumer_drain(&consumer, &recorder, 1), 1);
        /* a microsecond of slack for the calibration's rounding */
        assert_true(recorder.peak_time_ns + 1000 >= before);
        assert_true(recorder.peak_time_ns <= after + 1000);
    }
    recorder_free(&recorder);
    consumer_off(&consumer);
}
#endif

/* Holding's thresholds: 1 M / 0.5 M events a second while as many threads
 * ran as there are processors, 3 M / 1.5 M otherwise. */
static void test_hold_crowded_from_one_million(void **state)
{
    (void)state;
    int uncrowded = 0;
    assert_int_equal(shm_hold_next(1600000, 2, 2, 0, &uncrowded), 1);
    assert_int_equal(shm_hold_next(800000, 2, 2, 1, &uncrowded), 1);  /* within the band: stays */
    assert_int_equal(shm_hold_next(400000, 2, 2, 1, &uncrowded), 0);
    assert_int_equal(shm_hold_next(1600000, 1, 2, 0, &uncrowded), 0); /* one thread ran: not crowded */
    assert_int_equal(shm_hold_next(1600000, 8, 0, 0, &uncrowded), 0); /* processors unknown */
}

/* One crowded window (the start's) must not keep holding on in the band
 * between the uncrowded rates (the second review of round twenty-two:
 * one worker at 1.6 M a second held for the whole run). */
static void test_hold_crowded_window_does_not_stick(void **state)
{
    (void)state;
    int uncrowded = 0;
    assert_int_equal(shm_hold_next(2100000, 2, 2, 0, &uncrowded), 1);
    assert_int_equal(uncrowded, 0);
    assert_int_equal(shm_hold_next(2400000, 1, 2, 1, &uncrowded), 0);
    assert_int_equal(shm_hold_next(1600000, 1, 2, 0, &uncrowded), 0);
}

/* Holding that an uncrowded window over 3 M started goes on down to 1.5 M,
 * whether later windows are crowded or not. */
static void test_hold_uncrowded_band_keeps_its_own(void **state)
{
    (void)state;
    int uncrowded = 0;
    assert_int_equal(shm_hold_next(4000000, 1, 8, 0, &uncrowded), 1);
    assert_int_equal(uncrowded, 1);
    assert_int_equal(shm_hold_next(2000000, 1, 8, 1, &uncrowded), 1);
    assert_int_equal(shm_hold_next(2000000, 8, 8, 1, &uncrowded), 1);
    assert_int_equal(shm_hold_next(2000000, 1, 8, 1, &uncrowded), 1);
    assert_int_equal(shm_hold_next(1000000, 1, 8, 1, &uncrowded), 0);
    assert_int_equal(uncrowded, 0);
    /* crowded at 4 M counts as over the uncrowded rate too */
    assert_int_equal(shm_hold_next(4000000, 8, 8, 0, &uncrowded), 1);
    assert_int_equal(shm_hold_next(2000000, 1, 8, 1, &uncrowded), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_producers_counted, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_shared_tail_read_whole, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_forged_events_skipped, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_slots_above_high_water_untouched, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_high_water_stays_at_most_threads_at_once, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_repeated_stamp_not_before_previous_drain, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_repeated_stamp_floor_is_the_rings_own, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_rings_merged_by_stamp, setup_region, teardown_region),
        cmocka_unit_test(test_hold_crowded_from_one_million),
        cmocka_unit_test(test_hold_crowded_window_does_not_stick),
        cmocka_unit_test(test_hold_uncrowded_band_keeps_its_own),
#if defined(__x86_64__)
        cmocka_unit_test_setup_teardown(test_tsc_stamps_converted, setup_region, teardown_region),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

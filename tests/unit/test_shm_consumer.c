/*
 * test_shm_consumer.c - tracer/shm_consumer.c draining a region that a
 * producer (preload/ring_writer.h) fills in this process: the drain floor
 * that places a repeated stamp (the shim's event_stamp, while a process has
 * one recording thread) no earlier than the tracer's previous drain, and
 * the producer count the shim decides that by.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../preload/ring_writer.h"
#include "../../preload/shm_region.h"
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
    shm_consumer_init(&consumer);
    consumer.base = base;
    consumer.size = SHM_TOTAL_SIZE;
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
    consumer.base = NULL; /* not the consumer's mapping */
    shm_consumer_detach(&consumer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_producers_counted, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_repeated_stamp_not_before_previous_drain, setup_region, teardown_region),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

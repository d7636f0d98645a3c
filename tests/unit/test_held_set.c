/*
 * Unit tests for preload/held_set.[ch]: a thread's set of unsampled blocks.
 * Inserts, takes, pushing out of a full bucket, a stale copy of an
 * address, draining at a thread's end; and the protocol with the tracer,
 * which takes the set while the thread is stopped at any instruction: a
 * signal handler stands in for it here (it runs between two instructions
 * of the interrupted code, as a ptrace stop does), and every block must
 * end up counted exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../preload/held_set.h"

#define BASE 0x10000000ull

/* The clock of stamps: counts its reads (an insert that pushes nothing
 * out reads none: a TSC read for every held block cost 12.6 ns). */
static uint64_t clock_reads;

static uint64_t test_clock(void)
{
    return 1000 + ++clock_reads;
}

/* n distinct block addresses that land in the same bucket as the first. */
static void same_bucket_addresses(struct held_set *set, uint64_t *addresses, int n)
{
    struct shm_held_bucket *wanted = held_bucket(set, BASE);
    int found = 0;
    for (uint64_t a = BASE; found < n; a += 16)
        if (held_bucket(set, a) == wanted)
            addresses[found++] = a;
}

static void insert_then_take(void **state)
{
    (void)state;
    struct held_set set = {0};
    uint32_t epoch = 0;
    uint64_t size = 0;
    struct held_block out;
    assert_true(held_set_create(&set));
    assert_int_equal(held_set_take(&set, BASE, &size, &epoch), HELD_NOT);
    uint64_t reads = clock_reads;
    held_set_insert(&set, BASE, 48, test_clock, &out);
    assert_int_equal(out.address, 0);
    assert_int_equal(clock_reads, reads);
    assert_int_equal(held_set_take(&set, BASE, &size, &epoch), HELD_PAIR);
    assert_int_equal(size, 48);
    assert_int_equal(held_set_take(&set, BASE, &size, &epoch), HELD_NOT);
    assert_int_equal(set.busy, 0);
    held_set_destroy(&set);
    assert_null(set.buckets);
}

/* A full bucket pushes a block out, with its size, stamped as it goes,
 * for the caller to send; the rest stay. */
static void full_bucket_pushes_one_out(void **state)
{
    (void)state;
    struct held_set set = {0};
    uint32_t epoch = 0;
    uint64_t size, addresses[SHM_HELD_WAYS + 1];
    struct held_block out;
    assert_true(held_set_create(&set));
    same_bucket_addresses(&set, addresses, SHM_HELD_WAYS + 1);
    for (unsigned i = 0; i < SHM_HELD_WAYS; i++) {
        held_set_insert(&set, addresses[i], 16 + i, test_clock, &out);
        assert_int_equal(out.address, 0);
    }
    uint64_t reads = clock_reads;
    held_set_insert(&set, addresses[SHM_HELD_WAYS], 99, test_clock, &out);
    assert_int_equal(clock_reads, reads + 1);
    assert_int_not_equal(out.address, 0);
    unsigned pushed = SHM_HELD_WAYS;
    for (unsigned i = 0; i < SHM_HELD_WAYS; i++)
        if (addresses[i] == out.address)
            pushed = i;
    assert_true(pushed < SHM_HELD_WAYS);
    assert_int_equal(out.size, 16 + pushed);
    assert_int_equal(out.stamp, 1000 + clock_reads);
    for (unsigned i = 0; i <= SHM_HELD_WAYS; i++)
        assert_int_equal(held_set_take(&set, addresses[i], &size, &epoch), i == pushed ? HELD_NOT : HELD_PAIR);
    held_set_destroy(&set);
}

/* Another thread freed a block this one held (its free crossed): when the
 * address comes back, the stale copy goes out first, stamped older than
 * anything, to cancel that free. */
static void stale_copy_goes_out_first(void **state)
{
    (void)state;
    struct held_set set = {0};
    uint32_t epoch = 0;
    uint64_t size;
    struct held_block out;
    assert_true(held_set_create(&set));
    held_set_insert(&set, BASE, 32, test_clock, &out);
    held_set_insert(&set, BASE, 64, test_clock, &out);
    assert_int_equal(out.address, BASE);
    assert_int_equal(out.size, 32);
    assert_int_equal(out.stamp, 0);
    assert_int_equal(held_set_take(&set, BASE, &size, &epoch), HELD_PAIR);
    assert_int_equal(size, 64);
    held_set_destroy(&set);
}

static void thread_end_drains_every_block(void **state)
{
    (void)state;
    struct held_set set = {0};
    struct held_block out, block;
    uint64_t sum = 0, expected = 0;
    assert_true(held_set_create(&set));
    for (uint64_t i = 0; i < 1000; i++) {
        held_set_insert(&set, BASE + i * 4096, i + 1, test_clock, &out);
        expected += i + 1;
        sum += out.address ? out.size : 0; /* pushed out: sent already */
    }
    uint32_t cursor = 0;
    int n = 0;
    while (held_set_take_next(&set, &cursor, 77, &block)) {
        sum += block.size;
        assert_int_equal(block.stamp, 77);
        n++;
    }
    assert_true(n > 900);
    assert_int_equal(sum, expected);
    assert_false(held_set_take_next(&set, &cursor, 77, &block));
    held_set_destroy(&set);
}

/* ---- the tracer's take, at any instruction -------------------------------- */

enum fate { UNUSED, HELD, TAKEN, PAIR, PUSHED, CROSSED_AFTER_TAKEN, LEFT };

#define LIVE 3000
#define OPS 400000
/* On a loaded machine the signaller may barely run during OPS operations:
 * the loop goes on, up to this many, until the set was taken often. */
#define MAX_OPS (16 * OPS)
#define MIN_TAKES 10

static struct held_set protocol_set;
static uint32_t protocol_epoch;
static uint8_t *fates;
static volatile sig_atomic_t handler_errors, handler_runs;
static volatile int signaller_stop;

static uint64_t id_of(uint64_t address)
{
    return (address - BASE) / 16;
}

/* What the tracer does with the thread stopped: bump the epoch, take every
 * block, clear the set. */
static void tracer_take(int signal)
{
    (void)signal;
    protocol_epoch++;
    for (uint32_t b = 0; b < SHM_HELD_BUCKETS; b++)
        for (unsigned way = 0; way < SHM_HELD_WAYS; way++) {
            uint64_t address = protocol_set.buckets[b].addr[way];
            if (!address)
                continue;
            if (fates[id_of(address)] != HELD)
                handler_errors++;
            fates[id_of(address)] = TAKEN;
            protocol_set.buckets[b].addr[way] = 0;
        }
    handler_runs++;
}

static void *signaller(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    struct timespec pause = {0, 20000};
    while (!signaller_stop) {
        pthread_kill(target, SIGUSR1);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static int settle_free(uint64_t address)
{
    uint64_t size = 0;
    uint8_t *fate = &fates[id_of(address)];
    switch (held_set_take(&protocol_set, address, &size, &protocol_epoch)) {
    case HELD_PAIR:
        if (*fate != HELD)
            return 1; /* counted twice: the tracer took it too */
        *fate = PAIR;
        return 0;
    case HELD_UNSETTLED: /* crosses: the tracer frees it if it took it, else counts a pair */
        *fate = *fate == TAKEN ? CROSSED_AFTER_TAKEN : PAIR;
        return 0;
    case HELD_NOT: /* crosses as an ordinary free: the tracer must have it */
        if (*fate != TAKEN && *fate != PUSHED)
            return 1;
        *fate = CROSSED_AFTER_TAKEN;
        return 0;
    }
    return 1;
}

static void every_block_counted_once_whatever_the_stop(void **state)
{
    (void)state;
    fates = calloc(MAX_OPS + LIVE, 1);
    assert_non_null(fates);
    assert_true(held_set_create(&protocol_set));
    struct sigaction action = {.sa_handler = tracer_take, .sa_flags = SA_RESTART};
    sigemptyset(&action.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &action, NULL), 0);
    pthread_t self = pthread_self(), thread;
    assert_int_equal(pthread_create(&thread, NULL, signaller, &self), 0);

    uint64_t live[LIVE] = {0}, next = 0, rng = 88172645463325252ull;
    int errors = 0;
    for (int op = 0; op < OPS || (handler_runs <= MIN_TAKES && op < MAX_OPS); op++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        unsigned slot = (unsigned)(rng % LIVE);
        if (live[slot])
            errors += settle_free(live[slot]);
        uint64_t address = BASE + 16 * next++;
        struct held_block out;
        fates[id_of(address)] = HELD; /* before the insert: the handler may take it at once */
        protocol_set.busy++;
        held_set_insert(&protocol_set, address, 16, test_clock, &out);
        protocol_set.busy--;
        if (out.address) {
            errors += fates[id_of(out.address)] != HELD;
            fates[id_of(out.address)] = PUSHED;
        }
        live[slot] = address;
    }
    signaller_stop = 1;
    pthread_join(thread, NULL);
    struct held_block block;
    uint32_t cursor = 0;
    while (held_set_take_next(&protocol_set, &cursor, 1, &block)) {
        errors += fates[id_of(block.address)] != HELD;
        fates[id_of(block.address)] = LEFT;
    }
    for (uint64_t id = 0; id < next; id++)
        errors += fates[id] == HELD; /* in no set and never sent */
    assert_int_equal(errors, 0);
    assert_int_equal(handler_errors, 0);
    assert_true(handler_runs > MIN_TAKES);
    held_set_destroy(&protocol_set);
    free(fates);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(insert_then_take),
        cmocka_unit_test(full_bucket_pushes_one_out),
        cmocka_unit_test(stale_copy_goes_out_first),
        cmocka_unit_test(thread_end_drains_every_block),
        cmocka_unit_test(every_block_counted_once_whatever_the_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

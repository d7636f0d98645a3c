/*
 * Unit tests for preload/stack_table.c: insert, dedupe, dense ids,
 * collisions, full index, table and pool, concurrent inserts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../preload/shm_region.h"
#include "../../preload/populate.h"
#include "../../preload/stack_table.h"
#include "test_region.h"

/* The frames of a stored stack, its inner ones and its tail put together
 * (valid until the next call). */
static const uint64_t *frames_of(void *base, uint32_t id, uint32_t *depth)
{
    static uint64_t joined[SHM_MAX_FRAMES_LIMIT];
    struct shm_stack_entry *entry = &shm_stack_table(base)[id];
    assert_int_equal(entry->state, SHM_STACK_READY);
    *depth = entry->depth;
    assert_true(entry->tail_count <= entry->depth);
    uint32_t own = entry->depth - entry->tail_count;
    memcpy(joined, &shm_frame_pool(base)[entry->frame_offset], own * sizeof *joined);
    memcpy(joined + own, &shm_frame_pool(base)[entry->tail_offset], entry->tail_count * sizeof *joined);
    return joined;
}

static void test_hash_is_nonzero_and_order_sensitive(void **state)
{
    (void)state;
    uint64_t ab[2] = {0x401000, 0x402000}, ba[2] = {0x402000, 0x401000};
    assert_int_not_equal(stack_hash(ab, 2), 0);
    assert_int_not_equal(stack_hash(NULL, 0), 0);
    assert_int_not_equal(stack_hash(ab, 2), stack_hash(ba, 2));
    assert_int_not_equal(stack_hash(ab, 1), stack_hash(ab, 2));
}

static void test_insert_then_dedupe(void **state)
{
    void *base = *state;
    uint64_t stack_a[3] = {0x1111, 0x2222, 0x3333}, stack_b[2] = {0x4444, 0x5555};
    uint32_t id_a = stack_table_intern(base, stack_hash(stack_a, 3), stack_a, 3, NULL);
    uint32_t id_b = stack_table_intern(base, stack_hash(stack_b, 2), stack_b, 2, NULL);
    assert_int_not_equal(id_a, SHM_STACK_NONE);
    assert_int_not_equal(id_b, SHM_STACK_NONE);
    assert_int_not_equal(id_a, id_b);
    assert_int_equal(stack_table_intern(base, stack_hash(stack_a, 3), stack_a, 3, NULL), id_a);
    assert_int_equal(stack_table_intern(base, stack_hash(stack_b, 2), stack_b, 2, NULL), id_b);

    uint32_t depth;
    const uint64_t *stored = frames_of(base, id_a, &depth);
    assert_int_equal(depth, 3);
    assert_memory_equal(stored, stack_a, sizeof stack_a);
    struct shm_header *header = base;
    assert_int_equal(header->frame_pool_used, 5);
    assert_int_equal(header->stacks_dropped, 0);
}

static void test_empty_stack_is_a_stack(void **state)
{
    void *base = *state;
    uint32_t id = stack_table_intern(base, stack_hash(NULL, 0), NULL, 0, NULL);
    assert_int_not_equal(id, SHM_STACK_NONE);
    assert_int_equal(stack_table_intern(base, stack_hash(NULL, 0), NULL, 0, NULL), id);
}

static void test_hash_collision_keeps_probing(void **state)
{
    void *base = *state;
    /* same hash forced for two different stacks: both stored, each found */
    uint64_t stack_a[2] = {0xa1, 0xa2}, stack_b[2] = {0xb1, 0xb2}, stack_c[3] = {0xa1, 0xa2, 0xa3};
    const uint64_t shared_hash = 0x1234500000000ull; /* low bits 0: index slot 0 is a slot like any other */
    uint32_t id_a = stack_table_intern(base, shared_hash, stack_a, 2, NULL);
    uint32_t id_b = stack_table_intern(base, shared_hash, stack_b, 2, NULL);
    uint32_t id_c = stack_table_intern(base, shared_hash, stack_c, 3, NULL);
    assert_int_equal(id_a, 1);
    assert_int_equal(id_b, 2);
    assert_int_equal(id_c, 3);
    assert_int_equal(stack_table_intern(base, shared_hash, stack_b, 2, NULL), id_b);
    assert_int_equal(stack_table_intern(base, shared_hash, stack_c, 3, NULL), id_c);
    assert_int_equal(stack_table_intern(base, shared_hash, stack_a, 2, NULL), id_a);
}

/* A thread's stacks share their outer frames: one stored whole becomes
 * the tail; those after it with at least half their frames in common with
 * its outer end store only the rest; one with fewer is stored whole and
 * becomes the tail. Every one reads back as it was, and is found again
 * with or without a tail. */
static void test_outer_frames_stored_once(void **state)
{
    void *base = *state;
    struct shm_header *header = base;
    struct stack_tail tail = {0, 0};
    /* innermost first: inner calls, then the loop, run, main */
    uint64_t first[5] = {0x11, 0x12, 0x1003, 0x1002, 0x1001};
    uint64_t second[6] = {0x21, 0x22, 0x23, 0x1003, 0x1002, 0x1001}; /* 3 of 6 in common: shares them */
    uint64_t third[5] = {0x31, 0x32, 0x33, 0x9002, 0x1001};          /* 1 of 5: stored whole, the tail */
    uint64_t fourth[4] = {0x41, 0x33, 0x9002, 0x1001};               /* 3 of 4 with the new tail */
    uint64_t elsewhere[3] = {0x51, 0x52, 0x7001};                    /* none */
    uint64_t *stacks[] = {first, second, third, fourth, elsewhere};
    uint32_t depths[] = {5, 6, 5, 4, 3}, ids[5], pool_after[5], tail_counts[5];
    const uint32_t expected_pool[5] = {5, 8, 13, 14, 17}, expected_tails[5] = {0, 3, 0, 3, 0};
    for (int i = 0; i < 5; i++) {
        ids[i] = stack_table_intern(base, stack_hash(stacks[i], depths[i]), stacks[i], depths[i], &tail);
        assert_int_equal(ids[i], (uint32_t)i + 1);
        pool_after[i] = (uint32_t)header->frame_pool_used;
        tail_counts[i] = shm_stack_table(base)[ids[i]].tail_count;
    }
    assert_memory_equal(pool_after, expected_pool, sizeof expected_pool);
    assert_memory_equal(tail_counts, expected_tails, sizeof expected_tails);
    assert_int_equal(tail.offset, 14);
    assert_int_equal(tail.count, 3);
    for (int i = 0; i < 5; i++) {
        uint32_t depth;
        const uint64_t *stored = frames_of(base, ids[i], &depth);
        assert_int_equal(depth, depths[i]);
        assert_memory_equal(stored, stacks[i], depths[i] * sizeof(uint64_t));
        assert_int_equal(stack_table_intern(base, stack_hash(stacks[i], depths[i]), stacks[i], depths[i], NULL), ids[i]);
        assert_int_equal(stack_table_intern(base, stack_hash(stacks[i], depths[i]), stacks[i], depths[i], &tail),
                         ids[i]);
    }
    /* a stack that differs only in the shared part is another stack */
    uint64_t other_outer[6] = {0x21, 0x22, 0x23, 0x1003, 0x1002, 0x1009};
    assert_int_equal(stack_table_intern(base, stack_hash(second, 6), other_outer, 6, NULL), 6);
}

static void test_ids_are_dense_in_order_of_first_use(void **state)
{
    void *base = *state;
    uint64_t frames[1];
    for (uint32_t n = 0; n < 1000; n++) {
        frames[0] = 0x400000u + n;
        assert_int_equal(stack_table_intern(base, stack_hash(frames, 1), frames, 1, NULL), n + 1);
    }
    frames[0] = 0x400000u + 500;
    assert_int_equal(stack_table_intern(base, stack_hash(frames, 1), frames, 1, NULL), 501);
    struct shm_header *header = base;
    assert_int_equal(header->stack_entries_used, 1001);
}

/* The sequence every shim table probes (near_probe.h): its first run in
 * the near part, wrapping there; the second past it, wrapping back to its
 * start, never into the near part. */
static void test_near_probe_sequence(void **state)
{
    (void)state;
    const uint32_t near = 16, near_probes = 4, slots = 64;
    uint64_t hash = 0x0000003d0000000eull; /* near run from 14, far run from 61 % 48 = 13, i.e. slot 29 */
    const uint32_t expected[] = {14, 15, 0, 1, 29, 30};
    for (uint32_t probe = 0; probe < 6; probe++)
        assert_int_equal(near_probe_slot(hash, probe, near, near_probes, slots), expected[probe]);
    hash = 0x0000002f00000000ull; /* far run from 47: slots 63, then 16 */
    assert_int_equal(near_probe_slot(hash, near_probes, near, near_probes, slots), 63);
    assert_int_equal(near_probe_slot(hash, near_probes + 1, near, near_probes, slots), 16);
    for (uint64_t h = 1; h < 1u << 20; h = h * 3 + 0x9e3779b97f4a7c15ull % 977) {
        for (uint32_t probe = 0; probe < 40; probe++) {
            uint32_t slot = near_probe_slot(h, probe, near, near_probes, slots);
            assert_true(probe < near_probes ? slot < near : slot >= near && slot < slots);
        }
    }
}

static void test_probe_wraps_past_the_end(void **state)
{
    void *base = *state;
    uint64_t stack_a[1] = {1}, stack_b[1] = {2};
    uint64_t last = STACK_INDEX_NEAR_SLOTS - 1; /* the near part's last slot */
    assert_int_equal(stack_table_intern(base, last, stack_a, 1, NULL), 1);
    assert_int_equal(stack_table_intern(base, last, stack_b, 1, NULL), 2);
    assert_int_equal(shm_stack_index(base)[last], 1);
    assert_int_equal(shm_stack_index(base)[0], 2);
    assert_int_equal(stack_table_intern(base, last, stack_b, 1, NULL), 2);
}

/* Stacks of a small program stay in the index's near part: its pages are
 * the only ones touched (before near_probe.h, 5,000 stacks were spread over
 * 1,007 of the index's 1,024 pages). */
static void test_few_stacks_stay_in_the_near_part(void **state)
{
    void *base = *state;
    uint64_t frames[2];
    for (uint32_t n = 0; n < 5000; n++) {
        frames[0] = 0x400000u + n;
        frames[1] = 0x7f0000001000u + n * 16;
        assert_int_not_equal(stack_table_intern(base, stack_hash(frames, 2), frames, 2, NULL), SHM_STACK_NONE);
    }
    uint32_t beyond = 0;
    for (uint32_t i = STACK_INDEX_NEAR_SLOTS; i < SHM_STACK_INDEX_SLOTS; i++)
        beyond += shm_stack_index(base)[i] != SHM_STACK_NONE;
    assert_int_equal(beyond, 0);
}

/* A stack whose near slots are all taken goes further out, and is found
 * there again. */
static void test_full_near_run_goes_further_out(void **state)
{
    void *base = *state;
    uint32_t *index = shm_stack_index(base);
    uint64_t other[1] = {99};
    uint32_t other_id = stack_table_intern(base, 1, other, 1, NULL);
    uint64_t hash = 0x0005432100000100ull;
    for (uint32_t probe = 0; probe < STACK_INDEX_NEAR_PROBES; probe++)
        index[stack_index_slot(hash, probe)] = other_id;
    uint64_t stack[2] = {7, 8};
    uint32_t id = stack_table_intern(base, hash, stack, 2, NULL);
    assert_int_not_equal(id, SHM_STACK_NONE);
    uint32_t far = stack_index_slot(hash, STACK_INDEX_NEAR_PROBES);
    assert_int_equal(far, STACK_INDEX_NEAR_SLOTS + 0x54321u);
    assert_int_equal(index[far], id);
    assert_int_equal(stack_table_intern(base, hash, stack, 2, NULL), id);
}

/* With the near part full (a program with some 100,000 stacks), stacks
 * still go in further out: the run past the near part starts past it
 * too (a run through a full near part would drop every 16th of them). */
static void test_full_near_part_drops_nothing(void **state)
{
    void *base = *state;
    uint32_t *index = shm_stack_index(base);
    uint64_t other[1] = {99};
    uint32_t other_id = stack_table_intern(base, 1, other, 1, NULL);
    for (uint32_t i = 0; i < STACK_INDEX_NEAR_SLOTS; i++)
        index[i] = other_id;
    uint64_t frames[1];
    for (uint32_t n = 0; n < 2000; n++) {
        frames[0] = 0x400000u + n;
        uint64_t hash = stack_hash(frames, 1);
        uint32_t id = stack_table_intern(base, hash, frames, 1, NULL);
        assert_int_not_equal(id, SHM_STACK_NONE);
        assert_int_equal(stack_table_intern(base, hash, frames, 1, NULL), id);
    }
    struct shm_header *header = base;
    assert_int_equal(header->stacks_dropped, 0);
}

static void test_full_index_drops(void **state)
{
    void *base = *state;
    uint32_t *index = shm_stack_index(base);
    uint64_t other[1] = {99};
    uint32_t other_id = stack_table_intern(base, 1, other, 1, NULL);
    /* every slot the probe sequence of this hash could use holds that other stack */
    uint64_t hash = 0x0000500000000100ull;
    for (uint32_t probe = 0; probe < STACK_INDEX_NEAR_PROBES + STACK_TABLE_MAX_PROBES; probe++)
        index[stack_index_slot(hash, probe)] = other_id;
    uint64_t stack[2] = {7, 8};
    assert_int_equal(stack_table_intern(base, hash, stack, 2, NULL), SHM_STACK_NONE);
    struct shm_header *header = base;
    assert_int_equal(header->stacks_dropped, 1);
    /* a stack hashing elsewhere still goes in */
    assert_int_not_equal(stack_table_intern(base, 5000, stack, 2, NULL), SHM_STACK_NONE);
}

static void test_full_table_drops(void **state)
{
    void *base = *state;
    struct shm_header *header = base;
    header->stack_entries_used = SHM_STACK_TABLE_ENTRIES - 1;
    uint64_t last[1] = {1}, past[1] = {2};
    assert_int_equal(stack_table_intern(base, stack_hash(last, 1), last, 1, NULL), SHM_STACK_TABLE_ENTRIES - 1);
    assert_int_equal(stack_table_intern(base, stack_hash(past, 1), past, 1, NULL), SHM_STACK_NONE);
    assert_int_equal(header->stacks_dropped, 1);
    assert_int_equal(stack_table_intern(base, stack_hash(last, 1), last, 1, NULL), SHM_STACK_TABLE_ENTRIES - 1);
    /* no id past the table was taken: the check before the fetch-add held */
    assert_int_equal(header->stack_entries_used, SHM_STACK_TABLE_ENTRIES);
}

static void test_index_written_over_is_not_trusted(void **state)
{
    void *base = *state;
    uint64_t stack[2] = {7, 8};
    uint64_t hash = stack_hash(stack, 2);
    shm_stack_index(base)[stack_index_slot(hash, 0)] = 0xffffffffu; /* a program's stray write */
    uint32_t id = stack_table_intern(base, hash, stack, 2, NULL);
    assert_int_equal(id, 1);
    assert_int_equal(stack_table_intern(base, hash, stack, 2, NULL), 1);
}

/* A stray index value that names an entry another thread is filling with
 * the same stack (hash and frames written, not READY yet): that id is not
 * taken, it could reach the tracer before its entry is complete. */
static void test_entry_being_filled_is_not_taken(void **state)
{
    void *base = *state;
    struct shm_header *header = base;
    uint64_t stack[2] = {7, 8};
    uint64_t hash = stack_hash(stack, 2);
    header->stack_entries_used = 6; /* ids 1..5 taken, 5 being filled */
    struct shm_stack_entry *filling = &shm_stack_table(base)[5];
    filling->hash = hash;
    filling->depth = 2;
    filling->frame_offset = 0;
    memcpy(shm_frame_pool(base), stack, sizeof stack);
    header->frame_pool_used = 2;
    shm_stack_index(base)[stack_index_slot(hash, 0)] = 5;
    uint32_t id = stack_table_intern(base, hash, stack, 2, NULL);
    assert_int_equal(id, 6);
    filling->state = SHM_STACK_READY; /* complete now: found again, as either id is the stack */
    assert_int_equal(stack_table_intern(base, hash, stack, 2, NULL), 5);
}

static void test_full_pool_drops(void **state)
{
    void *base = *state;
    struct shm_header *header = base;
    header->frame_pool_used = SHM_FRAME_POOL_FRAMES - 2;
    uint64_t big[3] = {1, 2, 3}, small[2] = {4, 5};
    assert_int_equal(stack_table_intern(base, stack_hash(big, 3), big, 3, NULL), SHM_STACK_NONE);
    assert_int_equal(header->stacks_dropped, 1);
    uint32_t id = stack_table_intern(base, stack_hash(small, 2), small, 2, NULL);
    assert_int_not_equal(id, SHM_STACK_NONE);
    assert_int_equal(header->frame_pool_used, SHM_FRAME_POOL_FRAMES);
    assert_int_equal(stack_table_intern(base, stack_hash(big, 3), big, 3, NULL), SHM_STACK_NONE);
    assert_int_equal(stack_table_intern(base, stack_hash(small, 2), small, 2, NULL), id); /* still found */
}

#define CONCURRENT_THREADS 4
#define CONCURRENT_STACKS 5000

struct insert_job {
    void *base;
    uint32_t start;
    uint32_t ids[CONCURRENT_STACKS];
};

static void make_stack(uint32_t n, uint64_t *frames, uint32_t *depth)
{
    *depth = 1 + n % 11;
    for (uint32_t i = 0; i < *depth; i++)
        frames[i] = 0x400000u + n * 64u + i;
}

static void *insert_all(void *arg)
{
    struct insert_job *job = arg;
    for (uint32_t k = 0; k < CONCURRENT_STACKS; k++) {
        uint32_t n = (job->start + k * 7u) % CONCURRENT_STACKS; /* different orders per thread */
        uint64_t frames[16];
        uint32_t depth;
        make_stack(n, frames, &depth);
        /* a weak hash makes collisions and contended entries likely (its
         * high half varies too: it picks the run past the near part) */
        job->ids[n] = stack_table_intern(job->base, (n % 512) * 0x0001000100010001ull + 1, frames, depth, NULL);
    }
    return NULL;
}

/* Runs CONCURRENT_THREADS threads of worker over jobs, thread t starting
 * at t * step. */
static void run_inserters(void *base, struct insert_job *jobs, uint32_t step, void *(*worker)(void *))
{
    pthread_t threads[CONCURRENT_THREADS];
    for (int t = 0; t < CONCURRENT_THREADS; t++) {
        jobs[t].base = base;
        jobs[t].start = (uint32_t)t * step;
        assert_int_equal(pthread_create(&threads[t], NULL, worker, &jobs[t]), 0);
    }
    for (int t = 0; t < CONCURRENT_THREADS; t++)
        pthread_join(threads[t], NULL);
}

/* Every thread got the same id for each stack, and each reads back as
 * make builds it. Returns the frames of all the stacks. */
static uint64_t check_inserted(void *base, const struct insert_job *jobs,
                               void (*make)(uint32_t n, uint64_t *frames, uint32_t *depth))
{
    uint64_t total = 0;
    for (uint32_t n = 0; n < CONCURRENT_STACKS; n++) {
        uint32_t id = jobs[0].ids[n];
        assert_int_not_equal(id, SHM_STACK_NONE);
        for (int t = 1; t < CONCURRENT_THREADS; t++)
            assert_int_equal(jobs[t].ids[n], id);
        uint64_t frames[64];
        uint32_t depth, stored_depth;
        make(n, frames, &depth);
        const uint64_t *stored = frames_of(base, id, &stored_depth);
        assert_int_equal(stored_depth, depth);
        assert_memory_equal(stored, frames, depth * sizeof(uint64_t));
        total += depth;
    }
    return total;
}

static void test_concurrent_inserts_agree(void **state)
{
    void *base = *state;
    static struct insert_job jobs[CONCURRENT_THREADS];
    run_inserters(base, jobs, 1237u, insert_all);
    uint64_t expected_frames = check_inserted(base, jobs, make_stack);
    /* Each stack is in the index once. Two threads inserting the same new
     * stack at once both fill an entry and one is left unused, so entries
     * and frames may exceed the stacks by those races, never fall short. */
    uint32_t indexed = 0;
    for (uint32_t i = 0; i < SHM_STACK_INDEX_SLOTS; i++)
        indexed += shm_stack_index(base)[i] != SHM_STACK_NONE;
    assert_int_equal(indexed, CONCURRENT_STACKS);
    struct shm_header *header = base;
    assert_true(header->stack_entries_used - 1 >= CONCURRENT_STACKS);
    assert_true(header->frame_pool_used >= expected_frames);
    assert_int_equal(header->stacks_dropped, 0);
}

/* Stacks in groups that share 10-29 outer frames, with 1-7 inner ones of
 * their own. */
static void make_shared_stack(uint32_t n, uint64_t *frames, uint32_t *depth)
{
    uint32_t inner = 1 + n % 7, outer = 10 + (n / 97) % 20;
    *depth = inner + outer;
    for (uint32_t i = 0; i < inner; i++)
        frames[i] = 0x500000u + n * 16u + i;
    for (uint32_t i = 0; i < outer; i++)
        frames[inner + i] = 0x400000u + (n / 1000) * 64u + (outer - 1 - i);
}

static void *insert_all_with_tail(void *arg)
{
    struct insert_job *job = arg;
    struct stack_tail tail = {0, 0};
    for (uint32_t k = 0; k < CONCURRENT_STACKS; k++) {
        uint32_t n = (job->start + k) % CONCURRENT_STACKS; /* nearly one order: races on the same new stacks */
        uint64_t frames[64];
        uint32_t depth;
        make_shared_stack(n, frames, &depth);
        job->ids[n] = stack_table_intern(job->base, stack_hash(frames, depth), frames, depth, &tail);
    }
    return NULL;
}

/* Threads with tails of their own inserting the same new stacks at once
 * (a review's stress test): one id each, every stack read back whole,
 * and the pool holds far fewer frames than the stacks have. */
static void test_concurrent_inserts_with_tails_agree(void **state)
{
    void *base = *state;
    static struct insert_job jobs[CONCURRENT_THREADS];
    run_inserters(base, jobs, 3u, insert_all_with_tail);
    uint64_t frames_in_stacks = check_inserted(base, jobs, make_shared_stack);
    struct shm_header *header = base;
    assert_int_equal(header->stacks_dropped, 0);
    assert_true(header->frame_pool_used < frames_in_stacks / 2);
}

/* The frame pool fills in order, each 64 KiB from its second on populated
 * as the first stack enters it (populate.h): stacks of 100 distinct frames
 * reach the pool's second chunk (8,192 frames) at the 82nd. */
static void test_pool_populated_as_it_fills(void **state)
{
    if (sysconf(_SC_PAGESIZE) != 4096)
        skip(); /* the page-by-page checks below need pages smaller than a chunk */
    void *base = *state;
    const uint64_t *pool = shm_frame_pool(base);
    const uint32_t chunk = POPULATE_CHUNK_BYTES / sizeof(uint64_t);
    const struct shm_header *header = base;
    uint64_t frames[100];
    for (uint32_t n = 0; n < 100; n++) {
        for (uint32_t f = 0; f < 100; f++)
            frames[f] = 0x400000 + n * 1000 + f;
        uint32_t id = stack_table_intern(base, stack_hash(frames, 100), frames, 100, NULL);
        assert_int_equal(id, n + 1);
        uint32_t used = header->frame_pool_used;
        assert_true(page_resident(&pool[used - 1]));
        if (used <= chunk) {
            if (used + 1024 < chunk) /* the first chunk: page by page */
                assert_false(page_resident(&pool[used + 1024]));
            assert_false(page_resident(&pool[2 * chunk - 1]));
        } else if (!__atomic_load_n(&populate_unsupported, __ATOMIC_RELAXED)) {
            assert_true(page_resident(&pool[2 * chunk - 1])); /* the second, whole */
        }
    }
    assert_true(header->frame_pool_used > chunk);
}

/* The stack table too, from its second 64 KiB on: the entry of id 2,730
 * (bytes 65,520 to 65,543) is the first to reach into it, and populates it
 * before its own write faults the chunk's first page. */
static void test_table_populated_as_it_fills(void **state)
{
    if (sysconf(_SC_PAGESIZE) != 4096)
        skip(); /* the page-by-page checks below need pages smaller than a chunk */
    void *base = *state;
    const struct shm_stack_entry *table = shm_stack_table(base);
    const uint32_t straddler = POPULATE_CHUNK_BYTES / sizeof *table;
    const char *second = (const char *)table + POPULATE_CHUNK_BYTES;
    for (uint32_t n = 1; n < straddler; n++) {
        uint64_t frame = 0x400000 + n;
        assert_int_equal(stack_table_intern(base, stack_hash(&frame, 1), &frame, 1, NULL), n);
        if (n == 1) /* the first chunk: page by page */
            assert_false(page_resident((const char *)table + POPULATE_CHUNK_BYTES / 2));
    }
    assert_false(page_resident(second));
    assert_false(page_resident(second + POPULATE_CHUNK_BYTES - 1));
    uint64_t frame = 0x400000 + straddler;
    assert_int_equal(stack_table_intern(base, stack_hash(&frame, 1), &frame, 1, NULL), straddler);
    if (__atomic_load_n(&populate_unsupported, __ATOMIC_RELAXED))
        skip(); /* a kernel before 5.14: nothing populated, the faults come as they did */
    assert_true(page_resident(second + POPULATE_CHUNK_BYTES - 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_is_nonzero_and_order_sensitive),
        cmocka_unit_test_setup_teardown(test_insert_then_dedupe, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_pool_populated_as_it_fills, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_table_populated_as_it_fills, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_empty_stack_is_a_stack, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_hash_collision_keeps_probing, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_outer_frames_stored_once, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_ids_are_dense_in_order_of_first_use, setup_region, teardown_region),
        cmocka_unit_test(test_near_probe_sequence),
        cmocka_unit_test_setup_teardown(test_probe_wraps_past_the_end, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_few_stacks_stay_in_the_near_part, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_near_run_goes_further_out, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_near_part_drops_nothing, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_index_drops, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_table_drops, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_index_written_over_is_not_trusted, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_entry_being_filled_is_not_taken, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_pool_drops, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_concurrent_inserts_agree, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_concurrent_inserts_with_tails_agree, setup_region, teardown_region),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

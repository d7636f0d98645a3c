/*
 * Unit tests for preload/ring_writer.[ch] and preload/shm_region.c: slot
 * claim and retire, reserve/publish, nesting as a signal handler causes it,
 * the full-ring wait against a consumer thread, a consumer that is gone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../preload/ring_writer.h"
#include "../../preload/shm_region.h"
#include "test_region.h"

static struct shm_event event_numbered(uint64_t n)
{
    struct shm_event event = {.time_ns = n, .addr = n, .size = ~n, .kind = SHM_EV_ALLOC};
    return event;
}

static void test_header_is_complete(void **state)
{
    struct shm_header *header = *state;
    assert_int_equal(header->magic, SHM_MAGIC);
    assert_int_equal(header->version, SHM_VERSION);
    assert_int_equal(header->pid, (uint32_t)getpid());
    assert_int_equal(header->max_frames, 64);
    assert_int_equal(header->slots_offset, SHM_SLOTS_OFFSET);
    assert_int_equal(header->slot_size, SHM_SLOT_SIZE);
    assert_int_equal(header->ring_events, SHM_RING_EVENTS);
    assert_int_equal(header->stack_table_offset, SHM_STACK_TABLE_OFFSET);
    assert_int_equal(header->frame_pool_offset, SHM_FRAME_POOL_OFFSET);
    assert_int_equal(header->name_pool_offset, SHM_NAME_POOL_OFFSET);
    assert_int_equal(header->name_pool_bytes, SHM_NAME_POOL_BYTES);
    assert_int_equal(header->total_size, SHM_TOTAL_SIZE);
    assert_int_equal(header->ready, 1);
}

static void test_region_is_a_named_memfd(void **state)
{
    (void)state;
    int fd = -1;
    errno = 1234;
    void *base = shm_region_create(&fd, 77, 12, 4096, SHM_CLOCK_TSC);
    assert_non_null(base);
    assert_int_equal(errno, 1234);
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    assert_true(n > 0);
    link[n] = '\0';
    assert_string_equal(link, "/memfd:memslope (deleted)");
    struct shm_header *header = base;
    assert_int_equal(header->pid, 77);
    assert_int_equal(header->max_frames, 12);
    assert_int_equal(header->sample_rate, 4096);
    assert_int_equal(header->ready, 1);
    int flags = fcntl(fd, F_GETFD);
    assert_true(flags & FD_CLOEXEC);
    munmap(base, SHM_TOTAL_SIZE);
    close(fd);
}

static void test_parse_u64(void **state)
{
    (void)state;
    assert_int_equal(shm_parse_u64(NULL, 9), 9);
    assert_int_equal(shm_parse_u64("", 9), 9);
    assert_int_equal(shm_parse_u64("12x", 9), 9);
    assert_int_equal(shm_parse_u64("-1", 9), 9);
    assert_int_equal(shm_parse_u64("4096", 9), 4096);
    assert_int_equal(shm_parse_u64("18446744073709551615", 9), UINT64_MAX);
    assert_int_equal(shm_parse_u64("18446744073709551616", 9), 9);
}

static void test_claim_write_retire(void **state)
{
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 4242));
    struct shm_thread_slot *slot = producer.slot;
    assert_non_null(slot);
    assert_int_equal(slot->state, SHM_SLOT_OWNED);
    assert_int_equal(slot->tid, 4242);
    for (uint64_t n = 0; n < 10; n++) {
        struct shm_event event = event_numbered(n);
        assert_true(ring_write(&producer, &event, getpid()));
        assert_int_equal(slot->write_pos, n + 1);
    }
    assert_int_equal(producer.nesting, 0);
    for (uint64_t n = 0; n < 10; n++)
        assert_int_equal(slot->ring[n].addr, n);
    ring_retire_slot(base, &producer);
    assert_null(producer.slot);
    assert_int_equal(slot->state, SHM_SLOT_RETIRED);
    assert_int_equal(slot->write_pos, 10);

    /* the consumer drains and frees it; a new owner continues from write_pos */
    slot->read_pos = 10;
    slot->state = SHM_SLOT_FREE;
    struct ring_producer again = {0};
    for (uint32_t i = 0; i < SHM_MAX_THREADS; i++) {
        assert_true(ring_claim_slot(base, &again, 1));
        if (again.slot == slot)
            break;
        again.slot = NULL;
    }
    assert_ptr_equal(again.slot, slot);
    assert_int_equal(again.reserve, 10);
}

/* On its first lap the ring is populated 64 KiB at a time as the writes
 * enter each stretch from its second on (populate.h): a thread with a few
 * events keeps to the pages it writes, and errno is the caller's after. */
static void test_first_lap_populated_ahead(void **state)
{
    if (sysconf(_SC_PAGESIZE) != 4096)
        skip(); /* the page-by-page checks below need pages smaller than a chunk */
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 4242));
    struct shm_thread_slot *slot = producer.slot;
    const uint64_t chunk_events = RING_POPULATE_EVENTS;
    const struct shm_event *first_end = &slot->ring[chunk_events - 1], *second_end = &slot->ring[2 * chunk_events - 1];
    struct shm_event event = event_numbered(0);
    assert_true(ring_write(&producer, &event, getpid()));
    assert_false(page_resident(first_end)); /* the first chunk: page by page */
    for (uint64_t n = 1; n < chunk_events; n++) {
        event = event_numbered(n);
        assert_true(ring_write(&producer, &event, getpid()));
    }
    assert_false(page_resident(second_end)); /* nothing written there yet */
    errno = 4321;
    event = event_numbered(chunk_events);
    assert_true(ring_write(&producer, &event, getpid()));
    assert_int_equal(errno, 4321);
    if (__atomic_load_n(&populate_unsupported, __ATOMIC_RELAXED))
        skip(); /* a kernel before 5.14: nothing populated, the faults come as they did */
    assert_true(page_resident(second_end));
    ring_retire_slot(base, &producer);
}

/* A madvise that fails (here: memory not mapped) keeps errno and stops
 * the populating for the rest of the image. */
static void test_populate_failure_keeps_errno(void **state)
{
    (void)state;
    void *hole = mmap(NULL, POPULATE_CHUNK_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(hole != MAP_FAILED);
    assert_int_equal(munmap(hole, POPULATE_CHUNK_BYTES), 0);
    errno = 4321;
    populate_ahead(hole, POPULATE_CHUNK_BYTES);
    assert_int_equal(errno, 4321);
    assert_int_equal(__atomic_load_n(&populate_unsupported, __ATOMIC_RELAXED), 1);
    __atomic_store_n(&populate_unsupported, 0, __ATOMIC_RELAXED); /* for the tests after this one */
}

static void test_slots_exhausted(void **state)
{
    void *base = *state;
    for (uint32_t i = 0; i < SHM_MAX_THREADS; i++)
        shm_slot(base, i)->state = SHM_SLOT_OWNED;
    struct ring_producer producer = {0};
    assert_false(ring_claim_slot(base, &producer, 1));
    assert_null(producer.slot);
    assert_int_equal(((struct shm_header *)base)->slots_exhausted, 1);
}

/* What a signal handler arriving in the middle of ring_write does, replayed
 * step by step: the outer write has taken its index but not written. */
static void test_nested_write_is_published_by_the_outer(void **state)
{
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 1));
    struct shm_thread_slot *slot = producer.slot;

    producer.nesting++; /* outer ring_write, up to its index */
    uint64_t outer_index = ring_take_index(&producer.reserve);

    struct shm_event nested = event_numbered(100);
    assert_true(ring_write(&producer, &nested, getpid())); /* the handler */
    assert_int_equal(slot->write_pos, 0);                   /* not published: outer pending */
    assert_int_equal(producer.nesting, 1);

    slot->ring[outer_index] = event_numbered(99); /* outer resumes */
    ring_publish(&producer);
    assert_int_equal(slot->write_pos, 2);
    assert_int_equal(producer.nesting, 0);
    assert_int_equal(slot->ring[0].addr, 99);
    assert_int_equal(slot->ring[1].addr, 100);
}

/* A handler that runs after the outer write dropped nesting to 0 publishes
 * by itself; the outer never stores a smaller write_pos afterwards. */
static void test_handler_after_outer_publish(void **state)
{
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 1));
    struct shm_event event = event_numbered(1);
    assert_true(ring_write(&producer, &event, getpid()));
    assert_true(ring_write(&producer, &event, getpid()));
    assert_int_equal(producer.slot->write_pos, 2);
}

/* Stress with real signals: the main loop writes, a 20 us timer's handler
 * writes too, a consumer thread drains concurrently and checks that
 * write_pos never goes back, nothing is lost or torn. */
static struct ring_producer *signal_producer;
static volatile uint64_t handler_writes;

static void writing_handler(int signo)
{
    (void)signo;
    struct shm_event event = event_numbered((1ull << 62) + handler_writes);
    if (ring_write(signal_producer, &event, getpid()))
        handler_writes++;
}

struct drain_job {
    struct shm_thread_slot *slot;
    volatile int stop;
    uint64_t main_seen, handler_seen, regressions, torn, out_of_order;
    uint32_t sleep_us;
};

static void drain_once(struct drain_job *job)
{
    struct shm_thread_slot *slot = job->slot;
    uint64_t write_pos = __atomic_load_n(&slot->write_pos, __ATOMIC_ACQUIRE);
    uint64_t read_pos = slot->read_pos;
    if (write_pos < read_pos) {
        job->regressions++;
        return;
    }
    for (uint64_t i = read_pos; i < write_pos; i++) {
        struct shm_event event = slot->ring[i & (SHM_RING_EVENTS - 1)];
        if (event.size != ~event.addr)
            job->torn++;
        if (event.addr >= (1ull << 62)) {
            if (event.addr - (1ull << 62) != job->handler_seen)
                job->out_of_order++;
            job->handler_seen++;
        } else {
            if (event.addr != job->main_seen)
                job->out_of_order++;
            job->main_seen++;
        }
    }
    if (write_pos != read_pos) {
        __atomic_store_n(&slot->read_pos, write_pos, __ATOMIC_RELEASE);
        __atomic_fetch_add(&slot->read_seq, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&slot->producer_waiting, __ATOMIC_SEQ_CST))
            syscall(SYS_futex, &slot->read_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

static void *drain_thread(void *arg)
{
    struct drain_job *job = arg;
    while (!job->stop) {
        drain_once(job);
        if (job->sleep_us)
            usleep(job->sleep_us);
    }
    drain_once(job);
    return NULL;
}

static void test_signal_nesting_stress(void **state)
{
    void *base = *state;
    static struct ring_producer producer;
    memset(&producer, 0, sizeof producer);
    assert_true(ring_claim_slot(base, &producer, 1));
    signal_producer = &producer;
    handler_writes = 0;
    struct drain_job job = {.slot = producer.slot};
    /* the consumer thread must not take the signals: it inherits this mask */
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm_only, NULL);
    pthread_t consumer;
    assert_int_equal(pthread_create(&consumer, NULL, drain_thread, &job), 0);
    pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
    struct sigaction action = {.sa_handler = writing_handler, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &action, NULL);
    struct itimerval every_20us = {{0, 20}, {0, 20}}; /* as often as the kernel allows */
    setitimer(ITIMER_REAL, &every_20us, NULL);
    const uint64_t main_events = 400000;
    for (uint64_t n = 0; n < main_events; n++) {
        struct shm_event event = event_numbered(n);
        assert_true(ring_write(&producer, &event, getpid()));
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_DFL);
    job.stop = 1;
    pthread_join(consumer, NULL);

    assert_int_equal(job.regressions, 0);
    assert_int_equal(job.torn, 0);
    assert_int_equal(job.out_of_order, 0);
    assert_int_equal(job.main_seen, main_events);
    assert_int_equal(job.handler_seen, handler_writes);
    assert_int_equal(producer.slot->write_pos, main_events + handler_writes);
    print_message("signal stress: %llu handler writes among %llu\n", (unsigned long long)handler_writes,
                  (unsigned long long)main_events);
}

static void test_full_ring_waits_for_slow_consumer(void **state)
{
    void *base = *state;
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 1));
    struct drain_job job = {.slot = producer.slot, .sleep_us = 3000};
    pthread_t consumer;
    assert_int_equal(pthread_create(&consumer, NULL, drain_thread, &job), 0);
    const uint64_t total = 5ull * SHM_RING_EVENTS + 17;
    for (uint64_t n = 0; n < total; n++) {
        struct shm_event event = event_numbered(n);
        assert_true(ring_write(&producer, &event, getpid()));
        /* never more than a ring's worth outstanding */
        assert_true(producer.slot->write_pos - __atomic_load_n(&producer.slot->read_pos, __ATOMIC_ACQUIRE) <=
                    SHM_RING_EVENTS);
    }
    job.stop = 1;
    pthread_join(consumer, NULL);
    assert_int_equal(job.main_seen, total);
    assert_int_equal(job.out_of_order, 0);
    assert_int_equal(job.torn, 0);
    assert_int_equal(producer.slot->producer_waiting, 0);
}

static void test_full_ring_with_consumer_gone(void **state)
{
    void *base = *state;
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    waitpid(gone, NULL, 0); /* reaped: kill(gone, 0) now fails with ESRCH */
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 1));
    for (uint64_t n = 0; n < SHM_RING_EVENTS; n++) {
        struct shm_event event = event_numbered(n);
        assert_true(ring_write(&producer, &event, gone));
    }
    struct timespec before, after;
    clock_gettime(CLOCK_MONOTONIC, &before);
    struct shm_event one_more = event_numbered(SHM_RING_EVENTS);
    errno = 4321;
    assert_false(ring_write(&producer, &one_more, gone));
    assert_int_equal(errno, 4321);
    clock_gettime(CLOCK_MONOTONIC, &after);
    double waited = (double)(after.tv_sec - before.tv_sec) + (after.tv_nsec - before.tv_nsec) / 1e9;
    assert_true(waited >= 0.009 && waited < 1.0); /* one 10 ms futex timeout, then the check */
    assert_int_equal(producer.nesting, 0);
    assert_int_equal(producer.slot->write_pos, SHM_RING_EVENTS);
}

/* Traced (ptrace mode): a consumer alive but no longer tracing this
 * process (memslope let it go when the command ended, or its pid is
 * another's now) is given up on too, at the first timeout. */
static void test_full_ring_with_consumer_not_tracing(void **state)
{
    void *base = *state;
    pid_t alive = getppid(); /* exists, and does not trace this test */
    ring_writer_init(true);
    struct ring_producer producer = {0};
    assert_true(ring_claim_slot(base, &producer, 1));
    for (uint64_t n = 0; n < SHM_RING_EVENTS; n++) {
        struct shm_event event = event_numbered(n);
        assert_true(ring_write(&producer, &event, alive));
    }
    struct shm_event one_more = event_numbered(SHM_RING_EVENTS);
    assert_false(ring_write(&producer, &one_more, alive));
    ring_writer_init(false);
    assert_int_equal(producer.nesting, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_header_is_complete, setup_region, teardown_region),
        cmocka_unit_test(test_region_is_a_named_memfd),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test_setup_teardown(test_claim_write_retire, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_first_lap_populated_ahead, setup_region, teardown_region),
        cmocka_unit_test(test_populate_failure_keeps_errno),
        cmocka_unit_test_setup_teardown(test_slots_exhausted, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_nested_write_is_published_by_the_outer, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_handler_after_outer_publish, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_signal_nesting_stress, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_ring_waits_for_slow_consumer, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_ring_with_consumer_gone, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(test_full_ring_with_consumer_not_tracing, setup_region, teardown_region),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

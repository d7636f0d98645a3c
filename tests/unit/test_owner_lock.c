/*
 * test_owner_lock.c - preload/owner_lock.h: mutual exclusion between
 * threads, a waiter that sleeps until the release, errno kept, and the
 * point of it: a fork child whose parent's other thread held the lock takes
 * it over (and is told so) instead of waiting for ever, with or without
 * fork handlers, while a vfork child, which shares the parent's memory,
 * waits for the holder as another thread would.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/owner_lock.h"
#include "test_child.h"

#define THREADS 4
#define ROUNDS 50000

/* A counter that threads add to under a lock: a plain add, so that a lost
 * update shows. */
struct counted {
    struct owner_lock lock;
    uint64_t value;
    int rounds; /* each thread's */
};

static struct counted counter = {OWNER_LOCK_INIT, 0, ROUNDS};

/* A thread's adds; non-NULL when an acquire said "taken over". */
static void *count_up(void *arg)
{
    struct counted *counted = arg;
    for (int i = 0; i < counted->rounds; i++) {
        if (owner_lock_acquire(&counted->lock) != OWNER_LOCK_TAKEN)
            return (void *)1;
        uint64_t value = counted->value;
        __asm__ volatile("" ::: "memory");
        counted->value = value + 1;
        owner_lock_release(&counted->lock);
    }
    return NULL;
}

static void test_threads_exclude_each_other(void **state)
{
    (void)state;
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, count_up, &counter), 0);
    for (int i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        assert_null(result); /* never "taken over" between live threads */
    }
    assert_int_equal(counter.value, (uint64_t)THREADS * ROUNDS);
    assert_int_equal(counter.lock.word, 0);
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

static uint64_t monotonic_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

struct holder {
    struct owner_lock *lock;
    long hold_ms;    /* how long it holds the lock; -1: until the process ends */
    volatile int taken;
};

static void *hold_lock(void *arg)
{
    struct holder *holder = arg;
    owner_lock_acquire(holder->lock);
    holder->taken = 1;
    if (holder->hold_ms < 0)
        for (;;)
            pause();
    sleep_ms(holder->hold_ms);
    owner_lock_release(holder->lock);
    return NULL;
}

static void start_holder(pthread_t *thread, struct holder *holder)
{
    assert_int_equal(pthread_create(thread, NULL, hold_lock, holder), 0);
    while (!holder->taken)
        sleep_ms(1);
}

/* A waiter sleeps on the futex until the release; errno is what it was. */
static void test_waiter_outlasts_timeouts(void **state)
{
    (void)state;
    struct owner_lock lock = OWNER_LOCK_INIT;
    struct holder holder = {&lock, 350, 0};
    pthread_t thread;
    start_holder(&thread, &holder);
    uint64_t start = monotonic_ms();
    errno = EDOM;
    assert_int_equal(owner_lock_acquire(&lock), OWNER_LOCK_TAKEN);
    assert_int_equal(errno, EDOM);
    assert_true(monotonic_ms() - start >= 250); /* it waited for the holder */
    owner_lock_release(&lock);
    assert_int_equal(errno, EDOM);
    assert_int_equal(lock.word, 0);
    pthread_join(thread, NULL);
}

/* What a fork child finds (exit status 0: as expected). */
static int child_takes_over(struct owner_lock *lock)
{
    if (owner_lock_acquire(lock) != OWNER_LOCK_TAKEN_OVER)
        return 3;
    owner_lock_release(lock);
    if (owner_lock_acquire(lock) != OWNER_LOCK_TAKEN)
        return 4;
    owner_lock_release(lock);
    return lock->word == 0 ? 0 : 5;
}

/* The child of a fork made while another thread holds the lock: that
 * thread is not in the child. Its acquire returns at once, "taken over",
 * and the lock then works as before; the parent's is untouched. */
static void test_fork_child_takes_over(void **state)
{
    (void)state;
    static struct owner_lock lock = OWNER_LOCK_INIT;
    static struct holder holder = {&lock, -1, 0};
    pthread_t thread;
    start_holder(&thread, &holder);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_takes_over(&lock));
    assert_int_equal(test_child_exit_status(pid), 0);
    assert_int_equal(lock.word, owner_lock_epoch());
    /* a fork without handlers (a raw system call) too */
    pid = (pid_t)syscall(SYS_fork);
    if (pid == 0)
        _exit(child_takes_over(&lock));
    assert_int_equal(test_child_exit_status(pid), 0);
}

static struct counted child_counter = {OWNER_LOCK_INIT, 0, ROUNDS / 10};

/* A child made by _Fork (no handler runs; unlike a raw system call it
 * leaves the child fit to start threads) that took the lock and then
 * starts threads: they wait for its main thread, take nothing over, and
 * lose no update. */
static int child_threads_exclude_each_other(void)
{
    if (owner_lock_acquire(&child_counter.lock) != OWNER_LOCK_TAKEN)
        return 3;
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, count_up, &child_counter) != 0)
            return 4;
    sleep_ms(50);
    if (child_counter.value != 0)
        return 5; /* a thread got in while the main thread held it */
    owner_lock_release(&child_counter.lock);
    for (int i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        if (result)
            return 6;
    }
    return child_counter.value == (uint64_t)THREADS * (ROUNDS / 10) ? 0 : 7;
}

static void test_raw_fork_child_threads(void **state)
{
    (void)state;
    assert_int_equal(owner_lock_acquire(&child_counter.lock), OWNER_LOCK_TAKEN); /* the parent's epoch drawn */
    owner_lock_release(&child_counter.lock);
    pid_t pid = _Fork();
    if (pid == 0)
        _exit(child_threads_exclude_each_other());
    assert_int_equal(test_child_exit_status(pid), 0);
}

/* A vfork child shares the parent's memory: the lock held by the parent's
 * other thread is held by a live thread of its space, and it waits. */
static void test_vfork_child_waits(void **state)
{
    (void)state;
    static struct owner_lock lock = OWNER_LOCK_INIT;
    static struct holder holder = {&lock, 300, 0};
    static volatile int result = -1;
    pthread_t thread;
    start_holder(&thread, &holder);
    pid_t pid = vfork();
    if (pid == 0) {
        result = owner_lock_acquire(&lock);
        owner_lock_release(&lock);
        _exit(0);
    }
    assert_int_equal(test_child_exit_status(pid), 0);
    pthread_join(thread, NULL);
    assert_int_equal(result, OWNER_LOCK_TAKEN);
    assert_int_equal(lock.word, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_exclude_each_other),
        cmocka_unit_test(test_waiter_outlasts_timeouts),
        cmocka_unit_test(test_fork_child_takes_over),
        cmocka_unit_test(test_raw_fork_child_threads),
        cmocka_unit_test(test_vfork_child_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

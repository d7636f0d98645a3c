/*
 * test_owner_lock.c - preload/owner_lock.h: mutual exclusion between
 * threads, a waiter that sleeps past the futex timeout, errno kept, and the
 * point of it: a fork child whose parent's other thread held the lock takes
 * it over (and is told so) instead of waiting for ever.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/owner_lock.h"

#define THREADS 4
#define ROUNDS 200000

static struct owner_lock counter_lock = OWNER_LOCK_INIT;
static uint64_t counter; /* a plain add under the lock: lost updates show */

static void *count_up(void *unused)
{
    (void)unused;
    for (int i = 0; i < ROUNDS; i++) {
        if (owner_lock_acquire(&counter_lock) != OWNER_LOCK_TAKEN)
            return (void *)1;
        uint64_t value = counter;
        __asm__ volatile("" ::: "memory");
        counter = value + 1;
        owner_lock_release(&counter_lock);
    }
    return NULL;
}

static void test_threads_exclude_each_other(void **state)
{
    (void)state;
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, count_up, NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        assert_null(result); /* never "taken over" between live threads */
    }
    assert_int_equal(counter, (uint64_t)THREADS * ROUNDS);
    assert_int_equal(counter_lock.word, 0);
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
    uint32_t thread_id;
};

static void *hold_lock(void *arg)
{
    struct holder *holder = arg;
    owner_lock_acquire(holder->lock);
    holder->thread_id = owner_lock_thread_id();
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

/* A waiter sleeps on the futex, wakes at its 100 ms timeouts, finds the
 * holder alive and sleeps again until the release; errno is what it was. */
static void test_waiter_outlasts_timeouts(void **state)
{
    (void)state;
    struct owner_lock lock = OWNER_LOCK_INIT;
    struct holder holder = {&lock, 350, 0, 0};
    pthread_t thread;
    start_holder(&thread, &holder);
    uint64_t start = monotonic_ms();
    errno = EDOM;
    assert_int_equal(owner_lock_acquire(&lock), OWNER_LOCK_TAKEN);
    assert_int_equal(errno, EDOM);
    assert_true(monotonic_ms() - start >= 250); /* it waited through the timeouts */
    owner_lock_release(&lock);
    assert_int_equal(errno, EDOM);
    assert_int_equal(lock.word, 0);
    pthread_join(thread, NULL);
}

/* The child of a fork made while another thread holds the lock: that
 * thread is not in the child. Its acquire returns at once, "taken over",
 * and the lock then works as before. */
static void test_fork_child_takes_over(void **state)
{
    (void)state;
    static struct owner_lock lock = OWNER_LOCK_INIT;
    static struct holder holder = {&lock, -1, 0, 0};
    pthread_t thread;
    start_holder(&thread, &holder);
    assert_int_equal(pthread_atfork(NULL, NULL, owner_lock_forked), 0); /* as the shim's child handler does */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10); /* a child that waits for the lock dies of SIGALRM */
        if (owner_lock_acquire(&lock) != OWNER_LOCK_TAKEN_OVER)
            _exit(3);
        owner_lock_release(&lock);
        if (owner_lock_acquire(&lock) != OWNER_LOCK_TAKEN)
            _exit(4);
        owner_lock_release(&lock);
        if (owner_lock_thread_id() != (uint32_t)getpid())
            _exit(6); /* the child's main thread's id is its pid */
        _exit(lock.word == 0 ? 0 : 5);
    }
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the child died of signal %d (SIGALRM: it waited for the lock)", WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(lock.word, holder.thread_id); /* the parent's is untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_exclude_each_other),
        cmocka_unit_test(test_waiter_outlasts_timeouts),
        cmocka_unit_test(test_fork_child_takes_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_shim_unwind_fork.c - the shim's unwinder across fork
 * (preload/fast_unwind.h, preload/owner_lock.h). A fork made while another
 * thread is inside a rule lookup copies the lookup lock held by a thread
 * that is not in the child. The child's lookups must neither wait for it
 * for ever (the bug: its first new call site hung) nor trust the CFI caches
 * of the module that lookup was in. The lookup is held open by the
 * observer, which runs under the lock: it stays there until the main
 * thread has forked (not a fixed time, which a busy machine can outlast). A program of its own: the unwinder's state is the
 * process's, and the tests run in order (the first meets the module).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/fast_unwind.h"
#include "test_child.h"

#define MAX 64

static volatile int sleep_in_module_added, sleep_in_rule_looked_up; /* armed by a test */
static volatile int in_lookup;          /* set by the observer, under the lookup lock */
static volatile int forked;             /* set by the parent once it forked: the observer returns */
static volatile int rules_reported;     /* rule_looked_up calls (the child's own copy after a fork) */
static volatile int handler_unwound;    /* frames the child handler's unwind found */

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){0, ms * 1000 * 1000}, NULL);
}

/* Holds the lookup open until the parent has forked (10 s at most). */
static void stay_in_lookup(void)
{
    in_lookup = 1;
    for (int ms = 0; ms < 10000 && !forked; ms++)
        sleep_ms(1);
}

static void module_added(const struct fast_unwind_module_info *module)
{
    (void)module;
    if (sleep_in_module_added) {
        sleep_in_module_added = 0;
        stay_in_lookup();
    }
}

static void rule_looked_up(uint64_t ip, uint64_t rule)
{
    (void)ip;
    (void)rule;
    rules_reported++;
    if (sleep_in_rule_looked_up) {
        sleep_in_rule_looked_up = 0;
        stay_in_lookup();
    }
}

static void rule_reused(void) {}

/* An unwind from this function's caller, looking rules up. */
static __attribute__((noinline)) int unwind_here(void)
{
    uint64_t frames[MAX];
    struct fast_unwind_regs start = FAST_UNWIND_CALLER_REGS();
    return fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 1, NULL, NULL);
}

/* Call sites met first in a child: their rules are new there. */
static __attribute__((noinline)) int unwind_in_child(void)
{
    return unwind_here() + 0;
}

static __attribute__((noinline)) int unwind_in_handler(void)
{
    return unwind_here() + 0;
}

static __attribute__((noinline)) int unwind_in_parent_after(void)
{
    return unwind_here() + 0;
}

/* The thread's unwinds: each test's through a call site of its own, whose
 * rule is new. */
static __attribute__((noipa)) void *thread_unwinding(void *arg)
{
    (void)arg;
    unwind_here();
    return NULL;
}

static __attribute__((noipa)) void *thread_unwinding_again(void *arg)
{
    (void)arg;
    unwind_here();
    return NULL;
}

/* Registered before anything of the unwinder's: runs first in the child. */
static void child_handler(void)
{
    handler_unwound = unwind_in_handler();
}

/* Forks while a thread sleeps inside a lookup; returns the child's status. */
static int fork_during_lookup(void *(*unwinding)(void *), int (*in_child)(void))
{
    in_lookup = 0;
    forked = 0;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, unwinding, NULL), 0);
    for (int waited = 0; !in_lookup; waited++) {
        if (waited == 5000)
            fail_msg("the thread met no new module or rule in 5 s");
        sleep_ms(1);
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(in_child());
    forked = 1;
    assert_true(pid > 0);
    /* a child stuck on the lock (in the child handler, too) fails the test */
    int status = test_child_exit_status(pid);
    pthread_join(thread, NULL);
    return status;
}

/* The child handler and the child's code unwind through new call sites
 * with CFI: the cut lookup was in no module's CFI yet. */
static int child_after_module_added(void)
{
    if (handler_unwound <= 0)
        return 3;
    return unwind_in_child() > 0 ? 0 : 4;
}

static void test_fork_while_a_module_is_added(void **state)
{
    (void)state;
    static const struct fast_unwind_observer observer = {module_added, rule_looked_up, rule_reused};
    /* "/nonexistent": modules are identified (and announced), no file is found */
    fast_unwind_keep_rules("/nonexistent", &observer);
    assert_int_equal(pthread_atfork(NULL, NULL, child_handler), 0);
    sleep_in_module_added = 1;
    assert_int_equal(fork_during_lookup(thread_unwinding, child_after_module_added), 0);
}

/* A lookup cut in this program's CFI: the child looks up no rule there
 * again (an unwind through a new call site of it gives up, and nothing is
 * reported to keep); the parent goes on as before. */
static int child_after_rule_looked_up(void)
{
    int reported = rules_reported;
    int result = unwind_in_child();
    if (result != FAST_UNWIND_UNSUPPORTED)
        return 3;
    return rules_reported == reported ? 0 : 4;
}

static void test_fork_while_a_rule_is_looked_up(void **state)
{
    (void)state;
    sleep_in_rule_looked_up = 1;
    assert_int_equal(fork_during_lookup(thread_unwinding_again, child_after_rule_looked_up), 0);
    int reported = rules_reported;
    assert_true(unwind_in_parent_after() > 0);
    assert_true(rules_reported > reported);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_while_a_module_is_added),
        cmocka_unit_test(test_fork_while_a_rule_is_looked_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

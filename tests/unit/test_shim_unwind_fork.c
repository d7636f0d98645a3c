/* The shim's unwinder across fork (preload/fast_unwind.h): a fork made
 * while another thread is inside a rule lookup (holding the lookup lock,
 * libdw's caches half-updated) waits for it, with the shim's atfork
 * handlers, so that the child's first lookup does not wait forever for a
 * lock whose holder is not in the child. The lookup is held open by the
 * observer's module_added, which runs under the lock: it sleeps there while
 * the main thread forks. A program of its own: the unwinder's state is the
 * process's. */
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

#define MAX 64

static volatile int in_lookup; /* set by module_added, under the lookup lock */

static void module_added_slowly(const struct fast_unwind_module_info *module)
{
    (void)module;
    in_lookup = 1;
    nanosleep(&(struct timespec){.tv_nsec = 300 * 1000 * 1000}, NULL);
}

static void rule_looked_up(uint64_t ip, uint64_t rule)
{
    (void)ip;
    (void)rule;
}

static void rule_reused(void) {}

/* An unwind from this function's caller, looking rules up. */
static __attribute__((noinline)) int unwind_here(void)
{
    uint64_t frames[MAX];
    struct fast_unwind_regs start = FAST_UNWIND_CALLER_REGS();
    return fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 1, NULL, NULL);
}

/* Another call site, unwound first in the child: its rule is new there. */
static __attribute__((noinline)) int unwind_in_child(void)
{
    return unwind_here() + 0;
}

static void *thread_meeting_modules(void *arg)
{
    (void)arg;
    unwind_here(); /* the first lookup meets this program's module */
    return NULL;
}

/* With the handlers as the shim registers them. */
static void atfork_once(void)
{
    pthread_atfork(fast_unwind_fork_prepare, fast_unwind_fork_parent, fast_unwind_fork_child);
}

static void test_fork_during_a_lookup(void **state)
{
    (void)state;
    /* "/nonexistent": modules are identified (and announced), no file is found */
    static const struct fast_unwind_observer observer = {module_added_slowly, rule_looked_up, rule_reused};
    fast_unwind_keep_rules("/nonexistent", &observer);
    atfork_once();
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, thread_meeting_modules, NULL), 0);
    while (!in_lookup)
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    pid_t pid = fork(); /* while the thread sleeps inside its lookup */
    if (pid == 0) {
        alarm(10); /* a child stuck on the lock dies of SIGALRM */
        _exit(unwind_in_child() > 0 ? 0 : 3);
    }
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pthread_join(thread, NULL);
    if (WIFSIGNALED(status))
        fail_msg("the child died of signal %d (SIGALRM: it waited for the lookup lock)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_during_a_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_child.h - waiting for a forked child in a unit test without hanging
 * it: a child stuck on a lock for 10 s is killed, and the test fails.
 * Include after <cmocka.h>.
 */
#ifndef MEMSLOPE_TEST_CHILD_H
#define MEMSLOPE_TEST_CHILD_H

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

/* The child's exit status; fails the test if it was killed or had to be. */
static inline int test_child_exit_status(pid_t pid)
{
    assert_true(pid > 0);
    int status = 0;
    pid_t waited = 0;
    for (int ms = 0; ms < 10000 && (waited = waitpid(pid, &status, WNOHANG)) == 0; ms++)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    if (waited == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("the child waited 10 s (for a lock) and was killed");
    }
    assert_int_equal(waited, pid);
    if (WIFSIGNALED(status))
        fail_msg("the child died of signal %d", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

#endif

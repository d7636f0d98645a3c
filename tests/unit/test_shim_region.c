/* Unit tests of the shim's process checks (preload/shm_region.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/shm_region.h"

static long tracer_of(const char *status)
{
    return shm_status_tracer_pid(status, strlen(status));
}

static void tracer_pid_is_parsed(void **state)
{
    (void)state;
    assert_int_equal(tracer_of("Name:\tx\nState:\tS\nTracerPid:\t4242\nUid:\t0\n"), 4242);
    assert_int_equal(tracer_of("Name:\tx\nTracerPid:\t0\n"), 0);
    assert_int_equal(tracer_of("Name:\tx\nTracerPid:   17"), 17);
}

static void missing_or_malformed_is_minus_one(void **state)
{
    (void)state;
    assert_int_equal(tracer_of(""), -1);
    assert_int_equal(tracer_of("Name:\tx\n"), -1);
    assert_int_equal(tracer_of("Name:\tx\nTracerPid:\t\n"), -1);
    assert_int_equal(tracer_of("TracerPid:\t5\n"), -1); /* only as a line of its own after another */
}

static void this_process_is_not_traced_by_a_stranger(void **state)
{
    (void)state;
    assert_false(shm_traced_by(getpid()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tracer_pid_is_parsed),
        cmocka_unit_test(missing_or_malformed_is_minus_one),
        cmocka_unit_test(this_process_is_not_traced_by_a_stranger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

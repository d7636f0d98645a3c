/* Unit tests of the growth estimator (report/growth.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../report/growth.h"

#define N 40

static void flat_series_has_exactly_zero_growth(void **state)
{
    (void)state;
    struct growth_point points[N];
    for (int i = 0; i < N; i++)
        points[i] = (struct growth_point){i, 5000};
    struct growth_fit fit = growth_estimate(points, N);
    assert_true(fit.known);
    assert_true(fit.slope == 0.0);
    assert_true(fit.intercept == 5000.0);
}

static void setup_then_steady_leak(void **state)
{
    (void)state;
    /* 1 MiB retained before the first iteration, 48 B per iteration. */
    struct growth_point points[N];
    for (int i = 0; i < N; i++)
        points[i] = (struct growth_point){i, 1000 + 1048576 + 48.0 * i};
    struct growth_fit fit = growth_estimate(points, N);
    assert_true(fit.known);
    assert_true(fit.slope == 48.0);
    assert_true(fit.intercept == 1000 + 1048576);
    assert_int_equal(fit.warmup_points, 0);
}

static void lazy_cache_in_first_iteration_is_warmup(void **state)
{
    (void)state;
    /* Before iteration 1: 1000 B; iteration 1 fills a 4 KiB cache; flat after. */
    struct growth_point points[N];
    points[0] = (struct growth_point){0, 1000};
    for (int i = 1; i < N; i++)
        points[i] = (struct growth_point){i, 1000 + 4096};
    struct growth_fit fit = growth_estimate(points, N);
    assert_true(fit.known);
    assert_true(fit.slope == 0.0);
    assert_true(fit.intercept == 1000 + 4096);
    assert_int_equal(fit.warmup_points, 1);
}

static void cache_plus_leak(void **state)
{
    (void)state;
    struct growth_point points[N];
    points[0] = (struct growth_point){0, 0};
    points[1] = (struct growth_point){1, 1048576 + 48};
    for (int i = 2; i < N; i++)
        points[i] = (struct growth_point){i, 1048576 + 48.0 * i};
    struct growth_fit fit = growth_estimate(points, N);
    assert_true(fit.slope == 48.0);
    assert_true(fit.intercept == 1048576);
}

static void outlier_does_not_move_the_slope(void **state)
{
    (void)state;
    struct growth_point points[N];
    for (int i = 0; i < N; i++)
        points[i] = (struct growth_point){i, 100.0 * i};
    points[25].y += 1e6; /* one transient spike in the steady state */
    struct growth_fit fit = growth_estimate(points, N);
    assert_true(fit.slope == 100.0);
}

static void fewer_than_three_points_is_unknown(void **state)
{
    (void)state;
    struct growth_point points[2] = {{0, 0}, {1, 48}};
    assert_false(growth_estimate(points, 2).known);
    assert_false(growth_estimate(points, 0).known);
    struct growth_point three[3] = {{0, 0}, {1, 48}, {2, 96}};
    struct growth_fit fit = growth_estimate(three, 3);
    assert_true(fit.known);
    assert_true(fit.slope == 48.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flat_series_has_exactly_zero_growth),
        cmocka_unit_test(setup_then_steady_leak),
        cmocka_unit_test(lazy_cache_in_first_iteration_is_warmup),
        cmocka_unit_test(cache_plus_leak),
        cmocka_unit_test(outlier_does_not_move_the_slope),
        cmocka_unit_test(fewer_than_three_points_is_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

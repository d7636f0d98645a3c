/*
 * growth.h - setup versus per-iteration growth of a series of heap
 * snapshots.
 *
 * x is the number of iterations completed when a snapshot was taken (the
 * snapshot at iteration marker k has k-1 completed; the case-end snapshot
 * has all of them), y the live bytes (or blocks) then.
 *
 * The steady state is found from the series itself: a Theil-Sen line is fit
 * to the second half of the points (which a warm-up cannot reach, since the
 * warm-up is found only among the first half), and the warm-up is the prefix
 * of points that stray from that line by more than the noise of the second
 * half allows (3 scaled median absolute deviations; exactly zero for a clean
 * series). The final line is a Theil-Sen fit to the points from the end of the
 * warm-up on: slope = growth per iteration, exactly 0 for a flat series;
 * intercept (at x = 0) less the live figure at case begin = setup, which
 * includes what the warm-up iterations retained once.
 */
#ifndef MEMSLOPE_GROWTH_H
#define MEMSLOPE_GROWTH_H

#include <stddef.h>

struct growth_point {
    double x, y;
};

struct growth_fit {
    int known;            /* 0 with fewer than GROWTH_MIN_POINTS points */
    double slope;         /* growth per iteration */
    double intercept;     /* fitted value at x = 0 */
    size_t warmup_points; /* leading points excluded as warm-up */
};

#define GROWTH_MIN_POINTS 3

/* points sorted by x. */
struct growth_fit growth_estimate(const struct growth_point *points, size_t count);

/* Theil-Sen on its own: median of pairwise slopes (all pairs up to 64
 * points; beyond, the pairs half the series apart), then median of
 * y - slope x. Exposed for tests. count >= 2. */
int growth_theil_sen(const struct growth_point *points, size_t count, double *slope, double *intercept);

#endif

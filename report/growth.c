/* growth.c - see growth.h. */
#include "growth.h"

#include <math.h>
#include <stdlib.h>

#define GROWTH_ALL_PAIRS 64

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of values (reorders them). */
static double median(double *values, size_t count)
{
    qsort(values, count, sizeof *values, compare_double);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2.0;
}

int growth_theil_sen(const struct growth_point *points, size_t count, double *slope, double *intercept)
{
    if (count < 2)
        return -1;
    /* All pairs up to GROWTH_ALL_PAIRS points; beyond, the pairs half the
     * series apart (i, i + count/2): n/2 slopes instead of n^2/2, the same
     * answer on a straight line and as robust to a few outliers, so a
     * report of many sites x 200 snapshots stays fast. */
    int all_pairs = count <= GROWTH_ALL_PAIRS;
    size_t pairs = all_pairs ? count * (count - 1) / 2 : count / 2;
    double *values = malloc((pairs > count ? pairs : count) * sizeof *values);
    if (!values)
        return -1;
    size_t n = 0;
    if (all_pairs) {
        for (size_t i = 0; i < count; i++)
            for (size_t j = i + 1; j < count; j++)
                if (points[j].x != points[i].x)
                    values[n++] = (points[j].y - points[i].y) / (points[j].x - points[i].x);
    } else {
        size_t half = count / 2;
        for (size_t i = 0; i + half < count; i++)
            if (points[i + half].x != points[i].x)
                values[n++] = (points[i + half].y - points[i].y) / (points[i + half].x - points[i].x);
    }
    *slope = n ? median(values, n) : 0.0;
    for (size_t i = 0; i < count; i++)
        values[i] = points[i].y - *slope * points[i].x;
    *intercept = median(values, count);
    free(values);
    return 0;
}

/* How far a point may stray from the steady line and still belong to it. */
static double noise_tolerance(const struct growth_point *points, size_t count, double slope, double intercept)
{
    double *residuals = malloc(count * sizeof *residuals);
    if (!residuals)
        return 0.0;
    for (size_t i = 0; i < count; i++)
        residuals[i] = fabs(points[i].y - (slope * points[i].x + intercept));
    double mad = median(residuals, count);
    free(residuals);
    /* 1.4826 scales the MAD to a standard deviation for normal noise; the
     * small absolute floor absorbs floating-point rounding only. */
    return fmax(3.0 * 1.4826 * mad, 1e-6 * fmax(1.0, fabs(intercept)));
}

struct growth_fit growth_estimate(const struct growth_point *points, size_t count)
{
    struct growth_fit fit = {0};
    if (count < GROWTH_MIN_POINTS)
        return fit;
    size_t tail_start = count / 2;
    double slope, intercept;
    if (growth_theil_sen(points + tail_start, count - tail_start, &slope, &intercept) < 0)
        return fit;
    double tolerance = noise_tolerance(points + tail_start, count - tail_start, slope, intercept);
    /* The warm-up ends after the last point of the first half that strays. */
    size_t warmup = 0;
    for (size_t i = 0; i < tail_start; i++)
        if (fabs(points[i].y - (slope * points[i].x + intercept)) > tolerance)
            warmup = i + 1;
    if (growth_theil_sen(points + warmup, count - warmup, &fit.slope, &fit.intercept) < 0)
        return fit;
    if (fabs(fit.slope) < 1e-9)
        fit.slope = 0.0;
    fit.known = 1;
    fit.warmup_points = warmup;
    return fit;
}

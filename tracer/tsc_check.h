/*
 * tsc_check.h - whether the target's events may be stamped with the TSC.
 *
 * Event stamps order the events of different threads (docs/internals.md,
 * "Unfenced time stamps"), so they need a clock that every processor reads
 * in step. The kernel's CLOCK_MONOTONIC is such a clock, but under a
 * hypervisor's clock (kvm-clock) its vDSO read costs 25 ns here against
 * 10.6 for a bare TSC read, and a program with two recording threads reads
 * it on every event. The kernel uses the TSC itself only when it is the
 * clocksource; in a guest whose kernel was told not to (tsc=unstable) the
 * TSC can still be constant and in step, which this checks.
 */
#ifndef MEMSLOPE_TSC_CHECK_H
#define MEMSLOPE_TSC_CHECK_H

#include <stdbool.h>
#include <stdint.h>

/* --clock */
enum event_clock { EVENT_CLOCK_AUTO = 0, EVENT_CLOCK_TSC, EVENT_CLOCK_MONOTONIC };

/* What EVENT_CLOCK_AUTO decides: the TSC when the kernel's clocksource is
 * "tsc" (the kernel checked it), or when the processors say it is constant
 * and nonstop and no configured processor reads it behind the first this
 * process may run on (tsc_warp_between; at most 64 of them, spread). Never
 * on a processor other than x86-64. Takes 1-2 ms with two processors, at
 * most ~20 ms (more only where a processor hands over slowly). */
bool tsc_orders_events(void);

/* tsc_orders_events, its verdict kept in file for ten minutes of the boot
 * (one line: the boot's id, the processors allowed, when, the verdict):
 * the check takes 0.8-2.3 ms of a recording's start here, a twentieth of
 * what `record -- python3 -c pass` may add, and a CI loop records again
 * and again. Not longer: a virtual machine restored from a snapshot on
 * another host keeps its boot id. Only a conclusive verdict is kept (in
 * step, or a processor found behind); a check that could not hand over
 * often enough decides for this recording only. file NULL: no file. */
bool tsc_orders_events_cached(const char *file);

/* Whether a /proc/cpuinfo text says the TSC ticks at a constant rate and
 * does not stop in idle states ("constant_tsc" and "nonstop_tsc" in the
 * first "flags" line). */
bool cpuinfo_says_tsc_constant(const char *cpuinfo);

struct tsc_warp {
    uint64_t rounds;         /* handovers completed */
    uint64_t backward_ticks; /* the most one processor read behind the other; 0 in step */
};

/* Two threads pinned to cpu_a and cpu_b hand a TSC reading back and forth
 * (each reads the clock after it saw the other's reading, so a reading
 * lower than the one handed over is a warp) for at most max_rounds
 * handovers or budget_ns. b_behind_ticks is taken off cpu_b's readings:
 * 0 but in tests, which make a processor read behind. 0, or -1 when the
 * threads could not be created or pinned. */
int tsc_warp_between(int cpu_a, int cpu_b, uint64_t b_behind_ticks, uint64_t max_rounds, uint64_t budget_ns,
                     struct tsc_warp *warp);

#endif

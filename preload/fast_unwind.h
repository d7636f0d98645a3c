/*
 * fast_unwind.h - backtraces from cached call-frame rules, for the shim's
 * hot path.
 *
 * libunwind's unw_backtrace spends most of its ~130 instructions per frame
 * finding the unwind information of each return address again. On x86-64
 * nearly every frame's rule at a call site is one of "CFA = rsp + N" or
 * "CFA = rbp + N", with the return address at CFA - 8 and the caller's rbp
 * either unchanged or saved at CFA + M. fast_unwind looks that rule up once
 * per return address (with elfutils' CFI reader, from .eh_frame) and keeps it
 * in a lock-free table, so a frame costs a probe and two loads afterwards.
 *
 * Any frame whose rule is not of that shape (signal trampolines, hand-written
 * assembly with CFI expressions, code without CFI) makes fast_unwind give
 * up, and the caller falls back to libunwind for that backtrace: the result
 * is always what a CFI unwinder would give.
 */
#ifndef MEMSLOPE_FAST_UNWIND_H
#define MEMSLOPE_FAST_UNWIND_H

#include <stdint.h>

/* The state of the frame to start from: its return address into the
 * caller... more exactly: ip is an address in the frame's function (a
 * return address), sp its CFA-relative stack pointer and bp its rbp. */
struct fast_unwind_regs {
    uint64_t ip, sp, bp;
};

#define FAST_UNWIND_UNSUPPORTED (-1)
#define FAST_UNWIND_NEEDS_LOOKUP (-2)

/* Writes up to max return addresses, starting with start->ip, innermost
 * first. Returns the number written; FAST_UNWIND_UNSUPPORTED when some
 * frame's rule is not a simple one (the caller falls back to libunwind);
 * FAST_UNWIND_NEEDS_LOOKUP when a rule is not cached yet and lookup is 0.
 * Without lookup it neither allocates nor takes a lock, so it is safe in a
 * signal handler that interrupted another unwind; with lookup it reads CFI
 * with libdw, which allocates. stack_limit: no CFA may lie at or above it,
 * nor at or below the previous one; reads stay inside [start->sp,
 * stack_limit). */
int fast_unwind(const struct fast_unwind_regs *start, uint64_t stack_limit, uint64_t *frames, int max, int lookup);

/* Rules looked up and cached so far, and lookups that found no simple rule
 * (for tests and statistics). */
void fast_unwind_stats(uint64_t *cached, uint64_t *unsupported);

#endif

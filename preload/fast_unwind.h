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

#include <stdbool.h>
#include <stdint.h>

/* The state of the frame to start from: its return address into the
 * caller... more exactly: ip is an address in the frame's function (a
 * return address), sp its CFA-relative stack pointer and bp its rbp. */
struct fast_unwind_regs {
    uint64_t ip, sp, bp;
};

/* The registers to unwind from the caller of the function this expands
 * in, taken from that function's frame: it must keep a frame pointer
 * (-fno-omit-frame-pointer, as the shim and the unit tests are built), and
 * the macro must expand in it, not in a helper it calls. */
#define FAST_UNWIND_CALLER_REGS()                                                                       \
    __extension__({                                                                                     \
        const uint64_t *frame_pointer_ = __builtin_frame_address(0);                                    \
        (struct fast_unwind_regs){.ip = (uint64_t)(uintptr_t)__builtin_return_address(0),               \
                                  .sp = (uint64_t)(uintptr_t)(frame_pointer_ + 2),                      \
                                  .bp = frame_pointer_[0]};                                             \
    })

#define FAST_UNWIND_UNSUPPORTED (-1)
#define FAST_UNWIND_NEEDS_LOOKUP (-2)

/*
 * A thread's previous backtrace, kept so the next one unwinds only the
 * frames that changed, as a shadow stack would. Consecutive allocations
 * mostly share their outer frames (main, the loop, the library's entry
 * point): once the unwind reaches a frame with the same ip and stack
 * pointer as a remembered one (and the same rbp, when the rest of the
 * unwind reads it), the rest is what the remembered frames say, provided
 * every stack word the unwinder read past them (return addresses and saved
 * rbp values) still holds what it held. Those words are re-read and
 * compared, one independent load each, instead of a rule probe and a
 * dependent chain of loads per frame; any difference and the unwind goes
 * on the ordinary way. The result is always exactly what fast_unwind
 * without a memo returns.
 */
#define FAST_UNWIND_MEMO_FRAMES 64

/* Whole words only: a frame is written field by field and soon copied,
 * and a copy that reads bytes stored separately stalls on store
 * forwarding (it was half of fast_unwind's time). */
struct fast_unwind_memo_frame {
    uint64_t sp, bp;
    uint64_t bp_slot;     /* where the caller's rbp was read from; 0: not read (same value) */
    uint64_t suffix_hash; /* stack_hash_fold of this frame's ip and all outer ones */
    uint64_t flags;       /* FAST_UNWIND_USES_BP | _BP_MATTERS | _CHECK_BP */
};

#define FAST_UNWIND_USES_BP 1u    /* this frame's CFA is rbp-based */
#define FAST_UNWIND_BP_MATTERS 2u /* the unwind from this frame on reads this frame's rbp */
#define FAST_UNWIND_CHECK_BP 4u   /* bp_slot is set and the caller's rbp matters */

/* The frames kept are the last count entries of ip and frame, innermost
 * first (fast_unwind.c: memo_first). */
struct fast_unwind_memo {
    uint32_t count;    /* frames kept; 0 = nothing remembered */
    uint32_t ended;    /* how that unwind ended (fast_unwind.c's enum unwind_end) */
    uint64_t end_slot; /* where its terminating 0 return address was read */
    uint64_t reused;   /* unwinds that took frames from the memo (statistics, tests) */
    uint64_t ip[FAST_UNWIND_MEMO_FRAMES]; /* apart, so a reuse copies them in one go */
    struct fast_unwind_memo_frame frame[FAST_UNWIND_MEMO_FRAMES];
};

/* Where a backtrace's frames are, and their unfinished stack_hash
 * (stack_table.h: folded outermost first from STACK_HASH_SEED), which the
 * memo mostly has at hand already. */
struct fast_unwind_result {
    const uint64_t *frames; /* the caller's buffer, or the memo's (valid until its next use) */
    uint64_t hash;
    /* When frames are the memo's: its frames, one for each, whose
     * suffix_hash is the unfinished hash of frames[i] and all outer ones
     * (a merge that keeps an outer part of the backtrace hashes only the
     * rest); NULL when frames are the caller's buffer. */
    const struct fast_unwind_memo_frame *suffix;
};

/* Unwinds up to max return addresses, starting with start->ip, innermost
 * first. Returns their number; FAST_UNWIND_UNSUPPORTED when some frame's
 * rule is not a simple one (the caller falls back to libunwind);
 * FAST_UNWIND_NEEDS_LOOKUP when a rule is not cached yet and lookup is 0.
 * Without lookup it neither allocates nor takes a lock, so it is safe in a
 * signal handler that interrupted another unwind; with lookup it reads CFI
 * with libdw, which allocates. stack_limit: no CFA may lie at or above it,
 * nor at or below the previous one; reads stay inside [start->sp,
 * stack_limit).
 *
 * memo: the calling thread's (zeroed before first use), or NULL; used and
 * updated only by one unwind at a time (a signal handler interrupting an
 * unwind must pass NULL). buffer: room for max frames. Without result the
 * frames are always written to buffer; with it, frames taken from the
 * memo may be left there, and result says where they all are. */
int fast_unwind(const struct fast_unwind_regs *start, uint64_t stack_limit, uint64_t *buffer, int max, int lookup,
                struct fast_unwind_memo *memo, struct fast_unwind_result *result);

struct read_set; /* read_set.h */

/* The stack words the memo's whole backtrace was unwound from, appended to
 * reads: while they hold what they held, an unwind from start (with the
 * same stack_limit offset and max) gives the memo's frames again, as the
 * memo's reuse from its first frame would find. Call right after
 * fast_unwind returned count frames from start with this memo. false when
 * the memo does not hold exactly that backtrace, or reads overflowed.
 * *bp_matters: whether the unwind also depends on start->bp. */
bool fast_unwind_memo_reads(const struct fast_unwind_memo *memo, const struct fast_unwind_regs *start, int count,
                            int max, struct read_set *reads, bool *bp_matters);

/*
 * Rules kept across recordings (common/unwind_rules_file.h): a module's
 * rules are read from its file in directory when the unwinder first meets
 * the module, and found there without a lookup (or the guard a lookup
 * needs) from then on. The observer is told, for the tracer to keep them:
 * of each module met that has a build-id (module_added, with the number of
 * rules read for it), of each rule looked up in CFI, in any module
 * (rule_looked_up), both under the lookup lock, and of each rule taken
 * from a kept file (rule_reused, from any unwind: async-signal-safe).
 * Call once, before the first unwind; NULL directory: nothing is read.
 */
struct fast_unwind_module_info {
    uint64_t start, end; /* the executable mapping */
    uint64_t bias;       /* a rule's offset is its address less the bias */
    uint64_t file_size;
    const uint8_t *build_id;
    uint32_t build_id_size;
    uint32_t rules_kept;
};
struct fast_unwind_observer {
    void (*module_added)(const struct fast_unwind_module_info *module);
    void (*rule_looked_up)(uint64_t ip, uint64_t rule);
    void (*rule_reused)(void);
};
void fast_unwind_keep_rules(const char *directory, const struct fast_unwind_observer *observer);

/* Tells the observer of every module met so far again: in a fork child,
 * which reports into a region of its own, before it starts a thread. */
void fast_unwind_announce_modules(void);

/* Rules looked up and cached so far, and lookups that found no simple rule
 * (for tests and statistics). */
void fast_unwind_stats(uint64_t *cached, uint64_t *unsupported);

#endif

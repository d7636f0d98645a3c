/*
 * session.h - one `memslope record` run: the command launched, its
 * processes and threads traced, and the trace file written. The recording
 * engine's interface; how it works is its own (session_internal.h).
 */
#ifndef MEMSLOPE_SESSION_H
#define MEMSLOPE_SESSION_H

#include <stdint.h>

struct record_options {
    const char *output;       /* NULL: memslope.<command>.<pid>.trace */
    uint32_t max_frames;
    uint32_t snapshots_limit;
    uint64_t interval_ns;
    uint64_t checkpoint_ns;   /* --checkpoint: the first checkpoint's delay (0: none) */
    uint64_t sample_rate;
    uint32_t leak_check;      /* enum trace_leak_check */
    uint32_t clock;           /* --clock: enum event_clock (tsc_check.h) */
    int follow_children;
    int wait_all;             /* --wait-all: record what the command left running to its end */
    int quiet;                /* --quiet: no status line */
    int no_freeres;           /* --no-freeres: the shims skip freeres at exit */
    int no_symbol_cache;      /* --no-symbol-cache: resolve every frame from debug info */
    int verbose;              /* --verbose: what symbolization cost (frames from the cache, DWARF loaded) */
    const char *iteration_symbol; /* --iteration SYMBOL: NULL when not given */
    const char *python_iteration; /* --iteration py:[MODULE:]QUALNAME, without "py:"; NULL when not given */
    char *const *command;     /* argv of the target, NULL-terminated */
    int command_argc;
};

struct session; /* the recording engine's own (session_internal.h) */

/* A recording with these options (copied; the strings they point to must
 * outlive it). NULL when out of memory. */
struct session *session_create(const struct record_options *options);

/* Forks and execs the command with the shim preloaded and PTRACE_SEIZE
 * options set, creates the trace file before the target runs, and writes
 * the INFO section. Returns 0, or the exit status record should end with
 * (127 for a command that cannot be found, 1 for other failures) after
 * printing one clear message. */
int session_launch(struct session *session, const char *shim_path);

/* Runs until the command's own process has ended, and the processes it
 * started with it (--wait-all: until every one has; else those still
 * running are let go of, their records ending there), then writes the
 * remaining sections. Returns record's exit status. */
int session_run(struct session *session);

/* Completes the trace file and says where it is (unless --quiet), or why
 * it could not be completed. Returns exit_code, or 1 for a trace that
 * could not be completed when exit_code is 0. */
int session_finish(struct session *session, int exit_code);

void session_destroy(struct session *session);

/* Monotonic clock, nanoseconds. */
uint64_t session_now_ns(void);

#endif

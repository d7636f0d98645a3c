/*
 * session.h - one `memslope record` run: the traced processes and threads,
 * the ptrace event loop, and the hand-off of each process image's recorder
 * to the trace file.
 */
#ifndef MEMSLOPE_SESSION_H
#define MEMSLOPE_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "breakpoint.h"
#include "leak_check.h"
#include "../common/proc_maps.h"
#include "progress.h"
#include "python_frames.h"
#include "recorder.h"
#include "shm_consumer.h"
#include "sigtrap_guard.h"

struct symbol_store;
struct trace_writer;
struct traced_thread;

struct record_options {
    const char *output;       /* NULL: memslope.<command>.<pid>.trace */
    uint32_t max_frames;
    uint32_t snapshots_limit;
    uint64_t interval_ns;
    uint64_t checkpoint_ns;   /* --checkpoint: the first checkpoint's delay (0: none) */
    uint64_t sample_rate;
    uint32_t leak_check;      /* enum trace_leak_check */
    int follow_children;
    int quiet;                /* --quiet: no status line */
    int no_freeres;           /* --no-freeres: the shims skip freeres at exit */
    const char *iteration_symbol; /* --iteration SYMBOL: NULL when not given */
    const char *python_iteration; /* --iteration py:[MODULE:]QUALNAME, without "py:"; NULL when not given */
    char *const *command;     /* argv of the target, NULL-terminated */
    int command_argc;
};

enum traced_process_state { PROCESS_RUNNING, PROCESS_EXITING, PROCESS_ENDED };

struct symbolizer_warmup;

struct traced_process {
    uint32_t process_id;
    pid_t pid;
    uint32_t parent_process_id;
    char *exe;
    char **argv;
    uint32_t argc;
    uint64_t start_ns, end_ns;
    uint32_t flags;            /* enum trace_process_flags */
    int32_t exit_status, exit_signal;
    enum traced_process_state state;
    int live_threads;          /* threads that have not reached their exit stop */
    int final_snapshot_taken;
    int vfork_child;           /* shares its parent's memory until it execs */
    uint64_t next_attach_ns;   /* when to look for the shim's region again */
    uint64_t attach_tries;

    struct recorder recorder;
    struct python_frames python; /* the Python frames of its sites, named from the region */
    struct shm_consumer shm;
    uint64_t previous_image_inode; /* region of the image before exec: not ours */

    struct proc_maps maps;     /* every mapping seen while the image lived */
    int maps_final;            /* exec replaced the image: /proc/PID/maps is the next image's */
    size_t sites_checked;      /* sites whose frames are known to lie in maps */

    struct breakpoint_set breakpoints;
    struct sigtrap_guard sigtrap; /* the program's own SIGTRAP handler, kept across our traps */
    struct leak_results leaks; /* leak checks at case ends, then at exit or fatal signal */
    unsigned char *cases_checked; /* by case id: checked at its own end */
    size_t cases_checked_count;
    char *leak_check_note;     /* why no leak check ran, if it did not */
    int secure_execution;      /* AT_SECURE: setuid, setgid or file capabilities; ld.so ignores LD_PRELOAD */
    int statically_linked;     /* no PT_INTERP: no dynamic loader to preload the shim */
    uint64_t invalid_events;   /* events of its region no shim writes, skipped (shm_consumer.h) */
    int exit_checked;          /* no-ptrace mode: the shim's exit check ran and was recorded */
    struct symbolizer_warmup *warmup; /* symbolizing in the background (symbolize.h), or NULL */
    struct trace_output_state *output; /* what the trace has of the image (trace_output.h) */
    int warmup_tried;
};

struct pending_detach {
    pid_t pid;
    struct breakpoint_set breakpoints; /* to take out of the child's memory */
};

struct session {
    struct record_options options;
    struct trace_writer *writer;
    struct traced_process **processes;
    size_t process_count, process_capacity;
    struct traced_thread *threads; /* hash by tid */
    pid_t initial_pid;
    int initial_status_known;
    int first_exec_seen;
    char output_path[4096];
    uint32_t modules_written;  /* module ids are global to the trace */
    int write_failure_reported; /* a write to the trace failed, and was said (once) */
    uint64_t next_checkpoint_ns, checkpoint_gap_ns; /* when running images are next written, and the gap after */
    int exit_code;             /* record's own exit status: the target's */
    uint64_t start_ns;
    int interrupted;
    int fatal;                 /* a usage error found while running (exit status); the target is killed */
    int no_ptrace;             /* ptrace was refused: session_run records without it */
    int region_socket;         /* no-ptrace mode: the shims send their regions' memfds here (-1: none) */
    int iteration_symbol_found;
    /* images that ran CPython, those whose frames were read, and the
     * iterations they marked: what --iteration py: found */
    uint32_t python_interpreters, python_frames_read;
    uint64_t python_iterations;
    struct pending_detach *detach_pending; /* --no-follow: children to let go */
    size_t detach_count;           /* memslope got SIGTERM/SIGHUP: forwarded to the target */
    int warmups_running;           /* images with a symbolizer warm-up not yet ended (at most 1) */
    struct symbol_store *symbols;  /* shared by every image's symbolizer (symbolize.h); the caller's */
    struct progress_line progress; /* the status line on a terminal (progress.h) */
};

/* Forks and execs the command with the shim preloaded and PTRACE_SEIZE
 * options set, creates the trace file before the target runs, and writes
 * the INFO section. Returns 0, or the exit status record should end with
 * (127 for a command that cannot be found, 1 for other failures) after
 * printing one clear message. */
int session_launch(struct session *session, const char *shim_path);

/* Runs until every traced process has ended, then writes the remaining
 * sections. Returns record's exit status. */
int session_run(struct session *session);

void session_destroy(struct session *session);

/* Monotonic clock, nanoseconds. */
uint64_t session_now_ns(void);

#endif

/*
 * session_internal.h - what the files of the recording engine share: the
 * session, its process images and threads (session.c, session_stops.c,
 * session_world_stop.c, session_markers.c, session_noptrace.c; launch.c
 * starts the command, progress.c draws the status line from the table).
 * Nothing outside the engine includes it: the trace output is handed a
 * view of an image (trace_output.h), the command line session.h.
 */
#ifndef MEMSLOPE_SESSION_INTERNAL_H
#define MEMSLOPE_SESSION_INTERNAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uthash.h>

#include "breakpoint.h"
#include "../leakscan/leakscan.h"
#include "leak_check.h"
#include "../common/proc_maps.h"
#include "progress.h"
#include "python_frames.h"
#include "recorder.h"
#include "session.h"
#include "shm_consumer.h"
#include "sigtrap_guard.h"
#include "trace_output.h"

struct leak_check_pending;
struct socket_message;
struct symbol_store;
struct symbolizer_warmup;
struct trace_output_state;
struct trace_writer;

enum traced_process_state { PROCESS_RUNNING, PROCESS_EXITING, PROCESS_ENDED };

/* Case checks classified at once beside the program, at most (results of
 * checks that needed no thread may queue behind it: the queue holds one
 * more). Each holds a copy of the heap's memory and its lists until it is
 * collected: with three, issue 14's driver (a 25 MB copy per check) had
 * the tracer peak at 127-153 MiB against its 150 MB bar; with one (the
 * exit check waiting for it), 83-103 MiB, for a case end that may wait for
 * the last case's classification (0.43 -> 0.465 s). */
#define PENDING_CHECKS_MAX 1
#define PENDING_QUEUE (PENDING_CHECKS_MAX + 1)

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
    /* A fork child's first stop: whether glibc's fork made it (else the
     * shim's fork handler never runs in it: it is told to stop recording
     * through what its parent's region said, stop_recording_*). */
    int start_checked, raw_fork_child;
    int held_unreadable; /* its threads' held sets could not be read: said once */
    int held_case_late;  /* a case opened with a thread that did not stop: said once */
    int held_taken_at_end; /* its threads all end (exit, exec): the sets were taken, once */
    pid_t fork_parent_pid;
    uint64_t stop_recording_address;
    uint32_t stop_recording_value;
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
    /* Checks of cases classified on threads of their own (leak_check.h),
     * their results not yet in leaks, oldest first: results go in in the
     * order the checks were taken. */
    struct pending_case_check {
        struct leak_check_pending *check; /* NULL: results ready, waiting for older ones */
        struct leak_results ready;
        uint32_t when, case_id;
        uint64_t bytes; /* its copy's buffer */
    } pending_checks[PENDING_QUEUE];
    size_t pending_count;
    struct leak_check_spare check_spare; /* what the last check wrote, for the next (leak_check.h) */
    int secure_execution;      /* AT_SECURE: setuid, setgid or file capabilities; ld.so ignores LD_PRELOAD */
    int statically_linked;     /* no PT_INTERP: no dynamic loader to preload the shim */
    enum trace_preload preload; /* its LD_PRELOAD at its exec */
    char *preload_value;        /* TRACE_PRELOAD_WITHOUT_SHIM: the value; else NULL */
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
    int first_exec_seen;
    char output_path[4096];
    uint32_t modules_written;  /* module ids are global to the trace */
    int write_failure_reported; /* a write to the trace failed, and was said (once) */
    uint64_t next_checkpoint_ns, checkpoint_gap_ns; /* when running images are next written, and the gap after */
    int exit_code;             /* record's own exit status: the target's */
    uint64_t start_ns;
    int fatal;                 /* a usage error found while running (exit status); the target is killed */
    int no_ptrace;             /* ptrace was refused: session_run records without it */
    int clock_is_tsc;          /* events stamped with the TSC (--clock; tsc_check.h) */
    int holding;               /* the target's threads may hold unsampled blocks (held_sets.h) */
    uint64_t idle_wait_ns;     /* the drain loop's sleep while the rings are quiet (IDLE_WAIT_NS) */
    int region_socket;         /* no-ptrace mode: the shims send their regions' memfds here (-1: none) */
    int iteration_symbol_found;
    /* images that ran CPython, those whose frames were read, and the
     * iterations they marked: what --iteration py: found */
    uint32_t python_interpreters, python_frames_read;
    uint32_t python_before_3_11; /* of them, interpreters whose code objects have no qualified name */
    uint64_t python_iterations;
    uint32_t preload_lost; /* images that ran without the shim because a command removed or replaced LD_PRELOAD */
    struct pending_detach *detach_pending; /* --no-follow: children to let go */
    size_t detach_count;
    /* The launched command's own process has ended; what it left running
     * is let go of (let_go_of_the_rest) unless --wait-all, or until a
     * signal to memslope asks for it (let_go_asked). let_go_count: images
     * let go of, said once at the end; let_go_waited: of them, those whose
     * main thread had ended (a zombie, kept traced until the others end:
     * memslope's exit would kill them). */
    int initial_ended, let_go_asked;
    uint32_t let_go_count, let_go_waited;
    int warmups_running;           /* images with a symbolizer warm-up not yet ended (at most 1) */
    struct symbol_store *symbols;  /* shared by every image's symbolizer (symbolize.h); the caller's */
    struct kept_rules *kept_rules; /* the unwind rules the shims looked up (kept_rules.h); NULL: no cache */
    struct progress_line progress; /* the status line on a terminal (progress.h) */
    int priority_raised;           /* the drain loop runs above the target (raise_priority) */
    /* case checks (--verbose): classified from a copy, scanned in place;
     * the largest copy and the longest the process was held by one */
    uint32_t checks_copied, checks_in_place;
    uint64_t check_copy_max, check_hold_max_ns;
    /* MEMSLOPE_CHECK_COPY_MAX, when set (check_copy_limit) */
    int check_copy_set;
    uint64_t check_copy_limit_set;
    /* check_copy_limit as get_ready_for_leak_check last read it, and when:
     * it reads /proc and cgroup files, too dear for every drain */
    uint64_t ready_copy_limit, ready_copy_limit_ns;
    uint32_t processors; /* the processors memslope may run on, at the start */
};

/* Sleep between drains while the target runs and reports nothing. Each
 * wake-up costs a program whose threads fill the processors more than the
 * tracer's work does: with two threads holding their blocks
 * (malloc_bench -t 2 -W 800, MEMSLOPE_HOLD=always) the tracer woke 480
 * times a second at 2 ms, for 0.074 s of CPU in 3 s, and 0.052 s at 10 ms
 * (paired wall 1.073 and 1.053 of plain). A full ring, a message on the
 * region socket or the symbolizer warm-up's end ends the sleep at once
 * (SHM_TRACER_DOORBELL), and so does a stop (SIGCHLD). */
#define IDLE_WAIT_NS 10000000L
/* The sleep while an image's threads cannot ring (doorbell_refused): as
 * before the doorbell. */
#define IDLE_WAIT_UNRUNG_NS 2000000L

/* A drain that found fewer events than this, with a processor free for
 * the tracer to come back on, is followed by a pause of BUSY_PAUSE_NS (cut
 * short by a child's stop): see wait_after_drain. */
#define BUSY_PAUSE_EVENTS 8192u
#define BUSY_PAUSE_NS 100000L

struct traced_thread {
    pid_t tid;
    struct traced_process *process;
    int reached_exit; /* stopped at PTRACE_EVENT_EXIT already */
    /* A stop of it was collected while the world was stopped and is not
     * handled yet (world_stop_end): it stays stopped meanwhile, and a
     * stop of the world started by another thread's stop in between must
     * count it as stopped, not interrupt it and wait for a stop that will
     * never come (issue 19: three threads at one breakpoint hung). */
    int held;
    UT_hash_handle hh;
};

/* session.c: the process table */
struct traced_process *process_create(struct session *session, pid_t pid, uint32_t parent_process_id);
struct traced_process *process_by_pid(struct session *session, pid_t pid);
char *read_proc_file(pid_t pid, const char *name, size_t *length);
void process_read_identity(struct traced_process *process);
void process_copy_identity(struct traced_process *to, const struct traced_process *from);
struct traced_thread *thread_find(struct session *session, pid_t tid);
struct traced_thread *thread_add(struct session *session, pid_t tid, struct traced_process *process);
void thread_remove(struct session *session, struct traced_thread *thread);

/* session.c: draining, the region socket, an image's end */
void process_merge_maps(struct traced_process *process, struct proc_maps fresh);
void process_refresh_maps(struct traced_process *process);
size_t process_drain(struct traced_process *process, int full);
void process_drain_all(struct session *session, struct traced_process *process);
void process_drain_at_marker(struct session *session, struct traced_process *process);
/* The value of auxiliary-vector entry type (AT_ENTRY, AT_SECURE; <elf.h>)
 * of pid: 0, or -1 when it has none or the vector cannot be read. */
int process_auxv_value(pid_t pid, uint64_t type, uint64_t *value);
/* Whether a mapping's path is the shim's (ends in /libmemslope.so). */
int path_is_shim(const char *path);
int receive_message(struct session *session, struct socket_message *message);
int map_sent_region(struct socket_message *message, struct shm_consumer *consumer, pid_t *pid);
void reply_to_exit_check(struct session *session);
void process_final_snapshot(struct session *session, struct traced_process *process, uint32_t kind,
                            pid_t stopped_tid);
void process_end(struct session *session, struct traced_process *process);
struct traced_process *replace_image(struct session *session, struct traced_process *old);
void checkpoint_running_images(struct session *session, uint64_t now);
void warn_iterations_missed(struct session *session);
void forward_signal(struct session *session, int signal);
/* Waits as a drain that found `events` asks (nothing, a pause, the idle
 * sleep); returns the signal that ended the wait (0: none). */
int wait_after_drain(struct session *session, const sigset_t *wait_set, size_t events);

/* session_stops.c */
void resume_thread(pid_t tid, int signal);
void process_set_exit(struct traced_process *process, int status);
void handle_wait_status(struct session *session, pid_t tid, int status);
/* Once the command's own process has ended, and unless --wait-all (or a
 * signal to memslope asked for it): every image still running is let go
 * of, its record ending as it stands ("still running when the command
 * ended"), its threads detached to run on untraced. */
void let_go_of_the_rest(struct session *session);

/* session_world_stop.c: a stop of the world, every other thread of an
 * image interrupted and held so that a leak check sees its heap, registers
 * and stacks as they are. Between world_stop_begin and world_stop_end,
 * tids[0, stopped) are the stopped threads, the one whose stop began it
 * first (the caller resumes that one); late counts the threads that did
 * not stop in time and run on: a scan then would miss their registers and
 * race their writes, so none runs (note_late_threads says which check was
 * skipped). What the others reported meanwhile is handled at the end. */
struct deferred_status;
struct world_stop {
    pid_t *tids;
    size_t stopped, late;
    struct deferred_status *deferred;
    size_t deferred_count;
};
/* How long a stop of a thread is waited for (one in an uninterruptible
 * sleep, or being killed, may not stop): then it is let run. */
#define THREAD_STOP_TIMEOUT_NS 2000000000ull
/* Waits for tid's next stop or exit until the deadline: 1 when it came
 * (*status), 0 at the deadline, -1 when tid is gone (reaped elsewhere). */
int wait_for_stop(pid_t tid, int *status, uint64_t deadline_ns);
/* -1 when out of memory: nothing stopped, nothing for world_stop_end to do. */
int world_stop_begin(struct world_stop *world, struct session *session, struct traced_process *process,
                     pid_t stopped_tid);
void world_stop_end(struct world_stop *world, struct session *session);
/* copy_limit: leak_check_run's (check_copy_limit, or 0: in place). */
int run_leak_check(struct traced_process *process, const pid_t *tids, size_t count, uint32_t when,
                   const unsigned char *skip_cases, size_t skip_count, uint64_t copy_limit,
                   struct leak_results *results, char *err, size_t err_size);
/* MEMSLOPE_CHECK_COPY_MAX (read once, by read_check_copy_max, which warns
 * of a value that is not a size), or its default (docs/leakscan.md). */
uint64_t check_copy_limit(const struct session *session);
void read_check_copy_max(struct session *session);
/* A check of the open case started on its own thread (leak_check_start),
 * the process held only while its memory is copied: 0, or 1 when the copy
 * would be too large (check in place), or -1 with a message. */
int start_case_check(const struct session *session, struct traced_process *process, const pid_t *tids,
                     size_t count, uint32_t when, char *err, size_t err_size);
/* Gets the process's lists and copy's buffer ready for its next leak check
 * (leak_check_spare_ready), a few pages at a time while the drain keeps
 * up: drained, the events the drain just took (a ring a quarter full or
 * more: the drain is behind, and this waits). */
#define READY_PAGES_PER_DRAIN 256u /* ~1.2 ms of page faults here, while the ring fills by 3,000 events at most */
#define READY_DRAINED_MAX (SHM_RING_EVENTS / 4)
void get_ready_for_leak_check(struct session *session, struct traced_process *process, size_t drained);
void add_leak_check_note(struct traced_process *process, const char *why);
/* Takes the blocks the process's threads hold in their sets into its
 * recorder (held_sets.h), reading through reader, one of its threads that
 * is stopped; only when none of them can run the program's code. */
void take_held_blocks(struct traced_process *process, pid_t reader);
void note_late_threads(struct traced_process *process, size_t late, const char *check);
void process_leak_check(struct session *session, struct traced_process *process, pid_t stopped_tid, uint32_t kind);

/* session_markers.c */
void process_watch_entry(struct session *session, struct traced_process *process);
/* The results of the process's pending case checks, oldest first (wait: 0
 * takes them only as far as their threads are finished). */
void collect_case_check(struct traced_process *process, int wait);
/* Waits for the oldest pending case check and takes its results. */
void collect_oldest_case_check(struct traced_process *process);
int on_breakpoint(struct session *session, struct traced_thread *thread);

/* session_noptrace.c */
int session_run_without_ptrace(struct session *session, const sigset_t *wait_set);

#endif

/*
 * session_internal.h - what the files of the recording engine share
 * (session.c, session_stops.c, session_world_stop.c, session_markers.c,
 * session_noptrace.c). Nothing else includes it.
 */
#ifndef MEMSLOPE_SESSION_INTERNAL_H
#define MEMSLOPE_SESSION_INTERNAL_H

#include <signal.h>
#include <uthash.h>

#include "session.h"

struct leak_results;
struct shm_consumer;
struct socket_message;

/* Sleep between drains while the target runs and reports nothing. */
#define IDLE_WAIT_NS 2000000L

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

/* session_stops.c */
void resume(pid_t tid, int signal);
void process_set_exit(struct traced_process *process, int status);
void handle_wait_status(struct session *session, pid_t tid, int status);

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
/* -1 when out of memory: nothing stopped, nothing for world_stop_end to do. */
int world_stop_begin(struct world_stop *world, struct session *session, struct traced_process *process,
                     pid_t stopped_tid);
void world_stop_end(struct world_stop *world, struct session *session);
int run_leak_check(struct traced_process *process, const pid_t *tids, size_t count, uint32_t when,
                   const unsigned char *skip_cases, size_t skip_count, struct leak_results *results, char *err,
                   size_t err_size);
void add_leak_check_note(struct traced_process *process, const char *why);
void note_late_threads(struct traced_process *process, size_t late, const char *check);
void process_leak_check(struct session *session, struct traced_process *process, pid_t stopped_tid, uint32_t kind);

/* session_markers.c */
void process_watch_entry(struct session *session, struct traced_process *process);
int on_breakpoint(struct session *session, struct traced_thread *thread);

/* session_noptrace.c */
int session_run_without_ptrace(struct session *session, const sigset_t *wait_set);

#endif

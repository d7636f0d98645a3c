/*
 * session_noptrace.c - `memslope record` where ptrace is refused (seccomp,
 * Yama, no CAP_SYS_PTRACE): the target is an ordinary child, each image's
 * shim hands its region over the socket, and the leak check at exit runs
 * through the descriptors the exiting process opens on itself.
 */
#include "session_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../leakscan/leakscan.h"
#include "socket_message.h"

/* A new region from the same pid: the process exec'd a program that loaded
 * the shim. The old image ends there, the new one begins. */
static struct traced_process *start_image_without_ptrace(struct session *session, struct traced_process *current,
                                                        struct shm_consumer *region)
{
    if (!current->shm.base) {
        current->shm = *region;
        current->flags |= TRACE_PROC_SHIM_SEEN;
        process_read_identity(current);
        process_refresh_maps(current);
        return current;
    }
    struct traced_process *image = replace_image(session, current);
    if (!image) {
        shm_consumer_detach(region);
        return current;
    }
    image->shm = *region;
    image->flags |= TRACE_PROC_SHIM_SEEN;
    process_refresh_maps(image);
    return image;
}

/* Whether the process has ended (not reaped: its status stays for the
 * loop's waitpid). */
static int process_has_ended(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == pid;
}

/* The scan of the exit check, through the descriptors the process opened
 * on itself; recorded like ptrace mode's check at the exit stop. */
static void scan_handed_over(struct traced_process *process, const struct socket_message *message)
{
    const struct shm_exit_check_request *request = &message->exit_check;
    struct leakscan_shim_memory shim;
    struct leakscan_range *ranges;
    struct leakscan_handover handover = {message->mem_fd, message->maps_fd, request->stack_pointer,
                                         request->registers, request->register_count, &shim};
    struct leak_results results = {0};
    char err[512];
    int rc = shm_consumer_shim_memory(&process->shm, &shim, &ranges);
    if (rc < 0)
        snprintf(err, sizeof err, "out of memory copying the allocator ranges");
    else
        rc = leak_check_run_handover(process->pid, &handover, &process->recorder, session_now_ns(), &results, err,
                                     sizeof err);
    free(ranges);
    /* Another thread may have ended the process meanwhile (exit_group):
     * its memory went away under the scan. */
    if (rc == 0 && process_has_ended(process->pid)) {
        leak_results_free(&results);
        snprintf(err, sizeof err, "it ended during the check at exit (another thread ended it); nothing was reported");
        rc = -1;
    }
    if (rc == 0 && leak_results_append(&process->leaks, &results) == 0) {
        process->exit_checked = 1;
    } else {
        free(process->leak_check_note);
        if (asprintf(&process->leak_check_note, "no leak check for process %d: %s", (int)process->pid,
                     rc == 0 ? "out of memory keeping the results" : err) < 0)
            process->leak_check_note = NULL;
    }
    leak_results_free(&results);
}

/* The shim's request at the process's end (preload/exit_check.c): its
 * exiting thread waits, after exit()'s handlers and every destructor (or in
 * _exit). Every event before the request is in the rings: drain them all,
 * scan, then let the process go on. */
static void exit_check_without_ptrace(struct session *session, struct traced_process *process,
                                      struct socket_message *message)
{
    if ((pid_t)message->exit_check.pid == process->pid && process->shm.base && !process->exit_checked &&
        session->options.leak_check != TRACE_LEAK_CHECK_OFF) {
        process_drain(process, 1);
        scan_handed_over(process, message);
    }
    /* The process's own maps, read while it waits: a process that lived a
     * few milliseconds may be gone before the tracer reads /proc/PID/maps,
     * and its frames would have no module to be named from (issue 19). */
    struct proc_maps handed;
    if ((pid_t)message->exit_check.pid == process->pid && lseek(message->maps_fd, 0, SEEK_SET) == 0 &&
        proc_maps_read_fd(message->maps_fd, &handed) == 0)
        process_merge_maps(process, handed);
    socket_message_close(message);
    reply_to_exit_check(session);
}

static struct traced_process *receive_regions(struct session *session, struct traced_process *process)
{
    struct socket_message message;
    while (receive_message(session, &message)) {
        if (message.kind == SOCKET_MESSAGE_EXIT_CHECK) {
            exit_check_without_ptrace(session, process, &message);
            continue;
        }
        struct shm_consumer region;
        pid_t pid;
        if (!map_sent_region(&message, &region, &pid))
            continue;
        if (pid == process->pid)
            process = start_image_without_ptrace(session, process, &region);
        else
            shm_consumer_detach(&region); /* not ours to follow */
    }
    return process;
}

/* Without ptrace the check at exit runs only if the process's shim asks
 * for it: not when a signal kills it, nor at a raw exit_group. */
static void note_missing_exit_check(struct session *session, struct traced_process *process)
{
    if (session->options.leak_check == TRACE_LEAK_CHECK_OFF || process->exit_checked || process->leak_check_note)
        return;
    int rc;
    if (process->exit_signal)
        rc = asprintf(&process->leak_check_note,
                      "no leak check for process %d: ptrace is not permitted here, and the process was killed by "
                      "signal %d before the check it runs itself at exit",
                      (int)process->pid, process->exit_signal);
    else
        rc = asprintf(&process->leak_check_note,
                      "no leak check for process %d: ptrace is not permitted here, and the process ended without "
                      "the check it runs itself at exit() or _exit (a raw exit_group system call, or a program "
                      "the shim was not loaded into)",
                      (int)process->pid);
    if (rc < 0)
        process->leak_check_note = NULL;
}

static void end_without_ptrace(struct session *session, struct traced_process *process, int status)
{
    process_set_exit(process, status);
    session->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!process->exe)
        process->exe = strdup(session->options.command[0]);
    note_missing_exit_check(session, process);
    process->final_snapshot_taken = 1; /* the snapshot below, from the events; no stop */
    process_drain(process, 1);
    recorder_case_end(&process->recorder, session_now_ns());
    recorder_snapshot(&process->recorder, process->exit_signal ? TRACE_SNAP_SIGNAL : TRACE_SNAP_EXIT,
                      session_now_ns());
    process_end(session, process);
}

/* ptrace refused: the child is an ordinary child. Each image's shim sends
 * its region over a socket the moment it exists, so even a process that
 * ends at once is recorded; its exit status comes from waitpid. */
int session_run_without_ptrace(struct session *session, const sigset_t *wait_set)
{
    struct traced_process *process = process_create(session, session->initial_pid, TRACE_NONE);
    if (!process)
        return 1;
    process->flags |= TRACE_PROC_PRIMARY;
    int rung = 0; /* the doorbell ended the last wait: look at every slot */
    for (;;) {
        int status;
        pid_t got = waitpid(process->pid, &status, WNOHANG);
        process = receive_regions(session, process);
        size_t events = process_drain(process, rung);
        progress_update(&session->progress, session, session_now_ns());
        checkpoint_running_images(session, session_now_ns());
        if (got == process->pid) {
            end_without_ptrace(session, process, status);
            warn_iterations_missed(session);
            return session->exit_code;
        }
        if (got < 0 && errno != EINTR)
            return 1;
        rung = wait_after_drain(session, wait_set, events) == SHM_TRACER_DOORBELL;
    }
}

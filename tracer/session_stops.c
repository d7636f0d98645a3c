/*
 * session_stops.c - what each ptrace stop means: a new thread or process
 * (clone, fork, vfork), an exec, a thread's exit, a signal on its way to the
 * target (passed through unchanged, group-stops kept with PTRACE_LISTEN),
 * and a task that is gone. Children are let go of here under --no-follow.
 */
#include "session_internal.h"

#include "held_sets.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/kcmp.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

/* ---- ptrace stops -------------------------------------------------------- */

void resume_thread(pid_t tid, int signal)
{
    ptrace(PTRACE_CONT, tid, 0, (void *)(long)signal);
}

/* A signal set of /proc/PID/status (key: "\nSigIgn:", "\nSigPnd:", ...);
 * empty when the line is missing. */
static unsigned long long status_signal_set(const char *status, const char *key)
{
    const char *line = strstr(status, key);
    return line ? strtoull(line + strlen(key), NULL, 16) : 0;
}

/* Whether delivering signal will kill the process: not caught, not ignored,
 * and terminating by default. */
static int signal_is_fatal(pid_t tid, int signal)
{
    switch (signal) {
    case SIGCHLD: case SIGURG: case SIGWINCH: case SIGCONT:
    case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU:
        return 0;
    case SIGKILL:
        return 1;
    default:
        break;
    }
    char *status = read_proc_file(tid, "status", NULL);
    if (!status)
        return 0;
    unsigned long long ignored = status_signal_set(status, "\nSigIgn:");
    unsigned long long caught = status_signal_set(status, "\nSigCgt:");
    free(status);
    unsigned long long bit = 1ull << (signal - 1);
    return !(caught & bit) && !(ignored & bit);
}

/* Whether any record, ended or not, was ever made for pid. */
static int pid_known(struct session *session, pid_t pid)
{
    for (size_t i = 0; i < session->process_count; i++)
        if (session->processes[i]->pid == pid)
            return 1;
    return 0;
}

/* Whether a thread of the process is sending blocks it took out of its
 * held set (shm_layout.h, held_sending). */
static int held_sends_in_flight(const struct traced_process *process)
{
    const struct shm_consumer *shm = &process->shm;
    for (uint32_t i = 0; shm->base && i < shm->seen_high_water; i++)
        if (__atomic_load_n(&shm_slot(shm->base, i)->held_sending, __ATOMIC_ACQUIRE))
            return 1;
    return 0;
}

/* The parent's threads run on while its forking thread is stopped here: a
 * block one of them took out of its set before the fork instant and sends
 * after it is in neither the child's copy of the set nor the rings yet.
 * Drained once no such send is under way (seen after the send ends, its
 * event is in the ring): at most 20 ms, a thread may be stopped or
 * blocked, draining meanwhile, a full ring may be what it waits for. */
static void drain_held_sends(struct session *session, struct traced_process *parent)
{
    for (int waited = 0; held_sends_in_flight(parent) && waited < 400; waited++) {
        process_drain_all(session, parent);
        struct timespec pause = {0, 50000};
        nanosleep(&pause, NULL);
    }
    process_drain_all(session, parent);
}

/* A fork child starts as its parent's image: the same program, the heap as
 * it was at the fork, the same breakpoints and mappings. The parent's
 * events up to the fork must all be in its table before the copy: a parent
 * that is itself a young fork child may not have had its region found yet,
 * its events since its own fork would be missing from the copy, and the
 * child's table would hold blocks the child never had (a later allocation
 * inside one made the leak check refuse the table as corrupt: bash's
 * subshells under pyenv's shims). */
static struct traced_process *fork_child_create(struct session *session, struct traced_process *parent, pid_t child,
                                                int vfork)
{
    if (parent->recorder.sample_rate && !vfork)
        drain_held_sends(session, parent);
    else
        process_drain_all(session, parent);
    struct traced_process *process = process_create(session, child, parent->process_id);
    if (!process)
        return NULL;
    process_copy_identity(process, parent);
    process->flags |= parent->flags & TRACE_PROC_SHIM_SEEN; /* the shim is in the copied memory */
    if (vfork)
        process->vfork_child = 1;
    else if (recorder_init_fork_child(&process->recorder, &parent->recorder) < 0)
        process->recorder.out_of_memory = 1;
    else if (held_sets_inherit(&parent->shm, &process->recorder, child, session_now_ns()) < 0)
        add_leak_check_note(process, "the blocks its parent's threads held back at the fork (--sample-rate) "
                                     "could not be read from the child: its figures may miss them; record "
                                     "with MEMSLOPE_HOLD=0 to have every block sent");
    process->recorder.snapshots_limit = parent->recorder.snapshots_limit;
    process->previous_image_inode = parent->shm.inode;
    process->fork_parent_pid = parent->pid;
    process->raw_fork_child = parent->raw_fork_child; /* its copy of the shim was told to stop too */
    if (parent->shm.base && !vfork) {
        const struct shm_header *header = parent->shm.base;
        process->stop_recording_address = __atomic_load_n(&header->stop_recording_address, __ATOMIC_RELAXED);
        process->stop_recording_value = __atomic_load_n(&header->stop_recording_value, __ATOMIC_RELAXED);
    }
    breakpoint_set_copy(&process->breakpoints, &parent->breakpoints);
    process->sigtrap = parent->sigtrap; /* a fork child keeps its parent's handlers */
    proc_maps_copy(&process->maps, &parent->maps); /* on failure: read again when needed */
    return process;
}

/* --no-follow: the kernel attached the child (we trace forks to get here
 * first); take our breakpoints out of its copy of memory, then detach. Its
 * shim does not record (MEMSLOPE_NO_FOLLOW). A vfork child shares its
 * parent's memory, so its breakpoints stay: it only runs until exec. */
static void let_go_of_child(struct session *session, struct traced_process *parent, pid_t child, int shared_memory)
{
    for (size_t i = 0; i < session->detach_count; i++)
        if (session->detach_pending[i].pid == child)
            return;
    struct pending_detach *grown =
        realloc(session->detach_pending, (session->detach_count + 1) * sizeof *session->detach_pending);
    if (!grown)
        return;
    session->detach_pending = grown;
    struct pending_detach *pending = &session->detach_pending[session->detach_count++];
    memset(pending, 0, sizeof *pending);
    pending->pid = child;
    if (!shared_memory)
        breakpoint_set_copy(&pending->breakpoints, &parent->breakpoints);
}

/* A stop of a child we are letting go of: returns 1 when handled. */
static int detach_if_pending(struct session *session, pid_t tid, int status)
{
    for (size_t i = 0; i < session->detach_count; i++) {
        struct pending_detach *pending = &session->detach_pending[i];
        if (pending->pid != tid)
            continue;
        if (WIFSTOPPED(status)) {
            breakpoint_remove_all(tid, &pending->breakpoints);
            int signal = (status >> 16) == 0 ? WSTOPSIG(status) : 0;
            ptrace(PTRACE_DETACH, tid, 0, (void *)(long)signal);
        }
        breakpoint_set_free(&pending->breakpoints);
        session->detach_pending[i] = session->detach_pending[--session->detach_count];
        return 1;
    }
    return 0;
}

/* ---- the command's end: what it left running ----------------------------- */

/* A thread of an image being let go of, stopped: the signal to deliver as
 * it is detached (a signal-delivery stop's; 0 for an interrupt or event),
 * and whether it stopped at the exec of a new image. */
struct stopped_task {
    pid_t tid;
    int signal;
    int exec;
};

/* What letting go of an image's threads found. */
struct letting_go {
    struct stopped_task *stopped;
    size_t stopped_count;
    pid_t *late; /* did not stop in time: let go of at their stop */
    size_t late_count;
    int exited;  /* the image ended meanwhile: its status is the process's */
};

/* Whether tid is a zombie: a main thread that ended while others run on.
 * It never stops again, nor can it be detached. */
static int thread_is_zombie(pid_t tid)
{
    char *stat = read_proc_file(tid, "stat", NULL);
    const char *end = stat ? strrchr(stat, ')') : NULL;
    int zombie = end && end[1] == ' ' && end[2] == 'Z';
    free(stat);
    return zombie;
}

/* A SIGTRAP stop at one of our int3s: rip back on the instruction the
 * breakpoint replaced (taken out before the detach), and no signal: the
 * program never sees the trap (it was killed by it). A trap inside the
 * program's own SIGTRAP handler reset that handler: it is put back, as
 * after any of our breakpoints (sigtrap_guard.h). */
static int undo_breakpoint_trap(pid_t tid, struct traced_process *process)
{
    struct breakpoint *hit = breakpoint_hit(tid, &process->breakpoints);
    struct user_regs_struct regs;
    if (!hit || ptrace(PTRACE_GETREGS, tid, 0, &regs) < 0)
        return 0;
    regs.rip = hit->address;
    if (ptrace(PTRACE_SETREGS, tid, 0, &regs) != 0)
        return 0;
    int pending_signal = 0;
    sigtrap_guard_repair(&process->sigtrap, process->pid, tid, &pending_signal);
    return 1;
}

/* Whether SIGTRAP waits in tid's own pending set (/proc's SigPnd): an int3
 * run just as the interrupt came is reported after the interrupt stop. */
static int trap_pending(pid_t tid)
{
    char *status = read_proc_file(tid, "status", NULL);
    unsigned long long pending = status ? status_signal_set(status, "\nSigPnd:") : 0;
    free(status);
    return (pending >> (SIGTRAP - 1)) & 1;
}

/* The queued trap taken as a stop of its own (the thread resumed, it stops
 * at once to deliver it): 1 with *status, else 0 (gone, or no stop). */
static int take_pending_trap(pid_t tid, uint64_t deadline, int *status)
{
    if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
        return 0;
    return wait_for_stop(tid, status, deadline) == 1 && WIFSTOPPED(*status);
}

/* Interrupts tid and sorts out what its stop means. A thread stopping to
 * exit is let go of at once (an exec in another thread waits for it); a
 * fork or clone it was making is let go of at the child's first stop (a
 * fork child with the breakpoints of its copy of memory). */
static void interrupt_for_letting_go(struct session *session, struct traced_process *process, pid_t tid,
                                     uint64_t deadline, struct letting_go *going)
{
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0)
        return;
    int status;
    int came = wait_for_stop(tid, &status, deadline);
    if (came == 0) {
        going->late[going->late_count++] = tid;
        return;
    }
    if (came < 0)
        return;
    if (!WIFSTOPPED(status)) {
        if (tid == process->pid) { /* the image's end, not to be lost */
            process_set_exit(process, status);
            going->exited = 1;
        }
        return;
    }
    int event = status >> 16;
    if (event == PTRACE_EVENT_STOP && trap_pending(tid)) {
        if (!take_pending_trap(tid, deadline, &status)) {
            going->late[going->late_count++] = tid; /* running: let go of at its stop */
            return;
        }
        event = status >> 16;
    }
    if (event == PTRACE_EVENT_EXIT) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        return;
    }
    if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
        unsigned long child = 0;
        if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) == 0 && child)
            let_go_of_child(session, process, (pid_t)child, event != PTRACE_EVENT_FORK);
    }
    int signal = event == 0 ? WSTOPSIG(status) : 0;
    if (signal == SIGTRAP && undo_breakpoint_trap(tid, process))
        signal = 0;
    going->stopped[going->stopped_count++] = (struct stopped_task){tid, signal, event == PTRACE_EVENT_EXEC};
}

/* Interrupts every thread of process but those on their way out, into
 * going. Returns 1 when its main thread has ended while others run: that
 * one cannot stop or be detached, and memslope's exit would kill the
 * process (PTRACE_O_EXITKILL), so it stays traced until the others end.
 * Said now, --quiet or not: memslope waits, and this is why. */
static int interrupt_threads_for_letting_go(struct session *session, struct traced_process *process,
                                            struct letting_go *going)
{
    uint64_t deadline = session_now_ns() + THREAD_STOP_TIMEOUT_NS;
    int leader_kept = 0;
    struct traced_thread *thread, *tmp;
    HASH_ITER(hh, session->threads, thread, tmp) {
        if (thread->process != process)
            continue;
        pid_t tid = thread->tid;
        if (tid == process->pid && (thread->reached_exit || thread_is_zombie(tid))) {
            fprintf(stderr,
                    "memslope: process %d's main thread has ended while its other threads run on: its record "
                    "ends here, and memslope waits for it to end (leaving it would kill it)\n",
                    (int)tid);
            leader_kept = 1;
            continue;
        }
        if (thread->reached_exit)
            continue; /* on its way out: its end comes to the loop */
        thread_remove(session, thread);
        interrupt_for_letting_go(session, process, tid, deadline, going);
    }
    return leader_kept;
}

/* The record of a process let go of says so, and why it has no leak check. */
static void mark_let_go(struct session *session, struct traced_process *process, int leader_kept)
{
    process->flags |= TRACE_PROC_LET_GO;
    if (session->options.leak_check != TRACE_LEAK_CHECK_OFF && (process->flags & TRACE_PROC_SHIM_SEEN) &&
        !process->leak_check_note &&
        asprintf(&process->leak_check_note,
                 "no leak check for process %d: it was still running when the command ended, and was let go "
                 "of (record --wait-all records it to its end)",
                 (int)process->pid) < 0)
        process->leak_check_note = NULL;
    session->let_go_count++;
    session->let_go_waited += leader_kept;
}

/* Every thread stopped, the image's record ended with all it wrote until
 * then, the breakpoints taken out of the memory the threads share (not
 * after an exec: that memory is the new image's), then each detached: none
 * runs into an int3 untraced. A thread that did not stop in time is let go
 * of at its stop, the breakpoints taken out then if they are still in. */
static void let_go_of_running_process(struct session *session, struct traced_process *process)
{
    size_t count = 0;
    struct traced_thread *thread, *tmp;
    HASH_ITER(hh, session->threads, thread, tmp)
        count += thread->process == process;
    struct letting_go going = {calloc(count + 1, sizeof *going.stopped), 0, calloc(count + 1, sizeof *going.late),
                               0, 0};
    if (!going.stopped || !going.late) { /* tried again at the next turn of the loop */
        free(going.stopped);
        free(going.late);
        return;
    }
    int leader_kept = interrupt_threads_for_letting_go(session, process, &going);
    int exec_seen = 0;
    for (size_t i = 0; i < going.stopped_count; i++)
        exec_seen |= going.stopped[i].exec;
    int removed = going.stopped_count && !exec_seen;
    if (removed)
        breakpoint_remove_all(going.stopped[0].tid, &process->breakpoints);
    if (!going.exited)
        mark_let_go(session, process, leader_kept);
    if (!exec_seen && !going.late_count && going.stopped_count) {
        process_drain_all(session, process);
        take_held_blocks(process, going.stopped[0].tid); /* they end the record live, as they are */
    }
    process_end(session, process); /* drains what its stopped threads wrote */
    for (size_t i = 0; i < going.stopped_count; i++)
        ptrace(PTRACE_DETACH, going.stopped[i].tid, 0, (void *)(long)going.stopped[i].signal);
    for (size_t i = 0; i < going.late_count; i++)
        let_go_of_child(session, process, going.late[i], removed || exec_seen);
    free(going.stopped);
    free(going.late);
}

void let_go_of_the_rest(struct session *session)
{
    if (!session->initial_ended || (session->options.wait_all && !session->let_go_asked))
        return;
    for (size_t i = 0; i < session->process_count; i++)
        if (session->processes[i]->state == PROCESS_RUNNING)
            let_go_of_running_process(session, session->processes[i]);
}

static void on_new_task(struct session *session, struct traced_thread *thread, int event)
{
    unsigned long message = 0;
    ptrace(PTRACE_GETEVENTMSG, thread->tid, 0, &message);
    pid_t child = (pid_t)message;
    struct traced_process *parent = thread->process;
    if (event == PTRACE_EVENT_CLONE) {
        thread_add(session, child, parent);
        return;
    }
    if (!session->options.follow_children) {
        let_go_of_child(session, parent, child, event == PTRACE_EVENT_VFORK);
        return;
    }
    /* The child's first stop may have come first (thread_discover set it up). */
    if (pid_known(session, child))
        return;
    struct traced_process *process = fork_child_create(session, parent, child, event == PTRACE_EVENT_VFORK);
    if (process)
        thread_add(session, child, process);
}

static void on_exec(struct session *session, struct traced_thread *thread)
{
    struct traced_process *old = thread->process;
    pid_t pid = old->pid;
    /* Other threads vanished in the exec. */
    struct traced_thread *t, *tmp;
    HASH_ITER(hh, session->threads, t, tmp) {
        if (t->process == old && t->tid != old->pid) {
            t->reached_exit = 1;
            thread_remove(session, t);
        }
    }
    struct traced_process *image = replace_image(session, old);
    if (!image)
        return;
    process_watch_entry(session, image);
    thread = thread_find(session, pid);
    if (thread) {
        thread->process = image;
        thread->reached_exit = 0;
        image->live_threads = 1;
    } else {
        thread_add(session, pid, image);
    }
    process_refresh_maps(image);
}

/* memslope's own child runs memslope's code until its first exec; the
 * first image starts there. */
static void on_first_exec(struct session *session, pid_t pid)
{
    session->first_exec_seen = 1;
    struct traced_process *image = process_create(session, pid, TRACE_NONE);
    if (!image)
        return;
    image->flags |= TRACE_PROC_PRIMARY;
    process_read_identity(image);
    thread_add(session, pid, image);
    process_refresh_maps(image);
    process_watch_entry(session, image);
}

/* The system call a thread at its exit stop is in: its orig_rax still
 * names the call that is ending it (exit_group for the thread that called
 * it, exit for pthread_exit or a raw exit; a thread killed by a group exit
 * or an exec is in whatever call it was blocked in). -1 when unreadable. */
static long exiting_call(pid_t exiting)
{
    struct user_regs_struct regs;
    return ptrace(PTRACE_GETREGS, exiting, 0, &regs) == 0 ? (long)regs.orig_rax : -1;
}

/* Whether a thread of process other than tid is in an execve or an
 * exit_group, which end every other thread. */
static int another_ends_all(struct session *session, const struct traced_process *process, pid_t tid)
{
    struct traced_thread *thread, *tmp;
    HASH_ITER(hh, session->threads, thread, tmp) {
        if (thread->process != process || thread->tid == tid || thread->reached_exit)
            continue;
        char *call = read_proc_file(thread->tid, "syscall", NULL);
        long number = call ? strtol(call, NULL, 10) : -1;
        free(call);
        if (number == SYS_execve || number == SYS_execveat || number == SYS_exit_group)
            return 1;
    }
    return 0;
}

/* Whether the thread at its exit stop ends with all the others: it called
 * exit_group, or another thread's execve or exit_group killed it. A thread
 * that ends alone (the exit system call, a seccomp kill of the thread)
 * does not stop the others; a fatal signal's group end is taken at its
 * signal stop, with the world stopped (process_leak_check). */
static int ending_with_the_others(struct session *session, const struct traced_process *process, pid_t exiting,
                                  long call)
{
    if (call == -1 || call == SYS_exit)
        return 0;
    return call == SYS_exit_group || another_ends_all(session, process, exiting);
}

static void on_exit_stop(struct session *session, struct traced_thread *thread)
{
    struct traced_process *process = thread->process;
    if (!thread->reached_exit) {
        thread->reached_exit = 1;
        if (process && process->live_threads > 0)
            process->live_threads--;
    }
    if (!process)
        return;
    long call = exiting_call(thread->tid);
    /* A thread that ends with the others (an exit, an exec, a fatal
     * signal): none of them runs the program's code again, and the
     * image's sets are read, once, before its memory goes (an exec's
     * thread holds one too). A set a thread ending alone left full (a raw
     * exit) is taken at the next stop of the world. */
    if (process->recorder.sample_rate && process->shm.base && !process->held_taken_at_end &&
        ending_with_the_others(session, process, thread->tid, call)) {
        process->held_taken_at_end = 1;
        process_drain_all(session, process);
        take_held_blocks(process, thread->tid);
    }
    /* The image ends: the last thread reaches its exit stop, or the first
     * thread of an exit_group does (the kernel has queued SIGKILL for the
     * others). The check runs then, with every other thread stopped where
     * it was: their registers and stacks still hold pointers, as memcheck
     * sees them at exit. */
    if (process->live_threads == 0 || call == SYS_exit_group) {
        process->state = PROCESS_EXITING;
        process_final_snapshot(session, process, TRACE_SNAP_EXIT, thread->tid);
    }
}

static void on_signal_stop(struct session *session, struct traced_thread *thread, int signal)
{
    struct traced_process *process = thread->process;
    if (signal == SIGTRAP && process && on_breakpoint(session, thread))
        return;
    /* The program's own SIGTRAP, to its own handler: our breakpoints must
     * not lose that handler (sigtrap_guard.h). */
    if (signal == SIGTRAP && process && process->breakpoints.count &&
        sigtrap_disposition(thread->tid) != SIGTRAP_DEFAULT)
        sigtrap_guard_remember(&process->sigtrap, process->pid, thread->tid);
    if (process && signal_is_fatal(thread->tid, signal)) {
        process->state = PROCESS_EXITING;
        process_final_snapshot(session, process, TRACE_SNAP_SIGNAL, thread->tid);
    }
    resume_thread(thread->tid, signal);
}

static int shares_memory(pid_t parent, pid_t child);

/* Whether the fork child stopped at tid was made by glibc's fork, whose
 * clone sets CLONE_CHILD_SETTID: a fork or clone system call of the
 * program's own (syscall(SYS_clone, SIGCHLD, ...)) runs no fork handler,
 * and the child's shim would go on writing its parent's ring. The child's
 * registers are its parent's at the system call. */
static int made_by_glibc_fork(pid_t tid, pid_t parent)
{
    if (parent > 0 && shares_memory(parent, tid))
        return 1; /* clone(CLONE_VM|SIGCHLD) is reported as a fork: its memory is its parent's, not ours to write */
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, 0, &regs) != 0)
        return 1; /* cannot tell: as before */
    uint64_t flags;
    if (regs.orig_rax == SYS_clone)
        flags = regs.rdi;
    else if (regs.orig_rax == SYS_clone3) {
        errno = 0;
        long word = ptrace(PTRACE_PEEKDATA, tid, (void *)regs.rdi, 0); /* struct clone_args: flags first */
        if (errno)
            return 1;
        flags = (uint64_t)word;
    } else
        return regs.orig_rax != SYS_fork;
    return (flags & CLONE_CHILD_SETTID) != 0;
}

/* Writes value, 32 bits, at address in tid's memory (a word read and
 * written back: PTRACE_POKEDATA writes 8 bytes). */
static int poke_u32(pid_t tid, uint64_t address, uint32_t value)
{
    uint64_t aligned = address & ~(uint64_t)7;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, tid, (void *)aligned, 0);
    if (errno)
        return -1;
    unsigned shift = (unsigned)(address - aligned) * 8;
    if (shift > 32)
        return -1; /* straddles two words: not an int the shim would have */
    uint64_t updated = ((uint64_t)word & ~((uint64_t)UINT32_MAX << shift)) | (uint64_t)value << shift;
    return ptrace(PTRACE_POKEDATA, tid, (void *)aligned, (void *)updated) == 0 ? 0 : -1;
}

/* A fork child at its first stop, before it runs: one made past glibc's
 * fork is told to stop recording (its shim still holds the parent's
 * region) and recorded as such: its heap as at the fork, no event and no
 * leak check of its own. */
static void check_fork_child_start(struct traced_process *process, pid_t tid)
{
    process->start_checked = 1;
    if (!process->stop_recording_address || made_by_glibc_fork(tid, process->fork_parent_pid))
        return;
    process->raw_fork_child = 1;
    process->flags &= ~TRACE_PROC_SHIM_SEEN;
    if (poke_u32(tid, process->stop_recording_address, process->stop_recording_value) != 0)
        process->raw_fork_child = 2; /* not stopped: said in its warning */
}

static void on_stopped(struct session *session, struct traced_thread *thread, int status)
{
    int signal = WSTOPSIG(status);
    int event = status >> 16;
    switch (event) {
    case 0:
        on_signal_stop(session, thread, signal);
        return;
    case PTRACE_EVENT_STOP:
        if (thread->process && thread->tid == thread->process->pid && !thread->process->start_checked)
            check_fork_child_start(thread->process, thread->tid);
        if (signal == SIGSTOP || signal == SIGTSTP || signal == SIGTTIN || signal == SIGTTOU)
            ptrace(PTRACE_LISTEN, thread->tid, 0, 0); /* a group-stop: stay stopped, as without us */
        else
            resume_thread(thread->tid, 0);
        return;
    case PTRACE_EVENT_CLONE:
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
        on_new_task(session, thread, event);
        break;
    case PTRACE_EVENT_EXEC:
        on_exec(session, thread);
        break;
    case PTRACE_EVENT_EXIT:
        on_exit_stop(session, thread);
        break;
    default:
        break;
    }
    resume_thread(thread->tid, 0);
}

/* Whether child runs in parent's address space (a vfork or CLONE_VM child):
 * kcmp(2); 0 where it cannot tell. A vfork child taken for a fork child
 * had the parent's heap copied into its record (171 KiB live in one of
 * gcc's, from run to run as the two stops raced). */
static int shares_memory(pid_t parent, pid_t child)
{
    return syscall(SYS_kcmp, parent, child, KCMP_VM, 0, 0) == 0;
}

/* A tid we have not seen: a new task whose first stop came before its
 * parent's clone/fork event. Attribute it through /proc. */
static struct traced_thread *thread_discover(struct session *session, pid_t tid)
{
    char *status = read_proc_file(tid, "status", NULL);
    pid_t tgid = tid, parent_pid = 0;
    if (status) {
        const char *line = strstr(status, "\nTgid:");
        if (line)
            tgid = (pid_t)strtol(line + 6, NULL, 10);
        line = strstr(status, "\nPPid:");
        if (line)
            parent_pid = (pid_t)strtol(line + 6, NULL, 10);
        free(status);
    }
    struct traced_process *process = process_by_pid(session, tgid);
    if (!process && tgid == tid && !session->options.follow_children) {
        struct traced_process *parent = process_by_pid(session, parent_pid);
        if (parent)
            let_go_of_child(session, parent, tid, 0);
        return NULL;
    }
    if (!process && tgid == tid) {
        /* A fork child reported before its parent's fork event: its parent
         * is its PPid, and a vfork child (the parent's event not seen yet
         * to tell) is one that shares its memory. */
        struct traced_process *parent = process_by_pid(session, parent_pid);
        process = parent ? fork_child_create(session, parent, tid, shares_memory(parent->pid, tid))
                         : process_create(session, tid, TRACE_NONE);
        if (!process)
            return NULL;
    }
    if (!process)
        process = process_by_pid(session, session->initial_pid);
    return process ? thread_add(session, tid, process) : NULL;
}

/* The image's end as waitpid reported it. */
void process_set_exit(struct traced_process *process, int status)
{
    if (WIFEXITED(status)) {
        process->flags |= TRACE_PROC_EXITED;
        process->exit_status = WEXITSTATUS(status);
    } else {
        process->flags |= TRACE_PROC_SIGNALED;
        process->exit_signal = WTERMSIG(status);
    }
}

static void on_task_gone(struct session *session, pid_t tid, int status)
{
    struct traced_thread *thread = thread_find(session, tid);
    struct traced_process *process = thread ? thread->process : process_by_pid(session, tid);
    if (thread)
        thread_remove(session, thread);
    /* An image let go of ended its record already (its main thread a
     * zombie, still traced, until the others end). */
    if (!process || tid != process->pid || process->state == PROCESS_ENDED)
        return;
    process_set_exit(process, status);
    if (tid == session->initial_pid) {
        session->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        session->initial_ended = 1;
    }
    process_end(session, process);
}

void handle_wait_status(struct session *session, pid_t tid, int status)
{
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        on_task_gone(session, tid, status);
        return;
    }
    if (!WIFSTOPPED(status))
        return;
    int event = status >> 16;
    if (detach_if_pending(session, tid, status))
        return;
    if (!session->first_exec_seen && tid == session->initial_pid) {
        if (event == PTRACE_EVENT_EXEC)
            on_first_exec(session, tid);
        resume_thread(tid, event == 0 ? WSTOPSIG(status) : 0);
        return;
    }
    struct traced_thread *thread = thread_find(session, tid);
    if (!thread)
        thread = thread_discover(session, tid);
    if (!thread && detach_if_pending(session, tid, status))
        return;
    if (!thread) {
        resume_thread(tid, event == 0 ? WSTOPSIG(status) : 0);
        return;
    }
    on_stopped(session, thread, status);
}

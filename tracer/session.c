/*
 * session.c - the ptrace side of `memslope record`.
 *
 * One thread does everything: it reaps ptrace stops with waitpid(WNOHANG),
 * drains the shared-memory rings of every process image between stops, and
 * sleeps in sigtimedwait() for SIGCHLD (or a short timeout, so that rings
 * are drained while the target runs) when there is nothing to do.
 *
 * Processes are followed through clone, fork, vfork and exec; each process
 * image (a fork child, or the program an exec started) is recorded as a
 * process of its own. Signals are passed through unchanged and group-stops
 * are kept with PTRACE_LISTEN, so job control behaves as without memslope.
 */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <elf.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "../common/shm_layout.h"
#include "../leakscan/leakscan.h"
#include "symbols/symbols.h"
#include "socket_message.h"
#include "trace_output.h"
#include "trace_writer.h"

/* Sleep between drains while the target runs and reports nothing. */
#define IDLE_WAIT_NS 2000000L
/* While the rings keep the loop busy, stops are reaped at most this often
 * (a waitpid on every drain was a tenth of the tracer's CPU with two
 * allocating threads). A stopped thread is still noticed at once when the
 * rings run dry, as they do when the only allocating thread stops. */
#define BUSY_REAP_INTERVAL_NS 100000ull
/* An image's symbolizer warm-up (symbolize.h) starts once it has run this
 * long with allocations recorded: a program that ends sooner has little to
 * gain, and one that runs on has loaded the libraries it allocates from. */
#define WARMUP_AFTER_NS 20000000ull
/* Looking for a new image's region: often at first, then now and then (a
 * static binary never gets one). */
#define ATTACH_RETRY_FAST_NS 1000000ull
#define ATTACH_RETRY_SLOW_NS 50000000ull

struct traced_thread {
    pid_t tid;
    struct traced_process *process;
    int reached_exit; /* stopped at PTRACE_EVENT_EXIT already */
    /* A stop of it was collected while the world was stopped and is not
     * handled yet (resume_other_threads): it stays stopped meanwhile, and a
     * stop of the world started by another thread's stop in between must
     * count it as stopped, not interrupt it and wait for a stop that will
     * never come (issue 19: three threads at one breakpoint hung). */
    int held;
    UT_hash_handle hh;
};

uint64_t session_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* ---- processes and threads ---------------------------------------------- */

static struct traced_process *process_create(struct session *session, pid_t pid, uint32_t parent_process_id)
{
    if (session->process_count == session->process_capacity) {
        size_t capacity = session->process_capacity ? session->process_capacity * 2 : 8;
        struct traced_process **grown = realloc(session->processes, capacity * sizeof *grown);
        if (!grown)
            return NULL;
        session->processes = grown;
        session->process_capacity = capacity;
    }
    struct traced_process *process = calloc(1, sizeof *process);
    if (!process)
        return NULL;
    process->process_id = (uint32_t)session->process_count;
    process->pid = pid;
    process->parent_process_id = parent_process_id;
    process->start_ns = session_now_ns();
    process->state = PROCESS_RUNNING;
    recorder_init(&process->recorder, session->options.interval_ns);
    process->recorder.snapshots_limit = session->options.snapshots_limit;
    process->recorder.sample_rate = session->options.sample_rate;
    python_frames_init(&process->python);
    shm_consumer_init(&process->shm);
    session->processes[session->process_count++] = process;
    return process;
}

/* The running image of pid: the newest process record with that pid. */
static struct traced_process *process_by_pid(struct session *session, pid_t pid)
{
    for (size_t i = session->process_count; i-- > 0;)
        if (session->processes[i]->pid == pid && session->processes[i]->state != PROCESS_ENDED)
            return session->processes[i];
    return NULL;
}

static char *read_proc_file(pid_t pid, const char *name, size_t *length)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t capacity = 4096, used = 0;
    char *text = malloc(capacity + 1);
    while (text) {
        ssize_t n = read(fd, text + used, capacity - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used == capacity) {
            char *grown = realloc(text, 2 * capacity + 1);
            if (!grown) {
                free(text);
                text = NULL;
                break;
            }
            text = grown;
            capacity *= 2;
        }
    }
    close(fd);
    if (text)
        text[used] = '\0';
    if (length)
        *length = used;
    return text;
}

/* AT_SECURE from the image's auxiliary vector: the loader runs it in
 * secure-execution mode and ignores LD_PRELOAD. */
static int read_secure_execution(pid_t pid)
{
    size_t length = 0;
    char *auxv = read_proc_file(pid, "auxv", &length);
    int secure = 0;
    for (size_t i = 0; auxv && i + 16 <= length; i += 16) {
        uint64_t type, value;
        memcpy(&type, auxv + i, 8);
        memcpy(&value, auxv + i + 8, 8);
        if (type == 23 /* AT_SECURE */)
            secure = value != 0;
    }
    free(auxv);
    return secure;
}

/* Whether the ELF file at path has no PT_INTERP: nothing loads the shim. */
static int elf_statically_linked(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr header;
    int is_static = 0;
    if (fd >= 0 && pread(fd, &header, sizeof header, 0) == (ssize_t)sizeof header &&
        memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_ident[EI_CLASS] == ELFCLASS64 &&
        header.e_phentsize == sizeof(Elf64_Phdr) && header.e_phnum < 256) {
        is_static = 1;
        for (int i = 0; i < header.e_phnum && is_static; i++) {
            Elf64_Phdr program_header;
            if (pread(fd, &program_header, sizeof program_header,
                      (off_t)(header.e_phoff + (uint64_t)i * sizeof program_header)) != (ssize_t)sizeof program_header ||
                program_header.p_type == PT_INTERP)
                is_static = 0;
        }
    }
    if (fd >= 0)
        close(fd);
    return is_static;
}

/* Names the image: /proc/PID/exe and the argv in /proc/PID/cmdline. */
static void process_read_identity(struct traced_process *process)
{
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)process->pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    free(process->exe);
    process->exe = strdup(n > 0 ? (exe[n] = '\0', exe) : "");
    process->secure_execution = read_secure_execution(process->pid);
    process->statically_linked = elf_statically_linked(path);

    size_t length = 0;
    char *cmdline = read_proc_file(process->pid, "cmdline", &length);
    for (uint32_t i = 0; i < process->argc; i++)
        free(process->argv[i]);
    free(process->argv);
    process->argv = NULL;
    process->argc = 0;
    if (!cmdline)
        return;
    uint32_t count = 0;
    for (size_t i = 0; i < length; i++)
        count += cmdline[i] == '\0';
    process->argv = calloc(count + 1, sizeof *process->argv);
    for (size_t i = 0; process->argv && i < length; i += strlen(cmdline + i) + 1)
        process->argv[process->argc++] = strdup(cmdline + i);
    free(cmdline);
}

/* The image's own copy of identity (a fork child runs its parent's program). */
static void process_copy_identity(struct traced_process *to, const struct traced_process *from)
{
    for (uint32_t i = 0; i < to->argc; i++)
        free(to->argv[i]);
    free(to->argv);
    free(to->exe);
    to->argc = 0;
    to->exe = strdup(from->exe ? from->exe : "");
    to->argv = calloc(from->argc + 1, sizeof *to->argv);
    for (uint32_t i = 0; to->argv && i < from->argc; i++)
        to->argv[to->argc++] = strdup(from->argv[i]);
}

static struct traced_thread *thread_find(struct session *session, pid_t tid)
{
    struct traced_thread *thread;
    HASH_FIND_INT(session->threads, &tid, thread);
    return thread;
}

static struct traced_thread *thread_add(struct session *session, pid_t tid, struct traced_process *process)
{
    struct traced_thread *thread = thread_find(session, tid);
    if (thread) {
        if (thread->process != process) {
            thread->process = process;
            process->live_threads++;
        }
        return thread;
    }
    thread = calloc(1, sizeof *thread);
    if (!thread)
        return NULL;
    thread->tid = tid;
    thread->process = process;
    process->live_threads++;
    HASH_ADD_INT(session->threads, tid, thread);
    return thread;
}

static void thread_remove(struct session *session, struct traced_thread *thread)
{
    if (!thread->reached_exit && thread->process->live_threads > 0)
        thread->process->live_threads--;
    HASH_DEL(session->threads, thread);
    free(thread);
}

static void handle_wait_status(struct session *session, pid_t tid, int status);

/* ---- draining and snapshots ---------------------------------------------- */

/* Replaces the image's mappings with fresh ones (its maps read again; this
 * frees them), keeping the old ones that nothing new overlaps: addresses of
 * a library dlclosed before exit must still symbolize, and the result never
 * overlaps itself. */
static void process_merge_maps(struct traced_process *process, struct proc_maps fresh)
{
    if (process->maps_final) {
        proc_maps_free(&fresh);
        return;
    }
    struct proc_maps *old = &process->maps;
    struct proc_map *merged = calloc(fresh.count + old->count + 1, sizeof *merged);
    if (!merged) {
        proc_maps_free(&fresh);
        return;
    }
    size_t count = 0;
    for (size_t i = 0; i < fresh.count; i++) {
        if (fresh.maps[i].path[0] == '/') {
            merged[count++] = fresh.maps[i];
            fresh.maps[i].path = NULL; /* moved */
        }
    }
    size_t fresh_count = count;
    for (size_t i = 0; i < old->count; i++) {
        int overlapped = 0;
        for (size_t j = 0; j < fresh_count && !overlapped; j++)
            overlapped = old->maps[i].start < merged[j].end && merged[j].start < old->maps[i].end;
        if (!overlapped) {
            merged[count++] = old->maps[i];
            old->maps[i].path = NULL;
        }
    }
    proc_maps_free(&fresh);
    proc_maps_free(old);
    qsort(merged, count, sizeof *merged, proc_map_compare_start);
    old->maps = merged;
    old->count = count;
}

static void process_refresh_maps(struct traced_process *process)
{
    struct proc_maps fresh;
    if (proc_maps_read(process->pid, &fresh) == 0)
        process_merge_maps(process, fresh);
}

/* New sites: their Python frames are named now, while the region that
 * holds the code table is mapped; if any other frame lies outside the
 * known mappings, the image mapped something new (dlopen): read the maps
 * while the process is alive. */
static void process_check_new_sites(struct traced_process *process)
{
    struct recorder *recorder = &process->recorder;
    for (; process->sites_checked < recorder->site_count; process->sites_checked++) {
        const struct recorder_site *site = &recorder->sites[process->sites_checked];
        int refreshed = 0;
        for (uint32_t f = 0; f < site->depth; f++) {
            uint64_t word = site->frames[f];
            if (shm_is_python_word(word)) {
                if (python_frames_add(&process->python, process->shm.base, word) < 0)
                    recorder->out_of_memory = 1;
            } else if (!refreshed && !proc_maps_find(&process->maps, word)) {
                process_refresh_maps(process);
                refreshed = 1;
            }
        }
    }
}

static void process_try_attach(struct session *session, struct traced_process *process, uint64_t now)
{
    (void)session;
    if (process->shm.base || process->vfork_child || process->state == PROCESS_ENDED || now < process->next_attach_ns)
        return;
    int found = shm_consumer_attach(&process->shm, process->pid, process->previous_image_inode);
    process->attach_tries++;
    if (found == 1) {
        process->flags |= TRACE_PROC_SHIM_SEEN;
        process_refresh_maps(process);
        return;
    }
    uint64_t wait = process->attach_tries < 200 ? ATTACH_RETRY_FAST_NS : ATTACH_RETRY_SLOW_NS;
    process->next_attach_ns = now + wait;
}

static size_t process_drain(struct traced_process *process, int full)
{
    size_t events = shm_consumer_drain(&process->shm, &process->recorder, full);
    if (events)
        process_check_new_sites(process);
    return events;
}

static int receive_message(struct session *session, struct socket_message *message);
static int map_sent_region(struct socket_message *message, struct shm_consumer *consumer, pid_t *pid);
static void reply_to_exit_check(struct session *session);

/* Regions the shims sent over the socket the moment they made them: each
 * goes to the running image of its pid. This way even a fork child that
 * execs at once has its events drained (/proc/PID/fd is the fallback). */
static void adopt_sent_regions(struct session *session)
{
    struct socket_message message;
    while (receive_message(session, &message)) {
        if (message.kind == SOCKET_MESSAGE_EXIT_CHECK) {
            /* Only no-ptrace shims ask; here the check runs at the exit
             * stop. Never leave a process waiting. */
            socket_message_close(&message);
            reply_to_exit_check(session);
            continue;
        }
        struct shm_consumer region;
        pid_t pid;
        if (!map_sent_region(&message, &region, &pid))
            continue;
        struct traced_process *process = process_by_pid(session, pid);
        if (process && !process->shm.base && !process->vfork_child && region.inode != process->previous_image_inode) {
            process->shm = region;
            process->flags |= TRACE_PROC_SHIM_SEEN;
            process_refresh_maps(process);
        } else {
            shm_consumer_detach(&region);
        }
    }
}

/* Whether an image still waits for its region: only then can one be on
 * the socket (a region comes from a new image, which exists here first). */
static int region_expected(const struct session *session)
{
    for (size_t i = 0; i < session->process_count; i++) {
        const struct traced_process *process = session->processes[i];
        if (process->state != PROCESS_ENDED && !process->shm.base && !process->vfork_child)
            return 1;
    }
    return 0;
}

/* The addresses of every frame of the image's sites so far. */
static uint64_t *site_frame_addresses(const struct recorder *recorder, size_t *count)
{
    size_t total = 0;
    for (size_t i = 0; i < recorder->site_count; i++)
        total += recorder->sites[i].depth;
    uint64_t *addresses = malloc((total ? total : 1) * sizeof *addresses);
    *count = 0;
    for (size_t i = 0; addresses && i < recorder->site_count; i++)
        for (uint32_t f = 0; f < recorder->sites[i].depth; f++)
            if (!shm_is_python_word(recorder->sites[i].frames[f]))
                addresses[(*count)++] = recorder->sites[i].frames[f];
    return addresses;
}

/* One image at a time warms its symbolizer up while it runs: see
 * symbolize.h and WARMUP_AFTER_NS. */
static void process_maybe_warm_up(struct session *session, struct traced_process *process, uint64_t now)
{
    if (process->warmup_tried || session->warmups_running > 0 || !process->shm.base ||
        process->recorder.site_count == 0 || now - process->start_ns < WARMUP_AFTER_NS)
        return;
    process->warmup_tried = 1;
    process_refresh_maps(process); /* files mapped since the last read (the shim maps the ELF files it reads CFI from) */
    size_t count;
    uint64_t *addresses = site_frame_addresses(&process->recorder, &count);
    if (!addresses)
        return;
    process->warmup = symbolizer_warmup_start(session->symbols, &process->maps, addresses, count);
    free(addresses);
    if (process->warmup)
        session->warmups_running++;
}

static size_t drain_all(struct session *session)
{
    uint64_t now = session_now_ns();
    size_t events = 0;
    /* Not a system call on every drain of a busy run: only while waiting. */
    if (region_expected(session))
        adopt_sent_regions(session);
    for (size_t i = 0; i < session->process_count; i++) {
        struct traced_process *process = session->processes[i];
        if (process->state == PROCESS_ENDED)
            continue;
        process_try_attach(session, process, now);
        events += process_drain(process, 0);
        process_maybe_warm_up(session, process, now);
    }
    return events;
}

/* The image is about to go (exit, fatal signal, exec): every event it
 * committed is in its region, so drain it all and snapshot the heap. */
static void process_leak_check(struct session *session, struct traced_process *process, pid_t stopped_tid,
                               uint32_t kind);

static void process_final_snapshot(struct session *session, struct traced_process *process, uint32_t kind,
                                   pid_t stopped_tid)
{
    if (process->final_snapshot_taken)
        return;
    process->final_snapshot_taken = 1;
    if (!process->shm.base)
        adopt_sent_regions(session);
    if (!process->shm.base)
        process_try_attach(session, process, UINT64_MAX);
    process_drain(process, 1);
    process_refresh_maps(process);
    recorder_case_end(&process->recorder, session_now_ns());
    recorder_snapshot(&process->recorder, kind, session_now_ns());
    if (kind != TRACE_SNAP_EXEC && stopped_tid > 0)
        process_leak_check(session, process, stopped_tid, kind);
}

/* What --iteration py: found, for warn_iterations_missed. */
static void count_python_image(struct session *session, const struct traced_process *process)
{
    if (!process->python.version)
        return;
    session->python_interpreters++;
    session->python_frames_read += process->python.frames_read;
    for (size_t i = 0; i < process->recorder.case_count; i++)
        session->python_iterations += process->recorder.cases[i].info.iterations;
}

/* The first failed write, said once, when it happens (the writer's error
 * is sticky: every later section fails the same way, and record's end
 * does not repeat it). */
static void report_write_failure(struct session *session)
{
    if (session->write_failure_reported)
        return;
    session->write_failure_reported = 1;
    fprintf(stderr, "memslope: %s: the trace ends before this point (the command runs on; memslope report reads "
                    "what was written)\n",
            trace_writer_error(session->writer));
}

static void process_end(struct session *session, struct traced_process *process)
{
    int was_stopped = process->final_snapshot_taken;
    process_final_snapshot(session, process, process->exit_signal ? TRACE_SNAP_SIGNAL : TRACE_SNAP_EXIT, 0);
    process_drain(process, 1);
    if (!was_stopped && session->options.leak_check != TRACE_LEAK_CHECK_OFF &&
        (process->flags & TRACE_PROC_SHIM_SEEN) && !process->leak_check_note &&
        asprintf(&process->leak_check_note,
                 "no leak check for process %d: it was gone before it could be stopped (killed by signal %d)",
                 (int)process->pid, process->exit_signal) < 0)
        process->leak_check_note = NULL;
    uint32_t stacks_dropped, slots_exhausted;
    shm_consumer_counters(&process->shm, &stacks_dropped, &slots_exhausted);
    if (process->shm.base)
        python_frames_read_header(&process->python, process->shm.base);
    process->invalid_events = process->shm.invalid_events;
    count_python_image(session, process);
    shm_consumer_detach(&process->shm);
    process->end_ns = session_now_ns();
    process->state = PROCESS_ENDED;
    if (process->warmup)
        session->warmups_running--; /* trace_output_process ends it */
    if (trace_output_process(session->writer, session->symbols, process, &session->modules_written, stacks_dropped,
                             slots_exhausted) < 0)
        report_write_failure(session);
    recorder_free(&process->recorder);
    python_frames_free(&process->python);
    trace_output_state_free(process->output);
    process->output = NULL;
}

/* Running images written as they stand (trace_output.h), so that a
 * memslope killed with SIGKILL leaves what it had measured: the first
 * checkpoint after --checkpoint (5 s by default), each gap twice the one
 * before, up to 60 times the first (5 min), which bounds what checkpoints
 * add to a long recording's trace. */
#define CHECKPOINT_GAP_GROWTH_LIMIT 60

static void checkpoint_running_images(struct session *session, uint64_t now)
{
    uint64_t first = session->options.checkpoint_ns;
    if (!first || session->write_failure_reported)
        return;
    if (!session->next_checkpoint_ns) {
        session->checkpoint_gap_ns = first;
        session->next_checkpoint_ns = session->start_ns + first;
    }
    if (now < session->next_checkpoint_ns)
        return;
    for (size_t i = 0; i < session->process_count; i++) {
        struct traced_process *process = session->processes[i];
        if (process->state == PROCESS_ENDED || process->vfork_child || !(process->flags & TRACE_PROC_SHIM_SEEN))
            continue;
        if (trace_output_checkpoint(session->writer, session->symbols, process, &session->modules_written, now) < 0)
            report_write_failure(session);
    }
    if (session->checkpoint_gap_ns < first * CHECKPOINT_GAP_GROWTH_LIMIT / 2)
        session->checkpoint_gap_ns *= 2;
    else
        session->checkpoint_gap_ns = first * CHECKPOINT_GAP_GROWTH_LIMIT;
    session->next_checkpoint_ns = now + session->checkpoint_gap_ns;
}

/* ---- ptrace stops -------------------------------------------------------- */

static void resume(pid_t tid, int signal)
{
    ptrace(PTRACE_CONT, tid, 0, (void *)(long)signal);
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
    unsigned long long caught = 0, ignored = 0;
    const char *line = strstr(status, "\nSigIgn:");
    if (line)
        ignored = strtoull(line + 8, NULL, 16);
    line = strstr(status, "\nSigCgt:");
    if (line)
        caught = strtoull(line + 8, NULL, 16);
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

/* A fork child starts as its parent's image: the same program, the heap as
 * it was at the fork (its events so far belong to the parent, so drain
 * those first), the same breakpoints and mappings. */
static struct traced_process *fork_child_create(struct session *session, struct traced_process *parent, pid_t child,
                                                int vfork)
{
    process_drain(parent, 1);
    struct traced_process *process = process_create(session, child, parent->process_id);
    if (!process)
        return NULL;
    process_copy_identity(process, parent);
    process->flags |= parent->flags & TRACE_PROC_SHIM_SEEN; /* the shim is in the copied memory */
    if (vfork)
        process->vfork_child = 1;
    else if (recorder_init_fork_child(&process->recorder, &parent->recorder) < 0)
        process->recorder.out_of_memory = 1;
    process->recorder.snapshots_limit = parent->recorder.snapshots_limit;
    process->previous_image_inode = parent->shm.inode;
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

static void process_watch_entry(struct session *session, struct traced_process *process);

/* An exec replaced the image: the old one ends (its heap with it: no leak
 * check at exec, as memcheck) and the new one, same pid, begins. The old
 * image keeps the mappings read while it ran: the pid's maps are the new
 * program's now, which would name the old image's frames after functions
 * of the new one wherever the two programs' mappings overlap (the same
 * load addresses without ASLR). NULL when out of memory. */
static struct traced_process *replace_image(struct session *session, struct traced_process *old)
{
    old->maps_final = 1;
    process_final_snapshot(session, old, TRACE_SNAP_EXEC, 0);
    old->flags |= TRACE_PROC_EXECED;
    uint64_t previous_inode = old->shm.inode;
    process_end(session, old);
    struct traced_process *image = process_create(session, old->pid, old->process_id);
    if (!image)
        return NULL;
    image->flags |= old->flags & TRACE_PROC_PRIMARY; /* the exec chain of the launched command */
    image->previous_image_inode = previous_inode;
    process_read_identity(image);
    return image;
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

/* Whether this exit stop is the thread that called exit_group: its
 * orig_rax still names the system call that is ending it (a thread leaving
 * by pthread_exit is in exit, one killed by the group exit in whatever call
 * it was blocked in). */
static int group_exit_started(pid_t exiting)
{
    struct user_regs_struct regs;
    return ptrace(PTRACE_GETREGS, exiting, 0, &regs) == 0 && regs.orig_rax == SYS_exit_group;
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
    /* The image ends: the last thread reaches its exit stop, or the first
     * thread of an exit_group does (the kernel has queued SIGKILL for the
     * others). The check runs then, with every other thread stopped where
     * it was: their registers and stacks still hold pointers, as memcheck
     * sees them at exit. */
    if (process->live_threads == 0 || group_exit_started(thread->tid)) {
        process->state = PROCESS_EXITING;
        process_final_snapshot(session, process, TRACE_SNAP_EXIT, thread->tid);
    }
}

static int on_breakpoint(struct session *session, struct traced_thread *thread);

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
    resume(thread->tid, signal);
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
        if (signal == SIGSTOP || signal == SIGTSTP || signal == SIGTTIN || signal == SIGTTOU)
            ptrace(PTRACE_LISTEN, thread->tid, 0, 0); /* a group-stop: stay stopped, as without us */
        else
            resume(thread->tid, 0);
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
    resume(thread->tid, 0);
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
         * is its PPid. */
        struct traced_process *parent = process_by_pid(session, parent_pid);
        process = parent ? fork_child_create(session, parent, tid, 0) : process_create(session, tid, TRACE_NONE);
        if (!process)
            return NULL;
    }
    if (!process)
        process = process_by_pid(session, session->initial_pid);
    return process ? thread_add(session, tid, process) : NULL;
}

/* The image's end as waitpid reported it. */
static void process_set_exit(struct traced_process *process, int status)
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
    if (!process || tid != process->pid)
        return;
    process_set_exit(process, status);
    if (tid == session->initial_pid) {
        session->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        session->initial_status_known = 1;
    }
    process_end(session, process);
}

static void handle_wait_status(struct session *session, pid_t tid, int status)
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
        resume(tid, event == 0 ? WSTOPSIG(status) : 0);
        return;
    }
    struct traced_thread *thread = thread_find(session, tid);
    if (!thread)
        thread = thread_discover(session, tid);
    if (!thread && detach_if_pending(session, tid, status))
        return;
    if (!thread) {
        resume(tid, event == 0 ? WSTOPSIG(status) : 0);
        return;
    }
    on_stopped(session, thread, status);
}

/* ---- stopping the world for a leak check ------------------------------- */

struct deferred_status {
    pid_t tid;
    int status;
};

/* How long a stop of the world waits for one thread (a thread in an
 * uninterruptible sleep, or one the kernel is killing): then the check goes
 * on without it, and says so, rather than hang. */
#define THREAD_STOP_TIMEOUT_NS 2000000000ull

/* Waits for tid's next stop or exit until the deadline: 1 when it came,
 * 0 at the deadline, -1 when tid is gone (reaped elsewhere). */
static int wait_for_stop(pid_t tid, int *status, uint64_t deadline_ns)
{
    long pause_ns = 10000;
    for (;;) {
        pid_t got = waitpid(tid, status, __WALL | WNOHANG);
        if (got == tid)
            return 1;
        if (got < 0 && errno != EINTR)
            return -1;
        if (session_now_ns() >= deadline_ns)
            return 0;
        struct timespec pause = {0, pause_ns};
        nanosleep(&pause, NULL);
        if (pause_ns < 1000000)
            pause_ns *= 2;
    }
}

/* Interrupts every other thread of the image and waits for each to stop.
 * What a thread reports instead of the interrupt stop (a signal, an event,
 * its exit) is kept in deferred to be handled once the scan is done; until
 * then the thread is held. A thread already held by an outer stop of the
 * world is stopped: it is counted, not interrupted. tids receives the
 * threads now stopped, stopped_tid first (*stopped of them); *late counts
 * the threads that missed the deadline, still running: a scan now would
 * miss their registers and race their writes. The return value counts the
 * entries of deferred (from 1). */
static size_t stop_other_threads(struct session *session, struct traced_process *process, pid_t stopped_tid,
                                 pid_t *tids, size_t *stopped, size_t *late_out, struct deferred_status *deferred,
                                 size_t capacity)
{
    size_t count = 0, late = 0;
    *stopped = 0;
    tids[(*stopped)++] = stopped_tid;
    count++;
    uint64_t deadline = session_now_ns() + THREAD_STOP_TIMEOUT_NS;
    struct traced_thread *thread, *tmp;
    HASH_ITER(hh, session->threads, thread, tmp) {
        if (count == capacity || *stopped == capacity)
            break;
        if (thread->process != process || thread->tid == stopped_tid || thread->reached_exit)
            continue;
        if (thread->held) {
            tids[(*stopped)++] = thread->tid;
            continue;
        }
        if (ptrace(PTRACE_INTERRUPT, thread->tid, 0, 0) < 0)
            continue;
        int status;
        int came = wait_for_stop(thread->tid, &status, deadline);
        if (came < 0)
            continue; /* gone: nothing of it to scan */
        if (came == 0) {
            late++; /* its interrupt stop reaches the loop later, which resumes it */
            continue;
        }
        deferred[count++] = (struct deferred_status){thread->tid, status};
        if (WIFSTOPPED(status)) {
            tids[(*stopped)++] = thread->tid;
            thread->held = 1;
        }
    }
    *late_out = late;
    return count;
}

/* Hands the stops collected while the world was stopped back to the loop:
 * a plain interrupt stop just resumes. Each thread is let go of before its
 * stop is handled, which may stop the world again. */
static void resume_other_threads(struct session *session, const struct deferred_status *deferred, size_t count)
{
    for (size_t i = 1; i < count; i++) {
        struct traced_thread *thread = thread_find(session, deferred[i].tid);
        if (thread)
            thread->held = 0;
        int status = deferred[i].status;
        if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP && WSTOPSIG(status) == SIGTRAP)
            resume(deferred[i].tid, 0);
        else
            handle_wait_status(session, deferred[i].tid, status);
    }
}

/* leak_check_run with what the process's shim tells about its memory
 * (its pymalloc arenas, its TLS). */
static int run_leak_check(struct traced_process *process, const pid_t *tids, size_t count, uint32_t when,
                          const unsigned char *skip_cases, size_t skip_count, struct leak_results *results, char *err,
                          size_t err_size)
{
    struct leakscan_shim_memory shim;
    struct leakscan_range *ranges;
    if (shm_consumer_shim_memory(&process->shm, &shim, &ranges) < 0) {
        snprintf(err, err_size, "out of memory copying the allocator ranges of process %d", (int)process->pid);
        return -1;
    }
    int rc = leak_check_run(process->pid, tids, count, &shim, &process->recorder, when, session_now_ns(), skip_cases,
                            skip_count, results, err, err_size);
    free(ranges);
    return rc;
}

/* Adds why a leak check did not run to the process's note (said on stderr
 * now, and kept in the trace as a warning). */
static void add_leak_check_note(struct traced_process *process, const char *why)
{
    fprintf(stderr, "memslope: warning: %s\n", why);
    char *joined = NULL;
    int rc = process->leak_check_note ? asprintf(&joined, "%s; %s", process->leak_check_note, why)
                                      : asprintf(&joined, "%s", why);
    if (rc < 0)
        return;
    free(process->leak_check_note);
    process->leak_check_note = joined;
}

/* A scan while a thread runs on would miss the pointers in its registers
 * and race its writes: the check is skipped and the note says why. */
static void note_late_threads(struct traced_process *process, size_t late, const char *check)
{
    char why[256];
    snprintf(why, sizeof why,
             "no %s leak check for process %d: %zu thread%s did not stop within %llu s (uninterruptible sleep, or "
             "being killed)",
             check, (int)process->pid, late, late == 1 ? "" : "s", THREAD_STOP_TIMEOUT_NS / 1000000000ull);
    add_leak_check_note(process, why);
}

static void process_leak_check(struct session *session, struct traced_process *process, pid_t stopped_tid,
                               uint32_t kind)
{
    if (session->options.leak_check == TRACE_LEAK_CHECK_OFF || !(process->flags & TRACE_PROC_SHIM_SEEN))
        return;
    size_t capacity = (size_t)process->live_threads + 2;
    pid_t *tids = calloc(capacity, sizeof *tids);
    struct deferred_status *deferred = calloc(capacity, sizeof *deferred);
    if (!tids || !deferred) {
        free(tids);
        free(deferred);
        return;
    }
    size_t stopped, late;
    size_t count = stop_other_threads(session, process, stopped_tid, tids, &stopped, &late, deferred, capacity);
    char err[512];
    struct leak_results results;
    if (late)
        note_late_threads(process, late, "end-of-process");
    else if (run_leak_check(process, tids, stopped, kind, process->cases_checked, process->cases_checked_count, &results,
                       err, sizeof err) == 0) {
        leak_results_append(&process->leaks, &results);
        leak_results_free(&results);
    } else {
        char why[640];
        snprintf(why, sizeof why, "no leak check for process %d: %s", (int)process->pid, err);
        add_leak_check_note(process, why);
    }
    resume_other_threads(session, deferred, count);
    free(tids);
    free(deferred);
}

/* ---- --iteration SYMBOL --------------------------------------------------- */

/* At the program's entry point its libraries are loaded: the symbol can be
 * looked up then. */
static void process_watch_entry(struct session *session, struct traced_process *process)
{
    if (!session->options.iteration_symbol && session->options.leak_check == TRACE_LEAK_CHECK_OFF)
        return;
    size_t length = 0;
    char *auxv = read_proc_file(process->pid, "auxv", &length);
    for (size_t i = 0; auxv && i + 16 <= length; i += 16) {
        uint64_t type, value;
        memcpy(&type, auxv + i, 8);
        memcpy(&value, auxv + i + 8, 8);
        if (type == 9 /* AT_ENTRY */ && value)
            breakpoint_plant(process->pid, &process->breakpoints, value, BREAKPOINT_ENTRY);
    }
    free(auxv);
}

/* Every run-time address of wanted among the image's modules, as
 * "module: name" lines in *listing for an ambiguity message. */
static size_t find_symbol_addresses(struct traced_process *process, const char *wanted, uint64_t *addresses,
                                    size_t capacity, char *listing, size_t listing_size)
{
    size_t found = 0, used = 0;
    listing[0] = '\0';
    for (size_t i = 0; i < process->maps.count; i++) {
        const char *path = process->maps.maps[i].path;
        size_t length = strlen(path);
        if ((i > 0 && strcmp(path, process->maps.maps[i - 1].path) == 0) ||
            (length >= 15 && strcmp(path + length - 15, "/libmemslope.so") == 0))
            continue;
        uint64_t bias;
        struct elf_symbol_match *matches;
        int count = elf_find_functions(path, wanted, &matches);
        if (count > 0 && elf_load_bias(&process->maps, path, &bias) == 0) {
            for (int m = 0; m < count && found < capacity; m++) {
                addresses[found++] = matches[m].value + bias;
                int n = snprintf(listing + used, listing_size - used, "\n  %s: %s%s at 0x%llx", path,
                                 matches[m].name, matches[m].local ? " (local)" : "",
                                 (unsigned long long)(matches[m].value + bias));
                if (n > 0 && (size_t)n < listing_size - used)
                    used += (size_t)n;
            }
        }
        if (count > 0)
            elf_symbol_matches_free(matches, count);
    }
    return found;
}

/* Looks the symbol up (again): plants it, or waits for the next library. */
static void resolve_iteration_symbol(struct session *session, struct traced_process *process, pid_t tid)
{
    const char *wanted = session->options.iteration_symbol;
    uint64_t addresses[16];
    char listing[4096];
    process_refresh_maps(process);
    size_t found = find_symbol_addresses(process, wanted, addresses, 16, listing, sizeof listing);
    if (found > 1) {
        fprintf(stderr, "memslope: --iteration %s is ambiguous; it names %zu functions:%s\n"
                        "Name one with its C++ signature, or rename the others.\n", wanted, found, listing);
        session->fatal = 2;
        return;
    }
    if (found == 1) {
        breakpoint_plant(tid, &process->breakpoints, addresses[0], BREAKPOINT_ITERATION);
        session->iteration_symbol_found = 1;
        return;
    }
    /* Not loaded yet: ld.so calls _dl_debug_state after every dlopen. */
    for (size_t i = 0; i < process->maps.count; i++) {
        const char *path = process->maps.maps[i].path;
        if (!strstr(path, "/ld-linux") && !strstr(path, "/ld-2."))
            continue;
        struct elf_symbol_match *matches;
        uint64_t bias;
        int count = elf_find_functions(path, "_dl_debug_state", &matches);
        if (count > 0 && elf_load_bias(&process->maps, path, &bias) == 0)
            breakpoint_plant(tid, &process->breakpoints, matches[0].value + bias, BREAKPOINT_DLOPEN);
        if (count > 0)
            elf_symbol_matches_free(matches, count);
        break;
    }
}

/* Breakpoints on the shim's markers, where a leak check must see the heap
 * as it is at that moment: case end (the default), and every kept
 * iteration with --leak-check iterations. */
static void watch_markers(struct session *session, struct traced_process *process, pid_t tid)
{
    if (session->options.leak_check == TRACE_LEAK_CHECK_OFF)
        return;
    process_refresh_maps(process);
    for (size_t i = 0; i < process->maps.count; i++) {
        const char *path = process->maps.maps[i].path;
        size_t length = strlen(path);
        if (length < 15 || strcmp(path + length - 15, "/libmemslope.so") != 0)
            continue;
        uint64_t bias;
        if (elf_load_bias(&process->maps, path, &bias) < 0)
            return;
        struct elf_symbol_match *matches;
        int count = elf_find_functions(path, "memslope_case_end", &matches);
        if (count > 0)
            breakpoint_plant(tid, &process->breakpoints, matches[0].value + bias, BREAKPOINT_CASE_END);
        if (count > 0)
            elf_symbol_matches_free(matches, count);
        if (session->options.leak_check == TRACE_LEAK_CHECK_ITERATIONS &&
            (count = elf_find_functions(path, "memslope_iteration", &matches)) > 0) {
            breakpoint_plant(tid, &process->breakpoints, matches[0].value + bias, BREAKPOINT_MARKER_ITERATION);
            elf_symbol_matches_free(matches, count);
        }
        return;
    }
}

/* Whether the iteration about to start gets a snapshot (see recorder.h). */
static int iteration_will_be_kept(const struct recorder *recorder)
{
    return recorder->open_case != TRACE_NONE && recorder->iteration % recorder->snapshot_stride == 0;
}

/* What a thread at the entry of a marker taking no arguments holds only as
 * leftovers: by the calling convention its caller-saved registers are dead,
 * and so is the red zone below its stack pointer (the marker has not used
 * it yet, the caller's died with the call). They often hold the address of
 * the block the caller has just lost; hidden from the scan, as a call
 * boundary hides them, and restored after it. */
struct dead_state {
    struct user_regs_struct regs;
    long below_sp[16];
    int hidden;
};

static void hide_dead_state(pid_t tid, struct dead_state *dead)
{
    dead->hidden = ptrace(PTRACE_GETREGS, tid, 0, &dead->regs) == 0;
    if (!dead->hidden)
        return;
    struct user_regs_struct cleared = dead->regs;
    cleared.rax = cleared.rcx = cleared.rdx = cleared.rsi = cleared.rdi = 0;
    cleared.r8 = cleared.r9 = cleared.r10 = cleared.r11 = 0;
    dead->hidden = ptrace(PTRACE_SETREGS, tid, 0, &cleared) == 0;
    for (int i = 0; dead->hidden && i < 16; i++) {
        void *at = (void *)(dead->regs.rsp - 128 + 8 * (uint64_t)i);
        errno = 0;
        dead->below_sp[i] = ptrace(PTRACE_PEEKDATA, tid, at, 0);
        if (errno == 0)
            ptrace(PTRACE_POKEDATA, tid, at, 0);
        else
            dead->below_sp[i] = 0;
    }
}

static void restore_dead_state(pid_t tid, const struct dead_state *dead)
{
    if (!dead->hidden)
        return;
    for (int i = 0; i < 16; i++)
        ptrace(PTRACE_POKEDATA, tid, (void *)(dead->regs.rsp - 128 + 8 * (uint64_t)i), (void *)dead->below_sp[i]);
    ptrace(PTRACE_SETREGS, tid, 0, &dead->regs);
}

static void mark_case_checked(struct traced_process *process, uint32_t case_id)
{
    if (case_id >= process->cases_checked_count) {
        size_t size = (size_t)case_id + 64;
        unsigned char *grown = realloc(process->cases_checked, size);
        if (!grown)
            return;
        memset(grown + process->cases_checked_count, 0, size - process->cases_checked_count);
        process->cases_checked = grown;
        process->cases_checked_count = size;
    }
    process->cases_checked[case_id] = 1;
}

/* A leak check of the open case's blocks, the world being stopped (tids:
 * the stopped threads, the one at the marker's breakpoint first). A case
 * whose blocks were all freed has nothing to find: its check is empty,
 * without a scan (a case end cost ~1 ms of scan, mostly the kernel
 * writing /proc/PID/smaps, for loops of cases that free what they use). */
static void case_leak_check(struct traced_process *process, const pid_t *tids, size_t count, uint32_t when)
{
    struct recorder *recorder = &process->recorder;
    if (count == 0 || recorder->open_case == TRACE_NONE || !(process->flags & TRACE_PROC_SHIM_SEEN))
        return;
    struct leak_results results;
    char err[512];
    int rc;
    if (recorder_open_case_live_blocks(recorder) == 0) {
        rc = leak_check_results(recorder, NULL, 0, when, session_now_ns(), NULL, 0, &results);
        snprintf(err, sizeof err, "out of memory");
    } else {
        struct dead_state dead;
        hide_dead_state(tids[0], &dead);
        rc = run_leak_check(process, tids, count, when, NULL, 0, &results, err, sizeof err);
        restore_dead_state(tids[0], &dead);
    }
    if (rc != 0) {
        char why[640];
        snprintf(why, sizeof why, "no leak check of case %u in process %d: %s", (unsigned)recorder->open_case,
                 (int)process->pid, err);
        add_leak_check_note(process, why);
        return;
    }
    leak_results_append(&process->leaks, &results);
    leak_results_free(&results);
    if (when == TRACE_SNAP_CASE_END)
        mark_case_checked(process, recorder->open_case);
}

/* What a breakpoint of kind is for, the world being stopped (tids: the
 * stopped threads, tid first). Returns whether it stays planted. */
static int act_on_breakpoint(struct session *session, struct traced_process *process, pid_t tid, uint8_t kind,
                             const pid_t *tids, size_t stopped)
{
    switch (kind) {
    case BREAKPOINT_ENTRY:
        if (session->options.iteration_symbol)
            resolve_iteration_symbol(session, process, tid);
        watch_markers(session, process, tid);
        return 0;
    case BREAKPOINT_CASE_END:
        process_drain(process, 1);
        case_leak_check(process, tids, stopped, TRACE_SNAP_CASE_END);
        return 1;
    case BREAKPOINT_MARKER_ITERATION:
        process_drain(process, 1);
        if (iteration_will_be_kept(&process->recorder))
            case_leak_check(process, tids, stopped, TRACE_SNAP_ITERATION);
        return 1;
    case BREAKPOINT_DLOPEN:
        resolve_iteration_symbol(session, process, tid);
        return 1;
    case BREAKPOINT_ITERATION:
        process_drain(process, 1);
        recorder_iteration(&process->recorder, session_now_ns());
        return 1;
    }
    return 1;
}

/* A SIGTRAP at one of our breakpoints: act on it with the world stopped,
 * step over the displaced instruction, resume. Returns 0 when the trap is
 * not ours (the program's own SIGTRAP passes through). */
static int on_breakpoint(struct session *session, struct traced_thread *thread)
{
    struct traced_process *process = thread->process;
    struct breakpoint *breakpoint = breakpoint_hit(thread->tid, &process->breakpoints);
    if (!breakpoint)
        return 0;
    size_t capacity = (size_t)process->live_threads + 2;
    pid_t *tids = calloc(capacity, sizeof *tids);
    struct deferred_status *deferred = calloc(capacity, sizeof *deferred);
    size_t stopped = 0, late = 0;
    size_t count = tids && deferred
                       ? stop_other_threads(session, process, thread->tid, tids, &stopped, &late, deferred, capacity)
                       : 0;
    uint64_t address = breakpoint->address;
    int scans = breakpoint->kind == BREAKPOINT_CASE_END || breakpoint->kind == BREAKPOINT_MARKER_ITERATION;
    if (late && scans && breakpoint->planted && process->recorder.open_case != TRACE_NONE)
        note_late_threads(process, late, breakpoint->kind == BREAKPOINT_CASE_END ? "case-end" : "iteration");
    /* Taken out while this thread was held: nothing to act on. A world
     * stopped without every thread is not scanned (stopped 0). */
    int keep = breakpoint->planted
                   ? act_on_breakpoint(session, process, thread->tid, breakpoint->kind, tids, late ? 0 : stopped)
                   : 0;
    /* Planting may have moved the set: find the breakpoint again. */
    breakpoint = NULL;
    for (size_t i = 0; i < process->breakpoints.count; i++)
        if (process->breakpoints.items[i].address == address)
            breakpoint = &process->breakpoints.items[i];
    if (breakpoint && breakpoint->kind == BREAKPOINT_DLOPEN && session->iteration_symbol_found)
        keep = 0;
    int pending_signal = 0;
    if (breakpoint)
        breakpoint_step_over(thread->tid, breakpoint, keep, &pending_signal);
    sigtrap_guard_repair(&process->sigtrap, process->pid, thread->tid, &pending_signal);
    if (session->fatal) {
        kill(process->pid, SIGKILL);
    }
    resume(thread->tid, pending_signal);
    resume_other_threads(session, deferred, count);
    free(tids);
    free(deferred);
    return 1;
}

/* ---- the loop -------------------------------------------------------------- */

static void forward_signal(struct session *session, int signal)
{
    /* SIGINT and SIGQUIT from the terminal reach the target directly (same
     * process group); other signals sent to memslope are meant for it. */
    if (signal == SIGINT || signal == SIGQUIT)
        return;
    struct traced_process *process = process_by_pid(session, session->initial_pid);
    if (process)
        kill(process->pid, signal);
    session->interrupted = 1;
}

/* ---- without ptrace ------------------------------------------------------ */

#define EXEC_CHECK_INTERVAL_NS 20000000ull

/* The next message a shim sent over the socket; 0 when none is waiting.
 * A malformed one is reported and skipped (its descriptors closed). */
static int receive_message(struct session *session, struct socket_message *message)
{
    char err[512];
    for (;;) {
        enum socket_message_kind kind = socket_message_receive(session->region_socket, message, err, sizeof err);
        if (kind == SOCKET_MESSAGE_NONE)
            return 0;
        if (kind != SOCKET_MESSAGE_REJECTED)
            return 1;
        fprintf(stderr, "memslope: warning: %s\n", err);
    }
}

/* Maps a region hand-over (and closes its descriptor): 1 when it is one. */
static int map_sent_region(struct socket_message *message, struct shm_consumer *consumer, pid_t *pid)
{
    if (message->kind != SOCKET_MESSAGE_REGION) {
        socket_message_close(message);
        return 0;
    }
    shm_consumer_init(consumer);
    int mapped = shm_consumer_attach_fd(consumer, message->region_fd, pid);
    socket_message_close(message);
    return mapped == 1;
}

/* Lets the process that asked for an exit check go on. Its end of the
 * socket can only be full if it never reads; a few tries, then it gives up
 * waiting by itself once we are gone. */
static void reply_to_exit_check(struct session *session)
{
    const char reply = SHM_EXIT_CHECK_REPLY;
    for (int tries = 0; tries < 100; tries++) {
        if (send(session->region_socket, &reply, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 || errno != EAGAIN)
            return;
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

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
static void warn_whole_trace(struct session *session, const char *message)
{
    fprintf(stderr, "memslope: warning: %s\n", message);
    trace_write_warning(session->writer, TRACE_NONE, message);
}

/* An --iteration that marked nothing says why, on stderr and in the trace. */
static void warn_iterations_missed(struct session *session)
{
    char message[512];
    if (session->fatal)
        return;
    if (session->options.iteration_symbol && !session->iteration_symbol_found) {
        snprintf(message, sizeof message,
                 "--iteration %s: no loaded module defined this function before the program ended; "
                 "no iterations were recorded",
                 session->options.iteration_symbol);
        warn_whole_trace(session, message);
    }
    const char *python = session->options.python_iteration;
    if (!python || session->python_iterations)
        return;
    if (!session->python_interpreters)
        snprintf(message, sizeof message, "--iteration py:%s: no recorded process ran a Python interpreter", python);
    else if (!session->python_frames_read)
        snprintf(message, sizeof message,
                 "--iteration py:%s: memslope cannot read this Python version's frames (it reads CPython 3.11 to "
                 "3.13); mark iterations with the memslope module instead",
                 python);
    else
        snprintf(message, sizeof message,
                 "--iteration py:%s: the function was never called (names are qualified names, e.g. "
                 "Bench.run, optionally after the module: mymodule:Bench.run)",
                 python);
    warn_whole_trace(session, message);
}

static int session_run_without_ptrace(struct session *session, const sigset_t *wait_set)
{
    struct traced_process *process = process_create(session, session->initial_pid, TRACE_NONE);
    if (!process)
        return 1;
    process->flags |= TRACE_PROC_PRIMARY;
    for (;;) {
        int status;
        pid_t got = waitpid(process->pid, &status, WNOHANG);
        process = receive_regions(session, process);
        size_t events = process_drain(process, 0);
        progress_update(&session->progress, session, session_now_ns());
        checkpoint_running_images(session, session_now_ns());
        if (got == process->pid) {
            end_without_ptrace(session, process, status);
            warn_iterations_missed(session);
            return session->exit_code;
        }
        if (got < 0 && errno != EINTR)
            return 1;
        if (events)
            continue;
        struct timespec timeout = {0, IDLE_WAIT_NS};
        int signal = sigtimedwait(wait_set, NULL, &timeout);
        if (signal > 0 && signal != SIGCHLD)
            forward_signal(session, signal);
    }
}

int session_run(struct session *session)
{
    sigset_t wait_set;
    sigemptyset(&wait_set);
    sigaddset(&wait_set, SIGCHLD);
    sigaddset(&wait_set, SIGTERM);
    sigaddset(&wait_set, SIGHUP);
    sigaddset(&wait_set, SIGINT);
    sigaddset(&wait_set, SIGQUIT);
    sigprocmask(SIG_BLOCK, &wait_set, NULL);
    progress_init(&session->progress, session->options.quiet, session_now_ns());
    if (session->no_ptrace)
        return session_run_without_ptrace(session, &wait_set);

    size_t events = 0;
    uint64_t last_reap_ns = 0;
    for (;;) {
        int reaped = 0;
        uint64_t now = session_now_ns();
        if (!events || now - last_reap_ns >= BUSY_REAP_INTERVAL_NS) {
            int status;
            pid_t tid;
            while ((tid = waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
                handle_wait_status(session, tid, status);
                reaped++;
            }
            if (tid < 0 && errno == ECHILD)
                break;
            last_reap_ns = now;
        }
        events = drain_all(session);
        progress_update(&session->progress, session, now);
        checkpoint_running_images(session, now);
        if (reaped || events)
            continue;
        struct timespec timeout = {0, IDLE_WAIT_NS};
        int signal = sigtimedwait(&wait_set, NULL, &timeout);
        if (signal > 0 && signal != SIGCHLD)
            forward_signal(session, signal);
    }
    /* Images whose end we did not see (cannot happen with ptrace, but a
     * trace must never lose what was recorded). */
    for (size_t i = 0; i < session->process_count; i++)
        if (session->processes[i]->state != PROCESS_ENDED)
            process_end(session, session->processes[i]);
    warn_iterations_missed(session);
    return session->fatal ? session->fatal : session->exit_code;
}

void session_destroy(struct session *session)
{
    struct traced_thread *thread, *tmp;
    HASH_ITER(hh, session->threads, thread, tmp) {
        HASH_DEL(session->threads, thread);
        free(thread);
    }
    for (size_t i = 0; i < session->process_count; i++) {
        struct traced_process *process = session->processes[i];
        recorder_free(&process->recorder);
        python_frames_free(&process->python);
        shm_consumer_detach(&process->shm);
        proc_maps_free(&process->maps);
        for (uint32_t a = 0; a < process->argc; a++)
            free(process->argv[a]);
        free(process->argv);
        free(process->exe);
        leak_results_free(&process->leaks);
        trace_output_state_free(process->output);
        symbolizer_warmup_finish(process->warmup);
        free(process->cases_checked);
        breakpoint_set_free(&process->breakpoints);
        free(process->leak_check_note);
        free(process);
    }
    free(session->processes);
    if (session->region_socket > 0)
        close(session->region_socket);
    for (size_t i = 0; i < session->detach_count; i++)
        breakpoint_set_free(&session->detach_pending[i].breakpoints);
    free(session->detach_pending);
}

/*
 * session.c - the ptrace side of `memslope record`: the table of process
 * images and threads, draining their rings, an image's end, and the loop.
 *
 * One thread does everything: it reaps ptrace stops with waitpid(WNOHANG),
 * drains the shared-memory rings of every process image between stops, and
 * sleeps in sigtimedwait() for SIGCHLD, the doorbell (a full ring, a
 * message on the region socket: shm_layout.h) or a timeout, so that rings
 * are drained while the target runs, when there is nothing to do.
 *
 * Processes are followed through clone, fork, vfork and exec; each process
 * image (a fork child, or the program an exec started) is recorded as a
 * process of its own. Signals are passed through unchanged and group-stops
 * are kept with PTRACE_LISTEN, so job control behaves as without memslope.
 *
 * The stops are handled in session_stops.c, the world stopped for a leak
 * check in session_world_stop.c, breakpoints (--iteration, the shim's
 * markers) in session_markers.c, and ptrace refused in session_noptrace.c.
 */
#include "session_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <elf.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../common/shm_layout.h"
#include "../leakscan/leakscan.h"
#include "socket_message.h"
#include "symbols/symbols.h"
#include "trace_output.h"
#include "trace_writer.h"

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

/* Nice levels the drain loop runs above the target when it may. With
 * more allocating threads than CPUs an equal share of the CPUs left the
 * loop behind: rings filled and their threads slept until it caught up
 * (malloc_bench -t 8 on 2 CPUs, median of 7: 2.90x plain wall at the
 * target's priority, 2.29x five levels above it; with 1 or 2 threads the
 * same). docs/internals.md, "The drain loop's priority". */
#define TRACER_PRIORITY_BOOST 5

uint64_t session_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* ---- processes and threads ---------------------------------------------- */

struct traced_process *process_create(struct session *session, pid_t pid, uint32_t parent_process_id)
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
struct traced_process *process_by_pid(struct session *session, pid_t pid)
{
    for (size_t i = session->process_count; i-- > 0;)
        if (session->processes[i]->pid == pid && session->processes[i]->state != PROCESS_ENDED)
            return session->processes[i];
    return NULL;
}

char *read_proc_file(pid_t pid, const char *name, size_t *length)
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
    uint64_t secure = 0;
    return process_auxv_value(pid, AT_SECURE, &secure) == 0 && secure != 0;
}

int process_auxv_value(pid_t pid, uint64_t type, uint64_t *value)
{
    size_t length = 0;
    char *auxv = read_proc_file(pid, "auxv", &length);
    int found = -1;
    for (size_t i = 0; auxv && i + sizeof(Elf64_auxv_t) <= length; i += sizeof(Elf64_auxv_t)) {
        Elf64_auxv_t entry;
        memcpy(&entry, auxv + i, sizeof entry);
        if (entry.a_type == type) {
            *value = entry.a_un.a_val;
            found = 0;
            break;
        }
    }
    free(auxv);
    return found;
}

int path_is_shim(const char *path)
{
    static const char shim_suffix[] = "/libmemslope.so";
    size_t length = strlen(path);
    return length >= sizeof shim_suffix - 1 && strcmp(path + length - (sizeof shim_suffix - 1), shim_suffix) == 0;
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

/* Whether an LD_PRELOAD value (paths split by colons or spaces, as ld.so
 * reads it) names memslope's shim. */
static int preload_names_shim(const char *value)
{
    char path[PATH_MAX];
    for (const char *at = value; *at;) {
        size_t length = strcspn(at, ": ");
        if (length > 0 && length < sizeof path) {
            memcpy(path, at, length);
            path[length] = '\0';
            if (path_is_shim(path))
                return 1;
        }
        at += length + (at[length] != '\0');
    }
    return 0;
}

/* What LD_PRELOAD held when the image started: the last definition in
 * /proc/PID/environ (the environment its exec was given). */
static void read_preload(struct traced_process *process)
{
    static const char name[] = "LD_PRELOAD=";
    size_t length = 0;
    char *environment = read_proc_file(process->pid, "environ", &length);
    const char *value = NULL;
    for (size_t i = 0; environment && i < length; i += strlen(environment + i) + 1)
        if (strncmp(environment + i, name, sizeof name - 1) == 0)
            value = environment + i + sizeof name - 1;
    free(process->preload_value);
    process->preload_value = NULL;
    if (!environment)
        process->preload = TRACE_PRELOAD_UNKNOWN;
    else if (!value)
        process->preload = TRACE_PRELOAD_UNSET;
    else if (preload_names_shim(value))
        process->preload = TRACE_PRELOAD_WITH_SHIM;
    else {
        process->preload = TRACE_PRELOAD_WITHOUT_SHIM;
        process->preload_value = strndup(value, TRACE_PRELOAD_VALUE_MAX);
    }
    free(environment);
}

/* Names the image: /proc/PID/exe and the argv in /proc/PID/cmdline. */
void process_read_identity(struct traced_process *process)
{
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)process->pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    free(process->exe);
    process->exe = strdup(n > 0 ? (exe[n] = '\0', exe) : "");
    process->secure_execution = read_secure_execution(process->pid);
    process->statically_linked = elf_statically_linked(path);
    read_preload(process);

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
void process_copy_identity(struct traced_process *to, const struct traced_process *from)
{
    for (uint32_t i = 0; i < to->argc; i++)
        free(to->argv[i]);
    free(to->argv);
    free(to->exe);
    to->argc = 0;
    to->exe = strdup(from->exe ? from->exe : "");
    free(to->preload_value);
    to->preload = from->preload;
    to->preload_value = from->preload_value ? strdup(from->preload_value) : NULL;
    to->argv = calloc(from->argc + 1, sizeof *to->argv);
    for (uint32_t i = 0; to->argv && i < from->argc; i++)
        to->argv[to->argc++] = strdup(from->argv[i]);
}

struct traced_thread *thread_find(struct session *session, pid_t tid)
{
    struct traced_thread *thread;
    HASH_FIND_INT(session->threads, &tid, thread);
    return thread;
}

struct traced_thread *thread_add(struct session *session, pid_t tid, struct traced_process *process)
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

void thread_remove(struct session *session, struct traced_thread *thread)
{
    if (!thread->reached_exit && thread->process->live_threads > 0)
        thread->process->live_threads--;
    HASH_DEL(session->threads, thread);
    free(thread);
}

/* ---- draining and snapshots ---------------------------------------------- */

/* Replaces the image's mappings with fresh ones (its maps read again; this
 * frees them), keeping the old ones that nothing new overlaps: addresses of
 * a library dlclosed before exit must still symbolize, and the result never
 * overlaps itself. */
void process_merge_maps(struct traced_process *process, struct proc_maps fresh)
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

/* Whether maps, read from the image's pid, still describe this image: its
 * region (a memfd of its own, with its inode) is mapped there. An exec the
 * loop has not handled yet leaves the pid with the next program's maps,
 * which would name this image's frames after the next program's functions
 * where the two load at the same addresses (without ASLR). An image whose
 * region is not found yet cannot be told apart: its maps are taken. */
static int maps_are_this_image(const struct traced_process *process, const struct proc_maps *maps)
{
    if (!process->shm.base || !process->shm.inode)
        return 1;
    for (size_t i = 0; i < maps->count; i++)
        if (maps->maps[i].inode == process->shm.inode && strstr(maps->maps[i].path, "memslope"))
            return 1;
    return 0;
}

void process_refresh_maps(struct traced_process *process)
{
    struct proc_maps fresh;
    if (proc_maps_read(process->pid, &fresh) != 0)
        return;
    if (maps_are_this_image(process, &fresh))
        process_merge_maps(process, fresh);
    else
        proc_maps_free(&fresh);
}

/* New sites: their Python frames are named now, while the region that
 * holds the code table is mapped; if any other frame lies outside the
 * known mappings, the image mapped something new (dlopen): read the maps
 * while the process is alive. */
static void process_check_new_sites(struct traced_process *process)
{
    struct recorder *recorder = &process->recorder;
    /* The mapping the last native frame was in: most frames of a stack are
     * in the one or two modules of its neighbours, and a Python start-up's
     * ten thousand new stacks made the binary search of ~400 mappings for
     * each of their frames a tenth of the tracer's instructions. */
    uint64_t known_start = 0, known_end = 0;
    for (; process->sites_checked < recorder->site_count; process->sites_checked++) {
        const struct recorder_site *site = &recorder->sites[process->sites_checked];
        int refreshed = 0;
        for (uint32_t f = 0; f < site->depth; f++) {
            uint64_t word = recorder_site_frame(site, f);
            if (shm_is_python_word(word)) {
                if (python_frames_add(&process->python, process->shm.base, word) < 0)
                    recorder->out_of_memory = 1;
                continue;
            }
            if (refreshed || (word >= known_start && word < known_end))
                continue;
            const struct proc_map *map = proc_maps_find(&process->maps, word);
            if (map) {
                known_start = map->start;
                known_end = map->end;
            } else {
                process_refresh_maps(process);
                refreshed = 1;
            }
        }
    }
}

static void process_try_attach(struct traced_process *process, uint64_t now)
{
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

size_t process_drain(struct traced_process *process, int full)
{
    size_t events = shm_consumer_drain(&process->shm, &process->recorder, full);
    if (events)
        process_check_new_sites(process);
    return events;
}

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
        for (uint32_t f = 0; f < recorder->sites[i].depth; f++) {
            uint64_t word = recorder_site_frame(&recorder->sites[i], f);
            if (!shm_is_python_word(word))
                addresses[(*count)++] = word;
        }
    return addresses;
}

/* Moves the calling thread's nice value by delta; 0 when it moved.
 * Raising a priority takes CAP_SYS_NICE or an RLIMIT_NICE that allows it
 * (root has both): without them the loop stays at the target's priority,
 * as before. Linux nice values are per thread: only the calling thread's
 * moves, and the target, forked before, keeps its own. */
static int move_nice(int delta)
{
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, 0);
    return errno == 0 ? setpriority(PRIO_PROCESS, 0, nice_now + delta) : -1;
}

static void raise_priority(struct session *session)
{
    if (!session->priority_raised && move_nice(-TRACER_PRIORITY_BOOST) == 0)
        session->priority_raised = 1;
}

/* Returns whether it was raised (and is now back at the target's). */
static int lower_priority(struct session *session)
{
    if (!session->priority_raised)
        return 0;
    if (move_nice(TRACER_PRIORITY_BOOST) == 0)
        session->priority_raised = 0;
    return 1;
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
    /* A thread starts at its creator's priority: the warm-up, background
     * work, starts at the target's. */
    int was_raised = lower_priority(session);
    process->warmup = symbolizer_warmup_start(session->symbols, &process->maps, addresses, count,
                                               SHM_TRACER_DOORBELL);
    if (was_raised)
        raise_priority(session);
    free(addresses);
    if (process->warmup)
        session->warmups_running++;
}

/* every_slot: look at every ring of every image (after the doorbell: a
 * thread that claimed a slot since the last look may be the one ringing). */
static size_t drain_all(struct session *session, int every_slot)
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
        process_try_attach(process, now);
        process->shm.processors = session->processors; /* for its hold_wanted */
        size_t drained = process_drain(process, every_slot);
        events += drained;
        get_ready_for_leak_check(session, process, drained);
        process_maybe_warm_up(session, process, now);
    }
    return events;
}

/* ---- the region socket (both loops) ------------------------------------ */

/* The next message a shim sent over the socket; 0 when none is waiting.
 * A malformed one is reported and skipped (its descriptors closed). */
int receive_message(struct session *session, struct socket_message *message)
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
int map_sent_region(struct socket_message *message, struct shm_consumer *consumer, pid_t *pid)
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
void reply_to_exit_check(struct session *session)
{
    const char reply = SHM_EXIT_CHECK_REPLY;
    for (int tries = 0; tries < 100; tries++) {
        if (send(session->region_socket, &reply, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 || errno != EAGAIN)
            return;
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* ---- an image's end, and checkpoints ----------------------------------- */

/* Drains every event the image has written, finding its region first if
 * the tracer has not yet: its hand-over message may still be queued on the
 * socket, else /proc is searched, at once (now UINT64_MAX) or as often as
 * the main loop would (now: the time). */
static void drain_finding_region(struct session *session, struct traced_process *process, uint64_t now)
{
    if (!process->shm.base)
        adopt_sent_regions(session);
    if (!process->shm.base)
        process_try_attach(process, now);
    process_drain(process, 1);
}

void process_drain_all(struct session *session, struct traced_process *process)
{
    drain_finding_region(session, process, UINT64_MAX);
}

/* A marker's breakpoint comes again and again: a region still on the
 * socket is adopted (the first case of a program that ends it at once,
 * before the main loop read the hand-over), but a program without the
 * shim and with --iteration SYMBOL does not pay for a search of /proc at
 * every call. */
void process_drain_at_marker(struct session *session, struct traced_process *process)
{
    drain_finding_region(session, process, session_now_ns());
}

/* The image is about to go (exit, fatal signal, exec): every event it
 * committed is in its region, so drain it all and snapshot the heap. */
void process_final_snapshot(struct session *session, struct traced_process *process, uint32_t kind,
                            pid_t stopped_tid)
{
    if (process->final_snapshot_taken)
        return;
    process->final_snapshot_taken = 1;
    process_drain_all(session, process);
    /* At an exit every other thread has ended or is killed, never to run
     * the program's code again: their sets can be read and cleared. */
    if (kind == TRACE_SNAP_EXIT && stopped_tid > 0)
        take_held_blocks(process, stopped_tid);
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
    session->python_before_3_11 += process->python.version < 0x030b0000u;
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

/* An image whose LD_PRELOAD lost the shim on the way (a command in the
 * chain set or removed it) recorded nothing, by the user's hand: the first
 * is said on stderr as well as in the trace, and how many more at the end
 * (`env -i make` runs every command of a build without it). A static or
 * setuid program's is only in the trace: they are not the user's doing. */
static void warn_preload_lost(struct session *session, const struct trace_image *image)
{
    char message[1024];
    if ((image->preload != TRACE_PRELOAD_UNSET && image->preload != TRACE_PRELOAD_WITHOUT_SHIM) ||
        image->secure_execution || image->statically_linked || !trace_image_shim_absent(image, message, sizeof message))
        return;
    if (session->preload_lost++ == 0)
        fprintf(stderr, "memslope: warning: %s\n", message);
}

/* What the trace is told of the image (trace_output.h), its shim's
 * counters and Python header read now (a running image's checkpoint says
 * it runs Python, or its report gives C advice). */
static struct trace_image image_view(const struct session *session, struct traced_process *process)
{
    struct shm_counters counters = shm_consumer_counters(&process->shm);
    if (process->shm.base)
        python_frames_read_header(&process->python, process->shm.base);
    return (struct trace_image){
        .process_id = process->process_id,
        .parent_process_id = process->parent_process_id,
        .pid = process->pid,
        .exe = process->exe,
        .argc = process->argc,
        .argv = (const char *const *)process->argv,
        .start_ns = process->start_ns,
        .end_ns = process->end_ns,
        .flags = process->flags,
        .exit_status = process->exit_status,
        .exit_signal = process->exit_signal,
        .recorder = &process->recorder,
        .python = &process->python,
        .maps = &process->maps,
        .leaks = &process->leaks,
        .stacks_dropped = counters.stacks_dropped,
        .slots_exhausted = counters.slots_exhausted,
        .freeres_outcome = counters.freeres_outcome,
        .freeres_off = session->options.no_freeres,
        .region_found = process->shm.base != NULL,
        .raw_fork_child = process->raw_fork_child,
        .freeres_other_threads = counters.freeres_other_threads,
        .invalid_events = process->invalid_events,
        .vfork_child = process->vfork_child,
        .secure_execution = process->secure_execution,
        .statically_linked = process->statically_linked,
        .preload = process->preload,
        .preload_value = process->preload_value,
        .leak_check_note = process->leak_check_note,
        .output = &process->output,
    };
}

void process_end(struct session *session, struct traced_process *process)
{
    int was_stopped = process->final_snapshot_taken;
    collect_case_check(process, 1);
    process_final_snapshot(session, process, process->exit_signal ? TRACE_SNAP_SIGNAL : TRACE_SNAP_EXIT, 0);
    process_drain(process, 1);
    leak_check_spare_free(&process->check_spare); /* no check after this */
    if (!was_stopped && session->options.leak_check != TRACE_LEAK_CHECK_OFF &&
        (process->flags & TRACE_PROC_SHIM_SEEN) && !process->leak_check_note &&
        asprintf(&process->leak_check_note,
                 "no leak check for process %d: it was gone before it could be stopped (killed by signal %d)",
                 (int)process->pid, process->exit_signal) < 0)
        process->leak_check_note = NULL;
    if (process->shm.base && session->kept_rules)
        kept_rules_collect(session->kept_rules, process->shm.base);
    process->invalid_events = process->shm.invalid_events;
    process->end_ns = session_now_ns();
    process->state = PROCESS_ENDED;
    if (process->warmup)
        session->warmups_running--;
    symbolizer_warmup_stop(process->warmup); /* the output below resolves what it has not */
    symbolizer_warmup_finish(process->warmup); /* what it read is the symbol store's now */
    process->warmup = NULL;
    struct trace_image image = image_view(session, process); /* reads the shim's Python header */
    count_python_image(session, process);
    if (trace_output_process(session->writer, session->symbols, &image, &session->modules_written) < 0)
        report_write_failure(session);
    warn_preload_lost(session, &image);
    recorder_free(&process->recorder);
    shm_consumer_detach(&process->shm); /* the sites' frames were in it */
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

void checkpoint_running_images(struct session *session, uint64_t now)
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
        collect_case_check(process, 0);
        struct trace_image image = image_view(session, process);
        if (trace_output_checkpoint(session->writer, session->symbols, &image, &session->modules_written, now) < 0)
            report_write_failure(session);
    }
    if (session->checkpoint_gap_ns < first * CHECKPOINT_GAP_GROWTH_LIMIT / 2)
        session->checkpoint_gap_ns *= 2;
    else
        session->checkpoint_gap_ns = first * CHECKPOINT_GAP_GROWTH_LIMIT;
    session->next_checkpoint_ns = now + session->checkpoint_gap_ns;
}

/* While the loop has time to spare, the stacks of an image's new sites
 * are written ahead of its end (trace_output_new_stacks), once this many
 * are new. The end's own output was python3 -c pass's longest step after
 * its exit (sorting, resolving and writing ten thousand stacks), while the
 * tracer had been idle most of the run. */
#define STACKS_AHEAD_MIN_SITES 1024

/* Only once the image's symbolizer warm-up has ended (the two would
 * compete for the tracer's processor and the symbol store's lock; its
 * thread is joined at the image's end, as before, so that one image's
 * warm-up at a time still runs), and one image a turn. Returns whether
 * anything was written. */
static int write_stacks_ahead(struct session *session)
{
    if (session->write_failure_reported)
        return 0;
    for (size_t i = 0; i < session->process_count; i++) {
        struct traced_process *process = session->processes[i];
        if (process->state == PROCESS_ENDED || process->vfork_child || !(process->flags & TRACE_PROC_SHIM_SEEN) ||
            !process->warmup_tried || !symbolizer_warmup_done(process->warmup))
            continue;
        struct trace_image image = image_view(session, process);
        int written = trace_output_new_stacks(session->writer, session->symbols, &image, &session->modules_written,
                                              session_now_ns(), STACKS_AHEAD_MIN_SITES);
        if (written < 0)
            report_write_failure(session);
        if (written)
            return 1;
    }
    return 0;
}

/* An exec replaced the image: the old one ends (its heap with it: no leak
 * check at exec, as memcheck) and the new one, same pid, begins. The old
 * image keeps the mappings read while it ran: the pid's maps are the new
 * program's now, which would name the old image's frames after functions
 * of the new one wherever the two programs' mappings overlap (the same
 * load addresses without ASLR). NULL when out of memory. */
struct traced_process *replace_image(struct session *session, struct traced_process *old)
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

/* ---- warnings about the whole recording ------------------------------- */

/* A warning about the whole recording, on stderr and in the trace. */
static void warn_whole_trace(struct session *session, const char *message)
{
    fprintf(stderr, "memslope: warning: %s\n", message);
    trace_write_warning(session->writer, TRACE_NONE, message);
}

/* An --iteration that marked nothing says why, on stderr and in the trace. */
void warn_iterations_missed(struct session *session)
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
                 "--iteration py:%s: memslope cannot read this Python version's frames (it reads CPython 3.6 to "
                 "3.13); mark iterations with the memslope module instead",
                 python);
    else if (session->python_before_3_11 == session->python_interpreters)
        snprintf(message, sizeof message,
                 "--iteration py:%s: needs CPython 3.11 or later (the code objects of earlier versions have no "
                 "qualified name to match); mark iterations with the memslope module instead",
                 python);
    else
        snprintf(message, sizeof message,
                 "--iteration py:%s: the function was never called (names are qualified names, e.g. "
                 "Bench.run, optionally after the module: mymodule:Bench.run)",
                 python);
    warn_whole_trace(session, message);
}

/* ---- the loop -------------------------------------------------------------- */

void forward_signal(struct session *session, int signal)
{
    /* Once the command has ended, a signal to memslope (timeout's SIGTERM,
     * a Ctrl-C) ends the wait for what it left running (--wait-all). */
    if (session->initial_ended) {
        session->let_go_asked = 1;
        return;
    }
    /* SIGINT and SIGQUIT from the terminal reach the target directly (same
     * process group); other signals sent to memslope are meant for it. */
    if (signal == SIGINT || signal == SIGQUIT)
        return;
    struct traced_process *process = process_by_pid(session, session->initial_pid);
    if (process)
        kill(process->pid, signal);
}

/* Threads that hold a ring in the running images (each shim counts its
 * own; the target writes that count, so it is only a hint). */
static uint32_t producing_threads(const struct session *session)
{
    uint32_t threads = 0;
    for (size_t i = 0; i < session->process_count; i++)
        if (session->processes[i]->state != PROCESS_ENDED)
            threads += shm_consumer_producers(&session->processes[i]->shm);
    return threads;
}

/* Whether a running image's threads cannot ring the doorbell (they run as
 * another user: shm_layout.h, doorbell_refused). */
static int doorbell_refused(const struct session *session)
{
    for (size_t i = 0; i < session->process_count; i++)
        if (session->processes[i]->state != PROCESS_ENDED && shm_consumer_doorbell_refused(&session->processes[i]->shm))
            return 1;
    return 0;
}

/*
 * After a drain that found `events`: nothing, a short pause, or the idle
 * wait, each cut short by a signal (SIGCHLD: a child stopped or ended; the
 * doorbell).
 *
 * Why a pause after a light drain: the tracer drained again the moment it
 * finished, a few dozen events at a time, and each pass took from the
 * program the cache lines of its ring and of the ring's positions, which
 * its next writes had to fetch back. On this project's 2-vCPU VM a pure
 * Python script recorded at 0.72 s wall with the tracer spinning and
 * 0.51 s with a 100 us pause after drains of fewer than 8,192 events
 * (paired median ratio 0.74; the C benchmark with one thread: 0.93).
 * Only while the program's recording threads leave a processor free:
 * with as many threads as processors, a paused tracer waited for one to
 * be given back (the C benchmark with two threads: 1.12 with the pause),
 * and their rings filled meanwhile.
 */
static long wait_ns_after_drain(struct session *session, size_t events)
{
    if (events)
        return events < BUSY_PAUSE_EVENTS && producing_threads(session) < session->processors ? BUSY_PAUSE_NS : 0;
    uint64_t wait_ns = session->idle_wait_ns;
    if (wait_ns > IDLE_WAIT_UNRUNG_NS && doorbell_refused(session))
        wait_ns = IDLE_WAIT_UNRUNG_NS;
    /* no later than the next checkpoint (taken by the loop once due) */
    if (session->options.checkpoint_ns && session->next_checkpoint_ns && !session->write_failure_reported) {
        uint64_t now = session_now_ns();
        uint64_t until = session->next_checkpoint_ns > now ? session->next_checkpoint_ns - now : 1;
        if (until < wait_ns)
            wait_ns = until;
    }
    return (long)wait_ns;
}

/* Sleeps up to wait_ns for a signal of wait_set; returns it (0: none). */
static int wait_for(struct session *session, const sigset_t *wait_set, long wait_ns)
{
    if (!wait_ns)
        return 0;
    struct timespec timeout = {wait_ns / 1000000000L, wait_ns % 1000000000L};
    int signal = sigtimedwait(wait_set, NULL, &timeout);
    if (signal > 0 && signal != SIGCHLD && signal != SHM_TRACER_DOORBELL)
        forward_signal(session, signal);
    return signal > 0 ? signal : 0;
}

int wait_after_drain(struct session *session, const sigset_t *wait_set, size_t events)
{
    return wait_for(session, wait_set, wait_ns_after_drain(session, events));
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
    sigaddset(&wait_set, SHM_TRACER_DOORBELL);
    sigprocmask(SIG_BLOCK, &wait_set, NULL);
    progress_init(&session->progress, session->options.quiet, session_now_ns());
    raise_priority(session);
    if (session->no_ptrace)
        return session_run_without_ptrace(session, &wait_set);

    size_t events = 0;
    uint64_t last_reap_ns = 0;
    int rung = 0; /* the doorbell ended the last wait */
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
        let_go_of_the_rest(session);
        events = drain_all(session, rung);
        rung = 0;
        progress_update(&session->progress, session, now);
        checkpoint_running_images(session, now);
        if (reaped)
            continue;
        long wait_ns = wait_ns_after_drain(session, events);
        /* in time the loop would have waited; then events may be waiting */
        if (wait_ns && write_stacks_ahead(session))
            continue;
        /* A SIGCHLD taken here is a stop the next iteration must reap, busy
         * or not: no other will come for it, and the loop may next sleep
         * its whole idle wait. */
        int signal = wait_for(session, &wait_set, wait_ns);
        if (signal == SIGCHLD)
            last_reap_ns = 0;
        rung = signal == SHM_TRACER_DOORBELL;
    }
    /* Images whose end we did not see (cannot happen with ptrace, but a
     * trace must never lose what was recorded). */
    for (size_t i = 0; i < session->process_count; i++)
        if (session->processes[i]->state != PROCESS_ENDED)
            process_end(session, session->processes[i]);
    warn_iterations_missed(session);
    return session->fatal ? session->fatal : session->exit_code;
}

/* ---- the recording (session.h) ------------------------------------------ */

/* The processors memslope (and so the target) may run on. */
static uint32_t processors_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (uint32_t)online : 1;
}

struct session *session_create(const struct record_options *options)
{
    struct session *session = calloc(1, sizeof *session);
    if (!session)
        return NULL;
    session->options = *options;
    session->processors = processors_available();
    session->symbols = symbol_store_create();
    if (!session->symbols) {
        free(session);
        return NULL;
    }
    if (!options->no_symbol_cache)
        symbol_store_use_cache(session->symbols, symbol_cache_open_user());
    if (symbol_store_cache(session->symbols))
        session->kept_rules = kept_rules_create(); /* NULL: the rules are simply not kept */
    read_check_copy_max(session);
    return session;
}

/* What the case checks cost the program under --verbose: how long they held
 * it, and how many classified a copy while it ran on. */
static void say_case_checks(const struct session *session)
{
    if (!session->options.verbose || session->checks_copied + session->checks_in_place == 0)
        return;
    fprintf(stderr,
            "memslope: case leak checks: %u classified from a copy while the program ran on (the largest %.1f MiB), "
            "%u scanned in place; the program held %.1f ms at most\n",
            session->checks_copied, (double)session->check_copy_max / (1 << 20), session->checks_in_place,
            (double)session->check_hold_max_ns / 1e6);
}

/* Adds the unwind rules the shims looked up to the symbol cache's folder;
 * says what they cost under --verbose. */
static void finish_kept_rules(struct kept_rules *kept, struct symbol_cache *cache, const struct record_options *options)
{
    char err[4096 + 256];
    if (!kept || !cache)
        return;
    if (kept_rules_save(kept, cache, err, sizeof err) != 0)
        fprintf(stderr, "memslope: warning: %s\n", err);
    if (!options->verbose)
        return;
    struct kept_rules_stats stats;
    kept_rules_stats(kept, &stats);
    fprintf(stderr,
            "memslope: unwind rules: %llu read from the symbol cache, %llu looked up in CFI (%llu of them kept for "
            "the next recording); %zu files written\n",
            (unsigned long long)stats.reused, (unsigned long long)stats.looked_up, (unsigned long long)stats.kept,
            stats.files_written);
}

/* Adds this recording's frames to the symbol cache; says what
 * symbolization cost under --verbose. */
static void finish_symbols(struct symbol_store *symbols, const struct record_options *options)
{
    char err[4096 + 256];
    if (symbol_store_save_cache(symbols, err, sizeof err) != 0)
        fprintf(stderr, "memslope: warning: %s\n", err);
    if (!options->verbose)
        return;
    struct symbol_store_stats stats;
    symbol_store_stats(symbols, &stats);
    const char *cache = symbol_store_cache_directory(symbols);
    fprintf(stderr,
            "memslope: symbols: %zu frames from the symbol cache, %zu read from debug info (ELF files opened: %zu, "
            "modules whose DWARF was loaded: %zu, separate debug files: %zu)\n",
            stats.cache_hits, stats.offsets_resolved, stats.files_opened, stats.dwarf_loaded,
            stats.debug_files_found);
    if (cache)
        fprintf(stderr, "memslope: symbol cache %s: %zu files read, %zu rejected, %zu written\n", cache,
                stats.cache_files_read, stats.cache_files_rejected, stats.cache_files_written);
    else
        fprintf(stderr, "memslope: symbol cache not used%s\n", options->no_symbol_cache ? " (--no-symbol-cache)" : "");
}

/* The closing note on the images let go of (let_go_of_the_rest): those
 * still running, and those memslope had to wait for, now ended. */
static void say_let_go(uint32_t count, uint32_t waited)
{
    uint32_t running = count - waited;
    fprintf(stderr, "memslope: the command ended with %u process%s it started still running: recorded until then, "
                    "then let go of",
            count, count == 1 ? "" : "es");
    if (!waited)
        fprintf(stderr, ", %s", count == 1 ? "it runs on" : "they run on");
    else if (count == 1)
        fprintf(stderr, "; memslope waited for it to end, its main thread having ended first");
    else
        fprintf(stderr, "; %u run%s on, and memslope waited for %u to end, %s main thread having ended first",
                running, running == 1 ? "s" : "", waited, waited == 1 ? "its" : "their");
    fprintf(stderr, " (record --wait-all records them to their end)\n");
}

int session_finish(struct session *session, int exit_code)
{
    progress_clear(&session->progress);
    say_case_checks(session);
    finish_symbols(session->symbols, &session->options);
    finish_kept_rules(session->kept_rules, symbol_store_cache(session->symbols), &session->options);
    char err[4096];
    if (trace_writer_finish(session->writer, err, sizeof err) < 0) {
        if (!session->write_failure_reported)
            fprintf(stderr, "memslope: %s\n", err);
        if (exit_code == 0)
            exit_code = 1;
    } else if (!session->options.quiet) {
        if (strcmp(session->output_path, "-") == 0)
            fputs("memslope: trace written to standard output (memslope report - reads it from a pipe)\n", stderr);
        else
            fprintf(stderr, "memslope: trace written to %s (memslope report %s)\n", session->output_path,
                    session->output_path);
    }
    if (session->let_go_count && !session->options.quiet)
        say_let_go(session->let_go_count, session->let_go_waited);
    if (session->preload_lost > 1)
        fprintf(stderr, "memslope: warning: %u more processes ran without the shim, their LD_PRELOAD removed or "
                        "replaced the same way (memslope report lists each)\n",
                session->preload_lost - 1);
    return exit_code;
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
        collect_case_check(process, 1); /* its thread reads the recorder */
        leak_check_spare_free(&process->check_spare);
        recorder_free(&process->recorder);
        python_frames_free(&process->python);
        shm_consumer_detach(&process->shm);
        proc_maps_free(&process->maps);
        for (uint32_t a = 0; a < process->argc; a++)
            free(process->argv[a]);
        free(process->argv);
        free(process->exe);
        free(process->preload_value);
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
    kept_rules_destroy(session->kept_rules);
    symbol_store_destroy(session->symbols);
    free(session);
}

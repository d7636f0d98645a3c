/*
 * session_world_stop.c - stopping every thread of an image so that a leak
 * check sees its heap, registers and stacks as they are, and the check at
 * the image's end (exit or fatal signal).
 */
#include "session_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/units.h"
#include "../leakscan/leakscan.h"
#include "held_sets.h"

/* ---- stopping the world for a leak check ------------------------------- */

/* A stop of the world waits THREAD_STOP_TIMEOUT_NS for each thread: then
 * the check goes on without it, and says so, rather than hang. */

int wait_for_stop(pid_t tid, int *status, uint64_t deadline_ns)
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

struct deferred_status {
    pid_t tid;
    int status;
};

/* Interrupts every other thread of the image and waits for each to stop.
 * What a thread reports instead of the interrupt stop (a signal, an event,
 * its exit) is kept in deferred to be handled at world_stop_end; until
 * then the thread is held. A thread already held by an outer stop of the
 * world is stopped: it is counted, not interrupted. A thread that is gone
 * has nothing to scan, and is not late. */
static void stop_other_threads(struct world_stop *world, struct session *session, struct traced_process *process,
                               size_t capacity)
{
    pid_t stopped_tid = world->tids[0];
    uint64_t deadline = session_now_ns() + THREAD_STOP_TIMEOUT_NS;
    struct traced_thread *thread, *tmp;
    HASH_ITER(hh, session->threads, thread, tmp) {
        if (world->deferred_count + 1 == capacity || world->stopped == capacity)
            break;
        if (thread->process != process || thread->tid == stopped_tid || thread->reached_exit)
            continue;
        if (thread->held) {
            world->tids[world->stopped++] = thread->tid;
            continue;
        }
        if (ptrace(PTRACE_INTERRUPT, thread->tid, 0, 0) < 0)
            continue;
        int status;
        int came = wait_for_stop(thread->tid, &status, deadline);
        if (came < 0)
            continue; /* gone: nothing of it to scan */
        if (came == 0) {
            world->late++; /* its interrupt stop reaches the loop later, which resumes it */
            continue;
        }
        world->deferred[world->deferred_count++] = (struct deferred_status){thread->tid, status};
        if (WIFSTOPPED(status)) {
            world->tids[world->stopped++] = thread->tid;
            thread->held = 1;
        }
    }
}

int world_stop_begin(struct world_stop *world, struct session *session, struct traced_process *process,
                     pid_t stopped_tid)
{
    memset(world, 0, sizeof *world);
    size_t capacity = (size_t)process->live_threads + 2;
    world->tids = calloc(capacity, sizeof *world->tids);
    world->deferred = calloc(capacity, sizeof *world->deferred);
    if (!world->tids || !world->deferred) {
        world_stop_end(world, session);
        return -1;
    }
    world->tids[world->stopped++] = stopped_tid;
    stop_other_threads(world, session, process, capacity);
    return 0;
}

/* Hands the stops collected while the world was stopped back to the loop:
 * a plain interrupt stop just resumes. Each thread is let go of before its
 * stop is handled, which may stop the world again. */
void world_stop_end(struct world_stop *world, struct session *session)
{
    for (size_t i = 0; i < world->deferred_count; i++) {
        const struct deferred_status *deferred = &world->deferred[i];
        struct traced_thread *thread = thread_find(session, deferred->tid);
        if (thread)
            thread->held = 0;
        int status = deferred->status;
        if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP && WSTOPSIG(status) == SIGTRAP)
            resume_thread(deferred->tid, 0);
        else
            handle_wait_status(session, deferred->tid, status);
    }
    free(world->tids);
    free(world->deferred);
    memset(world, 0, sizeof *world);
}

/* The most a check copies of what its scan reads (so that a case's runs
 * beside the program, and any reads each range once):
 * MEMSLOPE_CHECK_COPY_MAX (a size; 0: never), by default 256 MiB or a
 * quarter of the memory available (free, and left under a cgroup's
 * limit) if that is less. Above it the scan reads the
 * stopped process in place, in memory a small part of the heap's
 * (docs/leakscan.md). */
/* One number from a memory cgroup file of memslope's own cgroup: v1's
 * (its memory controller's) if there is one, else v2's; UINT64_MAX when
 * there is none ("max", no such file). */
static uint64_t cgroup_value(const char *v2_file, const char *v1_file)
{
    char line[4096], path[4096 + 64] = "";
    FILE *cgroups = fopen("/proc/self/cgroup", "re");
    if (!cgroups)
        return UINT64_MAX;
    while (fgets(line, sizeof line, cgroups)) {
        line[strcspn(line, "\n")] = '\0';
        const char *v1 = strstr(line, ":memory:");
        if (v1) {
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/%s", v1 + 8, v1_file);
            break;
        }
        if (strncmp(line, "0::", 3) == 0)
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/%s", line + 3, v2_file);
    }
    fclose(cgroups);
    FILE *value_file = path[0] ? fopen(path, "re") : NULL;
    unsigned long long value;
    int got = value_file && fscanf(value_file, "%llu", &value) == 1;
    if (value_file)
        fclose(value_file);
    return got ? (uint64_t)value : UINT64_MAX;
}

/* The memory memslope may still take: the free memory, and in a cgroup
 * with a limit what is left under it (where MAP_POPULATE over it would
 * have the tracer killed, not refused). */
static uint64_t memory_available(void)
{
    uint64_t available = UINT64_MAX;
    long free_pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (free_pages > 0 && page > 0)
        available = (uint64_t)free_pages * (uint64_t)page;
    uint64_t max = cgroup_value("memory.max", "memory.limit_in_bytes");
    uint64_t current = cgroup_value("memory.current", "memory.usage_in_bytes");
    if (max != UINT64_MAX && current != UINT64_MAX) {
        uint64_t left = max > current ? max - current : 0;
        available = left < available ? left : available;
    }
    return available;
}

uint64_t check_copy_limit(const struct session *session)
{
    if (session->check_copy_set)
        return session->check_copy_limit_set;
    /* The copies' kept buffers are memory a copy writes into again, not
     * memory it takes: counted as available, or a buffer readied for the
     * next check (leak_check_spare_ready) would lower the limit it was
     * sized under, and push that check into a scan in place. */
    uint64_t limit = 256ull << 20, available = memory_available();
    for (size_t p = 0; p < session->process_count; p++)
        available += session->processes[p]->check_spare.copy.size;
    return available / 4 < limit ? available / 4 : limit;
}

void read_check_copy_max(struct session *session)
{
    const char *set = getenv("MEMSLOPE_CHECK_COPY_MAX");
    if (!set || !*set)
        return;
    if (units_parse_size(set, &session->check_copy_limit_set) == 0) {
        session->check_copy_set = 1;
        return;
    }
    fprintf(stderr,
            "memslope: warning: MEMSLOPE_CHECK_COPY_MAX=%s is not a size (bytes, or with K, M or G, as 64M); the "
            "default limit applies\n",
            set);
}

/* leak_check_run with what the process's shim tells about its memory
 * (its pymalloc arenas, its TLS). */
int run_leak_check(struct traced_process *process, const pid_t *tids, size_t count, uint32_t when,
                   const unsigned char *skip_cases, size_t skip_count, uint64_t copy_limit,
                   struct leak_results *results, char *err, size_t err_size)
{
    struct leakscan_shim_memory shim;
    struct leakscan_range *ranges;
    if (shm_consumer_shim_memory(&process->shm, &shim, &ranges) < 0) {
        snprintf(err, err_size, "out of memory copying the allocator ranges of process %d", (int)process->pid);
        return -1;
    }
    int rc = leak_check_run(process->pid, tids, count, &shim, &process->recorder, when, session_now_ns(), skip_cases,
                            skip_count, copy_limit, &process->check_spare, results, err, err_size);
    free(ranges);
    return rc;
}

/* The memory the session's copies hold: every process's pending case
 * checks' and kept buffers (but process's kept one, which its next copy
 * takes or frees). MEMSLOPE_CHECK_COPY_MAX bounds them together. */
static uint64_t copies_held(const struct session *session, const struct traced_process *process)
{
    uint64_t bytes = 0;
    for (size_t p = 0; p < session->process_count; p++) {
        const struct traced_process *other = session->processes[p];
        for (size_t i = 0; i < other->pending_count; i++)
            bytes += other->pending_checks[i].bytes; /* 0 for results ready */
        if (other != process)
            bytes += other->check_spare.copy.size;
    }
    return bytes;
}

/* What a copy of process's may take under limit, beside the copies the
 * session holds already. */
static uint64_t copy_room(const struct session *session, const struct traced_process *process, uint64_t limit)
{
    uint64_t held = copies_held(session, process);
    return held < limit ? limit - held : 0;
}

/* How often get_ready_for_leak_check reads the copy's limit again. */
#define READY_LIMIT_INTERVAL_NS 100000000ull

void get_ready_for_leak_check(struct session *session, struct traced_process *process, size_t drained)
{
    if (session->options.leak_check == TRACE_LEAK_CHECK_OFF || !(process->flags & TRACE_PROC_SHIM_SEEN) ||
        drained > READY_DRAINED_MAX)
        return;
    collect_case_check(process, 0); /* gives the spare back */
    if (process->pending_count)
        return;
    uint64_t now = session_now_ns();
    if (!session->ready_copy_limit_ns || now - session->ready_copy_limit_ns >= READY_LIMIT_INTERVAL_NS) {
        session->ready_copy_limit = check_copy_limit(session);
        session->ready_copy_limit_ns = now;
    }
    leak_check_spare_ready(&process->check_spare, &process->recorder,
                           copy_room(session, process, session->ready_copy_limit), READY_PAGES_PER_DRAIN);
}

int start_case_check(const struct session *session, struct traced_process *process, const pid_t *tids,
                     size_t count, uint32_t when, char *err, size_t err_size)
{
    uint64_t limit = check_copy_limit(session);
    if (limit == 0)
        return 1;
    collect_case_check(process, 0); /* those done give their buffers back for this copy */
    while (process->pending_count >= PENDING_CHECKS_MAX)
        collect_oldest_case_check(process);
    struct leakscan_shim_memory shim;
    struct leakscan_range *ranges;
    if (shm_consumer_shim_memory(&process->shm, &shim, &ranges) < 0) {
        snprintf(err, err_size, "out of memory copying the allocator ranges of process %d", (int)process->pid);
        return -1;
    }
    struct leak_check_pending *check;
    /* this process has no check pending now: the copies held are other processes' */
    int rc = leak_check_start(process->pid, tids, count, &shim, &process->recorder, when, session_now_ns(),
                              copy_room(session, process, limit), &process->check_spare, &check, err, err_size);
    free(ranges);
    if (rc == 0)
        process->pending_checks[process->pending_count++] = (struct pending_case_check){
            check, {0}, when, process->recorder.open_case, leak_check_pending_bytes(check)};
    return rc;
}

void take_held_blocks(struct traced_process *process, pid_t reader)
{
    if (!process->shm.base || !process->recorder.sample_rate)
        return;
    if (held_sets_take(&process->shm, &process->recorder, reader, session_now_ns()) >= 0 ||
        process->held_unreadable)
        return;
    char why[256];
    snprintf(why, sizeof why,
             "the blocks the threads of process %d held back could not be read or cleared (%s): its leak "
             "checks and live figures may miss them; record with MEMSLOPE_HOLD=0 to have every block sent",
             (int)process->pid, strerror(errno));
    process->held_unreadable = 1; /* said once */
    add_leak_check_note(process, why);
}

/* Adds why a leak check did not run to the process's note (said on stderr
 * now, and kept in the trace as a warning). */
void add_leak_check_note(struct traced_process *process, const char *why)
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
void note_late_threads(struct traced_process *process, size_t late, const char *check)
{
    char why[256];
    snprintf(why, sizeof why,
             "no %s leak check for process %d: %zu thread%s did not stop within %llu s (uninterruptible sleep, or "
             "being killed)",
             check, (int)process->pid, late, late == 1 ? "" : "s", THREAD_STOP_TIMEOUT_NS / 1000000000ull);
    add_leak_check_note(process, why);
}

/* The check at exit (or a fatal signal). Case checks still being
 * classified (the last case of a driver ends just before its exit) are
 * waited for first: their cases are then skipped as checked, and their
 * copy's buffer is this check's, so it reads each range once and scans
 * the copy. Scanning in place beside them, the exit check of issue 14's
 * driver took 83-112 ms (timed at its phases, three runs); waiting and
 * copying, 69-84 ms, at the peak of one copy. */
void process_leak_check(struct session *session, struct traced_process *process, pid_t stopped_tid,
                        uint32_t kind)
{
    if (session->options.leak_check == TRACE_LEAK_CHECK_OFF || !(process->flags & TRACE_PROC_SHIM_SEEN)) {
        collect_case_check(process, 1);
        return;
    }
    struct world_stop world;
    int stopped = world_stop_begin(&world, session, process, stopped_tid);
    collect_case_check(process, 1);
    if (stopped < 0)
        return;
    char err[512];
    struct leak_results results;
    uint64_t room = copy_room(session, process, check_copy_limit(session)); /* its case checks are in */
    if (!world.late)
        take_held_blocks(process, world.tids[0]); /* a fatal signal's: the exit's are taken */
    if (world.late)
        note_late_threads(process, world.late, "end-of-process");
    else if (run_leak_check(process, world.tids, world.stopped, kind, process->cases_checked,
                            process->cases_checked_count, room, &results, err, sizeof err) == 0) {
        leak_results_append(&process->leaks, &results);
        leak_results_free(&results);
    } else {
        char why[640];
        snprintf(why, sizeof why, "no leak check for process %d: %s", (int)process->pid, err);
        add_leak_check_note(process, why);
    }
    world_stop_end(&world, session);
}

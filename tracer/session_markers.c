/*
 * session_markers.c - our breakpoints: the program's entry (its libraries
 * loaded), --iteration SYMBOL and ld.so's dlopen hook while it is not
 * loaded yet, and the shim's markers where a leak check must see the heap
 * as it is (case ends, kept iterations with --leak-check iterations).
 */
#include "session_internal.h"

#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "symbols/symbols.h"

/* ---- --iteration SYMBOL --------------------------------------------------- */

/* At the program's entry point its libraries are loaded: the symbol can be
 * looked up then. */
void process_watch_entry(struct session *session, struct traced_process *process)
{
    if (!session->options.iteration_symbol && session->options.leak_check == TRACE_LEAK_CHECK_OFF &&
        !session->holding)
        return;
    uint64_t entry = 0;
    if (process_auxv_value(process->pid, AT_ENTRY, &entry) == 0 && entry)
        breakpoint_plant(process->pid, &process->breakpoints, entry, BREAKPOINT_ENTRY);
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
        if ((i > 0 && strcmp(path, process->maps.maps[i - 1].path) == 0) || path_is_shim(path))
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

/* Plants a breakpoint of kind on the shim's function name, if it has it. */
static void plant_on_shim(struct traced_process *process, pid_t tid, const char *path, uint64_t bias,
                          const char *name, uint8_t kind)
{
    struct elf_symbol_match *matches;
    int count = elf_find_functions(path, name, &matches);
    if (count <= 0)
        return;
    breakpoint_plant(tid, &process->breakpoints, matches[0].value + bias, kind);
    elf_symbol_matches_free(matches, count);
}

/* Breakpoints on the shim's markers, where a leak check must see the heap
 * as it is at that moment: case end (the default), and every kept
 * iteration with --leak-check iterations; and, when threads may hold
 * blocks (held_sets.h), where a case opens. */
static void watch_markers(struct session *session, struct traced_process *process, pid_t tid)
{
    if (session->options.leak_check == TRACE_LEAK_CHECK_OFF && !session->holding)
        return;
    process_refresh_maps(process);
    for (size_t i = 0; i < process->maps.count; i++) {
        const char *path = process->maps.maps[i].path;
        if (!path_is_shim(path))
            continue;
        uint64_t bias;
        if (elf_load_bias(&process->maps, path, &bias) < 0)
            return;
        if (session->options.leak_check != TRACE_LEAK_CHECK_OFF)
            plant_on_shim(process, tid, path, bias, "memslope_case_end", BREAKPOINT_CASE_END);
        if (session->options.leak_check == TRACE_LEAK_CHECK_ITERATIONS)
            plant_on_shim(process, tid, path, bias, "memslope_iteration", BREAKPOINT_MARKER_ITERATION);
        if (session->holding)
            plant_on_shim(process, tid, path, bias, "memslope__case_opens", BREAKPOINT_CASE_OPENS);
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

/* A case check's results, in the process's checks; the case is then one
 * the exit check leaves to it. */
static void add_case_check(struct traced_process *process, struct leak_results *results, uint32_t when,
                           uint32_t case_id)
{
    leak_results_append(&process->leaks, results);
    leak_results_free(results);
    if (when == TRACE_SNAP_CASE_END)
        mark_case_checked(process, case_id);
}

static void note_case_check_failed(struct traced_process *process, uint32_t case_id, const char *err)
{
    char why[640];
    snprintf(why, sizeof why, "no leak check of case %u in process %d: %s", (unsigned)case_id, (int)process->pid,
             err);
    add_leak_check_note(process, why);
}

void collect_oldest_case_check(struct traced_process *process)
{
    if (process->pending_count == 0)
        return;
    struct pending_case_check oldest = process->pending_checks[0];
    process->pending_count--;
    memmove(&process->pending_checks[0], &process->pending_checks[1],
            process->pending_count * sizeof process->pending_checks[0]);
    struct leak_results results = oldest.ready;
    char err[512];
    if (oldest.check &&
        leak_check_finish(oldest.check, &process->recorder, &process->check_spare, &results, err, sizeof err) != 0)
        note_case_check_failed(process, oldest.case_id, err);
    else
        add_case_check(process, &results, oldest.when, oldest.case_id);
}

void collect_case_check(struct traced_process *process, int wait)
{
    while (process->pending_count > 0 &&
           (wait || !process->pending_checks[0].check || leak_check_pending_done(process->pending_checks[0].check)))
        collect_oldest_case_check(process);
}

/* Results of a case check that needed no thread: in the process's checks
 * now, or behind the pending ones (which the program, stopped, does not
 * wait for). */
static void add_or_queue_case_check(struct traced_process *process, struct leak_results *results, uint32_t when,
                                    uint32_t case_id)
{
    collect_case_check(process, 0);
    if (process->pending_count == 0) {
        add_case_check(process, results, when, case_id);
        return;
    }
    if (process->pending_count == PENDING_QUEUE)
        collect_oldest_case_check(process);
    process->pending_checks[process->pending_count++] = (struct pending_case_check){NULL, *results, when, case_id, 0};
    memset(results, 0, sizeof *results);
}

/* What --verbose says of the case checks that scanned (rc: 2 started on
 * its own thread, 0 scanned in place). */
static void count_case_check(struct session *session, const struct traced_process *process, uint64_t held_ns,
                             int rc)
{
    if (rc == 2) {
        session->checks_copied++;
        uint64_t bytes = process->pending_checks[process->pending_count - 1].bytes;
        session->check_copy_max = bytes > session->check_copy_max ? bytes : session->check_copy_max;
    } else if (rc == 0) {
        session->checks_in_place++;
    }
    if (rc >= 0 && held_ns > session->check_hold_max_ns)
        session->check_hold_max_ns = held_ns;
}

/* A leak check of the open case's blocks, the world being stopped (tids:
 * the stopped threads, the one at the marker's breakpoint first). A case
 * whose blocks were all freed has nothing to find: its check is empty,
 * without a scan (a case end cost ~1 ms of scan, mostly the kernel
 * writing /proc/PID/smaps, for loops of cases that free what they use).
 * Otherwise the process waits only while what the scan reads is copied,
 * and the classification runs beside it (start_case_check), unless the
 * copy would be too large. */
static void case_leak_check(struct session *session, struct traced_process *process, const pid_t *tids,
                            size_t count, uint32_t when)
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
        uint64_t start = session_now_ns();
        /* The blocks threads hold are older than the case, but the scan
         * must see them: they may point to the case's. */
        take_held_blocks(process, tids[0]);
        rc = start_case_check(session, process, tids, count, when, err, sizeof err);
        if (rc == 1)
            rc = run_leak_check(process, tids, count, when, NULL, 0, 0, &results, err, sizeof err);
        else if (rc == 0)
            rc = 2; /* started: its results come in later */
        restore_dead_state(tids[0], &dead);
        count_case_check(session, process, session_now_ns() - start, rc);
    }
    if (rc < 0)
        note_case_check_failed(process, recorder->open_case, err);
    else if (rc == 0)
        add_or_queue_case_check(process, &results, when, recorder->open_case);
}

/* A case opened while a thread did not stop: the blocks the threads held
 * before it stay held, and one freed inside it goes unseen by its figures. */
static void note_case_opened_late(struct traced_process *process)
{
    if (process->held_case_late)
        return;
    process->held_case_late = 1;
    char why[320];
    snprintf(why, sizeof why,
             "a thread of process %d did not stop when a case opened: blocks held back before it (--sample-rate) "
             "may be freed unseen inside it, and its setup and growth be off; record with MEMSLOPE_HOLD=0 to "
             "have every block sent",
             (int)process->pid);
    add_leak_check_note(process, why);
}

/* What a breakpoint of kind is for, the world being stopped (tids: the
 * stopped threads, tid first). Returns whether it stays planted. */
static int act_on_breakpoint(struct session *session, struct traced_process *process, pid_t tid, uint8_t kind,
                             const pid_t *tids, size_t stopped)
{
    /* A marker can come before the main loop has read the image's region
     * off the socket (a program that ends its first case at once, on a busy
     * host): process_drain_at_marker adopts it first; with no region the
     * case end saw no case open and no shim, and its check was silently
     * not taken. */
    switch (kind) {
    case BREAKPOINT_ENTRY:
        if (session->options.iteration_symbol)
            resolve_iteration_symbol(session, process, tid);
        watch_markers(session, process, tid);
        return 0;
    case BREAKPOINT_CASE_END:
        process_drain_at_marker(session, process);
        case_leak_check(session, process, tids, stopped, TRACE_SNAP_CASE_END);
        return 1;
    case BREAKPOINT_MARKER_ITERATION:
        process_drain_at_marker(session, process);
        if (iteration_will_be_kept(&process->recorder))
            case_leak_check(session, process, tids, stopped, TRACE_SNAP_ITERATION);
        return 1;
    case BREAKPOINT_DLOPEN:
        resolve_iteration_symbol(session, process, tid);
        return 1;
    case BREAKPOINT_CASE_OPENS:
        /* Blocks held before the case must not be freed unseen inside it:
         * its figures come from the live table. */
        process_drain_at_marker(session, process);
        if (stopped)
            take_held_blocks(process, tid);
        else
            note_case_opened_late(process);
        return 1;
    case BREAKPOINT_ITERATION:
        process_drain_at_marker(session, process);
        recorder_iteration(&process->recorder, session_now_ns());
        return 1;
    }
    return 1;
}

/* A SIGTRAP at one of our breakpoints: act on it with the world stopped,
 * step over the displaced instruction, resume. Returns 0 when the trap is
 * not ours (the program's own SIGTRAP passes through). */
int on_breakpoint(struct session *session, struct traced_thread *thread)
{
    struct traced_process *process = thread->process;
    struct breakpoint *breakpoint = breakpoint_hit(thread->tid, &process->breakpoints);
    if (!breakpoint)
        return 0;
    struct world_stop world;
    world_stop_begin(&world, session, process, thread->tid); /* out of memory: acts with no thread stopped */
    uint64_t address = breakpoint->address;
    int scans = breakpoint->kind == BREAKPOINT_CASE_END || breakpoint->kind == BREAKPOINT_MARKER_ITERATION;
    if (world.late && scans && breakpoint->planted && process->recorder.open_case != TRACE_NONE)
        note_late_threads(process, world.late, breakpoint->kind == BREAKPOINT_CASE_END ? "case-end" : "iteration");
    /* Taken out while this thread was held: nothing to act on. A world
     * stopped without every thread is not scanned (stopped 0), nor are
     * the held sets taken: a running thread may take from any of them. */
    int keep = breakpoint->planted
                   ? act_on_breakpoint(session, process, thread->tid, breakpoint->kind, world.tids,
                                       world.late ? 0 : world.stopped)
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
    resume_thread(thread->tid, pending_signal);
    world_stop_end(&world, session);
    return 1;
}

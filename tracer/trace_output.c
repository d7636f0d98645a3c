/* trace_output.c - see trace_output.h. */
#include "trace_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "../preload/shm_layout.h"
#include "session.h"
#include "symbolize.h"
#include "trace_writer.h"

/* Frames one return address expands to (inlined calls make it several). */
struct address_frames {
    uint64_t address;
    uint32_t first_frame_id;
    uint32_t count;
    UT_hash_handle hh;
};

struct frame_batch {
    struct trace_frame *frames;
    size_t count, capacity;
};

#define MAX_INLINE_DEPTH 16

static int batch_append(struct frame_batch *batch, const struct trace_frame *frames, size_t count)
{
    if (batch->count + count > batch->capacity) {
        size_t capacity = batch->capacity ? batch->capacity * 2 : 256;
        while (capacity < batch->count + count)
            capacity *= 2;
        struct trace_frame *grown = realloc(batch->frames, capacity * sizeof *grown);
        if (!grown)
            return -1;
        batch->frames = grown;
        batch->capacity = capacity;
    }
    memcpy(batch->frames + batch->count, frames, count * sizeof *frames);
    batch->count += count;
    return 0;
}

/* Resolves every distinct address of the image's sites. Frame ids are
 * assigned as first_id (the writer's next id) + position in the batch. */
/* One frame word into frames: a Python frame from the image's code table,
 * else a return address through the symbolizer. */
static size_t resolve_word(struct symbolizer *symbolizer, const struct python_frames *python, uint64_t word,
                           struct trace_frame *frames)
{
    if (shm_is_python_word(word)) {
        const struct trace_frame *frame = python_frames_find(python, word);
        frames[0] = frame ? *frame
                          : (struct trace_frame){.module_id = TRACE_NONE, .function = "<unknown Python function>",
                                                 .file = "", .address = word, .flags = TRACE_FRAME_PYTHON};
        return 1;
    }
    return symbolizer_resolve(symbolizer, word, 1, frames, MAX_INLINE_DEPTH);
}

static struct address_frames *resolve_addresses(struct symbolizer *symbolizer, const struct traced_process *process,
                                                struct frame_batch *batch)
{
    const struct recorder *recorder = &process->recorder;
    struct address_frames *by_address = NULL;
    for (size_t s = 0; s < recorder->site_count; s++) {
        const struct recorder_site *site = &recorder->sites[s];
        for (uint32_t f = 0; f < site->depth; f++) {
            struct address_frames *known;
            HASH_FIND(hh, by_address, &site->frames[f], sizeof(uint64_t), known);
            if (known)
                continue;
            struct trace_frame frames[MAX_INLINE_DEPTH];
            size_t count = resolve_word(symbolizer, &process->python, site->frames[f], frames);
            known = calloc(1, sizeof *known);
            if (!known || batch_append(batch, frames, count) < 0) {
                free(known);
                return by_address;
            }
            known->address = site->frames[f];
            known->first_frame_id = (uint32_t)(batch->count - count);
            known->count = (uint32_t)count;
            HASH_ADD(hh, by_address, address, sizeof(uint64_t), known);
        }
    }
    return by_address;
}

static int write_modules(struct trace_writer *writer, struct symbolizer *symbolizer, struct frame_batch *batch,
                         uint32_t *module_base)
{
    size_t count = 0;
    const struct trace_module *modules = symbolizer_modules(symbolizer, &count);
    for (size_t i = 0; i < count; i++) {
        struct trace_module module = modules[i];
        module.module_id = *module_base + (uint32_t)i;
        if (trace_write_module(writer, &module) < 0)
            return -1;
    }
    for (size_t i = 0; i < batch->count; i++)
        if (batch->frames[i].module_id != TRACE_NONE)
            batch->frames[i].module_id += *module_base;
    *module_base += (uint32_t)count;
    return 0;
}

static int write_stacks(struct trace_writer *writer, const struct traced_process *process,
                        struct address_frames *by_address, uint32_t first_id)
{
    const struct recorder *recorder = &process->recorder;
    struct trace_stack *stacks = calloc(recorder->site_count + 1, sizeof *stacks);
    uint32_t **ids = calloc(recorder->site_count + 1, sizeof *ids);
    int rc = -1;
    if (!stacks || !ids)
        goto out;
    for (size_t s = 0; s < recorder->site_count; s++) {
        const struct recorder_site *site = &recorder->sites[s];
        ids[s] = malloc((site->depth * MAX_INLINE_DEPTH + 1) * sizeof **ids);
        if (!ids[s])
            goto out;
        uint32_t depth = 0;
        for (uint32_t f = 0; f < site->depth; f++) {
            struct address_frames *known;
            HASH_FIND(hh, by_address, &site->frames[f], sizeof(uint64_t), known);
            for (uint32_t k = 0; known && k < known->count; k++)
                ids[s][depth++] = first_id + known->first_frame_id + k;
        }
        stacks[s] = (struct trace_stack){site->stack_id, depth, ids[s]};
    }
    rc = trace_write_stacks(writer, process->process_id, stacks, (uint32_t)recorder->site_count);
out:
    for (size_t s = 0; ids && s < recorder->site_count; s++)
        free(ids[s]);
    free(ids);
    free(stacks);
    return rc;
}

static int write_sites(struct trace_writer *writer, const struct traced_process *process)
{
    const struct recorder *recorder = &process->recorder;
    struct trace_site *sites = calloc(recorder->site_count + 1, sizeof *sites);
    if (!sites)
        return -1;
    uint32_t count = 0;
    for (size_t s = 0; s < recorder->site_count; s++) {
        const struct recorder_site *site = &recorder->sites[s];
        if (!recorder_site_shown(site))
            continue;
        uint64_t at_peak = site->peak_epoch == recorder->peak_epoch ? site->peak_live_bytes : site->live_bytes;
        sites[count++] = (struct trace_site){
            .stack_id = site->stack_id,
            .allocations = site->allocations,
            .allocated_bytes = site->allocated_bytes,
            .frees = site->frees,
            .live_bytes = site->live_bytes,
            .live_blocks = site->live_blocks,
            .peak_live_bytes = at_peak,
            .max_live_bytes = site->max_live_bytes,
        };
    }
    int rc = trace_write_sites(writer, process->process_id, sites, count);
    free(sites);
    return rc;
}

static int compare_counter_keys(const void *left, const void *right)
{
    const struct case_site_counter *a = *(const struct case_site_counter *const *)left;
    const struct case_site_counter *b = *(const struct case_site_counter *const *)right;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* Every case's counters, sorted by case then site: each case's share is
 * one run of them (a case looking through every case's counters made a
 * recording of 20,000 cases spend 4 s here). NULL when there are none or
 * out of memory. */
static const struct case_site_counter **counters_by_case(const struct recorder *recorder, size_t *count)
{
    *count = HASH_COUNT(recorder->case_sites);
    const struct case_site_counter **sorted = *count ? malloc(*count * sizeof *sorted) : NULL;
    size_t n = 0;
    for (const struct case_site_counter *c = recorder->case_sites; sorted && c; c = c->hh.next)
        sorted[n++] = c;
    if (sorted)
        qsort(sorted, n, sizeof *sorted, compare_counter_keys);
    else
        *count = 0;
    return sorted;
}

/* The case's own share of each site's counters: counters[0..count), all
 * of case_id. */
static int write_case_sites(struct trace_writer *writer, const struct traced_process *process, uint32_t case_id,
                            const struct case_site_counter *const *counters, size_t count)
{
    const struct recorder *recorder = &process->recorder;
    if (!count)
        return 0;
    struct trace_case_site *sites = calloc(count, sizeof *sites);
    if (!sites)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const struct case_site_counter *c = counters[i];
        size_t site_index = (uint32_t)c->key;
        if (site_index >= recorder->site_count || !recorder_site_shown(&recorder->sites[site_index]))
            continue;
        sites[n++] = (struct trace_case_site){recorder->sites[site_index].stack_id, c->allocations,
                                             c->allocated_bytes, c->frees};
    }
    struct trace_case_sites record = {process->process_id, case_id, (uint32_t)n, sites};
    int rc = trace_write_case_sites(writer, &record);
    free(sites);
    return rc;
}

/* Each case and its counters. */
static int write_cases(struct trace_writer *writer, const struct traced_process *process)
{
    const struct recorder *recorder = &process->recorder;
    size_t counter_count, next = 0;
    const struct case_site_counter **counters = counters_by_case(recorder, &counter_count);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < recorder->case_count; i++) {
        struct trace_case c = recorder->cases[i].info;
        c.process_id = process->process_id;
        if (!c.end_ns)
            c.end_ns = process->end_ns;
        while (next < counter_count && (uint32_t)(counters[next]->key >> 32) < c.case_id)
            next++;
        size_t first = next;
        while (next < counter_count && (uint32_t)(counters[next]->key >> 32) == c.case_id)
            next++;
        rc = trace_write_case(writer, &c) < 0 || write_case_sites(writer, process, c.case_id, counters + first,
                                                                  next - first) < 0 ? -1 : 0;
    }
    free(counters);
    return rc;
}

static int write_history(struct trace_writer *writer, const struct traced_process *process)
{
    const struct recorder *recorder = &process->recorder;
    if (write_cases(writer, process) < 0)
        return -1;
    for (size_t i = 0; i < recorder->snapshot_count; i++) {
        struct trace_snapshot snapshot = recorder->snapshots[i].header;
        snapshot.process_id = process->process_id;
        if (trace_write_snapshot_delta(writer, &snapshot) < 0)
            return -1;
    }
    if (recorder->timeline_count &&
        trace_write_timeline(writer, process->process_id, recorder->interval_ns, recorder->timeline,
                             (uint32_t)recorder->timeline_count) < 0)
        return -1;
    for (size_t i = 0; i < process->leaks.count; i++) {
        struct trace_leaks leaks = process->leaks.checks[i];
        leaks.process_id = process->process_id;
        if (trace_write_leaks(writer, &leaks) < 0)
            return -1;
    }
    return 0;
}

/* The interpreter the image ran, and how its objects reached the trace. */
static int write_python(struct trace_writer *writer, const struct traced_process *process)
{
    const struct python_frames *python = &process->python;
    if (!python->version)
        return 0;
    static const uint32_t allocator_of_mode[] = {
        [SHM_PYTHON_HOOKED] = TRACE_PYTHON_WRAPPED,
        [SHM_PYTHON_MALLOC] = TRACE_PYTHON_MALLOC,
        [SHM_PYTHON_USER_ALLOCATOR] = TRACE_PYTHON_UNRECORDED,
        [SHM_PYTHON_NOT_WRAPPED] = TRACE_PYTHON_NOT_WRAPPED,
    };
    struct trace_python record = {
        .process_id = process->process_id,
        .version = python->version,
        .allocator = python->mode < sizeof allocator_of_mode / sizeof *allocator_of_mode
                         ? allocator_of_mode[python->mode]
                         : 0,
        .flags = python->frames_read ? TRACE_PYTHON_FRAMES : 0,
        .unnamed_functions = python->codes_dropped,
    };
    return trace_write_python(writer, &record);
}

/* What the image's Python recording could not do, and why. */
static int write_python_warnings(struct trace_writer *writer, const struct traced_process *process)
{
    const struct python_frames *python = &process->python;
    if (!python->version)
        return 0;
    char version[32], message[512];
    python_version_text(python->version, version, sizeof version);
    int rc = 0;
    if (python->mode == SHM_PYTHON_USER_ALLOCATOR) {
        snprintf(message, sizeof message,
                 "Python %s runs the allocator the user chose (PYTHONMALLOC or -X dev): objects it serves from "
                 "pymalloc are not recorded; leave PYTHONMALLOC unset (or set PYTHONMALLOC=malloc) to record them",
                 version);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    if (python->mode == SHM_PYTHON_NOT_WRAPPED) {
        snprintf(message, sizeof message,
                 "Python %s: memslope wraps the object allocator of CPython 3.7 and later only: objects it serves "
                 "from pymalloc are not recorded (PYTHONMALLOC=malloc, from 3.6 on, has them recorded as malloc)",
                 version);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    if (!python->frames_read) {
        snprintf(message, sizeof message,
                 "Python %s: its frames are not read (memslope reads CPython 3.11 to 3.13): stacks show the "
                 "interpreter's C frames only",
                 version);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    if (python->codes_dropped) {
        snprintf(message, sizeof message,
                 "%u Python functions have no name: the shared code table was full", python->codes_dropped);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    return rc;
}

/* Why the shim never ran in an image, as far as the tracer can tell. */
static const char *shim_absent_reason(const struct traced_process *process)
{
    if (process->secure_execution)
        return "it runs in secure-execution mode, setuid, setgid or with file capabilities, where the dynamic "
               "loader ignores LD_PRELOAD; record it without those, or as the user it runs as";
    if (process->statically_linked)
        return "a statically linked program: no dynamic loader preloads anything into it";
    return "LD_PRELOAD was removed from its environment, or the shim could not be loaded";
}

static int write_warnings(struct trace_writer *writer, const struct traced_process *process, uint32_t stacks_dropped,
                          uint32_t slots_exhausted)
{
    char message[512];
    const struct recorder *recorder = &process->recorder;
    int rc = 0;
    if (!(process->flags & TRACE_PROC_SHIM_SEEN) && !process->vfork_child) {
        snprintf(message, sizeof message, "process %d (%s): the shim never loaded (%s): its allocations are not recorded",
                 (int)process->pid, process->exe ? process->exe : "?", shim_absent_reason(process));
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    if (stacks_dropped) {
        snprintf(message, sizeof message, "%u allocations have no backtrace: the stack table was full", stacks_dropped);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    if (slots_exhausted) {
        snprintf(message, sizeof message,
                 "%u threads found no free ring slot: their allocations were not recorded", slots_exhausted);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    if (process->invalid_events) {
        snprintf(message, sizeof message,
                 "%llu events in the shared memory of process %d were not valid and were skipped: the program "
                 "wrote over memslope's region (a buffer overrun?); its figures may be incomplete",
                 (unsigned long long)process->invalid_events, (int)process->pid);
        rc |= trace_write_warning(writer, process->process_id, message);
    }
    rc |= write_python(writer, process);
    rc |= write_python_warnings(writer, process);
    if (recorder->out_of_memory)
        rc |= trace_write_warning(writer, process->process_id,
                                  "memslope ran out of memory while recording: figures are incomplete");
    if (process->leak_check_note)
        rc |= trace_write_warning(writer, process->process_id, process->leak_check_note);
    return rc;
}

static int write_process_record(struct trace_writer *writer, const struct traced_process *process,
                                uint32_t stacks_dropped, uint32_t slots_exhausted)
{
    const struct recorder *recorder = &process->recorder;
    struct trace_process record = {
        .process_id = process->process_id,
        .pid = (uint32_t)process->pid,
        .parent_process_id = process->parent_process_id,
        .exe = process->exe ? process->exe : "",
        .argc = process->argc,
        .argv = (const char *const *)process->argv,
        .start_ns = process->start_ns,
        .end_ns = process->end_ns,
        .flags = process->flags,
        .exit_status = process->exit_status,
        .exit_signal = process->exit_signal,
        .allocations = recorder->allocations,
        .frees = recorder->frees,
        .allocated_bytes = recorder->allocated_bytes,
        .peak_bytes = recorder->peak_bytes,
        .peak_blocks = recorder->peak_blocks,
        .peak_time_ns = recorder->peak_time_ns,
        .live_bytes = recorder->live_bytes,
        .live_blocks = recorder->live_blocks,
        .stacks_dropped = stacks_dropped,
        .slots_exhausted = slots_exhausted,
    };
    return trace_write_process(writer, &record);
}

int trace_output_process(struct trace_writer *writer, struct symbol_store *symbols, struct traced_process *process,
                         uint32_t *module_base, uint32_t stacks_dropped, uint32_t slots_exhausted)
{
    symbolizer_warmup_finish(process->warmup);
    process->warmup = NULL;
    struct symbolizer *symbolizer = symbolizer_create(symbols, &process->maps);
    struct frame_batch batch = {0};
    struct address_frames *by_address = NULL;
    uint32_t first_id = 0;
    int rc = -1;
    if (write_process_record(writer, process, stacks_dropped, slots_exhausted) < 0)
        goto out;
    if (symbolizer)
        by_address = resolve_addresses(symbolizer, process, &batch);
    if (symbolizer && write_modules(writer, symbolizer, &batch, module_base) < 0)
        goto out;
    if (batch.count && trace_write_frames(writer, batch.frames, (uint32_t)batch.count, &first_id) < 0)
        goto out;
    if (write_stacks(writer, process, by_address, first_id) < 0 || write_sites(writer, process) < 0 ||
        write_history(writer, process) < 0 || write_warnings(writer, process, stacks_dropped, slots_exhausted) < 0)
        goto out;
    rc = 0;
out:;
    struct address_frames *entry, *tmp;
    HASH_ITER(hh, by_address, entry, tmp) {
        HASH_DEL(by_address, entry);
        free(entry);
    }
    free(batch.frames);
    if (symbolizer)
        symbolizer_destroy(symbolizer);
    return rc;
}

/* trace_reader.c - see trace_reader.h; the format is trace_format.h. */
#include "trace_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/crc32.h"
#include "../common/growable_array.h"

/* --- arena: the model's immutable data, freed at once ------------------------ */

struct trace_arena {
    struct trace_arena *next;
    size_t used, capacity;
    _Alignas(16) unsigned char data[];
};

enum { ARENA_BLOCK = 64 * 1024 };

static void *arena_alloc(struct trace_model *model, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    struct trace_arena *block = model->arena;
    if (!block || block->capacity - block->used < size) {
        size_t capacity = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        block = malloc(sizeof *block + capacity);
        if (!block)
            return NULL;
        block->used = 0;
        block->capacity = capacity;
        block->next = model->arena;
        model->arena = block;
    }
    void *memory = block->data + block->used;
    block->used += size;
    memset(memory, 0, size); /* records are compared whole, padding included */
    return memory;
}

/* --- the reader's state and errors ------------------------------------------- */

struct reader {
    struct trace_model *model;
    const char *name;
    uint64_t rebuilt_entries, max_rebuilt_entries; /* snapshot entries rebuilt from deltas: so far, at most */
    char problem[200]; /* what is wrong with the current section */
};

static int corrupt(struct reader *reader, const char *format, ...) __attribute__((format(printf, 2, 3)));

static int corrupt(struct reader *reader, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(reader->problem, sizeof reader->problem, format, args);
    va_end(args);
    return -1;
}

static int out_of_memory(struct reader *reader) { return corrupt(reader, "out of memory"); }

/* --- little-endian cursor over one payload ----------------------------------- */

struct cursor {
    const unsigned char *at;
    size_t left;
    int short_read; /* a field ran past the end of the payload */
    int overlong;   /* a varint of more than 64 bits */
};

static const unsigned char *take(struct cursor *cursor, size_t n)
{
    if (cursor->short_read || cursor->left < n) {
        cursor->short_read = 1;
        return NULL;
    }
    const unsigned char *bytes = cursor->at;
    cursor->at += n;
    cursor->left -= n;
    return bytes;
}

static uint32_t get_u32(struct cursor *cursor)
{
    const unsigned char *b = take(cursor, 4);
    return b ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24 : 0;
}

static uint64_t get_u64(struct cursor *cursor)
{
    uint64_t low = get_u32(cursor);
    return low | (uint64_t)get_u32(cursor) << 32;
}

static int32_t get_i32(struct cursor *cursor) { return (int32_t)get_u32(cursor); }

/* A LEB128 varint (trace_format.h): at most ten bytes, the tenth 0 or 1. */
static uint64_t get_varint(struct cursor *cursor)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        const unsigned char *b = take(cursor, 1);
        if (!b)
            return 0;
        if (shift == 63 && *b > 1)
            break;
        value |= (uint64_t)(*b & 0x7f) << shift;
        if (!(*b & 0x80))
            return value;
    }
    cursor->overlong = 1;
    return 0;
}

/* Checks that count records of at least record_size bytes can follow. */
static int check_count(struct reader *reader, struct cursor *cursor, uint64_t count, size_t record_size,
                       const char *what)
{
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    if (count > cursor->left / record_size)
        return corrupt(reader, "%llu %s do not fit in the section", (unsigned long long)count, what);
    return 0;
}

/* Reads a string id and resolves it against the strings defined so far. */
static const char *get_str(struct reader *reader, struct cursor *cursor)
{
    uint32_t id = get_u32(cursor);
    if (cursor->short_read)
        return "";
    if (id >= reader->model->string_count) {
        corrupt(reader, "string id %u is not defined (only %u are)", id, reader->model->string_count);
        return NULL;
    }
    return reader->model->strings[id];
}

/* Reads argc and argc string ids into an arena array. */
static int get_argv(struct reader *reader, struct cursor *cursor, uint32_t *argc, const char *const **argv)
{
    *argc = get_u32(cursor);
    if (check_count(reader, cursor, *argc, 4, "arguments") != 0)
        return -1;
    const char **items = arena_alloc(reader->model, ((size_t)*argc + 1) * sizeof *items);
    if (!items)
        return out_of_memory(reader);
    for (uint32_t i = 0; i < *argc; i++)
        if (!(items[i] = get_str(reader, cursor)))
            return -1;
    items[*argc] = NULL;
    *argv = items;
    return 0;
}

/* --- processes --------------------------------------------------------------- */

static struct trace_model_process *find_process(const struct trace_model *model, uint32_t process_id)
{
    struct trace_model_process *process;
    HASH_FIND(hh, model->processes, &process_id, sizeof process_id, process);
    return process;
}

/* The process with this id, created empty when first named. */
static struct trace_model_process *get_process(struct reader *reader, uint32_t process_id)
{
    struct trace_model *model = reader->model;
    struct trace_model_process *process = find_process(model, process_id);
    if (process)
        return process;
    if (!(process = calloc(1, sizeof *process))) {
        out_of_memory(reader);
        return NULL;
    }
    process->process_id = process_id;
    process->info.process_id = process_id;
    process->info.parent_process_id = TRACE_NONE;
    process->info.exe = "";
    HASH_ADD(hh, model->processes, process_id, sizeof process->process_id, process);
    model->process_count++;
    return process;
}

/* --- sections ------------------------------------------------------------------ */

static int parse_strings(struct reader *reader, struct cursor *cursor)
{
    struct trace_model *model = reader->model;
    uint32_t first_id = get_u32(cursor), count = get_u32(cursor);
    if (check_count(reader, cursor, count, 4, "strings") != 0)
        return -1;
    if (first_id > model->string_count)
        return corrupt(reader, "strings start at id %u but only %u are defined", first_id, model->string_count);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t length = get_u32(cursor);
        const unsigned char *bytes = take(cursor, length);
        if (!bytes)
            return corrupt(reader, "string %u runs past the end of the section", i);
        uint64_t id = (uint64_t)first_id + i;
        if (id < model->string_count) { /* a redefinition must agree (id 0 may be written out) */
            if (strlen(model->strings[id]) != length || memcmp(model->strings[id], bytes, length) != 0)
                return corrupt(reader, "string id %llu is redefined differently", (unsigned long long)id);
            continue;
        }
        if (id >= TRACE_NONE)
            return corrupt(reader, "too many strings");
        size_t capacity = model->string_capacity;
        char *copy = arena_alloc(model, (size_t)length + 1);
        if (!copy ||
            growable_array_reserve(&model->strings, &capacity, model->string_count + 1, sizeof *model->strings) != 0)
            return out_of_memory(reader);
        model->string_capacity = (uint32_t)capacity;
        memcpy(copy, bytes, length);
        copy[length] = '\0';
        model->strings[model->string_count++] = copy;
    }
    return 0;
}

static int parse_info(struct reader *reader, struct cursor *cursor)
{
    struct trace_info info = {0};
    if (!(info.memslope_version = get_str(reader, cursor)))
        return -1;
    info.start_unix_ns = get_u64(cursor);
    if (get_argv(reader, cursor, &info.argc, &info.argv) != 0)
        return -1;
    info.max_frames = get_u32(cursor);
    info.snapshots_limit = get_u32(cursor);
    info.interval_ns = get_u64(cursor);
    info.sample_rate = get_u64(cursor);
    info.leak_check = get_u32(cursor);
    info.flags = get_u32(cursor);
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    reader->model->info = info;
    reader->model->has_info = 1;
    return 0;
}

static int parse_module(struct reader *reader, struct cursor *cursor)
{
    struct trace_model *model = reader->model;
    uint32_t module_id = get_u32(cursor);
    const char *path = get_str(reader, cursor), *build_id = path ? get_str(reader, cursor) : NULL;
    if (!build_id)
        return -1;
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    struct trace_model_module *module;
    HASH_FIND(hh, model->modules, &module_id, sizeof module_id, module);
    if (module)
        return corrupt(reader, "module id %u is defined twice", module_id);
    if (!(module = arena_alloc(model, sizeof *module)))
        return out_of_memory(reader);
    memset(module, 0, sizeof *module);
    module->module_id = module_id;
    module->path = path;
    module->build_id = build_id;
    HASH_ADD(hh, model->modules, module_id, sizeof module->module_id, module);
    return 0;
}

static int parse_frame(struct reader *reader, struct cursor *cursor, struct trace_model_frame *frame)
{
    uint32_t module_id = get_u32(cursor);
    frame->module = NULL;
    if (module_id != TRACE_NONE && !cursor->short_read) {
        struct trace_model_module *module;
        HASH_FIND(hh, reader->model->modules, &module_id, sizeof module_id, module);
        if (!module)
            return corrupt(reader, "module id %u is not defined", module_id);
        frame->module = module;
    }
    if (!(frame->function = get_str(reader, cursor)) || !(frame->file = get_str(reader, cursor)))
        return -1;
    frame->line = get_u32(cursor);
    frame->address = get_u64(cursor);
    frame->module_offset = get_u64(cursor);
    frame->flags = get_u32(cursor);
    return cursor->short_read ? corrupt(reader, "payload too short") : 0;
}

enum { FRAME_RECORD_SIZE = 4 + 4 + 4 + 4 + 8 + 8 + 4 };

static int parse_frames(struct reader *reader, struct cursor *cursor)
{
    struct trace_model *model = reader->model;
    uint32_t first_id = get_u32(cursor), count = get_u32(cursor);
    if (check_count(reader, cursor, count, FRAME_RECORD_SIZE, "frames") != 0)
        return -1;
    if (first_id != model->frame_count)
        return corrupt(reader, "frames start at id %u, expected %u", first_id, model->frame_count);
    for (uint32_t i = 0; i < count; i++) {
        size_t capacity = model->frame_capacity;
        if (model->frame_count >= TRACE_NONE - 1 ||
            growable_array_reserve(&model->frames, &capacity, model->frame_count + 1, sizeof *model->frames) != 0)
            return out_of_memory(reader);
        model->frame_capacity = (uint32_t)capacity;
        if (parse_frame(reader, cursor, &model->frames[model->frame_count]) != 0)
            return -1;
        model->frame_count++;
    }
    return 0;
}

static int parse_process(struct reader *reader, struct cursor *cursor)
{
    struct trace_process info = {0};
    info.process_id = get_u32(cursor);
    info.pid = get_u32(cursor);
    info.parent_process_id = get_u32(cursor);
    if (!(info.exe = get_str(reader, cursor)) || get_argv(reader, cursor, &info.argc, &info.argv) != 0)
        return -1;
    info.start_ns = get_u64(cursor);
    info.end_ns = get_u64(cursor);
    info.flags = get_u32(cursor);
    info.exit_status = get_i32(cursor);
    info.exit_signal = get_i32(cursor);
    info.allocations = get_u64(cursor);
    info.frees = get_u64(cursor);
    info.allocated_bytes = get_u64(cursor);
    info.peak_bytes = get_u64(cursor);
    info.peak_blocks = get_u64(cursor);
    info.peak_time_ns = get_u64(cursor);
    info.live_bytes = get_u64(cursor);
    info.live_blocks = get_u64(cursor);
    info.stacks_dropped = get_u32(cursor);
    info.slots_exhausted = get_u32(cursor);
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    struct trace_model_process *process = get_process(reader, info.process_id);
    if (!process)
        return -1;
    process->info = info;
    process->has_info = 1;
    return 0;
}

/* One stack record: its frame ids innermost first, the outermost `shared`
 * of them those of the previous stack of the section (previous, whose
 * depth is *previous_depth; STACKS records share none). Sets *previous to
 * this stack's ids. */
static int parse_stack(struct reader *reader, struct cursor *cursor, struct trace_model_process *process,
                       int has_shared, const uint32_t **previous, uint32_t *previous_depth)
{
    struct trace_model *model = reader->model;
    uint32_t stack_id = get_u32(cursor), depth = get_u32(cursor), shared = has_shared ? get_u32(cursor) : 0;
    if (shared > depth || shared > *previous_depth)
        return corrupt(reader, "stack %u shares %u outer frames of %u, with a previous stack of %u", stack_id,
                       shared, depth, *previous_depth);
    uint32_t own = depth - shared;
    if (check_count(reader, cursor, own, 4, "frame ids") != 0)
        return -1;
    uint32_t *frame_ids = arena_alloc(model, (size_t)depth * 4 + 1);
    struct trace_model_stack *stack = arena_alloc(model, sizeof *stack);
    if (!frame_ids || !stack)
        return out_of_memory(reader);
    for (uint32_t i = 0; i < own; i++) {
        frame_ids[i] = get_u32(cursor);
        if (frame_ids[i] >= model->frame_count)
            return corrupt(reader, "stack %u names frame %u, which is not defined", stack_id, frame_ids[i]);
    }
    if (shared)
        memcpy(frame_ids + own, *previous + (*previous_depth - shared), (size_t)shared * 4);
    *previous = frame_ids;
    *previous_depth = depth;
    if (trace_model_stack(process, stack_id))
        return 0; /* the first definition stands */
    memset(stack, 0, sizeof *stack);
    stack->stack_id = stack_id;
    stack->depth = depth;
    stack->frame_ids = frame_ids;
    HASH_ADD(hh, process->stacks, stack_id, sizeof stack->stack_id, stack);
    return 0;
}

/* STACKS, or with has_shared STACKS_SHARED. */
static int parse_stacks(struct reader *reader, struct cursor *cursor, int has_shared)
{
    uint32_t process_id = get_u32(cursor), count = get_u32(cursor);
    if (check_count(reader, cursor, count, has_shared ? 12 : 8, "stacks") != 0)
        return -1;
    struct trace_model_process *process = get_process(reader, process_id);
    if (!process)
        return -1;
    const uint32_t *previous = NULL;
    uint32_t previous_depth = 0;
    for (uint32_t i = 0; i < count; i++)
        if (parse_stack(reader, cursor, process, has_shared, &previous, &previous_depth) != 0)
            return -1;
    return 0;
}

enum { SITE_RECORD_SIZE = 4 + 7 * 8 };

/* A site record replaces an earlier one for the same stack (fresher totals). */
static int store_site(struct reader *reader, struct trace_model_process *process, const struct trace_site *site)
{
    struct trace_model_site *entry;
    HASH_FIND(hh, process->sites, &site->stack_id, sizeof site->stack_id, entry);
    if (entry) {
        entry->site = *site;
        return 0;
    }
    if (!(entry = arena_alloc(reader->model, sizeof *entry)))
        return out_of_memory(reader);
    memset(entry, 0, sizeof *entry);
    entry->site = *site;
    HASH_ADD(hh, process->sites, site.stack_id, sizeof entry->site.stack_id, entry);
    process->site_count++;
    return 0;
}

/* A site record's seven figures, in their order, each read by get. */
static void get_site_figures(struct cursor *cursor, struct trace_site *site, uint64_t (*get)(struct cursor *))
{
    site->allocations = get(cursor);
    site->allocated_bytes = get(cursor);
    site->frees = get(cursor);
    site->live_bytes = get(cursor);
    site->live_blocks = get(cursor);
    site->peak_live_bytes = get(cursor);
    site->max_live_bytes = get(cursor);
}

static int parse_sites(struct reader *reader, struct cursor *cursor)
{
    uint32_t process_id = get_u32(cursor), count = get_u32(cursor);
    if (check_count(reader, cursor, count, SITE_RECORD_SIZE, "sites") != 0)
        return -1;
    struct trace_model_process *process = get_process(reader, process_id);
    if (!process)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        struct trace_site site;
        memset(&site, 0, sizeof site);
        site.stack_id = get_u32(cursor);
        get_site_figures(cursor, &site, get_u64);
        if (store_site(reader, process, &site) != 0)
            return -1;
    }
    return 0;
}

/* SITES_PACKED: the records of SITES as varints, the stack ids as steps. */
static int parse_sites_packed(struct reader *reader, struct cursor *cursor)
{
    uint32_t process_id = get_u32(cursor), count = get_u32(cursor);
    if (check_count(reader, cursor, count, 8, "sites") != 0)
        return -1;
    struct trace_model_process *process = get_process(reader, process_id);
    if (!process)
        return -1;
    uint32_t previous = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t zigzag = get_varint(cursor);
        int64_t step = (int64_t)(zigzag >> 1) ^ -(int64_t)(zigzag & 1);
        int64_t stack_id = (int64_t)previous + step;
        if (stack_id < 0 || stack_id > UINT32_MAX)
            return corrupt(reader, "site record %u: stack id %lld is out of range", i, (long long)stack_id);
        struct trace_site site;
        memset(&site, 0, sizeof site); /* padding too: records are compared whole */
        site.stack_id = previous = (uint32_t)stack_id;
        get_site_figures(cursor, &site, get_varint);
        if (cursor->overlong)
            return corrupt(reader, "site record %u: a number longer than 64 bits", i);
        if (cursor->short_read)
            return corrupt(reader, "payload too short");
        if (store_site(reader, process, &site) != 0)
            return -1;
    }
    return 0;
}

enum { SNAPSHOT_ENTRY_SIZE = 4 + 8 + 8 };

static void get_snapshot_entries(struct cursor *cursor, struct trace_snapshot_entry *entries, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        entries[i].stack_id = get_u32(cursor);
        entries[i].live_bytes = get_u64(cursor);
        entries[i].live_blocks = get_u64(cursor);
    }
}

static int compare_entry_stack(const void *left, const void *right)
{
    const struct trace_snapshot_entry *a = left, *b = right;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static int sorted_by_stack(const struct trace_snapshot_entry *entries, size_t count)
{
    for (size_t i = 1; i < count; i++)
        if (entries[i].stack_id < entries[i - 1].stack_id)
            return 0;
    return 1;
}

/* Sets snapshot's full entries: the process's previous snapshot with delta
 * (sorted by stack) applied. An unchanged snapshot shares the previous
 * one's entries (the arena's data is immutable). */
static int apply_delta(struct reader *reader, const struct trace_model_process *process,
                       const struct trace_snapshot_entry *delta, uint32_t delta_count, struct trace_snapshot *snapshot)
{
    const struct trace_snapshot *previous = process->snapshot_count ? &process->snapshots[process->snapshot_count - 1]
                                                                    : NULL;
    const struct trace_snapshot_entry *base = previous ? previous->entries : NULL;
    size_t base_count = previous ? previous->count : 0;
    struct trace_snapshot_entry *sorted = NULL;
    if (!sorted_by_stack(base, base_count)) { /* a full SNAPSHOT lists sites in the tracer's order */
        if (!(sorted = malloc(base_count * sizeof *sorted)))
            return out_of_memory(reader);
        memcpy(sorted, base, base_count * sizeof *sorted);
        qsort(sorted, base_count, sizeof *sorted, compare_entry_stack);
        base = sorted;
    }
    size_t count = trace_snapshot_merge(base, base_count, delta, delta_count, 1, NULL);
    int rc = 0;
    if (!sorted && !delta_count && count && count == base_count) {
        snapshot->entries = base;
    } else if (count > reader->max_rebuilt_entries - reader->rebuilt_entries) {
        rc = corrupt(reader,
                     "its snapshot deltas rebuild more than %llu snapshot entries in all (sites x snapshots): "
                     "too many to report",
                     (unsigned long long)reader->max_rebuilt_entries);
    } else {
        struct trace_snapshot_entry *entries = arena_alloc(reader->model, count * sizeof *entries + 1);
        if (entries)
            trace_snapshot_merge(base, base_count, delta, delta_count, 1, entries);
        else
            rc = out_of_memory(reader);
        snapshot->entries = entries;
        reader->rebuilt_entries += count;
    }
    snapshot->count = (uint32_t)count;
    free(sorted);
    return rc;
}

/* The entries of a SNAPSHOT_DELTA section, checked, applied to the
 * process's previous snapshot. */
static int parse_delta_entries(struct reader *reader, struct cursor *cursor, const struct trace_model_process *process,
                               struct trace_snapshot *snapshot)
{
    struct trace_snapshot_entry *delta = malloc(((size_t)snapshot->count + 1) * sizeof *delta);
    if (!delta)
        return out_of_memory(reader);
    get_snapshot_entries(cursor, delta, snapshot->count);
    int rc = 0;
    for (uint32_t i = 1; i < snapshot->count && rc == 0; i++)
        if (delta[i].stack_id <= delta[i - 1].stack_id)
            rc = corrupt(reader, "delta entry %u (stack %u) does not follow stack %u: entries must ascend by stack id",
                         i, delta[i].stack_id, delta[i - 1].stack_id);
    if (rc == 0)
        rc = apply_delta(reader, process, delta, snapshot->count, snapshot);
    free(delta);
    return rc;
}

/* SNAPSHOT (full entries) and SNAPSHOT_DELTA (the change since the
 * process's previous snapshot, rebuilt here into full entries). */
static int parse_snapshot(struct reader *reader, struct cursor *cursor, int delta)
{
    struct trace_snapshot snapshot = {0};
    snapshot.process_id = get_u32(cursor);
    snapshot.kind = get_u32(cursor);
    snapshot.case_id = get_u32(cursor);
    snapshot.iteration = get_u64(cursor);
    snapshot.time_ns = get_u64(cursor);
    snapshot.live_bytes = get_u64(cursor);
    snapshot.live_blocks = get_u64(cursor);
    snapshot.count = get_u32(cursor);
    if (check_count(reader, cursor, snapshot.count, SNAPSHOT_ENTRY_SIZE, "snapshot entries") != 0)
        return -1;
    struct trace_model_process *process = get_process(reader, snapshot.process_id);
    if (!process)
        return -1;
    if (growable_array_reserve(&process->snapshots, &process->snapshot_capacity, process->snapshot_count + 1,
                               sizeof *process->snapshots) != 0)
        return out_of_memory(reader);
    if (delta) {
        if (parse_delta_entries(reader, cursor, process, &snapshot) != 0)
            return -1;
    } else {
        struct trace_snapshot_entry *entries = arena_alloc(reader->model, (size_t)snapshot.count * sizeof *entries + 1);
        if (!entries)
            return out_of_memory(reader);
        get_snapshot_entries(cursor, entries, snapshot.count);
        snapshot.entries = entries;
    }
    process->snapshots[process->snapshot_count++] = snapshot;
    return 0;
}

static int parse_timeline(struct reader *reader, struct cursor *cursor)
{
    uint32_t process_id = get_u32(cursor);
    uint64_t interval_ns = get_u64(cursor);
    uint32_t count = get_u32(cursor);
    if (check_count(reader, cursor, count, 24, "timeline points") != 0)
        return -1;
    struct trace_model_process *process = get_process(reader, process_id);
    if (!process)
        return -1;
    process->timeline_interval_ns = interval_ns;
    for (uint32_t i = 0; i < count; i++) {
        if (growable_array_reserve(&process->timeline, &process->timeline_capacity, process->timeline_count + 1,
                                   sizeof *process->timeline) != 0)
            return out_of_memory(reader);
        struct trace_timeline_point *point = &process->timeline[process->timeline_count++];
        point->time_ns = get_u64(cursor);
        point->live_bytes = get_u64(cursor);
        point->live_blocks = get_u64(cursor);
    }
    return 0;
}

static int add_warning(struct reader *reader, const char ***warnings, size_t *count, size_t *capacity,
                       const char *message)
{
    if (growable_array_reserve(warnings, capacity, *count + 1, sizeof **warnings) != 0)
        return out_of_memory(reader);
    (*warnings)[(*count)++] = message;
    return 0;
}

static int parse_warning(struct reader *reader, struct cursor *cursor)
{
    struct trace_model *model = reader->model;
    uint32_t process_id = get_u32(cursor);
    const char *message = get_str(reader, cursor);
    if (!message)
        return -1;
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    if (process_id == TRACE_NONE)
        return add_warning(reader, &model->warnings, &model->warning_count, &model->warning_capacity, message);
    struct trace_model_process *process = get_process(reader, process_id);
    if (!process)
        return -1;
    return add_warning(reader, &process->warnings, &process->warning_count, &process->warning_capacity, message);
}

static int parse_python(struct reader *reader, struct cursor *cursor)
{
    struct trace_python python;
    python.process_id = get_u32(cursor);
    python.version = get_u32(cursor);
    python.allocator = get_u32(cursor);
    python.flags = get_u32(cursor);
    python.unnamed_functions = get_u32(cursor);
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    struct trace_model_process *process = get_process(reader, python.process_id);
    if (!process)
        return -1;
    process->has_python = 1;
    process->python = python;
    return 0;
}

/* Where a case id sits in process->cases: a trace of 100,000 cases looked
 * for each one among all the others. */
struct trace_case_slot {
    uint32_t case_id;
    size_t index;
    UT_hash_handle hh;
};

static int parse_case(struct reader *reader, struct cursor *cursor)
{
    struct trace_case trace_case = {0};
    trace_case.process_id = get_u32(cursor);
    trace_case.case_id = get_u32(cursor);
    if (!(trace_case.name = get_str(reader, cursor)))
        return -1;
    trace_case.begin_ns = get_u64(cursor);
    trace_case.end_ns = get_u64(cursor);
    trace_case.iterations = get_u64(cursor);
    trace_case.flags = get_u32(cursor);
    if (cursor->short_read)
        return corrupt(reader, "payload too short");
    struct trace_model_process *process = get_process(reader, trace_case.process_id);
    if (!process)
        return -1;
    struct trace_case_slot *slot;
    HASH_FIND(hh, process->case_slots, &trace_case.case_id, sizeof trace_case.case_id, slot);
    if (slot) {
        process->cases[slot->index] = trace_case;
        return 0;
    }
    if (growable_array_reserve(&process->cases, &process->case_capacity, process->case_count + 1,
                               sizeof *process->cases) != 0 ||
        !(slot = arena_alloc(reader->model, sizeof *slot)))
        return out_of_memory(reader);
    memset(slot, 0, sizeof *slot);
    slot->case_id = trace_case.case_id;
    slot->index = process->case_count;
    HASH_ADD(hh, process->case_slots, case_id, sizeof slot->case_id, slot);
    process->cases[process->case_count++] = trace_case;
    return 0;
}

enum { LOSS_RECORD_SIZE = 4 + 4 + 8 + 8 + 8 };

static int parse_loss_records(struct reader *reader, struct cursor *cursor, struct trace_leaks *leaks)
{
    leaks->count = get_u32(cursor);
    if (check_count(reader, cursor, leaks->count, LOSS_RECORD_SIZE, "loss records") != 0)
        return -1;
    struct trace_loss_record *records = arena_alloc(reader->model, (size_t)leaks->count * sizeof *records + 1);
    if (!records)
        return out_of_memory(reader);
    for (uint32_t i = 0; i < leaks->count; i++) {
        records[i].stack_id = get_u32(cursor);
        records[i].category = get_u32(cursor);
        records[i].bytes = get_u64(cursor);
        records[i].blocks = get_u64(cursor);
        records[i].first_iteration = get_u64(cursor);
        if (records[i].category >= TRACE_LEAK_CATEGORIES)
            return corrupt(reader, "loss record %u has unknown category %u", i, records[i].category);
    }
    leaks->records = records;
    return 0;
}

static int parse_leaks(struct reader *reader, struct cursor *cursor)
{
    struct trace_leaks leaks = {0};
    leaks.process_id = get_u32(cursor);
    leaks.case_id = get_u32(cursor);
    leaks.when = get_u32(cursor);
    leaks.iteration = get_u64(cursor);
    leaks.time_ns = get_u64(cursor);
    for (int category = 0; category < TRACE_LEAK_CATEGORIES; category++) {
        leaks.bytes[category] = get_u64(cursor);
        leaks.blocks[category] = get_u64(cursor);
    }
    if (parse_loss_records(reader, cursor, &leaks) != 0)
        return -1;
    struct trace_model_process *process = get_process(reader, leaks.process_id);
    if (!process)
        return -1;
    if (growable_array_reserve(&process->leaks, &process->leak_capacity, process->leak_count + 1,
                               sizeof *process->leaks) != 0)
        return out_of_memory(reader);
    process->leaks[process->leak_count++] = leaks;
    return 0;
}

enum { CASE_SITE_SIZE = 4 + 8 + 8 + 8 };

static int parse_case_sites(struct reader *reader, struct cursor *cursor)
{
    struct trace_case_sites record = {0};
    record.process_id = get_u32(cursor);
    record.case_id = get_u32(cursor);
    record.count = get_u32(cursor);
    if (check_count(reader, cursor, record.count, CASE_SITE_SIZE, "case sites") != 0)
        return -1;
    struct trace_case_site *sites = arena_alloc(reader->model, (size_t)record.count * sizeof *sites + 1);
    if (!sites)
        return out_of_memory(reader);
    for (uint32_t i = 0; i < record.count; i++) {
        sites[i].stack_id = get_u32(cursor);
        sites[i].allocations = get_u64(cursor);
        sites[i].allocated_bytes = get_u64(cursor);
        sites[i].frees = get_u64(cursor);
    }
    record.sites = sites;
    struct trace_model_process *process = get_process(reader, record.process_id);
    if (!process)
        return -1;
    if (growable_array_reserve(&process->case_sites, &process->case_sites_capacity, process->case_sites_count + 1,
                               sizeof *process->case_sites) != 0)
        return out_of_memory(reader);
    process->case_sites[process->case_sites_count++] = record;
    return 0;
}

const struct trace_case_site *trace_model_case_site(const struct trace_model_process *process, uint32_t case_id,
                                                    uint32_t stack_id)
{
    for (size_t i = process ? process->case_sites_count : 0; i-- > 0;) {
        const struct trace_case_sites *record = &process->case_sites[i];
        if (record->case_id != case_id)
            continue;
        for (uint32_t j = 0; j < record->count; j++)
            if (record->sites[j].stack_id == stack_id)
                return &record->sites[j];
    }
    return NULL;
}

/* Dispatches one complete, crc-checked section. Unknown types are skipped. */
static int parse_section(struct reader *reader, uint32_t type, const unsigned char *payload, size_t length)
{
    struct cursor cursor = {payload, length, 0, 0};
    switch (type) {
    case TRACE_SEC_STRINGS: return parse_strings(reader, &cursor);
    case TRACE_SEC_INFO: return parse_info(reader, &cursor);
    case TRACE_SEC_MODULE: return parse_module(reader, &cursor);
    case TRACE_SEC_FRAMES: return parse_frames(reader, &cursor);
    case TRACE_SEC_PROCESS: return parse_process(reader, &cursor);
    case TRACE_SEC_STACKS: return parse_stacks(reader, &cursor, 0);
    case TRACE_SEC_STACKS_SHARED: return parse_stacks(reader, &cursor, 1);
    case TRACE_SEC_SITES: return parse_sites(reader, &cursor);
    case TRACE_SEC_SITES_PACKED: return parse_sites_packed(reader, &cursor);
    case TRACE_SEC_SNAPSHOT: return parse_snapshot(reader, &cursor, 0);
    case TRACE_SEC_SNAPSHOT_DELTA: return parse_snapshot(reader, &cursor, 1);
    case TRACE_SEC_TIMELINE: return parse_timeline(reader, &cursor);
    case TRACE_SEC_WARNING: return parse_warning(reader, &cursor);
    case TRACE_SEC_CASE: return parse_case(reader, &cursor);
    case TRACE_SEC_LEAKS: return parse_leaks(reader, &cursor);
    case TRACE_SEC_CASE_SITES: return parse_case_sites(reader, &cursor);
    case TRACE_SEC_PYTHON: return parse_python(reader, &cursor);
    default: return 0;
    }
}

const char *trace_section_name(uint32_t type)
{
    static const char *const names[] = {
        [TRACE_SEC_STRINGS] = "STRINGS", [TRACE_SEC_INFO] = "INFO",         [TRACE_SEC_MODULE] = "MODULE",
        [TRACE_SEC_FRAMES] = "FRAMES",   [TRACE_SEC_PROCESS] = "PROCESS",   [TRACE_SEC_STACKS] = "STACKS",
        [TRACE_SEC_SITES] = "SITES",     [TRACE_SEC_SNAPSHOT] = "SNAPSHOT", [TRACE_SEC_TIMELINE] = "TIMELINE",
        [TRACE_SEC_WARNING] = "WARNING", [TRACE_SEC_CASE] = "CASE",         [TRACE_SEC_LEAKS] = "LEAKS",
        [TRACE_SEC_CASE_SITES] = "CASE_SITES", [TRACE_SEC_SNAPSHOT_DELTA] = "SNAPSHOT_DELTA",
        [TRACE_SEC_PYTHON] = "PYTHON", [TRACE_SEC_STACKS_SHARED] = "STACKS_SHARED",
        [TRACE_SEC_SITES_PACKED] = "SITES_PACKED",
    };
    if (type == TRACE_SEC_END)
        return "END";
    return type < sizeof names / sizeof *names && names[type] ? names[type] : "unknown";
}

/* --- the byte source: a buffer, or a file read section by section ------------- */

struct source {
    const unsigned char *data; /* the whole trace, or NULL when reading fd */
    int fd;
    uint64_t size;
    unsigned char *scratch; /* fd: the bytes last read */
    size_t scratch_capacity;
};

/* Points *bytes at n bytes at offset (n <= size - offset). -1 on I/O error. */
static int source_read(struct source *source, uint64_t offset, size_t n, const unsigned char **bytes)
{
    if (source->data) {
        *bytes = source->data + offset;
        return 0;
    }
    if (n > source->scratch_capacity) {
        unsigned char *grown = realloc(source->scratch, n);
        if (!grown) {
            errno = ENOMEM;
            return -1;
        }
        source->scratch = grown;
        source->scratch_capacity = n;
    }
    for (size_t done = 0; done < n;) {
        ssize_t got = pread(source->fd, source->scratch + done, n - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = EIO; /* the file shrank while being read */
            return -1;
        }
        done += (size_t)got;
    }
    *bytes = source->scratch;
    return 0;
}

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t le64(const unsigned char *b) { return le32(b) | (uint64_t)le32(b + 4) << 32; }

/* --- the section loop ------------------------------------------------------------ */

static int check_file_header(struct source *source, const char *name, char *err, size_t err_size)
{
    const unsigned char *header;
    if (source->size == 0) {
        snprintf(err, err_size, "%s: empty file, not a memslope trace", name);
        return -1;
    }
    size_t n = source->size < TRACE_FILE_HEADER_SIZE ? (size_t)source->size : TRACE_FILE_HEADER_SIZE;
    if (source_read(source, 0, n, &header) != 0) {
        snprintf(err, err_size, "%s: cannot read: %s", name, strerror(errno));
        return -1;
    }
    if (memcmp(header, TRACE_MAGIC, n < 8 ? n : 8) != 0) {
        snprintf(err, err_size, "%s: not a memslope trace (bad magic)", name);
        return -1;
    }
    if (n < TRACE_FILE_HEADER_SIZE) {
        snprintf(err, err_size, "%s: truncated trace: the file header is cut short (%zu of 16 bytes)", name, n);
        return -1;
    }
    uint32_t version = le32(header + 8);
    if (version < TRACE_VERSION_OLDEST || version > TRACE_VERSION) {
        snprintf(err, err_size,
                 "%s: unsupported trace version %u (this memslope reads versions %u to %u; a newer memslope "
                 "wrote it?)",
                 name, version, TRACE_VERSION_OLDEST, TRACE_VERSION);
        return -1;
    }
    return 0;
}

static void mark_incomplete(struct trace_model *model, uint64_t offset, const char *how)
{
    model->incomplete = 1;
    snprintf(model->incomplete_reason, sizeof model->incomplete_reason, "%s at offset %llu", how,
             (unsigned long long)offset);
}

/* Notes what follows END, or a section count that disagrees with END's. */
static int check_end(struct reader *reader, const unsigned char *payload, uint64_t length, uint64_t after,
                     uint64_t size)
{
    struct trace_model *model = reader->model;
    char *note = arena_alloc(model, 120);
    if (!note)
        return out_of_memory(reader);
    model->complete = 1;
    if (length >= 4 && le32(payload) != model->section_count)
        snprintf(note, 120, "END counts %u sections but %llu were read", le32(payload),
                 (unsigned long long)model->section_count);
    else if (after < size)
        snprintf(note, 120, "%llu bytes after END ignored", (unsigned long long)(size - after));
    else
        return 0;
    return add_warning(reader, &model->warnings, &model->warning_count, &model->warning_capacity, note);
}

static int read_sections(struct reader *reader, struct source *source, char *err, size_t err_size)
{
    uint64_t offset = TRACE_FILE_HEADER_SIZE;
    for (;;) {
        const unsigned char *bytes;
        uint64_t left = source->size - offset;
        if (left == 0) {
            mark_incomplete(reader->model, offset, "no END section: the file ends");
            return 0;
        }
        if (left < TRACE_SECTION_HEADER_SIZE) {
            mark_incomplete(reader->model, offset, "the file ends inside a section header");
            return 0;
        }
        if (source_read(source, offset, TRACE_SECTION_HEADER_SIZE, &bytes) != 0)
            goto io_error;
        uint32_t type = le32(bytes);
        uint64_t length = le64(bytes + 8);
        left -= TRACE_SECTION_HEADER_SIZE;
        if (length > left || left - length < TRACE_SECTION_TRAILER_SIZE) {
            mark_incomplete(reader->model, offset, "the file ends inside a section");
            return 0;
        }
        if (source_read(source, offset + TRACE_SECTION_HEADER_SIZE, (size_t)length + 4, &bytes) != 0)
            goto io_error;
        if (crc32_of(bytes, (size_t)length) != le32(bytes + length)) {
            snprintf(err, err_size, "%s: corrupt trace: crc mismatch in the %s section at offset %llu", reader->name,
                     trace_section_name(type), (unsigned long long)offset);
            return -1;
        }
        uint64_t next = offset + TRACE_SECTION_HEADER_SIZE + length + TRACE_SECTION_TRAILER_SIZE;
        int rc = type == TRACE_SEC_END ? check_end(reader, bytes, length, next, source->size)
                                       : parse_section(reader, type, bytes, (size_t)length);
        if (rc != 0) {
            snprintf(err, err_size, "%s: corrupt trace: %s section at offset %llu: %s", reader->name,
                     trace_section_name(type), (unsigned long long)offset, reader->problem);
            return -1;
        }
        if (type == TRACE_SEC_END)
            return 0;
        reader->model->section_count++;
        offset = next;
    }
io_error:
    snprintf(err, err_size, "%s: cannot read: %s", reader->name, strerror(errno));
    return -1;
}

static int init_model(struct trace_model *model)
{
    memset(model, 0, sizeof *model);
    model->strings = malloc(16 * sizeof *model->strings);
    if (!model->strings)
        return -1;
    model->string_capacity = 16;
    model->strings[model->string_count++] = "";
    return 0;
}

static int read_source(struct source *source, const char *name, uint64_t max_rebuilt_entries,
                       struct trace_model *model, char *err, size_t err_size)
{
    if (init_model(model) != 0) {
        snprintf(err, err_size, "%s: out of memory", name);
        return -1;
    }
    struct reader reader = {.model = model, .name = name, .max_rebuilt_entries = max_rebuilt_entries};
    if (check_file_header(source, name, err, err_size) != 0 || read_sections(&reader, source, err, err_size) != 0) {
        trace_model_free(model);
        return -1;
    }
    return 0;
}

int trace_read_buffer_bounded(const void *data, size_t size, const char *name, uint64_t max_rebuilt_entries,
                              struct trace_model *model, char *err, size_t err_size)
{
    struct source source = {.data = data ? data : (const void *)"", .fd = -1, .size = size};
    return read_source(&source, name, max_rebuilt_entries, model, err, err_size);
}

int trace_read_buffer(const void *data, size_t size, const char *name, struct trace_model *model, char *err,
                      size_t err_size)
{
    return trace_read_buffer_bounded(data, size, name, TRACE_READER_MAX_REBUILT_ENTRIES, model, err, err_size);
}

/* A pipe or FIFO (`record -o - -- CMD | report -`) cannot be read by
 * offset: it is read whole into memory first, then parsed as a buffer (the
 * model copies what it keeps). */
static int read_stream(int fd, const char *name, struct trace_model *model, char *err, size_t err_size)
{
    unsigned char *data = NULL;
    size_t size = 0, capacity = 0;
    for (;;) {
        if (size == capacity) {
            size_t grown_capacity = capacity ? capacity * 2 : (size_t)1 << 20;
            unsigned char *grown = grown_capacity > capacity ? realloc(data, grown_capacity) : NULL;
            if (!grown) {
                free(data);
                snprintf(err, err_size, "%s: out of memory after reading %zu bytes of it", name, size);
                return -1;
            }
            data = grown;
            capacity = grown_capacity;
        }
        ssize_t got = read(fd, data + size, capacity - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int read_errno = errno;
            free(data);
            snprintf(err, err_size, "%s: cannot read: %s", name, strerror(read_errno));
            return -1;
        }
        if (got == 0)
            break;
        size_t before = size;
        size += (size_t)got;
        /* an endless stream that is no trace must not fill memory first */
        if (before < TRACE_FILE_HEADER_SIZE && size >= TRACE_FILE_HEADER_SIZE &&
            check_file_header(&(struct source){.data = data, .fd = -1, .size = size}, name, err, err_size) != 0) {
            free(data);
            return -1;
        }
    }
    int rc = trace_read_buffer(data, size, name, model, err, err_size);
    free(data);
    return rc;
}

/* Reads the regular file, pipe or FIFO open at fd. */
static int read_descriptor(int fd, const char *name, struct trace_model *model, char *err, size_t err_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_size, "%s: cannot open: %s", name, strerror(errno));
        return -1;
    }
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
        return read_stream(fd, name, model, err, err_size);
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "%s: not a regular file, pipe or FIFO", name);
        return -1;
    }
    struct source source = {.fd = fd, .size = (uint64_t)st.st_size};
    int rc = read_source(&source, name, TRACE_READER_MAX_REBUILT_ENTRIES, model, err, err_size);
    free(source.scratch);
    return rc;
}

int trace_read_file(const char *path, struct trace_model *model, char *err, size_t err_size)
{
    memset(model, 0, sizeof *model);
    if (strcmp(path, "-") == 0) {
        if (isatty(STDIN_FILENO)) {
            snprintf(err, err_size, "-: standard input is a terminal, not a trace: pipe one in (memslope record -o - "
                                    "-- COMMAND | memslope report -) or name the trace file");
            return -1;
        }
        return read_descriptor(STDIN_FILENO, "standard input", model, err, err_size);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int rc = read_descriptor(fd, path, model, err, err_size);
    close(fd);
    return rc;
}

/* --- look-ups and freeing ------------------------------------------------------- */

const struct trace_model_stack *trace_model_stack(const struct trace_model_process *process, uint32_t stack_id)
{
    struct trace_model_stack *stack;
    HASH_FIND(hh, process->stacks, &stack_id, sizeof stack_id, stack);
    return stack;
}

const struct trace_model_site *trace_model_site(const struct trace_model_process *process, uint32_t stack_id)
{
    struct trace_model_site *site;
    HASH_FIND(hh, process->sites, &stack_id, sizeof stack_id, site);
    return site;
}

const struct trace_model_process *trace_model_process(const struct trace_model *model, uint32_t process_id)
{
    return find_process(model, process_id);
}

static void free_process(struct trace_model_process *process)
{
    HASH_CLEAR(hh, process->stacks);
    HASH_CLEAR(hh, process->sites);
    HASH_CLEAR(hh, process->case_slots);
    free(process->snapshots);
    free(process->timeline);
    free(process->cases);
    free(process->leaks);
    free(process->case_sites);
    free(process->warnings);
    free(process);
}

void trace_model_free(struct trace_model *model)
{
    struct trace_model_process *process, *next;
    HASH_ITER(hh, model->processes, process, next)
    {
        HASH_DEL(model->processes, process);
        free_process(process);
    }
    HASH_CLEAR(hh, model->modules);
    free(model->strings);
    free(model->frames);
    free(model->warnings);
    for (struct trace_arena *block = model->arena, *next_block; block; block = next_block) {
        next_block = block->next;
        free(block);
    }
    memset(model, 0, sizeof *model);
}

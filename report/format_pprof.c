/* format_pprof.c - pprof's profile.proto (github.com/google/pprof,
 * proto/profile.proto), gzipped, as `go tool pprof` reads it.
 *
 * Sample types: alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes (the whole process, per site, live meaning live at exit),
 * then growth/bytes (per iteration) when a case has iterations, and
 * leaked_objects/count, leaked_space/bytes when the trace has a leak check.
 * Process-wide figures are one sample per stack; growth and leaks are one
 * sample per case and stack, labelled case=NAME. The default sample type is
 * growth when anything grows, else leaked_space when anything leaked, else
 * inuse_space.
 *
 * A Location is one return address: the frame there and, innermost first,
 * the frames inlined into it (one Line each, with the line of the call), as
 * profile.proto has it. It refers to its module's Mapping (path and build
 * id). A Function is a function as every flame-graph format keys it
 * (formats.h, struct format_function), with its lowest line as start_line,
 * so pprof's function views draw one box per caller.
 */
#include "formats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <zlib.h>

#include "protobuf.h"

#ifndef MEMSLOPE_VERSION
#define MEMSLOPE_VERSION "unknown"
#endif

/* profile.proto field numbers. */
enum {
    PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
    LABEL_KEY = 1, LABEL_STR = 2,
    MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3, MAPPING_FILE_OFFSET = 4,
    MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6, MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
    MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
    LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1, LINE_LINE = 2,
    FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4, FUNCTION_START_LINE = 5,
};

enum value_slot { ALLOC_OBJECTS, ALLOC_SPACE, INUSE_OBJECTS, INUSE_SPACE, GROWTH, LEAKED_OBJECTS, LEAKED_SPACE,
                  VALUE_SLOTS };

static const char *const slot_type[VALUE_SLOTS] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
                                                   "growth", "leaked_objects", "leaked_space"};
static const char *const slot_unit[VALUE_SLOTS] = {"count", "bytes", "count", "bytes", "bytes", "count", "bytes"};

struct string_entry {
    char *text;
    int64_t index;
    UT_hash_handle hh;
};

struct location_entry {
    uint32_t *frame_ids; /* the key: visible frames, innermost (inlined) first */
    size_t count;
    uint64_t id;
    UT_hash_handle hh;
};

struct mapping_info {
    const struct trace_model_module *module;
    uint64_t start, limit;
    int used, has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct pprof_builder {
    const struct report *report;
    struct pb_buffer profile, message, inner; /* message, inner: scratch for one writer at a time */
    struct pb_buffer function_message, location_message, line_message;
    struct string_entry *strings; /* uthash by text */
    char **string_order;          /* by index */
    size_t string_count, string_capacity;
    struct format_functions functions;
    uint64_t *function_ids; /* per format function; 0: not written yet */
    uint64_t function_count;
    struct location_entry *locations; /* uthash by frame ids */
    uint64_t location_count;
    struct mapping_info *mappings;
    size_t mapping_count;
    int has_slot[VALUE_SLOTS];
    int slot_column[VALUE_SLOTS]; /* column in Sample.value; -1: not written */
    size_t columns;
    int failed;
};

/* --- strings and functions ------------------------------------------------------------ */

static int64_t string_index(struct pprof_builder *b, const char *text)
{
    struct string_entry *entry;
    HASH_FIND_STR(b->strings, text, entry);
    if (entry)
        return entry->index;
    if (b->string_count == b->string_capacity) {
        size_t grown = b->string_capacity ? b->string_capacity * 2 : 256;
        char **order = realloc(b->string_order, grown * sizeof *order);
        if (!order)
            goto out_of_memory;
        b->string_order = order;
        b->string_capacity = grown;
    }
    if (!(entry = calloc(1, sizeof *entry)) || !(entry->text = strdup(text))) {
        free(entry);
        goto out_of_memory;
    }
    entry->index = (int64_t)b->string_count;
    b->string_order[b->string_count++] = entry->text;
    HASH_ADD_KEYPTR(hh, b->strings, entry->text, strlen(entry->text), entry);
    return entry->index;
out_of_memory:
    b->failed = 1;
    return 0;
}

static void write_function(struct pprof_builder *b, const struct format_function *function, uint64_t id)
{
    char label[1024];
    int64_t name = string_index(b, format_function_label(function, label, sizeof label));
    struct pb_buffer *m = &b->function_message;
    pb_reset(m);
    pb_uint64_field(m, FUNCTION_ID, id);
    pb_int64_field(m, FUNCTION_NAME, name);
    pb_int64_field(m, FUNCTION_SYSTEM_NAME, name);
    pb_int64_field(m, FUNCTION_FILENAME, string_index(b, function->file));
    pb_int64_field(m, FUNCTION_START_LINE, function->line);
    pb_message_field(&b->profile, PROFILE_FUNCTION, m);
}

/* The Function of a frame, written the first time it is seen. */
static uint64_t function_id(struct pprof_builder *b, uint32_t frame_id)
{
    uint32_t index = b->functions.of_frame[frame_id];
    if (!b->function_ids[index]) {
        b->function_ids[index] = ++b->function_count;
        write_function(b, &b->functions.items[index], b->function_ids[index]);
    }
    return b->function_ids[index];
}

/* --- samples --------------------------------------------------------------------------- */

static int64_t rounded(double value) { return (int64_t)llround(value); }

static int case_has_growth_value(const struct report_case *report_case)
{
    for (size_t i = 0; i < report_case->site_count; i++)
        if (report_case->sites[i].growth.known && rounded(report_case->sites[i].growth.bytes_per_iteration) != 0)
            return 1;
    return 0;
}

static void choose_columns(struct pprof_builder *b)
{
    const struct report *report = b->report;
    b->has_slot[ALLOC_OBJECTS] = b->has_slot[ALLOC_SPACE] = 1;
    b->has_slot[INUSE_OBJECTS] = b->has_slot[INUSE_SPACE] = 1;
    for (size_t c = 0; c < report->case_count; c++) {
        b->has_slot[GROWTH] |= report->cases[c].iterations > 0;
        b->has_slot[LEAKED_SPACE] |= report->cases[c].leaks != NULL;
    }
    b->has_slot[LEAKED_OBJECTS] = b->has_slot[LEAKED_SPACE];
    for (int s = 0; s < VALUE_SLOTS; s++)
        b->slot_column[s] = b->has_slot[s] ? (int)b->columns++ : -1;
}

static uint64_t location_id(struct pprof_builder *b, const uint32_t *frame_ids, size_t count);

/* Sample.location_id, leaf first: one Location per run of inlined frames
 * and the frame they were inlined into. Returns the count. */
static size_t stack_locations(struct pprof_builder *b, const struct trace_model_stack *stack, uint64_t *locations)
{
    const struct trace_model_frame *frames = b->report->model->frames;
    uint32_t *run = malloc(((size_t)(stack ? stack->depth : 0) + 1) * sizeof *run);
    size_t count = 0;
    if (!run) {
        b->failed = 1;
        return 0;
    }
    for (uint32_t i = 0; stack && i < stack->depth;) {
        size_t length = 0;
        uint32_t frame_id;
        do {
            frame_id = stack->frame_ids[i++];
            if (report_frame_visible(&frames[frame_id]))
                run[length++] = frame_id;
        } while ((frames[frame_id].flags & TRACE_FRAME_INLINED) && i < stack->depth);
        uint64_t id = length ? location_id(b, run, length) : 0;
        if (id)
            locations[count++] = id;
    }
    free(run);
    return count;
}

static void write_sample(struct pprof_builder *b, const struct trace_model_stack *stack, const int64_t *slots,
                         const char *case_name)
{
    uint64_t *locations = malloc(((size_t)(stack ? stack->depth : 0) + 1) * sizeof *locations);
    int64_t values[VALUE_SLOTS];
    if (!locations) {
        b->failed = 1;
        return;
    }
    size_t location_count = stack_locations(b, stack, locations); /* may write Locations: before the Sample */
    for (int s = 0; s < VALUE_SLOTS; s++)
        if (b->slot_column[s] >= 0)
            values[b->slot_column[s]] = slots[s];
    pb_reset(&b->message);
    pb_packed_uint64_field(&b->message, SAMPLE_LOCATION_ID, locations, location_count);
    pb_packed_int64_field(&b->message, SAMPLE_VALUE, values, b->columns);
    if (case_name) {
        pb_reset(&b->inner);
        pb_int64_field(&b->inner, LABEL_KEY, string_index(b, "case"));
        pb_int64_field(&b->inner, LABEL_STR, string_index(b, case_name));
        pb_message_field(&b->message, SAMPLE_LABEL, &b->inner);
    }
    pb_message_field(&b->profile, PROFILE_SAMPLE, &b->message);
    free(locations);
}

/* With --case, the case's own figures: what it allocated while open, and
 * what it retained (its live bytes at its end, less those at its start). */
static void write_filtered_case_samples(struct pprof_builder *b)
{
    for (size_t c = 0; c < b->report->case_count; c++)
        for (size_t i = 0; i < b->report->cases[c].site_count; i++) {
            const struct report_site *site = &b->report->cases[c].sites[i];
            int64_t slots[VALUE_SLOTS] = {0};
            slots[ALLOC_OBJECTS] = (int64_t)site->allocations;
            slots[ALLOC_SPACE] = (int64_t)site->allocated_bytes;
            slots[INUSE_OBJECTS] = (int64_t)site->live_blocks;
            slots[INUSE_SPACE] = (int64_t)site->live_bytes;
            if (site->allocations || site->live_blocks)
                write_sample(b, site->stack, slots, NULL);
        }
}

static void write_process_samples(struct pprof_builder *b)
{
    if (b->report->case_filter) {
        write_filtered_case_samples(b);
        return;
    }
    const struct trace_model_process *process = b->report->primary;
    for (const struct trace_model_site *s = process ? process->sites : NULL; s; s = s->hh.next) {
        int64_t slots[VALUE_SLOTS] = {0};
        slots[ALLOC_OBJECTS] = (int64_t)s->site.allocations;
        slots[ALLOC_SPACE] = (int64_t)s->site.allocated_bytes;
        slots[INUSE_OBJECTS] = (int64_t)s->site.live_blocks;
        slots[INUSE_SPACE] = (int64_t)s->site.live_bytes;
        write_sample(b, trace_model_stack(process, s->site.stack_id), slots, NULL);
    }
}

static void write_case_samples(struct pprof_builder *b, const struct report_case *report_case)
{
    for (size_t i = 0; i < report_case->site_count; i++) {
        const struct report_site *site = &report_case->sites[i];
        int64_t slots[VALUE_SLOTS] = {0};
        slots[GROWTH] = site->growth.known ? rounded(site->growth.bytes_per_iteration) : 0;
        slots[LEAKED_OBJECTS] = (int64_t)site->leaked_blocks;
        slots[LEAKED_SPACE] = (int64_t)site->leaked_bytes;
        if ((slots[GROWTH] && b->has_slot[GROWTH]) || slots[LEAKED_SPACE] || slots[LEAKED_OBJECTS])
            write_sample(b, site->stack, slots, report_case->name);
    }
}

/* --- mappings and locations --------------------------------------------------------------- */

static int collect_mappings(struct pprof_builder *b)
{
    size_t count = HASH_COUNT(b->report->model->modules);
    b->mappings = calloc(count + 1, sizeof *b->mappings);
    if (!b->mappings)
        return -1;
    for (const struct trace_model_module *m = b->report->model->modules; m; m = m->hh.next)
        b->mappings[b->mapping_count++].module = m;
    return 0;
}

/* Mapping ids are the index in b->mappings plus one; 0 for no module. */
static uint64_t mapping_id(const struct pprof_builder *b, const struct trace_model_module *module)
{
    for (size_t i = 0; module && i < b->mapping_count; i++)
        if (b->mappings[i].module == module)
            return i + 1;
    return 0;
}

/* The module's extent as far as the frames tell it: base = address - offset. */
static void note_frame_in_mapping(struct mapping_info *mapping, const struct trace_model_frame *frame)
{
    uint64_t base = frame->address - frame->module_offset;
    if (!mapping->used || base < mapping->start)
        mapping->start = base;
    if (!mapping->used || frame->address + 1 > mapping->limit)
        mapping->limit = frame->address + 1;
    mapping->used = 1;
    mapping->has_functions |= *frame->function != '\0';
    mapping->has_filenames |= *frame->file != '\0';
    mapping->has_line_numbers |= frame->line != 0;
    mapping->has_inline_frames |= (frame->flags & TRACE_FRAME_INLINED) != 0;
}

/* A Location: its lines innermost first, its address and mapping those of the outermost frame. */
static void write_location(struct pprof_builder *b, const struct location_entry *entry)
{
    const struct trace_model_frame *frames = b->report->model->frames;
    const struct trace_model_frame *outer = &frames[entry->frame_ids[entry->count - 1]];
    uint64_t mapping = mapping_id(b, outer->module);
    struct pb_buffer *m = &b->location_message, *line = &b->line_message;
    pb_reset(m);
    pb_uint64_field(m, LOCATION_ID, entry->id);
    pb_uint64_field(m, LOCATION_MAPPING_ID, mapping);
    pb_uint64_field(m, LOCATION_ADDRESS, outer->address);
    for (size_t i = 0; i < entry->count; i++) {
        const struct trace_model_frame *frame = &frames[entry->frame_ids[i]];
        uint64_t function = function_id(b, entry->frame_ids[i]);
        if (mapping)
            note_frame_in_mapping(&b->mappings[mapping - 1], frame);
        pb_reset(line);
        pb_uint64_field(line, LINE_FUNCTION_ID, function);
        pb_int64_field(line, LINE_LINE, frame->line);
        pb_message_field(m, LOCATION_LINE, line);
    }
    pb_message_field(&b->profile, PROFILE_LOCATION, m);
}

/* The Location for these frames, written the first time they are seen. */
static uint64_t location_id(struct pprof_builder *b, const uint32_t *frame_ids, size_t count)
{
    struct location_entry *entry;
    size_t key_length = count * sizeof *frame_ids;
    HASH_FIND(hh, b->locations, frame_ids, key_length, entry);
    if (entry)
        return entry->id;
    if (!(entry = calloc(1, sizeof *entry)) || !(entry->frame_ids = malloc(key_length))) {
        free(entry);
        b->failed = 1;
        return 0;
    }
    memcpy(entry->frame_ids, frame_ids, key_length);
    entry->count = count;
    entry->id = ++b->location_count;
    HASH_ADD_KEYPTR(hh, b->locations, entry->frame_ids, key_length, entry);
    write_location(b, entry);
    return entry->id;
}

static void write_mapping(struct pprof_builder *b, size_t index)
{
    const struct mapping_info *m = &b->mappings[index];
    pb_reset(&b->message);
    pb_uint64_field(&b->message, MAPPING_ID, index + 1);
    pb_uint64_field(&b->message, MAPPING_MEMORY_START, m->start);
    pb_uint64_field(&b->message, MAPPING_MEMORY_LIMIT, m->limit);
    pb_uint64_field(&b->message, MAPPING_FILE_OFFSET, 0);
    pb_int64_field(&b->message, MAPPING_FILENAME, string_index(b, m->module->path));
    pb_int64_field(&b->message, MAPPING_BUILD_ID, string_index(b, m->module->build_id));
    pb_uint64_field(&b->message, MAPPING_HAS_FUNCTIONS, (uint64_t)m->has_functions);
    pb_uint64_field(&b->message, MAPPING_HAS_FILENAMES, (uint64_t)m->has_filenames);
    pb_uint64_field(&b->message, MAPPING_HAS_LINE_NUMBERS, (uint64_t)m->has_line_numbers);
    pb_uint64_field(&b->message, MAPPING_HAS_INLINE_FRAMES, (uint64_t)m->has_inline_frames);
    pb_message_field(&b->profile, PROFILE_MAPPING, &b->message);
}

static void write_mappings(struct pprof_builder *b)
{
    /* Mappings that no sample reaches are left out. */
    for (size_t i = 0; i < b->mapping_count; i++)
        if (b->mappings[i].used)
            write_mapping(b, i);
}

/* --- the profile ---------------------------------------------------------------------------- */

static void write_value_type(struct pprof_builder *b, uint32_t field, const char *type, const char *unit)
{
    pb_reset(&b->message);
    pb_int64_field(&b->message, VALUE_TYPE_TYPE, string_index(b, type));
    pb_int64_field(&b->message, VALUE_TYPE_UNIT, string_index(b, unit));
    pb_message_field(&b->profile, field, &b->message);
}

static enum value_slot default_slot(const struct pprof_builder *b)
{
    for (size_t c = 0; b->has_slot[GROWTH] && c < b->report->case_count; c++)
        if (case_has_growth_value(&b->report->cases[c]))
            return GROWTH;
    for (size_t c = 0; c < b->report->case_count; c++)
        for (size_t i = 0; i < b->report->cases[c].site_count; i++)
            if (b->report->cases[c].sites[i].leaked_bytes)
                return LEAKED_SPACE;
    return INUSE_SPACE;
}

static void write_header(struct pprof_builder *b)
{
    const struct trace_model *model = b->report->model;
    const struct trace_model_process *process = b->report->primary;
    char comment[1024];
    for (int s = 0; s < VALUE_SLOTS; s++)
        if (b->has_slot[s])
            write_value_type(b, PROFILE_SAMPLE_TYPE, slot_type[s], slot_unit[s]);
    pb_int64_field(&b->profile, PROFILE_DEFAULT_SAMPLE_TYPE, string_index(b, slot_type[default_slot(b)]));
    write_value_type(b, PROFILE_PERIOD_TYPE, "space", "bytes");
    /* With --sample-rate, each recorded backtrace stands for about that many bytes. */
    pb_int64_field(&b->profile, PROFILE_PERIOD,
                   model->has_info && model->info.sample_rate ? (int64_t)model->info.sample_rate : 1);
    if (model->has_info)
        pb_int64_field(&b->profile, PROFILE_TIME_NANOS, (int64_t)model->info.start_unix_ns);
    if (process && process->info.end_ns > process->info.start_ns)
        pb_int64_field(&b->profile, PROFILE_DURATION_NANOS, (int64_t)(process->info.end_ns - process->info.start_ns));
    snprintf(comment, sizeof comment, "memslope %s report of %s", MEMSLOPE_VERSION, b->report->trace_name);
    pb_int64_field(&b->profile, PROFILE_COMMENT, string_index(b, comment));
}

static void write_string_table(struct pprof_builder *b)
{
    for (size_t i = 0; i < b->string_count; i++)
        pb_string_field(&b->profile, PROFILE_STRING_TABLE, b->string_order[i]);
}

static int builder_init(struct pprof_builder *b, const struct report *report)
{
    memset(b, 0, sizeof *b);
    b->report = report;
    pb_init(&b->profile);
    pb_init(&b->message);
    pb_init(&b->inner);
    pb_init(&b->function_message);
    pb_init(&b->location_message);
    pb_init(&b->line_message);
    string_index(b, ""); /* string_table[0] must be "" */
    if (collect_mappings(b) != 0 || format_functions_build(report->model, &b->functions) != 0 ||
        !(b->function_ids = calloc(b->functions.count + 1, sizeof *b->function_ids)))
        b->failed = 1;
    return b->failed ? -1 : 0;
}

static void builder_free(struct pprof_builder *b)
{
    struct string_entry *s, *next_string;
    HASH_ITER(hh, b->strings, s, next_string)
    {
        HASH_DEL(b->strings, s);
        free(s->text);
        free(s);
    }
    format_functions_free(&b->functions);
    free(b->function_ids);
    free(b->string_order);
    struct location_entry *l, *next_location;
    HASH_ITER(hh, b->locations, l, next_location)
    {
        HASH_DEL(b->locations, l);
        free(l->frame_ids);
        free(l);
    }
    free(b->mappings);
    pb_free(&b->profile);
    pb_free(&b->message);
    pb_free(&b->inner);
    pb_free(&b->function_message);
    pb_free(&b->location_message);
    pb_free(&b->line_message);
}

/* gzip (RFC 1952) of the serialized profile, as pprof expects its files. */
static int write_gzip(FILE *out, const uint8_t *data, size_t length)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    uint8_t chunk[65536];
    int rc = Z_OK;
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)length; /* a profile beyond 4 GiB is not a practical concern here */
    while (rc == Z_OK) {
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = deflate(&z, Z_FINISH);
        size_t produced = sizeof chunk - z.avail_out;
        if ((rc == Z_OK || rc == Z_STREAM_END) && fwrite(chunk, 1, produced, out) != produced)
            rc = Z_ERRNO;
    }
    deflateEnd(&z);
    return rc == Z_STREAM_END ? 0 : -1;
}

int report_write_pprof(const struct report *report, FILE *out, char *err, size_t err_size)
{
    struct pprof_builder b;
    int rc = builder_init(&b, report);
    if (rc == 0) {
        choose_columns(&b);
        write_header(&b);
        write_process_samples(&b);
        for (size_t c = 0; c < report->case_count; c++)
            write_case_samples(&b, &report->cases[c]);
        write_mappings(&b);
        write_string_table(&b);
        rc = b.failed || b.profile.failed || b.function_message.failed || b.location_message.failed ? -1 : 0;
    }
    if (rc != 0)
        snprintf(err, err_size, "out of memory");
    else if (write_gzip(out, b.profile.data, b.profile.length) != 0) {
        snprintf(err, err_size, "cannot compress the profile");
        rc = -1;
    }
    builder_free(&b);
    return rc;
}

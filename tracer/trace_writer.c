/* trace_writer.c - see trace_writer.h; the format is common/trace_format.h. */
#include "trace_writer.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uthash.h>

#include "../common/crc32.h"
#include "../common/output_file.h"

/* A growable byte buffer holding one section payload being built. */
struct byte_buffer {
    unsigned char *data;
    size_t length, capacity;
    int failed; /* an allocation failed: the contents are incomplete */
};

struct interned_string {
    uint32_t id;
    UT_hash_handle hh; /* keyed by the bytes that follow the struct */
    char text[];
};

struct trace_writer {
    int fd;                            /* output.fd */
    char *path;
    struct output_file output;
    char error[512];
    int failed;                        /* sticky: an earlier call failed */
    uint32_t section_count;            /* sections written, END excluded */
    uint32_t next_string_id;           /* id 0 is "" and never written */
    uint32_t next_frame_id;
    struct interned_string *strings;   /* uthash by text */
    struct byte_buffer pending_strings;/* STRINGS payload records not yet written */
    uint32_t pending_first_id, pending_count;
    struct byte_buffer payload;        /* the section being built */
};

/* --- byte buffer ------------------------------------------------------------ */

static void buffer_reserve(struct byte_buffer *buffer, size_t extra)
{
    if (buffer->failed || buffer->capacity - buffer->length >= extra)
        return;
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity - buffer->length < extra) {
        if (capacity > SIZE_MAX / 2) {
            buffer->failed = 1;
            return;
        }
        capacity *= 2;
    }
    unsigned char *grown = realloc(buffer->data, capacity);
    if (!grown) {
        buffer->failed = 1;
        return;
    }
    buffer->data = grown;
    buffer->capacity = capacity;
}

/* Inlined, so that the fixed-size writes below become a store or two: out
 * of line, each 4-byte field of a million frames and stacks cost a call
 * and a call of memcpy. */
static inline __attribute__((always_inline)) void put_bytes(struct byte_buffer *buffer, const void *bytes,
                                                            size_t length)
{
    if (__builtin_expect(buffer->capacity - buffer->length < length, 0))
        buffer_reserve(buffer, length);
    if (buffer->failed)
        return;
    memcpy(buffer->data + buffer->length, bytes, length);
    buffer->length += length;
}

static inline __attribute__((always_inline)) void put_u32(struct byte_buffer *buffer, uint32_t value)
{
    unsigned char bytes[4];
    for (int i = 0; i < 4; i++)
        bytes[i] = (unsigned char)(value >> (8 * i));
    put_bytes(buffer, bytes, sizeof bytes);
}

static inline __attribute__((always_inline)) void put_u64(struct byte_buffer *buffer, uint64_t value)
{
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(value >> (8 * i));
    put_bytes(buffer, bytes, sizeof bytes);
}

static void put_i32(struct byte_buffer *buffer, int32_t value) { put_u32(buffer, (uint32_t)value); }

/* LEB128: seven bits a byte, the low ones first, the top bit set on every
 * byte but the last. */
static inline void put_varint(struct byte_buffer *buffer, uint64_t value)
{
    unsigned char bytes[10];
    size_t length = 0;
    while (value >= 0x80) {
        bytes[length++] = (unsigned char)(value | 0x80);
        value >>= 7;
    }
    bytes[length++] = (unsigned char)value;
    put_bytes(buffer, bytes, length);
}

/* count values, little-endian, with one check of the room: a stack's
 * frame ids (half a million of them for python3 -c pass) are most of the
 * words a trace holds. */
static void put_u32_array(struct byte_buffer *buffer, const uint32_t *values, size_t count)
{
    if (count > SIZE_MAX / 4) {
        buffer->failed = 1;
        return;
    }
    buffer_reserve(buffer, count * 4);
    if (buffer->failed)
        return;
    unsigned char *at = buffer->data + buffer->length;
    for (size_t i = 0; i < count; i++) {
        uint32_t little = htole32(values[i]);
        memcpy(at + 4 * i, &little, 4);
    }
    buffer->length += count * 4;
}

static void buffer_reset(struct byte_buffer *buffer)
{
    buffer->length = 0;
    buffer->failed = 0;
}

/* --- errors ------------------------------------------------------------------ */

static int fail(struct trace_writer *writer, const char *format, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct trace_writer *writer, const char *format, ...)
{
    if (!writer->failed) {
        int used = snprintf(writer->error, sizeof writer->error, "%s: ", writer->path);
        if (used < 0 || (size_t)used >= sizeof writer->error)
            used = 0;
        va_list args;
        va_start(args, format);
        vsnprintf(writer->error + used, sizeof writer->error - (size_t)used, format, args);
        va_end(args);
    }
    writer->failed = 1;
    return -1;
}

const char *trace_writer_error(const struct trace_writer *writer) { return writer->error; }

/* --- string interning ------------------------------------------------------- */

/* Returns the id of text, queueing a STRINGS record when it is new. */
static uint32_t intern(struct trace_writer *writer, const char *text)
{
    if (!text || !*text)
        return 0;
    size_t length = strlen(text);
    struct interned_string *found;
    HASH_FIND(hh, writer->strings, text, length, found);
    if (found)
        return found->id;
    if (length > UINT32_MAX || writer->next_string_id == TRACE_NONE) {
        writer->payload.failed = 1;
        return 0;
    }
    struct interned_string *entry = malloc(sizeof *entry + length + 1);
    if (!entry) {
        writer->payload.failed = 1;
        return 0;
    }
    memcpy(entry->text, text, length + 1);
    entry->id = writer->next_string_id++;
    HASH_ADD_KEYPTR(hh, writer->strings, entry->text, length, entry);
    if (writer->pending_count == 0)
        writer->pending_first_id = entry->id;
    writer->pending_count++;
    put_u32(&writer->pending_strings, (uint32_t)length);
    put_bytes(&writer->pending_strings, text, length);
    return entry->id;
}

static void put_str(struct trace_writer *writer, const char *text) { put_u32(&writer->payload, intern(writer, text)); }

/* --- section output ----------------------------------------------------------- */

static int write_all(struct trace_writer *writer, struct iovec *iov, int count)
{
    while (count > 0) {
        ssize_t written = writev(writer->fd, iov, count);
        if (written < 0) {
            if (errno == EINTR)
                continue;
            return fail(writer, "write: %s", strerror(errno));
        }
        size_t left = (size_t)written;
        while (count > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* Appends one whole section: header, payload, crc32 of the payload. */
static int emit_section(struct trace_writer *writer, uint32_t type, const unsigned char *payload, size_t length)
{
    unsigned char header[TRACE_SECTION_HEADER_SIZE], trailer[TRACE_SECTION_TRAILER_SIZE];
    uint32_t crc = crc32_of(payload, length);
    for (int i = 0; i < 4; i++) {
        header[i] = (unsigned char)(type >> (8 * i));
        header[4 + i] = 0;
        trailer[i] = (unsigned char)(crc >> (8 * i));
    }
    for (int i = 0; i < 8; i++)
        header[8 + i] = (unsigned char)((uint64_t)length >> (8 * i));
    struct iovec iov[3] = {{header, sizeof header}, {(void *)payload, length}, {trailer, sizeof trailer}};
    if (write_all(writer, iov, 3) != 0)
        return -1;
    writer->section_count++;
    return 0;
}

/* Writes the STRINGS section for strings interned since the last one. */
static int flush_strings(struct trace_writer *writer)
{
    if (writer->pending_count == 0)
        return 0;
    struct byte_buffer strings = {0};
    put_u32(&strings, writer->pending_first_id);
    put_u32(&strings, writer->pending_count);
    put_bytes(&strings, writer->pending_strings.data, writer->pending_strings.length);
    int rc = strings.failed ? fail(writer, "out of memory") : emit_section(writer, TRACE_SEC_STRINGS, strings.data, strings.length);
    free(strings.data);
    buffer_reset(&writer->pending_strings);
    writer->pending_count = 0;
    return rc;
}

/* Starts building a section payload. */
static int begin_section(struct trace_writer *writer)
{
    if (writer->failed)
        return -1;
    buffer_reset(&writer->payload);
    return 0;
}

/* Writes the strings the payload introduced, then the payload itself. */
static int end_section(struct trace_writer *writer, uint32_t type)
{
    if (writer->payload.failed || writer->pending_strings.failed)
        return fail(writer, "out of memory (or a string table overflow) building a section");
    if (flush_strings(writer) != 0)
        return -1;
    return emit_section(writer, type, writer->payload.data, writer->payload.length);
}

/* --- creation ------------------------------------------------------------------- */

static int write_file_header(struct trace_writer *writer)
{
    unsigned char header[TRACE_FILE_HEADER_SIZE] = {0};
    memcpy(header, TRACE_MAGIC, 8);
    for (int i = 0; i < 4; i++)
        header[8 + i] = (unsigned char)(TRACE_VERSION >> (8 * i));
    struct iovec iov = {header, sizeof header};
    return write_all(writer, &iov, 1);
}

static void free_writer(struct trace_writer *writer)
{
    struct interned_string *entry, *next;
    HASH_ITER(hh, writer->strings, entry, next)
    {
        HASH_DEL(writer->strings, entry);
        free(entry);
    }
    free(writer->pending_strings.data);
    free(writer->payload.data);
    free(writer->path);
    free(writer);
}

struct trace_writer *trace_writer_create(const char *path, char *err, size_t err_size)
{
    struct trace_writer *writer = calloc(1, sizeof *writer);
    if (!writer || !(writer->path = strdup(path))) {
        snprintf(err, err_size, "%s: cannot create trace: out of memory", path);
        free(writer);
        return NULL;
    }
    writer->next_string_id = 1;
    if (output_file_open(&writer->output, path, OUTPUT_EXCLUSIVE, err, err_size) != 0) {
        free_writer(writer);
        return NULL;
    }
    writer->fd = writer->output.fd;
    /* Published at once: a recording that is killed leaves its trace. */
    if (write_file_header(writer) != 0 ||
        (output_file_publish(&writer->output, writer->error, sizeof writer->error) != 0 && (writer->failed = 1))) {
        snprintf(err, err_size, "%s", writer->error);
        output_file_discard(&writer->output);
        free_writer(writer);
        return NULL;
    }
    return writer;
}

/* --- sections ------------------------------------------------------------------- */

static void put_argv(struct trace_writer *writer, uint32_t argc, const char *const *argv)
{
    put_u32(&writer->payload, argc);
    for (uint32_t i = 0; i < argc; i++)
        put_str(writer, argv[i]);
}

int trace_write_info(struct trace_writer *writer, const struct trace_info *info)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_str(writer, info->memslope_version);
    put_u64(out, info->start_unix_ns);
    put_argv(writer, info->argc, info->argv);
    put_u32(out, info->max_frames);
    put_u32(out, info->snapshots_limit);
    put_u64(out, info->interval_ns);
    put_u64(out, info->sample_rate);
    put_u32(out, info->leak_check);
    put_u32(out, info->flags);
    return end_section(writer, TRACE_SEC_INFO);
}

int trace_write_module(struct trace_writer *writer, const struct trace_module *module)
{
    if (begin_section(writer) != 0)
        return -1;
    put_u32(&writer->payload, module->module_id);
    put_str(writer, module->path);
    put_str(writer, module->build_id);
    return end_section(writer, TRACE_SEC_MODULE);
}

int trace_write_frames(struct trace_writer *writer, const struct trace_frame *frames, uint32_t count,
                       uint32_t *first_id)
{
    if (begin_section(writer) != 0)
        return -1;
    if (count > UINT32_MAX - writer->next_frame_id)
        return fail(writer, "too many frames");
    struct byte_buffer *out = &writer->payload;
    put_u32(out, writer->next_frame_id);
    put_u32(out, count);
    for (uint32_t i = 0; i < count; i++) {
        put_u32(out, frames[i].module_id);
        put_str(writer, frames[i].function);
        put_str(writer, frames[i].file);
        put_u32(out, frames[i].line);
        put_u64(out, frames[i].address);
        put_u64(out, frames[i].module_offset);
        put_u32(out, frames[i].flags);
    }
    if (end_section(writer, TRACE_SEC_FRAMES) != 0)
        return -1;
    if (first_id)
        *first_id = writer->next_frame_id;
    writer->next_frame_id += count;
    return 0;
}

uint32_t trace_writer_next_frame_id(const struct trace_writer *writer)
{
    return writer->next_frame_id;
}

int trace_write_process(struct trace_writer *writer, const struct trace_process *process)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, process->process_id);
    put_u32(out, process->pid);
    put_u32(out, process->parent_process_id);
    put_str(writer, process->exe);
    put_argv(writer, process->argc, process->argv);
    put_u64(out, process->start_ns);
    put_u64(out, process->end_ns);
    put_u32(out, process->flags);
    put_i32(out, process->exit_status);
    put_i32(out, process->exit_signal);
    put_u64(out, process->allocations);
    put_u64(out, process->frees);
    put_u64(out, process->allocated_bytes);
    put_u64(out, process->peak_bytes);
    put_u64(out, process->peak_blocks);
    put_u64(out, process->peak_time_ns);
    put_u64(out, process->live_bytes);
    put_u64(out, process->live_blocks);
    put_u32(out, process->stacks_dropped);
    put_u32(out, process->slots_exhausted);
    return end_section(writer, TRACE_SEC_PROCESS);
}

int trace_write_stacks(struct trace_writer *writer, uint32_t process_id, const struct trace_stack *stacks,
                       uint32_t count)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, process_id);
    put_u32(out, count);
    for (uint32_t i = 0; i < count; i++) {
        const struct trace_stack *stack = &stacks[i];
        if (stack->shared > stack->depth || stack->shared > (i ? stacks[i - 1].depth : 0))
            return fail(writer, "stack %u shares %u frames of %u with the one before it, which has %u",
                        stack->stack_id, stack->shared, stack->depth, i ? stacks[i - 1].depth : 0);
        put_u32(out, stack->stack_id);
        put_u32(out, stack->depth);
        put_u32(out, stack->shared);
        put_u32_array(out, stack->frame_ids, stack->depth - stack->shared);
    }
    return end_section(writer, TRACE_SEC_STACKS_SHARED);
}

int trace_write_sites(struct trace_writer *writer, uint32_t process_id, const struct trace_site *sites,
                      uint32_t count)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, process_id);
    put_u32(out, count);
    uint32_t previous = 0;
    for (uint32_t i = 0; i < count; i++) {
        /* the stack id's difference from the previous record's, zigzag:
         * sites come mostly in the order of their ids */
        int64_t step = (int64_t)sites[i].stack_id - (int64_t)previous;
        put_varint(out, (uint64_t)step << 1 ^ (uint64_t)(step >> 63));
        previous = sites[i].stack_id;
        put_varint(out, sites[i].allocations);
        put_varint(out, sites[i].allocated_bytes);
        put_varint(out, sites[i].frees);
        put_varint(out, sites[i].live_bytes);
        put_varint(out, sites[i].live_blocks);
        put_varint(out, sites[i].peak_live_bytes);
        put_varint(out, sites[i].max_live_bytes);
    }
    return end_section(writer, TRACE_SEC_SITES_PACKED);
}

/* SNAPSHOT and SNAPSHOT_DELTA share their layout; type says which. */
static int write_snapshot_section(struct trace_writer *writer, const struct trace_snapshot *snapshot, uint32_t type)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, snapshot->process_id);
    put_u32(out, snapshot->kind);
    put_u32(out, snapshot->case_id);
    put_u64(out, snapshot->iteration);
    put_u64(out, snapshot->time_ns);
    put_u64(out, snapshot->live_bytes);
    put_u64(out, snapshot->live_blocks);
    put_u32(out, snapshot->count);
    for (uint32_t i = 0; i < snapshot->count; i++) {
        put_u32(out, snapshot->entries[i].stack_id);
        put_u64(out, snapshot->entries[i].live_bytes);
        put_u64(out, snapshot->entries[i].live_blocks);
    }
    return end_section(writer, type);
}

int trace_write_snapshot(struct trace_writer *writer, const struct trace_snapshot *snapshot)
{
    return write_snapshot_section(writer, snapshot, TRACE_SEC_SNAPSHOT);
}

int trace_write_snapshot_delta(struct trace_writer *writer, const struct trace_snapshot *delta)
{
    return write_snapshot_section(writer, delta, TRACE_SEC_SNAPSHOT_DELTA);
}

int trace_write_timeline(struct trace_writer *writer, uint32_t process_id, uint64_t interval_ns,
                         const struct trace_timeline_point *points, uint32_t count)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, process_id);
    put_u64(out, interval_ns);
    put_u32(out, count);
    for (uint32_t i = 0; i < count; i++) {
        put_u64(out, points[i].time_ns);
        put_u64(out, points[i].live_bytes);
        put_u64(out, points[i].live_blocks);
    }
    return end_section(writer, TRACE_SEC_TIMELINE);
}

int trace_write_case(struct trace_writer *writer, const struct trace_case *trace_case)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, trace_case->process_id);
    put_u32(out, trace_case->case_id);
    put_str(writer, trace_case->name);
    put_u64(out, trace_case->begin_ns);
    put_u64(out, trace_case->end_ns);
    put_u64(out, trace_case->iterations);
    put_u32(out, trace_case->flags);
    return end_section(writer, TRACE_SEC_CASE);
}

int trace_write_leaks(struct trace_writer *writer, const struct trace_leaks *leaks)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, leaks->process_id);
    put_u32(out, leaks->case_id);
    put_u32(out, leaks->when);
    put_u64(out, leaks->iteration);
    put_u64(out, leaks->time_ns);
    for (int category = 0; category < TRACE_LEAK_CATEGORIES; category++) {
        put_u64(out, leaks->bytes[category]);
        put_u64(out, leaks->blocks[category]);
    }
    put_u32(out, leaks->count);
    for (uint32_t i = 0; i < leaks->count; i++) {
        const struct trace_loss_record *record = &leaks->records[i];
        put_u32(out, record->stack_id);
        put_u32(out, record->category);
        put_u64(out, record->bytes);
        put_u64(out, record->blocks);
        put_u64(out, record->first_iteration);
    }
    return end_section(writer, TRACE_SEC_LEAKS);
}

int trace_write_case_sites(struct trace_writer *writer, const struct trace_case_sites *case_sites)
{
    if (begin_section(writer) != 0)
        return -1;
    struct byte_buffer *out = &writer->payload;
    put_u32(out, case_sites->process_id);
    put_u32(out, case_sites->case_id);
    put_u32(out, case_sites->count);
    for (uint32_t i = 0; i < case_sites->count; i++) {
        const struct trace_case_site *site = &case_sites->sites[i];
        put_u32(out, site->stack_id);
        put_u64(out, site->allocations);
        put_u64(out, site->allocated_bytes);
        put_u64(out, site->frees);
    }
    return end_section(writer, TRACE_SEC_CASE_SITES);
}

int trace_write_warning(struct trace_writer *writer, uint32_t process_id, const char *message)
{
    if (begin_section(writer) != 0)
        return -1;
    put_u32(&writer->payload, process_id);
    put_str(writer, message);
    return end_section(writer, TRACE_SEC_WARNING);
}

int trace_write_python(struct trace_writer *writer, const struct trace_python *python)
{
    if (begin_section(writer) != 0)
        return -1;
    put_u32(&writer->payload, python->process_id);
    put_u32(&writer->payload, python->version);
    put_u32(&writer->payload, python->allocator);
    put_u32(&writer->payload, python->flags);
    put_u32(&writer->payload, python->unnamed_functions);
    return end_section(writer, TRACE_SEC_PYTHON);
}

/* --- end ------------------------------------------------------------------------ */

int trace_writer_finish(struct trace_writer *writer, char *err, size_t err_size)
{
    int rc = begin_section(writer);
    if (rc == 0) {
        put_u32(&writer->payload, writer->section_count);
        rc = end_section(writer, TRACE_SEC_END);
    }
    if (rc == 0 && !output_file_still_there(&writer->output))
        rc = fail(writer, "another program replaced or removed this file while memslope wrote it (another "
                          "`memslope record` with the same -o?): this recording's trace is lost");
    char close_err[512];
    if (output_file_close(&writer->output, close_err, sizeof close_err) != 0 && rc == 0)
        rc = -1;
    else
        close_err[0] = '\0';
    if (rc != 0)
        snprintf(err, err_size, "%s", close_err[0] ? close_err : writer->error);
    free_writer(writer);
    return rc;
}

void trace_writer_abandon(struct trace_writer *writer)
{
    char err[512];
    output_file_close(&writer->output, err, sizeof err);
    free_writer(writer);
}

void trace_writer_remove(struct trace_writer *writer)
{
    output_file_discard(&writer->output);
    free_writer(writer);
}

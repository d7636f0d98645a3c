/*
 * trace_format.h - the memslope trace file, version 2: the contract between
 * the tracer (writer, tracer/trace_writer.h) and the reporter (reader,
 * report/trace_reader.h). docs/trace-format.md is the prose version.
 *
 * A trace is a 16-byte file header followed by sections:
 *
 *   file header   char magic[8] = "MEMSLOPE"; u32 version = 2; u32 reserved = 0
 *
 * Version 2 writes a process's stacks as STACKS_SHARED and its sites as
 * SITES_PACKED instead of STACKS and SITES: a reader of version 1 would
 * skip them as unknown and report no site, so the version says it cannot
 * read the file instead. The sections are the same otherwise, and a reader
 * of version 2 reads version 1 (TRACE_VERSION_OLDEST).
 *   section       u32 type; u32 reserved = 0; u64 payload_length;
 *                 payload[payload_length]; u32 crc32(payload) (zlib's crc32)
 *
 * All integers are little-endian. A "str" is a u32 id into the string table,
 * which STRINGS sections build up in order (id 0 is always ""); a section
 * only names strings defined by an earlier STRINGS section. Likewise frame
 * and module ids are defined before use. Unknown section types are skipped,
 * so fields and sections can be added without breaking old readers.
 *
 * The file is appended to as recording goes; a reader of a file that ends
 * inside a section (memslope was killed) reads every complete section before
 * it and reports the trace as incomplete. The END section marks a complete
 * trace.
 *
 * Payloads (field by field, in this order):
 *
 *   STRINGS   u32 first_id; u32 count; count x (u32 length; bytes[length])
 *   INFO      str memslope_version; u64 start_unix_ns; u32 argc; argc x str;
 *             u32 max_frames; u32 snapshots_limit; u64 interval_ns;
 *             u64 sample_rate; u32 leak_check; u32 flags
 *   MODULE    u32 module_id; str path; str build_id (lower-case hex, "" if none)
 *   FRAMES    u32 first_id; u32 count; count x (u32 module_id; str function;
 *             str file; u32 line; u64 address; u64 module_offset; u32 flags)
 *   PROCESS   u32 process_id; u32 pid; u32 parent_process_id; str exe;
 *             u32 argc; argc x str; u64 start_ns; u64 end_ns; u32 flags;
 *             i32 exit_status; i32 exit_signal; u64 allocations; u64 frees;
 *             u64 allocated_bytes; u64 peak_bytes; u64 peak_blocks;
 *             u64 peak_time_ns; u64 live_bytes; u64 live_blocks;
 *             u32 stacks_dropped; u32 slots_exhausted
 *   STACKS    u32 process_id; u32 count; count x (u32 stack_id; u32 depth;
 *             depth x u32 frame_id)        frames innermost first (what
 *             traces before STACKS_SHARED hold)
 *   SITES     u32 process_id; u32 count; count x (u32 stack_id;
 *             u64 allocations; u64 allocated_bytes; u64 frees;
 *             u64 live_bytes; u64 live_blocks; u64 peak_live_bytes;
 *             u64 max_live_bytes)   (what traces before SITES_PACKED hold)
 *   SNAPSHOT  u32 process_id; u32 kind; u32 case_id; u64 iteration;
 *             u64 time_ns; u64 live_bytes; u64 live_blocks; u32 count;
 *             count x (u32 stack_id; u64 live_bytes; u64 live_blocks)
 *             every site with live blocks (what traces before
 *             SNAPSHOT_DELTA hold; the tracer now writes SNAPSHOT_DELTA)
 *   TIMELINE  u32 process_id; u64 interval_ns; u32 count;
 *             count x (u64 time_ns; u64 live_bytes; u64 live_blocks)
 *   WARNING   u32 process_id (TRACE_NONE for the whole trace); str message
 *   CASE      u32 process_id; u32 case_id; str name; u64 begin_ns; u64 end_ns;
 *             u64 iterations; u32 flags
 *   LEAKS     u32 process_id; u32 case_id (TRACE_NONE: the check at exit or at
 *             a fatal signal); u32 when (enum trace_snapshot_kind); u64 iteration;
 *             u64 time_ns; 4 x (u64 bytes; u64 blocks) in enum leak_category
 *             order; u32 count; count x (u32 stack_id; u32 category;
 *             u64 bytes; u64 blocks; u64 first_iteration)   loss records
 *   CASE_SITES u32 process_id; u32 case_id; u32 count; count x (u32 stack_id;
 *             u64 allocations; u64 allocated_bytes; u64 frees)   the case's own
 *             share of SITES: allocations made while it was open, and frees
 *             of those blocks
 *   SNAPSHOT_DELTA  the fields of SNAPSHOT, but the entries are only the
 *             sites whose live figures differ from the process's previous
 *             snapshot (its previous SNAPSHOT or SNAPSHOT_DELTA section, in
 *             file order; none before the first): strictly ascending by
 *             stack_id; live_blocks 0 means the site has no live block any
 *             more; a site not listed keeps its previous figures. Applied in
 *             order (trace_snapshot_merge), the deltas give each snapshot's
 *             full entries, as SNAPSHOT holds them. Iteration snapshots are
 *             thinned while recording; a dropped snapshot's entries are merged
 *             into the next snapshot kept, so an entry may repeat a site's
 *             previous figures.
 *   PYTHON    u32 process_id; u32 version (PY_VERSION_HEX); u32 allocator
 *             (enum trace_python_allocator); u32 flags (enum trace_python_flags);
 *             u32 unnamed_functions   the CPython the image ran, and how its
 *             objects were recorded
 *   STACKS_SHARED  u32 process_id; u32 count; count x (u32 stack_id;
 *             u32 depth; u32 shared; (depth - shared) x u32 frame_id): the
 *             stack's outermost `shared` frames are the previous stack's of
 *             this section (its outermost `shared`; 0 for the first), the
 *             ones listed are the rest, innermost first. The tracer sorts a
 *             section's stacks by their frames read from the outermost, so
 *             each shares what it can with the one before: a tenth of
 *             STACKS' frame ids on a large Python program.
 *   SITES_PACKED  u32 process_id; u32 count; count x (varint stack_step;
 *             7 x varint, the fields of a SITES record in its order): a
 *             varint is LEB128 (seven bits a byte, low ones first, the top
 *             bit set on all but the last; at most ten bytes); stack_step
 *             is the stack id less the previous record's (0 before the
 *             first), zigzag-coded (2n for n >= 0, -2n - 1 for n < 0).
 *             A quarter of SITES' size: most figures are small.
 *   END       u32 section_count (sections before END)
 *
 * Times (start_ns, time_ns, ...) are CLOCK_MONOTONIC nanoseconds; the INFO
 * section's start_unix_ns anchors them to wall-clock time.
 */
#ifndef MEMSLOPE_TRACE_FORMAT_H
#define MEMSLOPE_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_MAGIC "MEMSLOPE"
#define TRACE_VERSION 2u
#define TRACE_VERSION_OLDEST 1u /* the oldest version the reader reads */
#define TRACE_FILE_HEADER_SIZE 16u
#define TRACE_SECTION_HEADER_SIZE 16u
#define TRACE_SECTION_TRAILER_SIZE 4u
#define TRACE_NONE 0xffffffffu /* "no process / module / case" */

enum trace_section_type {
    TRACE_SEC_STRINGS = 1,
    TRACE_SEC_INFO = 2,
    TRACE_SEC_MODULE = 3,
    TRACE_SEC_FRAMES = 4,
    TRACE_SEC_PROCESS = 5,
    TRACE_SEC_STACKS = 6,
    TRACE_SEC_SITES = 7,
    TRACE_SEC_SNAPSHOT = 8,
    TRACE_SEC_TIMELINE = 9,
    TRACE_SEC_WARNING = 10,
    TRACE_SEC_CASE = 11,
    TRACE_SEC_LEAKS = 12,
    TRACE_SEC_CASE_SITES = 13,
    TRACE_SEC_SNAPSHOT_DELTA = 14,
    TRACE_SEC_PYTHON = 15,
    TRACE_SEC_STACKS_SHARED = 16,
    TRACE_SEC_SITES_PACKED = 17,
    TRACE_SEC_END = 0xffff,
};

enum trace_leak_check { TRACE_LEAK_CHECK_END = 0, TRACE_LEAK_CHECK_ITERATIONS = 1, TRACE_LEAK_CHECK_OFF = 2 };

enum trace_frame_flags {
    TRACE_FRAME_INLINED = 1u << 0,   /* inlined into the next (outer) frame of the stack */
    TRACE_FRAME_ALLOCATOR = 1u << 1, /* an allocator entry point (operator new, ...): hidden in reports */
    /* A Python frame that stands in place of the interpreter's C frame which
     * ran it: function is the code object's qualified name, file and line
     * its source; module_id is TRACE_NONE, address is the shim's frame word
     * (see tracer/python_frames.h) and module_offset the bytecode offset. */
    TRACE_FRAME_PYTHON = 1u << 2,
};

enum trace_process_flags {
    TRACE_PROC_SHIM_SEEN = 1u << 0,  /* the shim ran in this image: its allocations are recorded */
    TRACE_PROC_EXECED = 1u << 1,     /* the image was replaced by exec; the next PROCESS with the same pid continues it */
    TRACE_PROC_SIGNALED = 1u << 2,   /* ended by exit_signal */
    TRACE_PROC_EXITED = 1u << 3,     /* ended with exit_status */
    /* an image of the launched command's own process, through its exec
     * chain (never a fork child): the report's headline is the last one */
    TRACE_PROC_PRIMARY = 1u << 4,
    /* written at a checkpoint while the image ran: its figures as they
     * stood at end_ns; a later PROCESS replaces it (the next checkpoint,
     * or the image's end) */
    TRACE_PROC_CHECKPOINT = 1u << 5,
    /* still running when the launched command's own process ended: its
     * figures as they stood at end_ns, when memslope let it go (record
     * without --wait-all) */
    TRACE_PROC_LET_GO = 1u << 6,
};

enum trace_snapshot_kind {
    TRACE_SNAP_EXIT = 1,
    TRACE_SNAP_SIGNAL = 2, /* at a fatal signal, before delivery */
    TRACE_SNAP_CASE_BEGIN = 3,
    TRACE_SNAP_ITERATION = 4,
    TRACE_SNAP_CASE_END = 5,
    TRACE_SNAP_EXEC = 6,   /* the image was replaced by exec */
};

/* In-memory forms of the records above, shared by writer and reader.
 * Strings are C strings here; the writer interns them. */

enum trace_info_flags {
    TRACE_INFO_NO_FREERES = 1u << 0, /* --no-freeres: glibc's and libstdc++'s freeres were not run at exit */
};

struct trace_info {
    const char *memslope_version;
    uint64_t start_unix_ns;
    uint32_t argc;
    const char *const *argv;
    uint32_t max_frames;
    uint32_t snapshots_limit;
    uint64_t interval_ns;
    uint64_t sample_rate;
    uint32_t leak_check; /* enum trace_leak_check */
    uint32_t flags;      /* enum trace_info_flags */
};

struct trace_module {
    uint32_t module_id;
    const char *path;
    const char *build_id;
};

struct trace_frame {
    uint32_t module_id; /* TRACE_NONE when the address is in no known module */
    const char *function; /* "" when unknown */
    const char *file;     /* "" when unknown */
    uint32_t line;        /* 0 when unknown */
    uint64_t address;
    uint64_t module_offset;
    uint32_t flags;       /* enum trace_frame_flags */
};

struct trace_process {
    uint32_t process_id;
    uint32_t pid;
    uint32_t parent_process_id;
    const char *exe;
    uint32_t argc;
    const char *const *argv;
    uint64_t start_ns, end_ns;
    uint32_t flags; /* enum trace_process_flags */
    int32_t exit_status, exit_signal;
    uint64_t allocations, frees, allocated_bytes;
    uint64_t peak_bytes, peak_blocks, peak_time_ns;
    uint64_t live_bytes, live_blocks;
    uint32_t stacks_dropped, slots_exhausted;
};

struct trace_stack {
    uint32_t stack_id;
    uint32_t depth;
    const uint32_t *frame_ids; /* innermost first: depth - shared of them */
    /* Written: its outermost frames that are those of the stack before it
     * in the same STACKS_SHARED section, not in frame_ids (0: all are). */
    uint32_t shared;
};

struct trace_site {
    uint32_t stack_id;
    uint64_t allocations, allocated_bytes, frees;
    uint64_t live_bytes, live_blocks;
    uint64_t peak_live_bytes; /* this site's live bytes when the process peaked */
    uint64_t max_live_bytes;  /* this site's own maximum */
};

struct trace_snapshot_entry {
    uint32_t stack_id;
    uint64_t live_bytes, live_blocks;
};

struct trace_snapshot {
    uint32_t process_id;
    uint32_t kind; /* enum trace_snapshot_kind */
    uint32_t case_id;
    uint64_t iteration;
    uint64_t time_ns;
    uint64_t live_bytes, live_blocks;
    uint32_t count;
    const struct trace_snapshot_entry *entries;
};

/* Applies newer (a SNAPSHOT_DELTA's entries) to older (the previous
 * snapshot's, or an earlier delta): both sorted by stack_id. A stack in
 * both takes newer's figures; with drop_empty, entries with no live block
 * are left out (a full snapshot lists only sites with live blocks). Writes
 * the result to out (room for older_count + newer_count entries), sorted by
 * stack_id, and returns its count; with out NULL only counts. newer may sit
 * in out's own buffer at out + older_count: no entry is overwritten before
 * it is read. */
static inline size_t trace_snapshot_merge(const struct trace_snapshot_entry *older, size_t older_count,
                                          const struct trace_snapshot_entry *newer, size_t newer_count,
                                          int drop_empty, struct trace_snapshot_entry *out)
{
    size_t i = 0, j = 0, n = 0;
    while (i < older_count || j < newer_count) {
        const struct trace_snapshot_entry *next;
        if (j == newer_count || (i < older_count && older[i].stack_id < newer[j].stack_id)) {
            next = &older[i++];
        } else {
            if (i < older_count && older[i].stack_id == newer[j].stack_id)
                i++;
            next = &newer[j++];
        }
        if (drop_empty && !next->live_blocks)
            continue;
        if (out)
            out[n] = *next;
        n++;
    }
    return n;
}

/* memcheck's four categories, in memcheck's order of severity. */
enum trace_leak_category {
    TRACE_LEAK_DEFINITE = 0,
    TRACE_LEAK_INDIRECT = 1,
    TRACE_LEAK_POSSIBLE = 2,
    TRACE_LEAK_REACHABLE = 3,
    TRACE_LEAK_CATEGORIES = 4,
};

/* The category's name in the JSON report and in memslope leaks. */
static inline const char *trace_leak_category_name(uint32_t category)
{
    static const char *const names[TRACE_LEAK_CATEGORIES] = {"definitely_lost", "indirectly_lost", "possibly_lost",
                                                             "still_reachable"};
    return category < TRACE_LEAK_CATEGORIES ? names[category] : "unknown";
}

enum trace_case_flags {
    TRACE_CASE_ENDED = 1u << 0,    /* case_end was seen (else it ended with the process) */
    TRACE_CASE_IMPLICIT = 1u << 1, /* the whole-process case, never named by a marker */
};

struct trace_case {
    uint32_t process_id;
    uint32_t case_id;
    const char *name;
    uint64_t begin_ns, end_ns;
    uint64_t iterations;
    uint32_t flags; /* enum trace_case_flags */
};

struct trace_loss_record {
    uint32_t stack_id;
    uint32_t category; /* enum trace_leak_category */
    uint64_t bytes, blocks;
    uint64_t first_iteration; /* earliest iteration that allocated one of these blocks (0: outside iterations) */
};

struct trace_leaks {
    uint32_t process_id;
    uint32_t case_id; /* TRACE_NONE: whole process at exit / fatal signal */
    uint32_t when;    /* enum trace_snapshot_kind */
    uint64_t iteration;
    uint64_t time_ns;
    uint64_t bytes[TRACE_LEAK_CATEGORIES], blocks[TRACE_LEAK_CATEGORIES];
    uint32_t count;
    const struct trace_loss_record *records;
};

/* How an image's Python objects were recorded (the shim's enum
 * shm_python_mode, kept apart so the trace format does not depend on the
 * shared-memory ABI). */
enum trace_python_allocator {
    TRACE_PYTHON_WRAPPED = 1,     /* the allocator domains wrapped: every object, pymalloc kept */
    TRACE_PYTHON_MALLOC = 2,      /* the user's PYTHONMALLOC=malloc: every object, through malloc */
    TRACE_PYTHON_UNRECORDED = 3,  /* the user's allocator (PYTHONMALLOC, -X dev): pymalloc's objects not recorded */
    TRACE_PYTHON_NOT_WRAPPED = 4, /* an interpreter before 3.7: pymalloc's objects not recorded */
};

enum trace_python_flags {
    TRACE_PYTHON_FRAMES = 1u << 0, /* its Python frames are in the stacks */
};

struct trace_python {
    uint32_t process_id;
    uint32_t version;   /* PY_VERSION_HEX */
    uint32_t allocator; /* enum trace_python_allocator */
    uint32_t flags;     /* enum trace_python_flags */
    uint32_t unnamed_functions; /* frames whose code object could not be copied */
};

struct trace_case_site {
    uint32_t stack_id;
    uint64_t allocations, allocated_bytes, frees;
};

struct trace_case_sites {
    uint32_t process_id;
    uint32_t case_id;
    uint32_t count;
    const struct trace_case_site *sites;
};

struct trace_timeline_point {
    uint64_t time_ns, live_bytes, live_blocks;
};

#endif

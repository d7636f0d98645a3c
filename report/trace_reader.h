/*
 * trace_reader.h - reads a trace file (common/trace_format.h) into memory.
 *
 * The reader is hardened: any byte string gives either a model or one line
 * naming the file and the problem. Every length, count and id is checked
 * against the section it sits in and the tables defined so far. A file that
 * ends early (no END, or cut inside a section) yields every complete section
 * before the cut, with model->incomplete set.
 *
 * The model is bounded by the trace's own size (a trace holds per-site and
 * per-snapshot data, never per-allocation data), but for the snapshots of
 * SNAPSHOT_DELTA sections: each is rebuilt into its full entries, as a
 * SNAPSHOT section holds them (sorted by stack id; an unchanged snapshot
 * shares the previous one's), so they take sites x snapshots entries, at
 * most TRACE_READER_MAX_REBUILT_ENTRIES in all (beyond, a trace is refused
 * as too large: a small corrupt file could otherwise claim any number).
 * Strings are NUL-terminated copies owned by the model; all pointers stay
 * valid until trace_model_free.
 */
#ifndef MEMSLOPE_TRACE_READER_H
#define MEMSLOPE_TRACE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "../common/trace_format.h"

/* 32 Mi entries of 24 bytes: 768 MiB. A Python process with 10,000 sites
 * and 3 cases of 200 snapshots rebuilds 6 Mi. */
#define TRACE_READER_MAX_REBUILT_ENTRIES (1u << 25)

struct trace_model_module {
    uint32_t module_id;
    const char *path;
    const char *build_id;
    UT_hash_handle hh;
};

struct trace_model_frame {
    const struct trace_model_module *module; /* NULL: in no known module */
    const char *function;                    /* "" when unknown */
    const char *file;                        /* "" when unknown */
    uint32_t line;                           /* 0 when unknown */
    uint64_t address, module_offset;
    uint32_t flags;                          /* enum trace_frame_flags */
};

struct trace_model_stack {
    uint32_t stack_id;
    uint32_t depth;
    const uint32_t *frame_ids; /* innermost first; each < model->frame_count */
    UT_hash_handle hh;
};

struct trace_model_site {
    struct trace_site site; /* a later SITES record for the same stack replaces it */
    UT_hash_handle hh;
};

struct trace_model_process {
    uint32_t process_id;
    int has_info;                    /* a PROCESS section was read (else zeros) */
    struct trace_process info;       /* the last PROCESS section for this id */
    struct trace_model_stack *stacks; /* uthash by stack_id */
    struct trace_model_site *sites;   /* uthash by stack_id, first-seen order */
    size_t site_count;
    struct trace_snapshot *snapshots; /* in file order; full entries (deltas rebuilt) */
    size_t snapshot_count, snapshot_capacity;
    struct trace_timeline_point *timeline;
    size_t timeline_count, timeline_capacity;
    uint64_t timeline_interval_ns;
    struct trace_case *cases;         /* a later CASE with the same id replaces it */
    size_t case_count, case_capacity;
    struct trace_case_slot *case_slots; /* where each case id sits in cases (uthash; the reader's) */
    struct trace_leaks *leaks;        /* in file order; records owned */
    size_t leak_count, leak_capacity;
    struct trace_case_sites *case_sites; /* in file order; sites owned */
    size_t case_sites_count, case_sites_capacity;
    const char **warnings;
    size_t warning_count, warning_capacity;
    int has_python;                   /* a PYTHON section was read: the image ran CPython */
    struct trace_python python;
    UT_hash_handle hh;
};

struct trace_arena;

struct trace_model {
    int has_info;
    struct trace_info info;
    const char **strings; /* strings[0] == "" */
    uint32_t string_count, string_capacity;
    struct trace_model_module *modules; /* uthash by module_id */
    struct trace_model_frame *frames;
    uint32_t frame_count, frame_capacity;
    struct trace_model_process *processes; /* uthash by process_id, first-seen order */
    size_t process_count;
    const char **warnings; /* WARNING sections for the whole trace, and the reader's own notes */
    size_t warning_count, warning_capacity;
    uint64_t section_count;   /* complete sections read, END excluded */
    int complete;             /* END was read */
    int incomplete;           /* the file ends before END (see incomplete_reason) */
    char incomplete_reason[160];
    struct trace_arena *arena;
};

/* Reads the trace at path: a regular file, or a pipe or FIFO read whole
 * into memory; "-" is standard input (not a terminal). Returns 0, or -1
 * with one line in err naming the file and the problem (the model is then
 * empty and need not be freed, though freeing it is harmless). */
int trace_read_file(const char *path, struct trace_model *model, char *err, size_t err_size);

/* The same for a trace already in memory; name is used in messages. */
int trace_read_buffer(const void *data, size_t size, const char *name, struct trace_model *model, char *err,
                      size_t err_size);

/* trace_read_buffer with another bound than TRACE_READER_MAX_REBUILT_ENTRIES
 * on the snapshot entries rebuilt from deltas (tests). */
int trace_read_buffer_bounded(const void *data, size_t size, const char *name, uint64_t max_rebuilt_entries,
                              struct trace_model *model, char *err, size_t err_size);

void trace_model_free(struct trace_model *model);

/* Look-ups; NULL when not defined. */
const struct trace_model_stack *trace_model_stack(const struct trace_model_process *process, uint32_t stack_id);
const struct trace_model_site *trace_model_site(const struct trace_model_process *process, uint32_t stack_id);
const struct trace_model_process *trace_model_process(const struct trace_model *model, uint32_t process_id);
/* A case's own counters for a site: from the last CASE_SITES record of the
 * case that has the site, or NULL. */
const struct trace_case_site *trace_model_case_site(const struct trace_model_process *process, uint32_t case_id,
                                                    uint32_t stack_id);

/* A section type's name ("SITES"), or "unknown". */
const char *trace_section_name(uint32_t type);

#endif

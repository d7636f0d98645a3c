/*
 * test_trace_sample.h - a small trace holding every section type, with known
 * values, written through the real writer. Shared by the trace and report
 * unit tests (included, not linked: each test is its own program).
 */
#ifndef MEMSLOPE_TEST_TRACE_SAMPLE_H
#define MEMSLOPE_TEST_TRACE_SAMPLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tracer/trace_writer.h"

static const char *const sample_argv[] = {"./bench", "200"};
static const char *const sample_shell_argv[] = {"/bin/sh", "-c", "./bench 200"};

static const struct trace_frame sample_frames[] = {
    {1, "malloc", "", 0, 0x7f0000001000, 0x1000, TRACE_FRAME_ALLOCATOR},
    {0, "leaky_site", "leak.c", 6, 0x401136, 0x1136, 0},
    {0, "main", "leak.c", 12, 0x401180, 0x1180, 0},
    {0, "helper", "", 0, 0x401234, 0x1234, TRACE_FRAME_INLINED},
    {TRACE_NONE, "", "", 0, 0xdeadbeef, 0, 0},
};
static const uint32_t sample_stack_7[] = {0, 1, 2};
static const uint32_t sample_stack_9[] = {0, 3, 4};
static const struct trace_stack sample_stacks[] = {{7, 3, sample_stack_7, 0}, {9, 3, sample_stack_9, 0}};
static const struct trace_site sample_sites[] = {
    {7, 10, 480, 0, 480, 10, 480, 480},
    {9, 990, 47520, 990, 0, 0, 3616, 4000},
};
static const struct trace_snapshot_entry sample_entries[] = {{7, 48, 1}, {9, 16, 2}};
static const struct trace_timeline_point sample_points[] = {{1000, 0, 0}, {2000, 4096, 3}};
static const struct trace_loss_record sample_records[] = {
    {7, TRACE_LEAK_DEFINITE, 432, 9, 0},
    {7, TRACE_LEAK_INDIRECT, 48, 1, 3},
    {9, TRACE_LEAK_REACHABLE, 16, 1, 0},
};

static struct trace_process sample_process(int primary)
{
    struct trace_process p = {0};
    p.process_id = primary ? 1 : 0;
    p.pid = 100;
    p.parent_process_id = primary ? 0 : TRACE_NONE;
    p.exe = primary ? "/path/bench" : "/bin/sh";
    p.argc = primary ? 2 : 3;
    p.argv = primary ? sample_argv : sample_shell_argv;
    p.start_ns = primary ? 500 : 100;
    p.end_ns = primary ? 9000 : 400;
    p.flags = TRACE_PROC_SHIM_SEEN | (primary ? TRACE_PROC_EXITED : TRACE_PROC_EXECED);
    p.exit_status = primary ? 3 : 0;
    p.exit_signal = 0;
    p.allocations = primary ? 1000 : 5;
    p.frees = primary ? 990 : 5;
    p.allocated_bytes = primary ? 48000 : 100;
    p.peak_bytes = primary ? 4096 : 64;
    p.peak_blocks = primary ? 12 : 2;
    p.peak_time_ns = 2000;
    p.live_bytes = primary ? 480 : 0;
    p.live_blocks = primary ? 10 : 0;
    p.stacks_dropped = 1;
    p.slots_exhausted = 2;
    return p;
}

/* Every section type once (PROCESS and WARNING twice). Returns 0 or -1. */
static int write_sample_sections(struct trace_writer *w)
{
    struct trace_info info = {"0.1.0", 1700000000000000000ull, 2, sample_argv, 64, 200, 100000000, 0, 0, 0};
    struct trace_module bench = {0, "/path/bench", "abcdef01"}, libc = {1, "/lib/libc.so.6", ""};
    struct trace_process shell = sample_process(0), bench_process = sample_process(1);
    struct trace_snapshot snapshot = {1, TRACE_SNAP_ITERATION, TRACE_NONE, 1, 1500, 64, 3, 2, sample_entries};
    struct trace_case implicit_case = {1, 0, "bench", 500, 9000, 0, TRACE_CASE_IMPLICIT | TRACE_CASE_ENDED};
    struct trace_leaks leaks = {1, TRACE_NONE, TRACE_SNAP_EXIT, 0, 8900, {432, 48, 0, 16}, {9, 1, 0, 1},
                                3, sample_records};
    struct trace_python sample_python = {1, 0x030b02f0, TRACE_PYTHON_WRAPPED, TRACE_PYTHON_FRAMES, 3};
    uint32_t first_frame = 99;
    if (trace_write_info(w, &info) || trace_write_module(w, &bench) || trace_write_module(w, &libc) ||
        trace_write_frames(w, sample_frames, 5, &first_frame) || first_frame != 0 ||
        trace_write_process(w, &shell) || trace_write_stacks(w, 1, sample_stacks, 2) ||
        trace_write_snapshot(w, &snapshot) || trace_write_timeline(w, 1, 1000, sample_points, 2) ||
        trace_write_case(w, &implicit_case) || trace_write_sites(w, 1, sample_sites, 2) ||
        trace_write_leaks(w, &leaks) || trace_write_warning(w, TRACE_NONE, "stacks were dropped") ||
        trace_write_warning(w, 1, "process warning") || trace_write_process(w, &bench_process) ||
        trace_write_python(w, &sample_python))
        return -1;
    return 0;
}

/* Writes the sample trace to path; finished (with END) unless abandon. */
static int write_sample_trace(const char *path, int abandon)
{
    char err[512];
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    if (!w) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (write_sample_sections(w) != 0) {
        fprintf(stderr, "%s\n", trace_writer_error(w));
        trace_writer_abandon(w);
        return -1;
    }
    if (abandon) {
        trace_writer_abandon(w);
        return 0;
    }
    return trace_writer_finish(w, err, sizeof err);
}

/* A trace with two marked cases, each with begin and end snapshots. */
static inline int write_cases_trace(const char *path)
{
    char err[256];
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    struct trace_process p = sample_process(1);
    struct trace_case parse = {1, 0, "parse", 10, 20, 5, TRACE_CASE_ENDED};
    struct trace_case render = {1, 1, "render", 30, 40, 7, TRACE_CASE_ENDED};
    struct trace_snapshot_entry begin[] = {{7, 100, 1}}, end[] = {{7, 196, 3}, {9, 32, 1}};
    struct trace_snapshot snaps[] = {{1, TRACE_SNAP_CASE_BEGIN, 0, 0, 10, 100, 1, 1, begin},
                                     {1, TRACE_SNAP_CASE_END, 0, 5, 20, 228, 4, 2, end}};
    struct trace_loss_record record = {9, TRACE_LEAK_DEFINITE, 32, 1, 2};
    struct trace_leaks leaks = {1, 0, TRACE_SNAP_CASE_END, 5, 20, {32, 0, 0, 196}, {1, 0, 0, 3}, 1, &record};
    struct trace_module bench = {0, "/path/bench", ""}, libc = {1, "/lib/libc.so.6", ""};
    uint32_t first;
    int rc = !w || trace_write_module(w, &bench) || trace_write_module(w, &libc) ||
             trace_write_frames(w, sample_frames, 5, &first) || trace_write_stacks(w, 1, sample_stacks, 2) ||
             trace_write_case(w, &parse) || trace_write_case(w, &render) || trace_write_snapshot(w, &snaps[0]) ||
             trace_write_snapshot(w, &snaps[1]) || trace_write_leaks(w, &leaks) || trace_write_process(w, &p);
    if (w)
        rc |= trace_writer_finish(w, err, sizeof err);
    return rc ? -1 : 0;
}

/* The per-site heap of one case's snapshots, full (what SNAPSHOT holds: the
 * sites with live blocks, in the tracer's site order, not by stack id). */
struct history_point {
    uint32_t kind;
    uint64_t iteration, live_bytes, live_blocks;
    uint32_t count;
    struct trace_snapshot_entry entries[2];
};

static const struct history_point sample_history[] = {
    {TRACE_SNAP_CASE_BEGIN, 0, 100, 1, 1, {{7, 100, 1}}},
    {TRACE_SNAP_ITERATION, 1, 116, 2, 2, {{9, 16, 1}, {7, 100, 1}}},
    {TRACE_SNAP_ITERATION, 2, 180, 4, 2, {{9, 32, 2}, {7, 148, 2}}},
    {TRACE_SNAP_ITERATION, 3, 196, 3, 1, {{7, 196, 3}}}, /* stack 9 fell to 0 */
    {TRACE_SNAP_ITERATION, 4, 260, 5, 2, {{9, 16, 1}, {7, 244, 4}}},
    {TRACE_SNAP_ITERATION, 5, 308, 6, 2, {{9, 16, 1}, {7, 292, 5}}}, /* stack 9 unchanged */
    {TRACE_SNAP_CASE_END, 5, 356, 7, 2, {{9, 16, 1}, {7, 340, 6}}},
};
enum { SAMPLE_HISTORY_POINTS = sizeof sample_history / sizeof *sample_history };

static uint64_t history_figure(const struct history_point *point, uint32_t stack_id, int blocks)
{
    for (uint32_t i = 0; point && i < point->count; i++)
        if (point->entries[i].stack_id == stack_id)
            return blocks ? point->entries[i].live_blocks : point->entries[i].live_bytes;
    return 0;
}

/* The delta of point from previous (NULL: from nothing), by stack id. */
static uint32_t history_delta(const struct history_point *previous, const struct history_point *point,
                              struct trace_snapshot_entry *delta)
{
    static const uint32_t stacks[] = {7, 9};
    uint32_t count = 0;
    for (int i = 0; i < 2; i++) {
        uint64_t bytes = history_figure(point, stacks[i], 0), blocks = history_figure(point, stacks[i], 1);
        if (bytes != history_figure(previous, stacks[i], 0) || blocks != history_figure(previous, stacks[i], 1))
            delta[count++] = (struct trace_snapshot_entry){stacks[i], bytes, blocks};
    }
    return count;
}

/* One marked case ("loop", 5 iterations) whose sites grow, one steadily and
 * one not, with its snapshots as full SNAPSHOT sections (as traces before
 * SNAPSHOT_DELTA) or as SNAPSHOT_DELTA sections (as the tracer writes them
 * now). Both must give the same report. */
static inline int write_history_trace(const char *path, int as_deltas)
{
    char err[256];
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    struct trace_process p = sample_process(1);
    struct trace_case loop = {1, 0, "loop", 10, 90, 5, TRACE_CASE_ENDED};
    struct trace_module bench = {0, "/path/bench", ""}, libc = {1, "/lib/libc.so.6", ""};
    uint32_t first;
    int rc = !w || trace_write_module(w, &bench) || trace_write_module(w, &libc) ||
             trace_write_frames(w, sample_frames, 5, &first) || trace_write_stacks(w, 1, sample_stacks, 2) ||
             trace_write_sites(w, 1, sample_sites, 2) || trace_write_case(w, &loop);
    for (int i = 0; !rc && i < SAMPLE_HISTORY_POINTS; i++) {
        const struct history_point *point = &sample_history[i];
        struct trace_snapshot_entry delta[2];
        struct trace_snapshot snapshot = {1, point->kind, 0, point->iteration, 10 + 10 * (uint64_t)i,
                                          point->live_bytes, point->live_blocks, point->count, point->entries};
        if (as_deltas) {
            snapshot.count = history_delta(i ? &sample_history[i - 1] : NULL, point, delta);
            snapshot.entries = delta;
        }
        rc = as_deltas ? trace_write_snapshot_delta(w, &snapshot) : trace_write_snapshot(w, &snapshot);
    }
    rc = rc || trace_write_process(w, &p);
    if (w)
        rc |= trace_writer_finish(w, err, sizeof err);
    return rc ? -1 : 0;
}

/* Reads a whole file into memory (the caller frees). */
static inline unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    *size = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long length = ftell(f);
        rewind(f);
        data = length >= 0 ? malloc((size_t)length + 1) : NULL;
        if (data && fread(data, 1, (size_t)length, f) == (size_t)length)
            *size = (size_t)length;
    }
    fclose(f);
    return data;
}

/* A fresh scratch directory under TMPDIR; path gets "<dir>/name". */
static inline char *sample_path(char *dir_template, const char *name)
{
    char *path = NULL;
    if (!mkdtemp(dir_template) || asprintf(&path, "%s/%s", dir_template, name) < 0)
        return NULL;
    return path;
}

#endif

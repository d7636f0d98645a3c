/* test_trace_roundtrip.c - writer -> reader of every section type, exact values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <sys/stat.h>

#include "../../report/formats.h"
#include "../../report/trace_reader.h"
#include "test_trace_sample.h"

struct fixture {
    char dir[64];
    char *path;
    struct trace_model model;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[512];
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-rt.XXXXXX");
    f->path = sample_path(f->dir, "sample.trace");
    assert_non_null(f->path);
    assert_int_equal(write_sample_trace(f->path, 0), 0);
    if (trace_read_file(f->path, &f->model, err, sizeof err) != 0)
        fail_msg("%s", err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    trace_model_free(&f->model);
    unlink(f->path);
    rmdir(f->dir);
    free(f->path);
    free(f);
    return 0;
}

static void test_info_and_end(void **state)
{
    struct fixture *f = *state;
    const struct trace_model *m = &f->model;
    assert_true(m->complete);
    assert_false(m->incomplete);
    assert_int_equal(m->warning_count, 1);
    assert_true(m->has_info);
    assert_string_equal(m->info.memslope_version, "0.1.0");
    assert_true(m->info.start_unix_ns == 1700000000000000000ull);
    assert_int_equal(m->info.argc, 2);
    assert_string_equal(m->info.argv[0], "./bench");
    assert_string_equal(m->info.argv[1], "200");
    assert_int_equal(m->info.max_frames, 64);
    assert_int_equal(m->info.snapshots_limit, 200);
    assert_int_equal(m->info.interval_ns, 100000000);
    assert_int_equal(m->info.sample_rate, 0);
    assert_int_equal(m->info.leak_check, TRACE_LEAK_CHECK_END);
    assert_string_equal(m->warnings[0], "stacks were dropped");
}

static void test_modules_and_frames(void **state)
{
    const struct trace_model *m = &((struct fixture *)*state)->model;
    assert_int_equal(m->frame_count, 5);
    for (uint32_t i = 0; i < 5; i++) {
        const struct trace_model_frame *got = &m->frames[i];
        const struct trace_frame *want = &sample_frames[i];
        assert_string_equal(got->function, want->function);
        assert_string_equal(got->file, want->file);
        assert_int_equal(got->line, want->line);
        assert_true(got->address == want->address);
        assert_true(got->module_offset == want->module_offset);
        assert_int_equal(got->flags, want->flags);
        if (want->module_id == TRACE_NONE)
            assert_null(got->module);
        else
            assert_int_equal(got->module->module_id, want->module_id);
    }
    assert_string_equal(m->frames[1].module->path, "/path/bench");
    assert_string_equal(m->frames[1].module->build_id, "abcdef01");
    assert_string_equal(m->frames[0].module->path, "/lib/libc.so.6");
    assert_string_equal(m->frames[0].module->build_id, "");
}

static void check_process(const struct trace_model_process *got, const struct trace_process *want)
{
    assert_true(got->has_info);
    assert_int_equal(got->info.pid, want->pid);
    assert_int_equal(got->info.parent_process_id, want->parent_process_id);
    assert_string_equal(got->info.exe, want->exe);
    assert_int_equal(got->info.argc, want->argc);
    for (uint32_t i = 0; i < want->argc; i++)
        assert_string_equal(got->info.argv[i], want->argv[i]);
    assert_int_equal(got->info.start_ns, want->start_ns);
    assert_int_equal(got->info.end_ns, want->end_ns);
    assert_int_equal(got->info.flags, want->flags);
    assert_int_equal(got->info.exit_status, want->exit_status);
    assert_int_equal(got->info.exit_signal, want->exit_signal);
    assert_int_equal(got->info.allocations, want->allocations);
    assert_int_equal(got->info.frees, want->frees);
    assert_int_equal(got->info.allocated_bytes, want->allocated_bytes);
    assert_int_equal(got->info.peak_bytes, want->peak_bytes);
    assert_int_equal(got->info.peak_blocks, want->peak_blocks);
    assert_int_equal(got->info.peak_time_ns, want->peak_time_ns);
    assert_int_equal(got->info.live_bytes, want->live_bytes);
    assert_int_equal(got->info.live_blocks, want->live_blocks);
    assert_int_equal(got->info.stacks_dropped, want->stacks_dropped);
    assert_int_equal(got->info.slots_exhausted, want->slots_exhausted);
}

static void test_processes(void **state)
{
    const struct trace_model *m = &((struct fixture *)*state)->model;
    assert_int_equal(m->process_count, 2);
    struct trace_process shell = sample_process(0), bench = sample_process(1);
    check_process(trace_model_process(m, 0), &shell);
    check_process(trace_model_process(m, 1), &bench);
    assert_null(trace_model_process(m, 2));
    /* first-seen order: process 0 was named first */
    assert_int_equal(m->processes->process_id, 0);
    const struct trace_model_process *p = trace_model_process(m, 1);
    assert_int_equal(p->warning_count, 1);
    assert_string_equal(p->warnings[0], "process warning");
    /* the PYTHON section: process 1 ran CPython 3.11.2, process 0 nothing */
    assert_true(p->has_python);
    assert_int_equal(p->python.version, 0x030b02f0);
    assert_int_equal(p->python.allocator, TRACE_PYTHON_WRAPPED);
    assert_int_equal(p->python.flags, TRACE_PYTHON_FRAMES);
    assert_int_equal(p->python.unnamed_functions, 3);
    assert_false(trace_model_process(m, 0)->has_python);
}

static void test_stacks_and_sites(void **state)
{
    const struct trace_model_process *p = trace_model_process(&((struct fixture *)*state)->model, 1);
    for (int i = 0; i < 2; i++) {
        const struct trace_model_stack *s = trace_model_stack(p, sample_stacks[i].stack_id);
        assert_non_null(s);
        assert_int_equal(s->depth, 3);
        assert_memory_equal(s->frame_ids, sample_stacks[i].frame_ids, 3 * sizeof(uint32_t));
    }
    assert_null(trace_model_stack(p, 8));
    assert_int_equal(p->site_count, 2);
    for (int i = 0; i < 2; i++) {
        const struct trace_model_site *s = trace_model_site(p, sample_sites[i].stack_id);
        assert_non_null(s);
        assert_memory_equal(&s->site, &sample_sites[i], sizeof s->site);
    }
}

/* Stacks that share outer frames with the one before them, in two
 * sections (sharing never crosses one): each comes back whole, and the
 * sections hold only the frame ids not shared. A stack that claims more
 * than the one before it has fails the write. */
static void test_stacks_sharing_outer_frames(void **state)
{
    struct fixture *f = *state;
    /* whole, innermost first: c [1 0], b [0 3 2 1 0], a [4 3 2 1 0], e [4 4 4], d [2 1 0], g [3] */
    static const uint32_t c[] = {1, 0}, b_own[] = {0, 3, 2}, a_own[] = {4}, e[] = {4, 4, 4}, d[] = {2, 1, 0},
                          g_own[] = {3};
    static const uint32_t a_whole[] = {4, 3, 2, 1, 0}, b_whole[] = {0, 3, 2, 1, 0}, g_whole[] = {3, 1, 0};
    const struct trace_stack first[] = {{24, 0, NULL, 0}, {23, 2, c, 0},  {22, 5, b_own, 2},
                                        {20, 5, a_own, 4}, {21, 3, e, 0}};
    const struct trace_stack second[] = {{25, 3, d, 0}, {26, 3, g_own, 2}};
    const struct trace_stack whole[] = {{23, 2, c, 0}, {22, 5, b_whole, 0}, {20, 5, a_whole, 0},
                                        {21, 3, e, 0}, {25, 3, d, 0},      {26, 3, g_whole, 0}};
    char *path = NULL, err[512];
    assert_true(asprintf(&path, "%s/shared.trace", f->dir) > 0);
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    assert_non_null(w);
    uint32_t first_id = 0;
    struct trace_module bench = {0, "/path/bench", ""}, libc = {1, "/lib/libc.so.6", ""};
    assert_int_equal(trace_write_module(w, &bench), 0);
    assert_int_equal(trace_write_module(w, &libc), 0);
    assert_int_equal(trace_write_frames(w, sample_frames, 5, &first_id), 0);
    struct trace_process process = sample_process(1);
    assert_int_equal(trace_write_process(w, &process), 0);
    assert_int_equal(trace_write_stacks(w, 1, first, 5), 0);
    assert_int_equal(trace_write_stacks(w, 1, second, 2), 0);
    assert_int_equal(trace_writer_finish(w, err, sizeof err), 0);

    struct trace_model model;
    if (trace_read_file(path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct trace_model_process *p = trace_model_process(&model, 1);
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        const struct trace_model_stack *got = trace_model_stack(p, whole[i].stack_id);
        assert_non_null(got);
        assert_int_equal(got->depth, whole[i].depth);
        assert_memory_equal(got->frame_ids, whole[i].frame_ids, whole[i].depth * sizeof(uint32_t));
    }
    assert_non_null(trace_model_stack(p, 24));
    assert_int_equal(trace_model_stack(p, 24)->depth, 0);
    trace_model_free(&model);

    /* the first section's frame ids: only those listed */
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    unsigned char bytes[4096];
    size_t size = fread(bytes, 1, sizeof bytes, file);
    fclose(file);
    size_t at = 16, listed = 0, sections = 0;
    while (at + 16 <= size) {
        uint32_t type = (uint32_t)bytes[at] | (uint32_t)bytes[at + 1] << 8;
        uint64_t length = bytes[at + 8] | (uint64_t)bytes[at + 9] << 8 | (uint64_t)bytes[at + 10] << 16;
        if (type == TRACE_SEC_STACKS_SHARED && sections++ == 0)
            listed = (length - 8 - 5 * 12) / 4;
        at += 16 + length + 4;
    }
    assert_int_equal(sections, 2);
    assert_int_equal(listed, 0 + 2 + 3 + 1 + 3);
    unlink(path);

    /* a first stack that shares, or one that shares more than the one before has */
    const struct trace_stack bad_first[] = {{30, 2, c, 1}};
    const struct trace_stack bad_next[] = {{31, 2, c, 0}, {32, 5, a_own, 4}};
    for (int bad = 0; bad < 2; bad++) {
        w = trace_writer_create(path, err, sizeof err);
        assert_non_null(w);
        assert_int_equal(bad ? trace_write_stacks(w, 1, bad_next, 2) : trace_write_stacks(w, 1, bad_first, 1), -1);
        assert_non_null(strstr(trace_writer_error(w), bad ? "stack 32 shares 4 frames of 5 with the one before it, which has 2"
                                                          : "stack 30 shares 1 frames of 2"));
        trace_writer_finish(w, err, sizeof err);
        unlink(path);
    }
    free(path);
}

/* SITES_PACKED keeps every value: the largest, zero, the edges of one
 * varint byte, stack ids that go down as well as up. */
static void test_sites_packed_extremes(void **state)
{
    struct fixture *f = *state;
    const struct trace_site sites[] = {
        {9, UINT64_MAX, 0, 127, 128, 16383, 16384, UINT64_MAX - 1},
        {3, 1, 2, 3, 4, 5, 6, 7},
        {UINT32_MAX, 0, 0, 0, 0, 0, 0, 0},
        {0, (uint64_t)1 << 63, 1, 0, 0, 0, 0, 0},
    };
    char *path = NULL, err[512];
    assert_true(asprintf(&path, "%s/sites.trace", f->dir) > 0);
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    assert_non_null(w);
    struct trace_process process = sample_process(1);
    assert_int_equal(trace_write_process(w, &process), 0);
    assert_int_equal(trace_write_sites(w, 1, sites, 4), 0);
    assert_int_equal(trace_writer_finish(w, err, sizeof err), 0);
    struct trace_model model;
    if (trace_read_file(path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct trace_model_process *p = trace_model_process(&model, 1);
    assert_int_equal(p->site_count, 4);
    for (int i = 0; i < 4; i++) {
        const struct trace_model_site *got = trace_model_site(p, sites[i].stack_id);
        assert_non_null(got);
        const struct trace_site *a = &got->site, *b = &sites[i];
        uint64_t got_values[] = {a->allocations, a->allocated_bytes, a->frees, a->live_bytes,
                                 a->live_blocks, a->peak_live_bytes, a->max_live_bytes};
        uint64_t want_values[] = {b->allocations, b->allocated_bytes, b->frees, b->live_bytes,
                                  b->live_blocks, b->peak_live_bytes, b->max_live_bytes};
        assert_memory_equal(got_values, want_values, sizeof want_values);
    }
    trace_model_free(&model);
    unlink(path);
    free(path);
}

static void test_snapshot_timeline_case(void **state)
{
    const struct trace_model_process *p = trace_model_process(&((struct fixture *)*state)->model, 1);
    assert_int_equal(p->snapshot_count, 1);
    const struct trace_snapshot *s = &p->snapshots[0];
    assert_int_equal(s->process_id, 1);
    assert_int_equal(s->kind, TRACE_SNAP_ITERATION);
    assert_int_equal(s->case_id, TRACE_NONE);
    assert_int_equal(s->iteration, 1);
    assert_int_equal(s->time_ns, 1500);
    assert_int_equal(s->live_bytes, 64);
    assert_int_equal(s->live_blocks, 3);
    assert_int_equal(s->count, 2);
    assert_memory_equal(s->entries, sample_entries, sizeof sample_entries);
    assert_int_equal(p->timeline_count, 2);
    assert_int_equal(p->timeline_interval_ns, 1000);
    assert_memory_equal(p->timeline, sample_points, sizeof sample_points);
    assert_int_equal(p->case_count, 1);
    assert_string_equal(p->cases[0].name, "bench");
    assert_int_equal(p->cases[0].case_id, 0);
    assert_int_equal(p->cases[0].begin_ns, 500);
    assert_int_equal(p->cases[0].end_ns, 9000);
    assert_int_equal(p->cases[0].iterations, 0);
    assert_int_equal(p->cases[0].flags, TRACE_CASE_IMPLICIT | TRACE_CASE_ENDED);
}

static void test_leaks(void **state)
{
    const struct trace_model_process *p = trace_model_process(&((struct fixture *)*state)->model, 1);
    assert_int_equal(p->leak_count, 1);
    const struct trace_leaks *l = &p->leaks[0];
    assert_int_equal(l->case_id, TRACE_NONE);
    assert_int_equal(l->when, TRACE_SNAP_EXIT);
    assert_int_equal(l->time_ns, 8900);
    uint64_t bytes[] = {432, 48, 0, 16}, blocks[] = {9, 1, 0, 1};
    assert_memory_equal(l->bytes, bytes, sizeof bytes);
    assert_memory_equal(l->blocks, blocks, sizeof blocks);
    assert_int_equal(l->count, 3);
    assert_memory_equal(l->records, sample_records, sizeof sample_records);
}

static void test_case_sites(void **state)
{
    struct fixture *f = *state;
    char err[512];
    char *path = NULL;
    assert_true(asprintf(&path, "%s/cases.trace", f->dir) > 0);
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    assert_non_null(w);
    struct trace_case_site sites[] = {{7, 60, 12000, 50}, {9, 1, 48, 0}};
    struct trace_case_sites record = {1, 3, 2, sites};
    /* A later record (the next checkpoint, or the image's end) holds the
     * counters that changed: site 7's; site 9 keeps the earlier one's. */
    struct trace_case_site later_sites[] = {{7, 100, 20000, 100}};
    struct trace_case_sites later = {1, 3, 1, later_sites};
    struct trace_process p = sample_process(1);
    assert_int_equal(trace_write_case_sites(w, &record), 0);
    assert_int_equal(trace_write_case_sites(w, &later), 0);
    assert_int_equal(trace_write_process(w, &p), 0);
    assert_int_equal(trace_writer_finish(w, err, sizeof err), 0);
    struct trace_model model;
    if (trace_read_file(path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct trace_model_process *process = trace_model_process(&model, 1);
    assert_non_null(process);
    assert_int_equal(process->case_sites_count, 2);
    const struct trace_case_site *got = trace_model_case_site(process, 3, 7);
    assert_non_null(got);
    assert_int_equal(got->allocations, 100);
    assert_int_equal(got->allocated_bytes, 20000);
    assert_int_equal(got->frees, 100);
    got = trace_model_case_site(process, 3, 9);
    assert_non_null(got);
    assert_int_equal(got->allocated_bytes, 48);
    assert_null(trace_model_case_site(process, 3, 8));
    assert_null(trace_model_case_site(process, 4, 7));
    trace_model_free(&model);
    unlink(path);
    free(path);
}

static void test_buffer_reader_agrees(void **state)
{
    struct fixture *f = *state;
    size_t size;
    unsigned char *data = slurp(f->path, &size);
    struct trace_model model;
    char err[256];
    assert_int_equal(trace_read_buffer(data, size, "buffer", &model, err, sizeof err), 0);
    assert_int_equal(model.section_count, f->model.section_count);
    assert_int_equal(model.string_count, f->model.string_count);
    assert_true(model.complete);
    trace_model_free(&model);
    free(data);
}

static void test_strings_interned_once(void **state)
{
    /* "/path/bench" is used by MODULE and PROCESS; "./bench" by INFO and PROCESS. */
    const struct trace_model *m = &((struct fixture *)*state)->model;
    int bench_paths = 0;
    for (uint32_t i = 0; i < m->string_count; i++)
        bench_paths += strcmp(m->strings[i], "/path/bench") == 0;
    assert_int_equal(bench_paths, 1);
    assert_string_equal(m->strings[0], "");
}

static void test_file_mode_and_no_temp_left(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    mode_t mask = umask(0);
    umask(mask);
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    char command[200];
    snprintf(command, sizeof command, "test $(ls -A %s | wc -l) -eq 1", f->dir);
    assert_int_equal(system(command), 0);
}

static void test_writer_errors_name_the_file(void **state)
{
    (void)state;
    char err[512];
    assert_null(trace_writer_create("/nonexistent-dir/x.trace", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent-dir/x.trace"));
    assert_non_null(strstr(err, strerror(ENOENT)));
}

static void test_abandoned_trace_is_incomplete(void **state)
{
    struct fixture *f = *state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/abandoned.trace", f->dir);
    assert_int_equal(write_sample_trace(path, 1), 0);
    struct trace_model model;
    assert_int_equal(trace_read_file(path, &model, err, sizeof err), 0);
    assert_true(model.incomplete);
    assert_false(model.complete);
    assert_int_equal(model.section_count, f->model.section_count);
    trace_model_free(&model);
    unlink(path);
}

/* A snapshot's entries are exactly these (stack, bytes, blocks) triples. */
static void expect_entries(const struct trace_snapshot *snapshot, const uint64_t (*want)[3], uint32_t count)
{
    assert_int_equal(snapshot->count, count);
    for (uint32_t i = 0; i < count; i++) {
        assert_int_equal(snapshot->entries[i].stack_id, want[i][0]);
        assert_int_equal(snapshot->entries[i].live_bytes, want[i][1]);
        assert_int_equal(snapshot->entries[i].live_blocks, want[i][2]);
    }
}

static int write_delta(struct trace_writer *w, uint32_t process_id, uint64_t iteration,
                       const struct trace_snapshot_entry *entries, uint32_t count)
{
    struct trace_snapshot delta = {process_id, TRACE_SNAP_ITERATION, TRACE_NONE, iteration, 100 * iteration, 0, 0,
                                   count, entries};
    return trace_write_snapshot_delta(w, &delta);
}

/* The reader rebuilds each SNAPSHOT_DELTA into the full entries a SNAPSHOT
 * holds, sorted by stack: from the same process's previous snapshot (a
 * full one too, whatever its order), a 0-block entry removing the site. */
static void test_snapshot_deltas_rebuilt(void **state)
{
    struct fixture *f = *state;
    char err[512], *path = NULL;
    assert_true(asprintf(&path, "%s/deltas.trace", f->dir) > 0);
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    assert_non_null(w);
    const struct trace_snapshot_entry a[] = {{7, 48, 1}, {9, 16, 2}}, p2[] = {{7, 1, 1}};
    const struct trace_snapshot_entry b[] = {{9, 0, 0}, {11, 32, 1}};
    const struct trace_snapshot_entry full[] = {{11, 8, 1}, {7, 24, 1}, {5, 1, 1}};
    const struct trace_snapshot_entry d[] = {{5, 0, 0}, {7, 96, 2}, {13, 0, 0}};
    struct trace_snapshot full_snapshot = {1, TRACE_SNAP_ITERATION, TRACE_NONE, 4, 400, 0, 0, 3, full};
    assert_int_equal(write_delta(w, 1, 1, a, 2), 0);
    assert_int_equal(write_delta(w, 2, 1, p2, 1), 0);
    assert_int_equal(write_delta(w, 1, 2, b, 2), 0);
    assert_int_equal(write_delta(w, 1, 3, NULL, 0), 0);
    assert_int_equal(trace_write_snapshot(w, &full_snapshot), 0);
    assert_int_equal(write_delta(w, 1, 5, d, 3), 0);
    assert_int_equal(write_delta(w, 2, 2, NULL, 0), 0);
    assert_int_equal(write_delta(w, 3, 1, NULL, 0), 0); /* nothing live yet */
    assert_int_equal(trace_writer_finish(w, err, sizeof err), 0);
    struct trace_model model;
    if (trace_read_file(path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct trace_model_process *one = trace_model_process(&model, 1), *two = trace_model_process(&model, 2);
    assert_int_equal(one->snapshot_count, 5);
    expect_entries(&one->snapshots[0], (const uint64_t[][3]){{7, 48, 1}, {9, 16, 2}}, 2);
    expect_entries(&one->snapshots[1], (const uint64_t[][3]){{7, 48, 1}, {11, 32, 1}}, 2);
    expect_entries(&one->snapshots[2], (const uint64_t[][3]){{7, 48, 1}, {11, 32, 1}}, 2);
    assert_ptr_equal(one->snapshots[2].entries, one->snapshots[1].entries); /* unchanged: shared */
    expect_entries(&one->snapshots[3], (const uint64_t[][3]){{11, 8, 1}, {7, 24, 1}, {5, 1, 1}}, 3);
    expect_entries(&one->snapshots[4], (const uint64_t[][3]){{7, 96, 2}, {11, 8, 1}}, 2);
    assert_int_equal(one->snapshots[4].iteration, 5);
    assert_int_equal(one->snapshots[4].time_ns, 500);
    assert_int_equal(two->snapshot_count, 2);
    expect_entries(&two->snapshots[0], (const uint64_t[][3]){{7, 1, 1}}, 1);
    expect_entries(&two->snapshots[1], (const uint64_t[][3]){{7, 1, 1}}, 1);
    /* An empty snapshot still has entries to point at (the report copies them). */
    assert_int_equal(trace_model_process(&model, 3)->snapshots[0].count, 0);
    assert_non_null(trace_model_process(&model, 3)->snapshots[0].entries);
    trace_model_free(&model);
    /* The bound on rebuilt entries: 2 + 2 + 2 + 1 are rebuilt (the shared one is not counted). */
    size_t size;
    unsigned char *data = slurp(path, &size);
    assert_int_equal(trace_read_buffer_bounded(data, size, "d.trace", 7, &model, err, sizeof err), 0);
    trace_model_free(&model);
    assert_int_equal(trace_read_buffer_bounded(data, size, "d.trace", 6, &model, err, sizeof err), -1);
    assert_non_null(strstr(err, "d.trace: corrupt trace: SNAPSHOT_DELTA section at offset "));
    assert_non_null(strstr(err, "rebuild more than 6 snapshot entries in all"));
    free(data);
    unlink(path);
    free(path);
}

/* Renders a trace's report in every format and metric into one string. */
static char *render_all(const char *path)
{
    struct trace_model model;
    char err[512], *text = NULL;
    size_t length = 0;
    if (trace_read_file(path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    FILE *out = open_memstream(&text, &length);
    for (int metric = REPORT_METRIC_GROWTH; metric <= REPORT_METRIC_TEMPORARY; metric++) {
        struct report report;
        if (report_build(&report, &model, "t.trace", (enum report_metric)metric, NULL, err, sizeof err) != 0)
            fail_msg("%s", err);
        report_write_text(&report, out);
        report_write_json(&report, out);
        /* A format with nothing to show for a metric says so: that goes in too. */
        if (report_write_speedscope(&report, out, err, sizeof err) != 0)
            fprintf(out, "speedscope: %s\n", err);
        if (report_write_collapsed(&report, (enum report_metric)metric, out, err, sizeof err) != 0)
            fprintf(out, "collapsed: %s\n", err);
        if (report_write_html(&report, out, err, sizeof err) != 0)
            fprintf(out, "html: %s\n", err);
        if (report_write_pprof(&report, out, err, sizeof err) != 0)
            fprintf(out, "pprof: %s\n", err);
        report_free(&report);
    }
    fclose(out);
    trace_model_free(&model);
    return text;
}

/* The same snapshots as full SNAPSHOT sections and as deltas: the same
 * model (up to the order of entries) and the same report, byte for byte. */
static void test_deltas_report_as_full_snapshots(void **state)
{
    struct fixture *f = *state;
    char full_path[128], delta_path[128], err[512];
    snprintf(full_path, sizeof full_path, "%s/full.trace", f->dir);
    snprintf(delta_path, sizeof delta_path, "%s/delta.trace", f->dir);
    assert_int_equal(write_history_trace(full_path, 0), 0);
    assert_int_equal(write_history_trace(delta_path, 1), 0);
    struct trace_model model;
    if (trace_read_file(delta_path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct trace_model_process *process = trace_model_process(&model, 1);
    assert_int_equal(process->snapshot_count, SAMPLE_HISTORY_POINTS);
    for (int i = 0; i < SAMPLE_HISTORY_POINTS; i++) {
        const struct trace_snapshot *got = &process->snapshots[i];
        assert_int_equal(got->count, sample_history[i].count);
        for (uint32_t e = 0; e < got->count; e++) {
            assert_int_equal(got->entries[e].live_bytes, history_figure(&sample_history[i], got->entries[e].stack_id, 0));
            assert_int_equal(got->entries[e].live_blocks, history_figure(&sample_history[i], got->entries[e].stack_id, 1));
        }
    }
    trace_model_free(&model);
    char *full = render_all(full_path), *delta = render_all(delta_path);
    assert_non_null(strstr(full, "\"growth_bytes_per_iteration\": 48.0,\n          \"setup_bytes\": 0,"));
    assert_non_null(strstr(full, "\"growth_bytes_per_iteration\": 0.0,\n          \"setup_bytes\": 16,"));
    assert_string_equal(delta, full);
    free(full);
    free(delta);
    unlink(full_path);
    unlink(delta_path);
}

/* With MEMSLOPE_FUZZ_CORPUS=DIR, writes the traces of these tests there as
 * seeds for tests/fuzz/fuzz_trace_reader (tests/fuzz/corpus/trace_reader/). */
static void test_write_fuzz_seeds(void **state)
{
    (void)state;
    const char *dir = getenv("MEMSLOPE_FUZZ_CORPUS");
    if (!dir)
        skip();
    char path[512];
    snprintf(path, sizeof path, "%s/sample", dir);
    assert_int_equal(write_sample_trace(path, 0), 0);
    snprintf(path, sizeof path, "%s/sample-incomplete", dir);
    assert_int_equal(write_sample_trace(path, 1), 0);
    snprintf(path, sizeof path, "%s/cases", dir);
    assert_int_equal(write_cases_trace(path), 0);
    snprintf(path, sizeof path, "%s/history-deltas", dir);
    assert_int_equal(write_history_trace(path, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_info_and_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modules_and_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stacks_and_sites, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stacks_sharing_outer_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sites_packed_extremes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_timeline_case, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_case_sites, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_deltas_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deltas_report_as_full_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffer_reader_agrees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings_interned_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_mode_and_no_temp_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_errors_name_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abandoned_trace_is_incomplete, setup, teardown),
        cmocka_unit_test(test_write_fuzz_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_diff.c - `memslope diff`'s comparison (report/diff.h) on two small
 * traces of the same program rebuilt: a site matched across other lines and
 * addresses by its function stack, a site only in the new trace, an
 * unchanged site left unchanged, largest change first, the one case of two
 * traces without markers matched whatever their commands' names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../report/diff.h"
#include "test_trace_sample.h"

/* Old: make (x.c:11) <- open_user (x.c:30) <- main (x.c:60), and a temporary
 * in render (x.c:80) <- main (x.c:61). New (edited, rebuilt): the same
 * functions at other lines and addresses, and a new site in fresh. */
static const struct trace_frame old_frames[] = {
    {1, "malloc", "", 0, 0x7f0000001000, 0x1000, TRACE_FRAME_ALLOCATOR},
    {0, "make", "x.c", 11, 0x401000, 0x1000, 0},
    {0, "open_user", "x.c", 30, 0x401100, 0x1100, 0},
    {0, "main", "x.c", 60, 0x401300, 0x1300, 0},
    {0, "render", "x.c", 80, 0x401400, 0x1400, 0},
    {0, "main", "x.c", 61, 0x401310, 0x1310, 0},
};
static const struct trace_frame new_frames[] = {
    {1, "malloc", "", 0, 0x7f0000001000, 0x1000, TRACE_FRAME_ALLOCATOR},
    {0, "make", "x.c", 12, 0x402000, 0x2000, 0},
    {0, "open_user", "x.c", 33, 0x402100, 0x2100, 0},
    {0, "main", "x.c", 64, 0x402300, 0x2300, 0},
    {0, "render", "x.c", 84, 0x402400, 0x2400, 0},
    {0, "main", "x.c", 65, 0x402310, 0x2310, 0},
    {0, "fresh", "x.c", 90, 0x402500, 0x2500, 0},
    {0, "main", "x.c", 66, 0x402320, 0x2320, 0},
};
static const uint32_t make_stack[] = {0, 1, 2, 3}, render_stack[] = {0, 4, 5}, fresh_stack[] = {0, 6, 7};
static const struct trace_stack old_stacks[] = {{1, 4, make_stack, 0}, {2, 3, render_stack, 0}};
static const struct trace_stack new_stacks[] = {{7, 4, make_stack, 0}, {8, 3, render_stack, 0}, {9, 3, fresh_stack, 0}};
/* stack, allocations, allocated bytes, frees, live bytes, live blocks, peak live, max live */
static const struct trace_site old_sites[] = {{1, 10, 480, 0, 480, 10, 480, 480}, {2, 5, 1000, 5, 0, 0, 200, 200}};
static const struct trace_site new_sites[] = {
    {7, 20, 960, 0, 960, 20, 960, 960}, {8, 5, 1000, 5, 0, 0, 200, 200}, {9, 1, 4000, 1, 0, 0, 0, 4000}};

static const char *const old_argv[] = {"./bench"};
static const char *const new_argv[] = {"./bench-rebuilt"};

static int write_trace(const char *path, int is_new)
{
    char err[256];
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    struct trace_module bench = {0, is_new ? "/new/build/bench" : "/old/build/bench", ""}, libc = {1, "/lib/libc.so.6", ""};
    struct trace_process p = sample_process(1);
    p.argc = 1;
    p.argv = is_new ? new_argv : old_argv;
    struct trace_loss_record record = {is_new ? 7 : 1, TRACE_LEAK_DEFINITE, is_new ? 960 : 480, is_new ? 20 : 10, 0};
    struct trace_leaks leaks = {1, TRACE_NONE, TRACE_SNAP_EXIT, 0, 8900, {record.bytes, 0, 0, 0},
                                {record.blocks, 0, 0, 0}, 1, &record};
    uint32_t first;
    int rc = !w || trace_write_module(w, &bench) || trace_write_module(w, &libc) ||
             trace_write_frames(w, is_new ? new_frames : old_frames, is_new ? 8 : 6, &first) ||
             trace_write_stacks(w, 1, is_new ? new_stacks : old_stacks, is_new ? 3 : 2) ||
             trace_write_sites(w, 1, is_new ? new_sites : old_sites, is_new ? 3 : 2) || trace_write_leaks(w, &leaks) ||
             trace_write_process(w, &p);
    if (w)
        rc |= trace_writer_finish(w, err, sizeof err);
    return rc ? -1 : 0;
}

struct fixture {
    char dir[64];
    char *paths[2];
    struct trace_model models[2];
    struct report reports[2];
    struct report_diff diff;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[256];
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-diff.XXXXXX");
    f->paths[0] = sample_path(f->dir, "old.trace");
    assert_non_null(f->paths[0]);
    assert_true(asprintf(&f->paths[1], "%s/new.trace", f->dir) > 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(write_trace(f->paths[i], i), 0);
        assert_int_equal(trace_read_file(f->paths[i], &f->models[i], err, sizeof err), 0);
        assert_int_equal(report_build(&f->reports[i], &f->models[i], f->paths[i], REPORT_METRIC_GROWTH, NULL, err,
                                      sizeof err), 0);
    }
    assert_int_equal(report_diff_build(&f->diff, &f->reports[0], &f->reports[1], NULL, err, sizeof err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char command[200];
    report_diff_free(&f->diff);
    for (int i = 0; i < 2; i++) {
        report_free(&f->reports[i]);
        trace_model_free(&f->models[i]);
        free(f->paths[i]);
    }
    snprintf(command, sizeof command, "rm -rf '%s'", f->dir);
    assert_int_equal(system(command), 0);
    free(f);
    return 0;
}

/* The whole-process cases of ./bench and ./bench-rebuilt are one case. */
static void test_one_case(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(f->diff.case_count, 1);
    const struct diff_case *c = &f->diff.cases[0];
    assert_non_null(c->old_case);
    assert_non_null(c->new_case);
    assert_int_equal(c->old.leaked_bytes, 480);
    assert_int_equal(c->new.leaked_bytes, 960);
}

static void test_sites_by_function_stack(void **state)
{
    struct fixture *f = *state;
    const struct diff_case *c = &f->diff.cases[0];
    assert_int_equal(c->site_count, 3);
    assert_int_equal(c->changed_count, 2);
    /* fresh: 4,000 bytes allocated, new; then make: +480 leaked and allocated. */
    const struct diff_site *fresh = &c->sites[0], *make = &c->sites[1], *render = &c->sites[2];
    assert_false(fresh->old.present);
    assert_true(fresh->new.present);
    assert_int_equal(fresh->new.allocated_bytes, 4000);
    assert_string_equal(fresh->key, "fresh [bench]\nmain [bench]\n");
    assert_string_equal(make->key, "make [bench]\nopen_user [bench]\nmain [bench]\n");
    assert_true(make->old.present && make->new.present && make->changed);
    assert_int_equal(make->old.leaked_bytes, 480);
    assert_int_equal(make->new.leaked_bytes, 960);
    assert_int_equal(make->old.allocations, 10);
    assert_int_equal(make->new.allocations, 20);
    assert_true(make->change == 480.0);
    assert_string_equal(make->label, "make (x.c:12)");
    /* render: the same figures, other lines: unchanged, last. */
    assert_string_equal(render->key, "render [bench]\nmain [bench]\n");
    assert_false(render->changed);
}

static void test_case_filter(void **state)
{
    struct fixture *f = *state;
    struct report_diff diff;
    char err[256];
    assert_int_equal(report_diff_build(&diff, &f->reports[0], &f->reports[1], "nosuch", err, sizeof err), -1);
    assert_non_null(strstr(err, "no case named 'nosuch'"));
    assert_int_equal(report_diff_build(&diff, &f->reports[0], &f->reports[1], "bench-rebuilt", err, sizeof err), 0);
    assert_int_equal(diff.case_count, 1);
    report_diff_free(&diff);
}

/* A trace against itself: nothing changed. */
static void test_nothing_changed(void **state)
{
    struct fixture *f = *state;
    struct report_diff diff;
    char err[256];
    assert_int_equal(report_diff_build(&diff, &f->reports[1], &f->reports[1], NULL, err, sizeof err), 0);
    assert_int_equal(diff.cases[0].changed_count, 0);
    assert_int_equal(diff.cases[0].site_count, 3);
    report_diff_free(&diff);
}

int main(void)
{
    (void)write_sample_trace; /* the shared sample trace is not used here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_case, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sites_by_function_stack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_case_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_changed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_site_label.c - names that tell sites apart (report/site_label.h), on
 * a model with one allocating line reached from several callers: the first
 * differing caller, a deeper one after "...", two calls on one line told
 * apart by their address, one line through different library calls told
 * apart by the callees, callers by function alone, an unknown stack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../report/site_label.h"
#include "test_trace_sample.h"

/* Frames: 0 malloc (allocator), 1 make (x.c:11), 2 open_user (x.c:30),
 * 3 open_admin (x.c:41), 4 main (x.c:60), 5 main (x.c:61), 6 make (x.c:11)
 * at another address (a second call on the line). */
static const struct trace_frame label_frames[] = {
    {1, "malloc", "", 0, 0x7f0000001000, 0x1000, TRACE_FRAME_ALLOCATOR},
    {0, "make", "src/x.c", 11, 0x401000, 0x1000, 0},
    {0, "open_user", "src/x.c", 30, 0x401100, 0x1100, 0},
    {0, "open_admin", "src/x.c", 41, 0x401200, 0x1200, 0},
    {0, "main", "src/x.c", 60, 0x401300, 0x1300, 0},
    {0, "main", "src/x.c", 61, 0x401310, 0x1310, 0},
    {0, "make", "src/x.c", 11, 0x401010, 0x1010, 0},
    {1, "strdup", "", 0, 0x7f0000002000, 0x2000, 0},
    {1, "g_strdup", "", 0, 0x7f0000003000, 0x3000, 0},
};
static const uint32_t stack_user[] = {0, 1, 2, 4};      /* A */
static const uint32_t stack_admin[] = {0, 1, 3, 4};     /* B */
static const uint32_t stack_user_61[] = {0, 1, 2, 5};   /* C */
static const uint32_t stack_second_call[] = {0, 6, 2, 4}; /* D */
static const uint32_t stack_through_strdup[] = {0, 7, 1, 2, 4};      /* E */
static const uint32_t stack_through_g_strdup[] = {0, 8, 7, 1, 2, 4}; /* F */
static const struct trace_stack label_stacks[] = {
    {1, 4, stack_user, 0},           {2, 4, stack_admin, 0},
    {3, 4, stack_user_61, 0},        {4, 4, stack_second_call, 0},
    {5, 5, stack_through_strdup, 0}, {6, 6, stack_through_g_strdup, 0}};

struct fixture {
    char dir[64];
    char *trace;
    struct trace_model model;
    const struct trace_model_process *process;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[256];
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-labels.XXXXXX");
    f->trace = sample_path(f->dir, "labels.trace");
    assert_non_null(f->trace);
    struct trace_writer *w = trace_writer_create(f->trace, err, sizeof err);
    struct trace_module bench = {0, "/path/bench", ""}, libc = {1, "/lib/libc.so.6", ""};
    struct trace_process p = sample_process(1);
    uint32_t first;
    assert_non_null(w);
    assert_int_equal(trace_write_module(w, &bench) || trace_write_module(w, &libc) ||
                         trace_write_frames(w, label_frames, 9, &first) || trace_write_stacks(w, 1, label_stacks, 6) ||
                         trace_write_process(w, &p) || trace_writer_finish(w, err, sizeof err),
                     0);
    assert_int_equal(trace_read_file(f->trace, &f->model, err, sizeof err), 0);
    f->process = trace_model_process(&f->model, 1);
    assert_non_null(f->process);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char command[200];
    trace_model_free(&f->model);
    snprintf(command, sizeof command, "rm -rf '%s'", f->dir);
    assert_int_equal(system(command), 0);
    free(f->trace);
    free(f);
    return 0;
}

/* Labels of the stacks with these ids, checked against expected. */
static void expect_labels(struct fixture *f, int by_function, const uint32_t *ids, size_t count,
                          const char *const *expected)
{
    const struct trace_model_stack *stacks[8];
    char *labels[8];
    for (size_t i = 0; i < count; i++)
        stacks[i] = ids[i] ? trace_model_stack(f->process, ids[i]) : NULL;
    int rc = by_function ? site_labels_build_by_function(&f->model, stacks, count, labels)
                         : site_labels_build(&f->model, stacks, count, labels);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < count; i++)
        assert_string_equal(labels[i], expected[i]);
    site_labels_free(labels, count);
}

static void test_alone_by_user_frame(void **state)
{
    static const uint32_t ids[] = {1};
    static const char *const expected[] = {"make (x.c:11)"};
    expect_labels(*state, 0, ids, 1, expected);
}

static void test_first_differing_caller(void **state)
{
    static const uint32_t ids[] = {1, 2};
    static const char *const expected[] = {"make (x.c:11) <- open_user (x.c:30)", "make (x.c:11) <- open_admin (x.c:41)"};
    expect_labels(*state, 0, ids, 2, expected);
}

static void test_deeper_difference(void **state)
{
    static const uint32_t ids[] = {1, 3};
    static const char *const expected[] = {"make (x.c:11) <- ... <- main (x.c:60)", "make (x.c:11) <- ... <- main (x.c:61)"};
    expect_labels(*state, 0, ids, 2, expected);
}

/* A differs from B at the caller and from C two levels up: both shown. */
static void test_every_difference_shown(void **state)
{
    static const uint32_t ids[] = {1, 2, 3};
    static const char *const expected[] = {"make (x.c:11) <- open_user (x.c:30) <- main (x.c:60)",
                                           "make (x.c:11) <- open_admin (x.c:41)",
                                           "make (x.c:11) <- open_user (x.c:30) <- main (x.c:61)"};
    expect_labels(*state, 0, ids, 3, expected);
}

static void test_two_calls_on_one_line(void **state)
{
    static const uint32_t ids[] = {1, 4};
    static const char *const expected[] = {"make (x.c:11) [call at bench+0x1000]", "make (x.c:11) [call at bench+0x1010]"};
    expect_labels(*state, 0, ids, 2, expected);
}

/* The same line and callers, through different library calls (strdup,
 * strdup into g_strdup) to the allocator: told apart by the callees where
 * they first differ, after '->'. */
static void test_callees_where_callers_agree(void **state)
{
    static const uint32_t ids[] = {1, 5, 6};
    static const char *const expected[] = {"make (x.c:11)", "make (x.c:11) -> strdup",
                                           "make (x.c:11) -> strdup -> g_strdup"};
    expect_labels(*state, 0, ids, 3, expected);
    static const uint32_t deeper[] = {5, 6};
    static const char *const deeper_expected[] = {"make (x.c:11)", "make (x.c:11) -> ... -> g_strdup"};
    expect_labels(*state, 0, deeper, 2, deeper_expected);
    /* with callers shown too, the callees go right after the line */
    static const uint32_t with_callers[] = {1, 2, 5};
    static const char *const with_callers_expected[] = {"make (x.c:11) <- open_user (x.c:30)",
                                                        "make (x.c:11) <- open_admin (x.c:41)",
                                                        "make (x.c:11) -> strdup <- open_user (x.c:30)"};
    expect_labels(*state, 0, with_callers, 3, with_callers_expected);
}

static void test_callers_by_function(void **state)
{
    static const uint32_t ids[] = {1, 2, 0};
    static const char *const expected[] = {"make (x.c:11) <- open_user", "make (x.c:11) <- open_admin",
                                           "[unknown stack]"};
    expect_labels(*state, 1, ids, 3, expected);
}

int main(void)
{
    (void)write_sample_trace; /* the shared sample trace is not used here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alone_by_user_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_differing_caller, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deeper_difference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_difference_shown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_calls_on_one_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callees_where_callers_agree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callers_by_function, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_report_cli.c - `memslope report` on the sample trace: the JSON parsed
 * back by python3 (tests/unit/check_report_cli.py) with exact values, the
 * text report, the selection of cases and metrics, and the exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../common/units.h"
#include "../../report/report_model.h"
#include "../../cli/commands.h"
#include "test_trace_sample.h"

struct fixture {
    char dir[64];
    char *trace;
    char out[128];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-report.XXXXXX");
    f->trace = sample_path(f->dir, "sample.trace");
    assert_non_null(f->trace);
    assert_int_equal(write_sample_trace(f->trace, 0), 0);
    snprintf(f->out, sizeof f->out, "%s/report.out", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char command[200];
    snprintf(command, sizeof command, "rm -rf '%s'", f->dir);
    assert_int_equal(system(command), 0);
    free(f->trace);
    free(f);
    return 0;
}

static int run_report(int argc, const char **argv)
{
    return cmd_report(argc, (char **)argv);
}

/* Runs the function CHECK of tests/unit/check_report_cli.py on the JSON report. */
static void check_json(const struct fixture *f, const char *check)
{
    char command[400];
    snprintf(command, sizeof command, "python3 tests/unit/check_report_cli.py %s '%s'", check, f->out);
    assert_int_equal(system(command), 0);
}

static void test_json_exact_values(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"report", f->trace, "--format", "json", "-o", f->out};
    assert_int_equal(run_report(6, argv), 0);
    check_json(f, "sample");
}

static void test_metric_allocated_order(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"report", "--metric=allocated", "--format=json", "--output", f->out, f->trace};
    assert_int_equal(run_report(6, argv), 0);
    check_json(f, "metric_allocated_order");
}

static char *read_text(const char *path)
{
    size_t size;
    char *text = (char *)slurp(path, &size);
    assert_non_null(text);
    text[size] = '\0';
    return text;
}

static void expect_line(const char *text, const char *line)
{
    if (!strstr(text, line))
        fail_msg("missing '%s' in:\n%s", line, text);
}

/* The text report of the trace at path (free it). */
static char *text_report_of(const struct fixture *f, const char *path)
{
    const char *argv[] = {"report", path, "-o", f->out};
    assert_int_equal(run_report(4, argv), 0);
    return read_text(f->out);
}

static void test_text_report(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"report", f->trace, "-o", f->out};
    assert_int_equal(run_report(4, argv), 0);
    char *text = read_text(f->out);
    expect_line(text, "./bench 200: exited 3; 1,000 allocs, 990 frees; 46.9 KiB allocated, peak 4.0 KiB, "
                      "480 B live at exit\n");
    expect_line(text, "432 bytes in 9 blocks are definitely lost in loss record 1 of 2\n"
                      "    at leaky_site (leak.c:6)\n    by main (leak.c:12)\n");
    expect_line(text, "48 bytes in 1 blocks are indirectly lost in loss record 2 of 2\n");
    expect_line(text, "LEAK SUMMARY:\n   definitely lost: 432 bytes in 9 blocks\n"
                      "   indirectly lost: 48 bytes in 1 blocks\n     possibly lost: 0 bytes in 0 blocks\n"
                      "   still reachable: 16 bytes in 1 blocks\n");
    expect_line(text, "Case\n\nbench: no iterations; peak 4,096 bytes (4.0 KiB)\n"
                      "  setup, growth: not estimated (they need iterations:");
    expect_line(text, "  leaked: 480 bytes in 10 blocks (definitely and indirectly lost)\n"
                      "  Top sites by live bytes at the peak (no growth figures for this case)\n"
                      "    3,616 B                      helper\n"
                      "    480 B                        leaky_site (leak.c:6)\n"
                      "  Leaking sites (definitely and indirectly lost)\n"
                      "    480 B in 10 blocks           leaky_site (leak.c:6)\n");
    expect_line(text, "Other processes\n\npid 100 /bin/sh: replaced by exec; 5 allocations, 100 B allocated, peak 64 B\n");
    expect_line(text, "warning: stacks were dropped\nwarning: process warning\n");
    for (const char *line = text; *line;) {
        const char *end = strchrnul(line, '\n');
        assert_true(end - line <= 100);
        line = *end ? end + 1 : end;
    }
    free(text);
}

/* --metric sorts the text report's site lists and names them. */
static void test_text_metrics(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *metric, *expected;
    } cases[] = {
        {"leaked", "  Top sites by bytes leaked (definitely and indirectly lost)\n"
                   "    480 B in 10 blocks           leaky_site (leak.c:6)\n\n"},
        {"peak", "  Top sites by live bytes at the peak\n"
                 "    3,616 B                      helper\n"
                 "    480 B                        leaky_site (leak.c:6)\n"
                 "  Leaking sites"},
        {"allocated", "  Top sites by bytes allocated\n"
                      "    47,520 B in 990 allocations  helper\n"
                      "    480 B in 10 allocations      leaky_site (leak.c:6)\n"},
        {"temporary", "  Top sites by temporary allocations (freed again)\n"
                      "    990 of 990 allocations freed helper\n  Leaking sites"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *argv[] = {"report", f->trace, "--metric", cases[i].metric, "-o", f->out};
        assert_int_equal(run_report(6, argv), 0);
        char *text = read_text(f->out);
        expect_line(text, cases[i].expected);
        free(text);
    }
}

/* Without a leak check the text report says so, and lists what was live. */
static void test_text_without_leak_check(void **state)
{
    struct fixture *f = *state;
    char path[160], err[256];
    snprintf(path, sizeof path, "%s/noleaks.trace", f->dir);
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    struct trace_module bench = {0, "/path/bench", ""}, libc = {1, "/lib/libc.so.6", ""};
    struct trace_process p = sample_process(1);
    uint32_t first;
    assert_non_null(w);
    assert_int_equal(trace_write_module(w, &bench) || trace_write_module(w, &libc) ||
                         trace_write_frames(w, sample_frames, 5, &first) ||
                         trace_write_stacks(w, 1, sample_stacks, 2) || trace_write_sites(w, 1, sample_sites, 2) ||
                         trace_write_process(w, &p) || trace_writer_finish(w, err, sizeof err),
                     0);
    char *text = text_report_of(f, path);
    expect_line(text, "No leak check (recorded with --leak-check off");
    expect_line(text, "  leaked: not checked (the trace holds no leak check for it)");
    expect_line(text, "  Top sites by live bytes at the peak (no growth figures for this case)\n"
                      "    3,616 B                      helper\n"
                      "    480 B                        leaky_site (leak.c:6)\n");
    assert_null(strstr(text, "LEAK SUMMARY"));
    assert_null(strstr(text, "Leaking sites"));
    free(text);
    const char *json[] = {"report", path, "--format", "json", "-o", f->out};
    assert_int_equal(run_report(6, json), 0);
    check_json(f, "without_leak_check");
}

static void test_usage_and_failures(void **state)
{
    struct fixture *f = *state;
    const char *bad_format[] = {"report", f->trace, "--format", "xml"};
    assert_int_equal(run_report(4, bad_format), 2);
    const char *no_file[] = {"report"};
    assert_int_equal(run_report(1, no_file), 2);
    const char *two_files[] = {"report", f->trace, f->trace};
    assert_int_equal(run_report(3, two_files), 2);
    const char *bad_metric[] = {"report", f->trace, "--metric", "size"};
    assert_int_equal(run_report(4, bad_metric), 2);
    const char *missing_value[] = {"report", f->trace, "--format"};
    assert_int_equal(run_report(3, missing_value), 2);
    const char *unknown_option[] = {"report", f->trace, "--frobnicate"};
    assert_int_equal(run_report(3, unknown_option), 2);
    const char *missing[] = {"report", "/nonexistent/t.trace"};
    assert_int_equal(run_report(2, missing), 1);
    const char *no_case[] = {"report", f->trace, "--case", "nosuch", "-o", f->out};
    assert_int_equal(run_report(6, no_case), 1);
    const char *bad_output[] = {"report", f->trace, "-o", "/nonexistent/out.json"};
    assert_int_equal(run_report(4, bad_output), 1);
    const char *help[] = {"report", "--help"};
    assert_int_equal(run_report(2, help), 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs(text, file);
    assert_int_equal(fclose(file), 0);
}

/* --suppressions: the matching loss records are no loss record and count
 * only on the "suppressed:" line; a file that cannot be read or parsed
 * stops the report. */
static void test_suppressions_option(void **state)
{
    struct fixture *f = *state;
    char lsan[160], valgrind[160], bad[160];
    snprintf(lsan, sizeof lsan, "%s/lsan.supp", f->dir);
    snprintf(valgrind, sizeof valgrind, "%s/vg.supp", f->dir);
    snprintf(bad, sizeof bad, "%s/bad.supp", f->dir);
    write_file(lsan, "# the sample's leak\nleak:leaky_site\n");
    write_file(valgrind, "{\n  reachable\n  Memcheck:Leak\n  match-leak-kinds: reachable\n  fun:malloc\n  fun:helper\n}\n");
    write_file(bad, "{\n  x\n  Memcheck:Leak\n");
    const char *argv[] = {"report", f->trace, "--suppressions", lsan, "--suppressions=" , "-o", f->out};
    char both[200];
    snprintf(both, sizeof both, "--suppressions=%s", valgrind);
    argv[4] = both;
    assert_int_equal(run_report(7, argv), 0);
    char *text = read_text(f->out);
    expect_line(text, "LEAK SUMMARY:\n   definitely lost: 0 bytes in 0 blocks\n"
                      "   indirectly lost: 0 bytes in 0 blocks\n     possibly lost: 0 bytes in 0 blocks\n"
                      "   still reachable: 0 bytes in 0 blocks\n        suppressed: 496 bytes in 11 blocks\n");
    assert_null(strstr(text, "loss record"));
    free(text);
    const char *json[] = {"report", f->trace, "--suppressions", lsan, "--format", "json", "-o", f->out};
    assert_int_equal(run_report(8, json), 0);
    check_json(f, "suppressed");
    const char *missing[] = {"report", f->trace, "--suppressions", "/nonexistent/x.supp"};
    assert_int_equal(run_report(4, missing), 1);
    const char *unparsable[] = {"report", f->trace, "--suppressions", bad};
    assert_int_equal(run_report(4, unparsable), 1);
    const char *no_value[] = {"report", f->trace, "--suppressions"};
    assert_int_equal(run_report(3, no_value), 2);
}

/* A stack of the interpreter's C frames and Python frames (TRACE_FRAME_PYTHON):
 * leaked 4129 bytes, allocated by the interpreter for the Python code. */
static int write_python_trace(const char *path)
{
    char err[256];
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    static const struct trace_frame python_frames[] = {
        {1, "malloc", "", 0, 0x7f0000001000, 0x1000, TRACE_FRAME_ALLOCATOR},
        {0, "PyBytes_FromStringAndSize", "", 0, 0x5a0000, 0x1a0000, 0},
        {TRACE_NONE, "Job.step", "/srv/bench.py", 9, 0x7f0000abc000, 14, TRACE_FRAME_PYTHON},
        {TRACE_NONE, "<module>", "/srv/bench.py", 0, 0x7f0000abd000, 2, TRACE_FRAME_PYTHON},
        {0, "Py_BytesMain", "", 0, 0x627d37, 0x227d37, 0},
    };
    static const uint32_t ids[] = {0, 1, 2, 3, 4};
    struct trace_stack stack = {3, 5, ids, 0};
    struct trace_site site = {3, 1, 4129, 0, 4129, 1, 4129, 4129};
    struct trace_loss_record record = {3, TRACE_LEAK_DEFINITE, 4129, 1, 0};
    struct trace_leaks leaks = {1, TRACE_NONE, TRACE_SNAP_EXIT, 0, 20, {4129, 0, 0, 0}, {1, 0, 0, 0}, 1, &record};
    struct trace_module python = {0, "/usr/bin/python3.11", ""}, libc = {1, "/lib/libc.so.6", ""};
    struct trace_process p = sample_process(1);
    uint32_t first;
    int rc = !w || trace_write_module(w, &python) || trace_write_module(w, &libc) ||
             trace_write_frames(w, python_frames, 5, &first) || trace_write_stacks(w, 1, &stack, 1) ||
             trace_write_sites(w, 1, &site, 1) || trace_write_leaks(w, &leaks) || trace_write_process(w, &p);
    if (w)
        rc |= trace_writer_finish(w, err, sizeof err);
    return rc ? -1 : 0;
}

/* Python frames: "python" as their module in the JSON, with "python": true;
 * qualname (file.py:line) in the text; the first of them names the site. */
static void test_python_frames(void **state)
{
    struct fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/python.trace", f->dir);
    assert_int_equal(write_python_trace(path), 0);
    const char *json[] = {"report", path, "--format", "json", "-o", f->out};
    assert_int_equal(run_report(6, json), 0);
    check_json(f, "python_frames");
    const char *text[] = {"report", path, "-o", f->out};
    assert_int_equal(run_report(4, text), 0);
    char *report = read_text(f->out);
    expect_line(report, "4,129 bytes in 1 blocks are definitely lost in loss record 1 of 1\n"
                        "    at PyBytes_FromStringAndSize (python3.11+0x1a0000)\n"
                        "    by Job.step (/srv/bench.py:9)\n    by <module> (/srv/bench.py)\n"
                        "    by Py_BytesMain (python3.11+0x227d37)\n");
    free(report);
}

static void test_incomplete_trace_still_reports(void **state)
{
    struct fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/cut.trace", f->dir);
    assert_int_equal(write_sample_trace(path, 1), 0);
    const char *argv[] = {"report", path, "--format", "json", "-o", f->out};
    assert_int_equal(run_report(6, argv), 0);
    check_json(f, "incomplete");
}

/* A recording cut short after a child's PROCESS section (its sites and
 * any check never written): the headline names the child, under the
 * recorded command, and the text says the cut, not --leak-check off. */
static int write_cut_child_trace(const char *path, const char *const *command, const char *const *child)
{
    char err[512];
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    if (!w)
        return -1;
    struct trace_info info = {"0.1.0", 1700000000000000000ull, 2, command, 64, 200, 100000000, 0, 0, 0};
    struct trace_process p = sample_process(1);
    p.argc = 2;
    p.argv = child;
    p.exit_status = 0;
    struct trace_case implicit_case = {1, 0, "cc1", 500, 9000, 0, TRACE_CASE_IMPLICIT | TRACE_CASE_ENDED};
    int rc = trace_write_info(w, &info) || trace_write_case(w, &implicit_case) || trace_write_process(w, &p) ? -1 : 0;
    trace_writer_abandon(w);
    return rc;
}

static void test_cut_trace_says_so(void **state)
{
    struct fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/cut_child.trace", f->dir);
    static const char *const make_all[] = {"make", "all"}, *const cc1[] = {"cc1", "x.c"};
    assert_int_equal(write_cut_child_trace(path, make_all, cc1), 0);
    char *text = text_report_of(f, path);
    expect_line(text, "cc1 x.c (pid 100, under make all): exited 0; 1,000 allocs");
    expect_line(text, "No leak check in what the trace holds (it was cut short, or recorded with --leak-check off)");
    expect_line(text, "  leaked: not checked (no leak check in what the trace holds: it was cut short)\n");
    expect_line(text, "    (no site in what the trace holds: it may have been cut short before them)\n");
    free(text);
    /* a version manager's shim that execs its interpreter by full path: the same command */
    static const char *const shim[] = {"python3", "x.py"}, *const interpreter[] = {"/opt/py/bin/python3", "x.py"};
    assert_int_equal(write_cut_child_trace(path, shim, interpreter), 0);
    text = text_report_of(f, path);
    expect_line(text, "python3 x.py: exited 0;");
    free(text);
}

static void test_marked_cases(void **state)
{
    struct fixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/cases.trace", f->dir);
    assert_int_equal(write_cases_trace(path), 0);
    const char *all[] = {"report", path, "--format", "json", "-o", f->out};
    assert_int_equal(run_report(6, all), 0);
    check_json(f, "marked_cases");
    const char *one[] = {"report", path, "--format", "json", "-o", f->out, "--case", "render"};
    assert_int_equal(run_report(8, one), 0);
    check_json(f, "one_case");
}

static void test_no_temp_files_left(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"report", f->trace, "-o", f->out};
    assert_int_equal(run_report(4, argv), 0);
    char command[200];
    snprintf(command, sizeof command, "test -z \"$(ls -A '%s' | grep '\\.tmp$')\"", f->dir);
    assert_int_equal(system(command), 0);
}

static void test_format_bytes(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(units_format_bytes(0, b, sizeof b), "0 B");
    assert_string_equal(units_format_bytes(1023, b, sizeof b), "1023 B");
    assert_string_equal(units_format_bytes(1536, b, sizeof b), "1.5 KiB");
    assert_string_equal(units_format_bytes(3u << 20, b, sizeof b), "3.0 MiB");
    assert_string_equal(units_format_bytes(5ull << 30, b, sizeof b), "5.0 GiB");
    assert_string_equal(units_format_bytes((double)(1ull << 50), b, sizeof b), "1.0 PiB");
    assert_string_equal(units_format_bytes((double)UINT64_MAX, b, sizeof b), "16.0 EiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_exact_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metric_allocated_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_without_leak_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_and_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suppressions_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_python_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incomplete_trace_still_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_trace_says_so, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marked_cases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_temp_files_left, setup, teardown),
        cmocka_unit_test(test_format_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

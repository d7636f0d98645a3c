/* test_formats.c - the flame-graph formats (report/formats.h) on the sample
 * trace (test_trace_sample.h), with growth figures set by hand where the
 * model has none: collapsed stacks compared exactly; speedscope checked
 * against the schema's required members and index ranges, pprof decoded by a
 * small protobuf reader, the HTML page's embedded data parsed back, all by
 * python3 (tests/unit/check_formats.py); and the protobuf encoder's bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../report/formats.h"
#include "../../report/protobuf.h"
#include "test_trace_sample.h"

struct fixture {
    char dir[64];
    char *trace;
    char out[160];
    struct trace_model model;
    struct report report;
};

static int load(struct fixture *f, int two_cases, enum report_metric metric)
{
    char err[512];
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-formats.XXXXXX");
    f->trace = sample_path(f->dir, "sample.trace");
    assert_non_null(f->trace);
    assert_int_equal(two_cases ? write_cases_trace(f->trace) : write_sample_trace(f->trace, 0), 0);
    snprintf(f->out, sizeof f->out, "%s/out", f->dir);
    assert_int_equal(trace_read_file(f->trace, &f->model, err, sizeof err), 0);
    assert_int_equal(report_build(&f->report, &f->model, "sample.trace", metric, NULL, err, sizeof err), 0);
    return 0;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    *state = f;
    return load(f, 0, REPORT_METRIC_GROWTH);
}

static int setup_cases(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    *state = f;
    return load(f, 1, REPORT_METRIC_LEAKED);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char command[200];
    report_free(&f->report);
    trace_model_free(&f->model);
    snprintf(command, sizeof command, "rm -rf '%s'", f->dir);
    assert_int_equal(system(command), 0);
    free(f->trace);
    free(f);
    return 0;
}

/* The site of stack 7 (leaky_site) in the first case. */
static struct report_site *leaky(struct fixture *f)
{
    for (size_t i = 0; i < f->report.cases[0].site_count; i++)
        if (f->report.cases[0].sites[i].stack_id == 7)
            return &f->report.cases[0].sites[i];
    fail_msg("no site for stack 7");
    return NULL;
}

static void set_growth(struct fixture *f, double bytes_per_iteration)
{
    f->report.cases[0].growth = (struct report_growth){1, bytes_per_iteration, 1};
    f->report.cases[0].iterations = 200;
    leaky(f)->growth = (struct report_growth){1, bytes_per_iteration, 1};
}

/* Runs a collapsed writer into a string; returns its rc, the text in *text. */
static int collapsed(struct fixture *f, enum report_metric metric, char **text, char *err, size_t err_size)
{
    size_t length;
    FILE *out = open_memstream(text, &length);
    assert_non_null(out);
    int rc = report_write_collapsed(&f->report, metric, out, err, err_size);
    fclose(out);
    return rc;
}

static void expect_collapsed(struct fixture *f, enum report_metric metric, const char *expected)
{
    char *text = NULL, err[256] = "";
    assert_int_equal(collapsed(f, metric, &text, err, sizeof err), 0);
    assert_string_equal(text, expected);
    free(text);
}

static void test_collapsed_leaked_and_process_metrics(void **state)
{
    struct fixture *f = *state;
    /* 432 definitely + 48 indirectly lost; malloc (an allocator frame) is hidden. */
    expect_collapsed(f, REPORT_METRIC_LEAKED, "main;leaky_site 480\n");
    expect_collapsed(f, REPORT_METRIC_ALLOCATED, "[unknown];helper 47520\nmain;leaky_site 480\n");
    expect_collapsed(f, REPORT_METRIC_PEAK, "[unknown];helper 3616\nmain;leaky_site 480\n");
    expect_collapsed(f, REPORT_METRIC_TEMPORARY, "[unknown];helper 990\n");
}

static void test_collapsed_growth_needs_figures(void **state)
{
    struct fixture *f = *state;
    char *text = NULL, err[512] = "";
    assert_int_equal(collapsed(f, REPORT_METRIC_GROWTH, &text, err, sizeof err), -1);
    assert_string_equal(text, ""); /* nothing that looks like a valid, empty profile */
    assert_non_null(strstr(err, "no growth figures"));
    free(text);
    set_growth(f, 47.6); /* rounded to whole bytes for inferno */
    expect_collapsed(f, REPORT_METRIC_GROWTH, "main;leaky_site 48\n");
    set_growth(f, -8);
    text = NULL;
    assert_int_equal(collapsed(f, REPORT_METRIC_GROWTH, &text, err, sizeof err), -1);
    assert_non_null(strstr(err, "no site grows"));
    free(text);
}

/* Makes stack 9 a second call of leaky_site from main, at another line of
 * main (13) through another frame: the flame graphs must draw one main. */
static void second_caller_line(struct fixture *f)
{
    struct trace_model_frame *leaf = &f->model.frames[3], *caller = &f->model.frames[4];
    *leaf = f->model.frames[1];
    leaf->address += 0x40;
    *caller = f->model.frames[2];
    caller->line = 13;
    caller->address += 0x20;
}

static void test_flame_frames_are_functions(void **state)
{
    struct fixture *f = *state;
    second_caller_line(f);
    expect_collapsed(f, REPORT_METRIC_ALLOCATED, "main;leaky_site 48000\n");
}

static void test_collapsed_names_have_no_separator(void **state)
{
    struct fixture *f = *state;
    f->model.frames[1].function = "ns;fn\nx";
    f->model.frames[1].file = "a;b.c";
    expect_collapsed(f, REPORT_METRIC_LEAKED, "main;ns,fn x 480\n");
}

static void test_collapsed_case_frames(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(f->report.case_count, 2);
    expect_collapsed(f, REPORT_METRIC_LEAKED, "[case parse];[unknown];helper 32\n");
}

static void write_file(struct fixture *f, int (*writer)(const struct report *, FILE *, char *, size_t))
{
    char err[256] = "";
    FILE *out = fopen(f->out, "wb");
    assert_non_null(out);
    int rc = writer(&f->report, out, err, sizeof err);
    assert_int_equal(fclose(out), 0);
    if (rc != 0)
        fail_msg("writer failed: %s", err);
}

/* Runs the function CHECK of tests/unit/check_formats.py on f->out. */
static void check_python(const struct fixture *f, const char *check)
{
    char command[500];
    snprintf(command, sizeof command, "python3 tests/unit/check_formats.py %s '%s'", check, f->out);
    assert_int_equal(system(command), 0);
}

static void test_speedscope_without_growth(void **state)
{
    struct fixture *f = *state;
    write_file(f, report_write_speedscope);
    check_python(f, "speedscope_without_growth");
}

static void test_speedscope_one_frame_per_function(void **state)
{
    struct fixture *f = *state;
    second_caller_line(f);
    write_file(f, report_write_speedscope);
    check_python(f, "speedscope_one_frame_per_function");
}

static void test_speedscope_growth_is_active(void **state)
{
    struct fixture *f = *state;
    set_growth(f, 48);
    write_file(f, report_write_speedscope);
    check_python(f, "speedscope_growth_is_active");
}

static void test_pprof_decodes(void **state)
{
    struct fixture *f = *state;
    write_file(f, report_write_pprof);
    check_python(f, "pprof_decodes");
}

static void test_pprof_one_function_per_caller(void **state)
{
    struct fixture *f = *state;
    second_caller_line(f);
    write_file(f, report_write_pprof);
    check_python(f, "pprof_one_function_per_caller");
}

static void test_pprof_growth_column(void **state)
{
    struct fixture *f = *state;
    set_growth(f, 48);
    write_file(f, report_write_pprof);
    check_python(f, "pprof_growth_column");
}

static void test_html_embeds_data_safely(void **state)
{
    struct fixture *f = *state;
    f->model.frames[2].function = "</script><script>alert(1)</script>";
    set_growth(f, 48);
    write_file(f, report_write_html);
    check_python(f, "html_embeds_data_safely");
}

static void test_protobuf_encoding(void **state)
{
    (void)state;
    struct pb_buffer b, sub;
    pb_init(&b);
    pb_init(&sub);
    pb_uint64_field(&b, 1, 300);   /* 08 ac 02 */
    pb_int64_field(&b, 2, -1);     /* 10 ff x9 01 */
    pb_string_field(&b, 6, "ab");  /* 32 02 61 62 */
    uint64_t values[] = {1, 300};
    pb_packed_uint64_field(&b, 1, values, 2); /* 0a 03 01 ac 02 */
    pb_uint64_field(&sub, 1, 5);
    pb_message_field(&b, 4, &sub); /* 22 02 08 05 */
    static const uint8_t expected[] = {0x08, 0xac, 0x02, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0x01, 0x32, 0x02, 0x61, 0x62, 0x0a, 0x03, 0x01, 0xac, 0x02, 0x22, 0x02, 0x08,
                                       0x05};
    assert_int_equal(b.length, sizeof expected);
    assert_memory_equal(b.data, expected, sizeof expected);
    assert_false(b.failed);
    pb_free(&b);
    pb_free(&sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_collapsed_leaked_and_process_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collapsed_growth_needs_figures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flame_frames_are_functions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collapsed_names_have_no_separator, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collapsed_case_frames, setup_cases, teardown),
        cmocka_unit_test_setup_teardown(test_speedscope_without_growth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_speedscope_one_frame_per_function, setup, teardown),
        cmocka_unit_test_setup_teardown(test_speedscope_growth_is_active, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pprof_decodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pprof_one_function_per_caller, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pprof_growth_column, setup, teardown),
        cmocka_unit_test_setup_teardown(test_html_embeds_data_safely, setup, teardown),
        cmocka_unit_test(test_protobuf_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

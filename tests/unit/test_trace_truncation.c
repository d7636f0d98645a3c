/* test_trace_truncation.c - the reader on cut, corrupted and foreign files:
 * it succeeds with every complete section, or fails with one clear line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <zlib.h>

#include "../../report/report_model.h"
#include "../../report/trace_reader.h"
#include "test_trace_sample.h"

struct fixture {
    char dir[64];
    char *path;
    unsigned char *data;
    size_t size;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-cut.XXXXXX");
    f->path = sample_path(f->dir, "sample.trace");
    assert_non_null(f->path);
    assert_int_equal(write_sample_trace(f->path, 0), 0);
    f->data = slurp(f->path, &f->size);
    assert_non_null(f->data);
    *state = f;
    return 0;
}

/* The same tests on a trace whose snapshots are SNAPSHOT_DELTA sections. */
static int setup_deltas(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/memslope-cut.XXXXXX");
    f->path = sample_path(f->dir, "deltas.trace");
    assert_non_null(f->path);
    assert_int_equal(write_history_trace(f->path, 1), 0);
    f->data = slurp(f->path, &f->size);
    assert_non_null(f->data);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f->path);
    free(f->data);
    free(f);
    return 0;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* Number of whole sections (END excluded) that end at or before cut. */
static uint64_t sections_before(const unsigned char *data, size_t size, size_t cut)
{
    uint64_t count = 0;
    for (size_t at = 16; at + 16 <= size;) {
        size_t end = at + 16 + le(data + at + 8, 8) + 4;
        if (end > cut || le(data + at, 4) == TRACE_SEC_END)
            break;
        count++;
        at = end;
    }
    return count;
}

/* Builds the report in text and JSON, to exercise the renderers on the model. */
static void render(const struct trace_model *model)
{
    struct report report;
    char err[256], *text = NULL;
    size_t length = 0;
    if (report_build(&report, model, "t", REPORT_METRIC_GROWTH, NULL, err, sizeof err) != 0)
        fail_msg("report_build: %s", err);
    FILE *out = open_memstream(&text, &length);
    report_write_text(&report, out);
    report_write_json(&report, out);
    fclose(out);
    free(text);
    report_free(&report);
}

/* The file cut after its first cut bytes: an error for less than the file
 * header, else every complete section and a note that the rest is missing. */
static void check_cut(const struct fixture *f, size_t cut)
{
    struct trace_model model;
    char err[256];
    unsigned char *copy = malloc(cut + 1); /* exact size, so ASan sees any over-read */
    memcpy(copy, f->data, cut);
    int rc = trace_read_buffer(copy, cut, "cut", &model, err, sizeof err);
    if (cut < TRACE_FILE_HEADER_SIZE) {
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, "cut: "));
    } else {
        if (rc != 0)
            fail_msg("cut at %zu: %s", cut, err);
        assert_true(model.incomplete);
        assert_int_equal(model.section_count, sections_before(f->data, f->size, cut));
        render(&model);
        trace_model_free(&model);
    }
    free(copy);
}

static void test_cut_at_every_offset(void **state)
{
    struct fixture *f = *state;
    for (size_t cut = 0; cut < f->size; cut++)
        check_cut(f, cut);
}

/* A real recording (growth_cases, kept as a seed of the trace reader's fuzz
 * target), too long to cut everywhere under ASan: cut in its first and last
 * bytes, and at the start, in the header, in the payload and in the crc of
 * every section. */
#define RECORDING "tests/fuzz/corpus/trace_reader/seed-growth-cases"

static int setup_recording(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->data = slurp(RECORDING, &f->size);
    if (!f->data || f->size < 64)
        fail_msg("cannot read %s (run the unit tests from the repository root)", RECORDING);
    *state = f;
    return 0;
}

static int teardown_recording(void **state)
{
    struct fixture *f = *state;
    free(f->data);
    free(f);
    return 0;
}

static void test_cut_recording_at_section_edges(void **state)
{
    struct fixture *f = *state;
    size_t cuts = 0;
    for (size_t cut = 0; cut < 64; cut++, cuts++)
        check_cut(f, cut);
    for (size_t at = 16; at + 16 <= f->size;) {
        size_t end = at + 16 + le(f->data + at + 8, 8) + 4;
        const size_t edges[] = {at, at + 1, at + 16, at + 17, end - 4, end - 1};
        for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
            if (edges[i] > 64 && edges[i] < f->size - 40)
                check_cut(f, edges[i]), cuts++;
        at = end;
    }
    for (size_t cut = f->size - 40; cut < f->size; cut++, cuts++)
        check_cut(f, cut);
    assert_true(cuts > 300); /* the recording has dozens of sections */
}

static void test_every_byte_flipped(void **state)
{
    struct fixture *f = *state;
    for (size_t at = 0; at < f->size; at++) {
        struct trace_model model;
        char err[256];
        unsigned char *copy = malloc(f->size);
        memcpy(copy, f->data, f->size);
        copy[at] ^= 0xa5;
        if (trace_read_buffer(copy, f->size, "flip", &model, err, sizeof err) == 0) {
            render(&model);
            trace_model_free(&model);
        } else {
            assert_non_null(strstr(err, "flip: "));
            assert_null(strchr(err, '\n'));
        }
        free(copy);
    }
}

static void expect_error(const void *data, size_t size, const char *message)
{
    struct trace_model model;
    char err[256];
    assert_int_equal(trace_read_buffer(data, size, "x.trace", &model, err, sizeof err), -1);
    if (!strstr(err, message))
        fail_msg("expected '%s' in '%s'", message, err);
    assert_non_null(strstr(err, "x.trace: "));
}

static void test_foreign_files(void **state)
{
    struct fixture *f = *state;
    expect_error("", 0, "empty file");
    expect_error("ELF\x7f and more bytes than a header", 30, "bad magic");
    expect_error("MEMS", 4, "truncated");
    unsigned char header[16];
    memcpy(header, f->data, 16);
    header[8] = 3;
    expect_error(header, 16, "unsupported trace version 3 (this memslope reads versions 1 to 2");
    header[8] = 0;
    expect_error(header, 16, "unsupported trace version 0");
}

static void test_crc_mismatch(void **state)
{
    struct fixture *f = *state;
    unsigned char *copy = malloc(f->size);
    memcpy(copy, f->data, f->size);
    copy[16 + 16] ^= 1; /* first byte of the first payload */
    expect_error(copy, f->size, "crc mismatch in the STRINGS section at offset 16");
    free(copy);
}

/* A file header plus one section with a valid crc around payload. */
static size_t make_trace(unsigned char *out, uint32_t type, const void *payload, uint32_t length)
{
    memcpy(out, "MEMSLOPE\1\0\0\0\0\0\0\0", 16);
    unsigned char *s = out + 16;
    memset(s, 0, 16);
    s[0] = (unsigned char)type;
    s[1] = (unsigned char)(type >> 8);
    for (int i = 0; i < 4; i++)
        s[8 + i] = (unsigned char)(length >> (8 * i));
    memcpy(s + 16, payload, length);
    uint32_t crc = (uint32_t)crc32(0, payload, length);
    for (int i = 0; i < 4; i++)
        s[16 + length + i] = (unsigned char)(crc >> (8 * i));
    return 16 + 16 + length + 4;
}

static void test_valid_crc_bad_contents(void **state)
{
    (void)state;
    unsigned char trace[256];
    /* WARNING naming string 5, which no STRINGS section defined */
    const unsigned char warning[] = {1, 0, 0, 0, 5, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_WARNING, warning, sizeof warning), "string id 5 is not defined");
    /* STRINGS claiming a billion strings in 8 bytes */
    const unsigned char strings[] = {1, 0, 0, 0, 0, 0, 0, 0x40};
    expect_error(trace, make_trace(trace, TRACE_SEC_STRINGS, strings, sizeof strings), "do not fit");
    /* a string longer than the section */
    const unsigned char long_string[] = {1, 0, 0, 0, 1, 0, 0, 0, 0xff, 0, 0, 0, 'a'};
    expect_error(trace, make_trace(trace, TRACE_SEC_STRINGS, long_string, sizeof long_string), "runs past the end");
    /* STACKS naming frame 0 before any FRAMES */
    const unsigned char stacks[] = {1, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_STACKS, stacks, sizeof stacks), "frame 0, which is not defined");
    /* STACKS_SHARED whose first stack shares frames with no previous one */
    const unsigned char shared[] = {1, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_STACKS_SHARED, shared, sizeof shared),
                 "STACKS_SHARED section at offset 16: stack 7 shares 1 outer frames of 1, with a previous stack of 0");
    /* ... or more frames than it has */
    const unsigned char more[] = {1, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_STACKS_SHARED, more, sizeof more), "shares 2 outer frames of 1");
    /* SITES_PACKED: a number of eleven bytes, a stack id below 0, a record cut short */
    const unsigned char overlong[] = {1, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0x01, 0, 0, 0, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_SITES_PACKED, overlong, sizeof overlong),
                 "SITES_PACKED section at offset 16: site record 0: a number longer than 64 bits");
    const unsigned char below_zero[] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_SITES_PACKED, below_zero, sizeof below_zero),
                 "site record 0: stack id -1 is out of range");
    const unsigned char cut[] = {1, 0, 0, 0, 2, 0, 0, 0, 2, 0x81, 0x01, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1};
    expect_error(trace, make_trace(trace, TRACE_SEC_SITES_PACKED, cut, sizeof cut), "payload too short");
    /* FRAMES that skip ids */
    unsigned char frames[8 + 36] = {3};
    frames[4] = 1;
    expect_error(trace, make_trace(trace, TRACE_SEC_FRAMES, frames, sizeof frames), "frames start at id 3");
    /* SNAPSHOT_DELTA entries out of stack order, or naming a stack twice */
    unsigned char delta[48 + 3 * 20] = {1};
    delta[44] = 3;                                  /* count */
    delta[48] = 9, delta[68] = 7, delta[88] = 11;  /* stacks 9, 7, 11 */
    expect_error(trace, make_trace(trace, TRACE_SEC_SNAPSHOT_DELTA, delta, sizeof delta),
                 "SNAPSHOT_DELTA section at offset 16: delta entry 1 (stack 7) does not follow stack 9");
    delta[68] = 9;
    expect_error(trace, make_trace(trace, TRACE_SEC_SNAPSHOT_DELTA, delta, sizeof delta),
                 "delta entry 1 (stack 9) does not follow stack 9: entries must ascend by stack id");
    /* ... and claiming more entries than it holds */
    delta[44] = 4;
    expect_error(trace, make_trace(trace, TRACE_SEC_SNAPSHOT_DELTA, delta, sizeof delta),
                 "4 snapshot entries do not fit");
    /* a PROCESS cut short */
    const unsigned char process[] = {1, 0, 0, 0, 2, 0, 0, 0};
    expect_error(trace, make_trace(trace, TRACE_SEC_PROCESS, process, sizeof process), "payload too short");
}

static void test_unknown_sections_skipped(void **state)
{
    (void)state;
    unsigned char trace[256];
    struct trace_model model;
    char err[256];
    const unsigned char payload[] = {1, 2, 3};
    size_t size = make_trace(trace, 77, payload, sizeof payload);
    assert_int_equal(trace_read_buffer(trace, size, "u", &model, err, sizeof err), 0);
    assert_int_equal(model.section_count, 1);
    assert_true(model.incomplete);
    trace_model_free(&model);
}

static void test_bytes_after_end_noted(void **state)
{
    struct fixture *f = *state;
    unsigned char *copy = malloc(f->size + 3);
    memcpy(copy, f->data, f->size);
    memcpy(copy + f->size, "abc", 3);
    struct trace_model model;
    char err[256];
    assert_int_equal(trace_read_buffer(copy, f->size + 3, "t", &model, err, sizeof err), 0);
    assert_true(model.complete);
    assert_int_equal(model.warning_count, 2);
    assert_string_equal(model.warnings[1], "3 bytes after END ignored");
    trace_model_free(&model);
    free(copy);
}

static void test_missing_and_directory(void **state)
{
    struct fixture *f = *state;
    struct trace_model model;
    char err[256];
    assert_int_equal(trace_read_file("/nonexistent/t.trace", &model, err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent/t.trace: cannot open: No such file or directory");
    assert_int_equal(trace_read_file(f->dir, &model, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cut_at_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_byte_flipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_at_every_offset, setup_deltas, teardown),
        cmocka_unit_test_setup_teardown(test_every_byte_flipped, setup_deltas, teardown),
        cmocka_unit_test_setup_teardown(test_cut_recording_at_section_edges, setup_recording, teardown_recording),
        cmocka_unit_test_setup_teardown(test_foreign_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crc_mismatch, setup, teardown),
        cmocka_unit_test(test_valid_crc_bad_contents),
        cmocka_unit_test(test_unknown_sections_skipped),
        cmocka_unit_test_setup_teardown(test_bytes_after_end_noted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_directory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* fuzz_trace_reader.c - libFuzzer target: any byte string through the trace
 * reader, and whatever it accepts through the report model, both
 * renderers, `memslope diff` of the report against itself, and the model
 * of each other process as the gate builds it. Seeds: tests/fuzz/corpus/trace_reader/ (written by
 * MEMSLOPE_FUZZ_CORPUS=DIR build/unit/test_trace_roundtrip). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../../report/diff.h"
#include "../../report/report_model.h"
#include "../../report/trace_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The Makefile links every core object into a fuzz target, and the command
 * files call command_usage() from cli/main.c, which is not among them. */
const char *command_usage(const char *name) __attribute__((weak));
const char *command_usage(const char *name)
{
    (void)name;
    return NULL;
}

static void render(const struct trace_model *model, enum report_metric metric)
{
    struct report report;
    char err[512];
    if (report_build(&report, model, "fuzz", metric, NULL, err, sizeof err) != 0)
        return;
    FILE *out = fopen("/dev/null", "w");
    struct report_diff diff;
    if (out) {
        report_write_text(&report, out);
        report_write_json(&report, out);
        if (report_diff_build(&diff, &report, &report, NULL, err, sizeof err) == 0) {
            report_diff_write_text(&diff, out);
            report_diff_write_json(&diff, out);
            report_diff_free(&diff);
        }
        fclose(out);
    }
    report_free(&report);
    for (const struct trace_model_process *p = model->processes; p; p = p->hh.next) {
        struct report_request request = {metric, NULL, NULL, p};
        if (report_build_request(&report, model, "fuzz", &request, err, sizeof err) == 0)
            report_free(&report);
    }
}

static uint64_t le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* Rewrites the crc of every complete section, so mutations reach the
 * section parsers instead of stopping at the crc check. */
static void fix_crcs(uint8_t *data, size_t size)
{
    for (size_t at = 16; at + 16 <= size;) {
        uint64_t length = le(data + at + 8, 8);
        if (length > size - at - 16 || size - at - 16 - length < 4)
            return;
        uint32_t crc = (uint32_t)crc32(0, data + at + 16, (uInt)length);
        for (int i = 0; i < 4; i++)
            data[at + 16 + length + i] = (uint8_t)(crc >> (8 * i));
        at += 16 + length + 4;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct trace_model model;
    char err[512];
    uint8_t *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (size % 4 != 3) /* a quarter of the inputs keep their crcs as mutated */
        fix_crcs(copy, size);
    if (trace_read_buffer(copy, size, "fuzz", &model, err, sizeof err) == 0) {
        render(&model, (enum report_metric)(size % 5));
        trace_model_free(&model);
    }
    free(copy);
    return 0;
}

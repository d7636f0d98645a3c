/* fuzz_suppressions.c - libFuzzer target: any suppression file (report/
 * suppressions.h), in either format, read as a user's file and as a default
 * one, then matched against a few stacks in every leak category. Whatever
 * the bytes, a set or one error line, and no memory error. */
#include <stddef.h>
#include <stdint.h>

#include "../../report/suppressions.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The Makefile links every core object into a fuzz target, and the command
 * files call command_usage() from cli/main.c, which is not among them. */
const char *command_usage(const char *name) __attribute__((weak));
const char *command_usage(const char *name)
{
    (void)name;
    return NULL;
}

static struct trace_model_module app = {.path = "/srv/app"}, python = {.path = "/usr/bin/python3.11"},
                                 ld = {.path = "/lib64/ld-linux-x86-64.so.2"};
static struct trace_model_frame frames[] = {
    {&python, "operator new(unsigned long)", "", 0, 0, 0, TRACE_FRAME_ALLOCATOR},
    {&ld, "allocate_dtv", "dl-tls.c", 401, 0, 0, TRACE_FRAME_INLINED},
    {&python, "", "", 0, 0x500000, 0x100000, 0},
    {NULL, "Job.step", "bench.py", 9, 0, 0, TRACE_FRAME_PYTHON},
    {&app, "foo::bar(int)", "bar.cpp", 3, 0, 0, 0},
    {&app, "main", "app.c", 20, 0, 0, 0},
};
static const uint32_t stacks[][6] = {{0, 1, 2, 3, 4, 5}, {2, 2, 2, 5, 4, 1}, {3, 0, 0, 0, 0, 0}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct trace_model model = {.frames = frames, .frame_count = sizeof frames / sizeof *frames};
    for (int is_default = 0; is_default < 2; is_default++) {
        struct suppressions set;
        char err[512];
        if (suppressions_init(&set) == 0 &&
            suppressions_parse(&set, (const char *)data, size, "fuzz.supp", is_default, err, sizeof err) == 0) {
            for (size_t s = 0; s < sizeof stacks / sizeof *stacks; s++) {
                struct trace_model_stack stack = {.depth = s == 2 ? 1 : 6, .frame_ids = stacks[s]};
                for (uint32_t category = 0; category <= TRACE_LEAK_CATEGORIES; category++)
                    suppressions_match(&set, &model, &stack, category);
            }
        }
        suppressions_free(&set);
    }
    return 0;
}

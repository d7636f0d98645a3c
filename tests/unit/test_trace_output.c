/* test_trace_output.c - tracer/trace_output.c through its view of an image
 * (struct trace_image), without the recording engine: a checkpoint, then
 * the image's end, read back with the report's reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../report/trace_reader.h"
#include "../../tracer/leak_check.h"
#include "../../common/proc_maps.h"
#include "../../tracer/python_frames.h"
#include "../../tracer/recorder.h"
#include "../../tracer/symbols/symbolize.h"
#include "../../tracer/trace_output.h"
#include "../../tracer/trace_writer.h"

static const uint64_t frames_of_stack_1[] = {0x401000, 0x401100};
static const uint64_t frames_of_stack_2[] = {0x402000};
static const char *const image_argv[] = {"/bin/prog", "x"};

/* Stacks 1 and 2 whole; 3 and 4 with their outer frames in a tail (the
 * shim's region shares them so), 3's all of stack 1's, 4's its outermost. */
static const uint64_t own_of_stack_3[] = {0x403000}, own_of_stack_4[] = {0x404000, 0x404100};

static uint32_t lookup(void *context, uint32_t stack_id, const uint64_t **out, const uint64_t **tail,
                       uint32_t *tail_count)
{
    (void)context;
    *tail = NULL;
    *tail_count = 0;
    switch (stack_id) {
    case 1: *out = frames_of_stack_1; return 2;
    case 2: *out = frames_of_stack_2; return 1;
    case 3: *out = own_of_stack_3, *tail = frames_of_stack_1, *tail_count = 2; return 3;
    default: *out = own_of_stack_4, *tail = frames_of_stack_1 + 1, *tail_count = 1; return 3;
    }
}

/* An image and what the engine would hand trace_output of it. */
struct image_fixture {
    char path[64];
    struct recorder recorder;
    struct python_frames python;
    struct proc_maps maps;
    struct leak_results leaks;
    struct trace_output_state *output;
    struct trace_image image;
    struct symbol_store *symbols;
    struct trace_writer *writer;
    uint32_t modules_written;
    struct trace_model model;
};

static int setup(void **state)
{
    struct image_fixture *f = calloc(1, sizeof *f);
    char err[256];
    snprintf(f->path, sizeof f->path, "/tmp/memslope-output.XXXXXX");
    int fd = mkstemp(f->path);
    if (fd < 0)
        return -1;
    close(fd);
    recorder_init(&f->recorder, 0);
    python_frames_init(&f->python);
    f->symbols = symbol_store_create();
    f->writer = trace_writer_create(f->path, err, sizeof err);
    if (!f->symbols || !f->writer)
        return -1;
    f->image = (struct trace_image){
        .process_id = 0, .parent_process_id = TRACE_NONE, .pid = 4242, .exe = "/bin/prog", .argc = 2,
        .argv = image_argv, .start_ns = 100, .flags = TRACE_PROC_SHIM_SEEN | TRACE_PROC_PRIMARY,
        .recorder = &f->recorder, .python = &f->python, .maps = &f->maps, .leaks = &f->leaks, .output = &f->output,
    };
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct image_fixture *f = *state;
    trace_model_free(&f->model);
    trace_output_state_free(f->output);
    recorder_free(&f->recorder);
    python_frames_free(&f->python);
    symbol_store_destroy(f->symbols);
    unlink(f->path);
    free(f);
    return 0;
}

static void finish_and_read(struct image_fixture *f)
{
    char err[256];
    assert_int_equal(trace_writer_finish(f->writer, err, sizeof err), 0);
    f->writer = NULL;
    if (trace_read_file(f->path, &f->model, err, sizeof err) != 0)
        fail_msg("%s", err);
}

/* The trace finished and read back: its image, which must be there. */
static const struct trace_model_process *read_back(struct image_fixture *f)
{
    finish_and_read(f);
    const struct trace_model_process *process = trace_model_process(&f->model, 0);
    assert_non_null(process);
    return process;
}

static int has_warning(const struct trace_model_process *process, const char *text)
{
    for (size_t i = 0; i < process->warning_count; i++)
        if (strstr(process->warnings[i], text))
            return 1;
    return 0;
}

/* A memslope killed after a checkpoint leaves the image as it stood then. */
static void checkpoint_alone(void **state)
{
    struct image_fixture *f = *state;
    recorder_alloc(&f->recorder, 200, 0x1000, 48, 1, lookup, NULL);
    recorder_alloc(&f->recorder, 210, 0x2000, 16, 2, lookup, NULL);
    f->image.stacks_dropped = 5;
    assert_int_equal(trace_output_checkpoint(f->writer, f->symbols, &f->image, &f->modules_written, 500), 0);
    assert_non_null(f->output); /* created by the first output, kept by the image's owner */
    const struct trace_model_process *process = read_back(f);
    assert_int_equal(process->info.pid, 4242);
    assert_int_equal(process->info.flags, TRACE_PROC_SHIM_SEEN | TRACE_PROC_PRIMARY | TRACE_PROC_CHECKPOINT);
    assert_int_equal(process->info.end_ns, 500);
    assert_int_equal(process->info.allocations, 2);
    assert_int_equal(process->info.stacks_dropped, 5);
    assert_int_equal(process->site_count, 2);
    assert_int_equal(trace_model_stack(process, 1)->depth, 2);
    assert_int_equal(trace_model_stack(process, 2)->depth, 1);
    assert_int_equal(process->warning_count, 0); /* warnings come with the image's end */
}

/* Sites whose outer frames are a tail: the trace has each stack whole. */
static void frames_in_two_spans(void **state)
{
    struct image_fixture *f = *state;
    for (uint32_t stack = 1; stack <= 4; stack++)
        recorder_alloc(&f->recorder, 100 + stack, 0x1000 * stack, 16, stack, lookup, NULL);
    assert_int_equal(trace_output_process(f->writer, f->symbols, &f->image, &f->modules_written), 0);
    const struct trace_model_process *process = read_back(f);
    static const uint64_t whole_3[] = {0x403000, 0x401000, 0x401100}, whole_4[] = {0x404000, 0x404100, 0x401100};
    const struct {
        uint32_t stack;
        const uint64_t *frames;
    } expected[] = {{3, whole_3}, {4, whole_4}};
    for (int e = 0; e < 2; e++) {
        const struct trace_model_stack *stack = trace_model_stack(process, expected[e].stack);
        assert_non_null(stack);
        assert_int_equal(stack->depth, 3);
        for (uint32_t i = 0; i < 3; i++)
            assert_int_equal(f->model.frames[stack->frame_ids[i]].address, expected[e].frames[i]);
    }
}

/* The end after a checkpoint: the last PROCESS record is the end's, a site
 * that changed is written again, and the end's warnings are there. */
static void checkpoint_then_end(void **state)
{
    struct image_fixture *f = *state;
    recorder_alloc(&f->recorder, 200, 0x1000, 48, 1, lookup, NULL);
    recorder_alloc(&f->recorder, 210, 0x2000, 16, 2, lookup, NULL);
    assert_int_equal(trace_output_checkpoint(f->writer, f->symbols, &f->image, &f->modules_written, 500), 0);
    recorder_alloc(&f->recorder, 600, 0x3000, 32, 1, lookup, NULL);
    f->image.end_ns = 900;
    f->image.flags |= TRACE_PROC_EXITED;
    f->image.exit_status = 3;
    f->image.slots_exhausted = 2;
    f->image.invalid_events = 7;
    f->image.leak_check_note = "no leak check for process 4242: a reason";
    assert_int_equal(trace_output_process(f->writer, f->symbols, &f->image, &f->modules_written), 0);
    const struct trace_model_process *process = read_back(f);
    assert_int_equal(process->info.flags, TRACE_PROC_SHIM_SEEN | TRACE_PROC_PRIMARY | TRACE_PROC_EXITED);
    assert_int_equal(process->info.end_ns, 900);
    assert_int_equal(process->info.exit_status, 3);
    assert_int_equal(process->info.allocations, 3);
    assert_int_equal(process->info.slots_exhausted, 2);
    assert_int_equal(trace_model_site(process, 1)->site.allocations, 2);
    assert_int_equal(trace_model_site(process, 1)->site.allocated_bytes, 80);
    assert_int_equal(trace_model_site(process, 2)->site.allocations, 1);
    assert_true(has_warning(process, "2 threads found no free ring slot"));
    assert_true(has_warning(process, "7 events in the shared memory of process 4242"));
    assert_true(has_warning(process, "no leak check for process 4242: a reason"));
}

/* Stacks written ahead of the image's end: nothing while fewer sites than
 * asked are new; then the image named (as at a checkpoint) and its stacks,
 * written once though the end comes after; a site new since then gets its
 * stack at the end. */
static void stacks_ahead_then_end(void **state)
{
    struct image_fixture *f = *state;
    recorder_alloc(&f->recorder, 200, 0x1000, 48, 1, lookup, NULL);
    recorder_alloc(&f->recorder, 210, 0x2000, 16, 2, lookup, NULL);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 300, 3), 0);
    assert_null(f->output); /* nothing written: not even the image */
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 300, 2), 1);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 310, 1), 0);
    recorder_alloc(&f->recorder, 400, 0x3000, 32, 3, lookup, NULL);
    f->image.end_ns = 900;
    f->image.flags |= TRACE_PROC_EXITED;
    assert_int_equal(trace_output_process(f->writer, f->symbols, &f->image, &f->modules_written), 0);
    const struct trace_model_process *process = read_back(f);
    assert_int_equal(process->info.flags, TRACE_PROC_SHIM_SEEN | TRACE_PROC_PRIMARY | TRACE_PROC_EXITED);
    assert_int_equal(process->site_count, 3);
    assert_int_equal(trace_model_stack(process, 1)->depth, 2);
    assert_int_equal(trace_model_stack(process, 2)->depth, 1);
    assert_int_equal(trace_model_stack(process, 3)->depth, 3);
    assert_int_equal(f->model.frames[trace_model_stack(process, 3)->frame_ids[0]].address, 0x403000);
    assert_int_equal(trace_model_site(process, 1)->site.allocated_bytes, 48);
}

/* A memslope killed after stacks were written ahead: the image is named,
 * with its totals as they stood when the last of them were. */
static void stacks_ahead_alone(void **state)
{
    struct image_fixture *f = *state;
    recorder_alloc(&f->recorder, 200, 0x1000, 48, 1, lookup, NULL);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 300, 1), 1);
    recorder_alloc(&f->recorder, 350, 0x2000, 16, 2, lookup, NULL);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 400, 1), 1);
    const struct trace_model_process *process = read_back(f);
    assert_int_equal(process->info.pid, 4242);
    assert_int_equal(process->info.flags, TRACE_PROC_SHIM_SEEN | TRACE_PROC_PRIMARY | TRACE_PROC_CHECKPOINT);
    assert_int_equal(process->info.end_ns, 400);
    assert_int_equal(process->info.allocations, 2);
    assert_int_equal(trace_model_stack(process, 1)->depth, 2);
    assert_int_equal(trace_model_stack(process, 2)->depth, 1);
}

/* More new sites than one run holds (a run is about a million frames,
 * trace_output.c's STACKS_SECTION_FRAMES): a call writes one run, the
 * next the rest, and every stack is in the trace once. */
static void stacks_ahead_a_run_a_call(void **state)
{
    struct image_fixture *f = *state;
    const uint32_t sites = 400000; /* three frames each: 1.2 M frames */
    for (uint32_t stack = 5; stack < 5 + sites; stack++)
        recorder_alloc(&f->recorder, stack, 0x1000 * (uint64_t)stack, 16, stack, lookup, NULL);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 300, 1), 1);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 310, 1), 1);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 320, 1), 0);
    const struct trace_model_process *process = read_back(f);
    assert_non_null(trace_model_stack(process, 5));
    assert_non_null(trace_model_stack(process, 5 + sites - 1));
    assert_int_equal(trace_model_stack(process, 5 + sites - 1)->depth, 3);
}

/* After a checkpoint (figures with their sites), stacks written ahead do
 * not write newer totals over it, which its sites would not add up to. */
static void stacks_ahead_after_checkpoint(void **state)
{
    struct image_fixture *f = *state;
    recorder_alloc(&f->recorder, 200, 0x1000, 48, 1, lookup, NULL);
    assert_int_equal(trace_output_checkpoint(f->writer, f->symbols, &f->image, &f->modules_written, 500), 0);
    recorder_alloc(&f->recorder, 550, 0x2000, 16, 2, lookup, NULL);
    assert_int_equal(trace_output_new_stacks(f->writer, f->symbols, &f->image, &f->modules_written, 600, 1), 1);
    const struct trace_model_process *process = read_back(f);
    assert_int_equal(process->info.end_ns, 500);
    assert_int_equal(process->info.allocations, 1);
    assert_int_equal(process->site_count, 1);
    assert_int_equal(trace_model_stack(process, 2)->depth, 1); /* the new stack is there all the same */
}

/* Why the shim never ran, from what the engine knows of the image. */
static void shim_never_loaded(void **state)
{
    struct image_fixture *f = *state;
    f->image.flags = TRACE_PROC_EXITED;
    f->image.statically_linked = 1;
    assert_int_equal(trace_output_process(f->writer, f->symbols, &f->image, &f->modules_written), 0);
    const struct trace_model_process *process = read_back(f);
    assert_true(has_warning(process, "process 4242 (/bin/prog): the shim never loaded, so its allocations are not "
                                     "recorded: a statically linked"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(checkpoint_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpoint_then_end, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_in_two_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(stacks_ahead_then_end, setup, teardown),
        cmocka_unit_test_setup_teardown(stacks_ahead_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(stacks_ahead_after_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(stacks_ahead_a_run_a_call, setup, teardown),
        cmocka_unit_test_setup_teardown(shim_never_loaded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

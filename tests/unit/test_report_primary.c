/*
 * test_report_primary.c - which process image is the report's headline.
 *
 * The tracer flags the launched command's images (TRACE_PROC_PRIMARY): the
 * last of its exec chain is the headline, however much a fork child
 * allocates. A trace without the flag (written before it existed) keeps
 * the old rule: the image that allocated most, unless the end of the exec
 * chain did at least a tenth as many.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../report/report_model.h"
#include "../../report/trace_reader.h"
#include "../../tracer/trace_writer.h"

static const char *const shell_argv[] = {"/bin/sh", "-c", "exec ./tool"};
static const char *const tool_argv[] = {"./tool"};

/* process_id 0: the shell, which execs process 1 (the tool, 20
 * allocations), which forks process 2 (500 allocations). */
static struct trace_process image(uint32_t process_id, uint32_t flags)
{
    struct trace_process p = {0};
    p.process_id = process_id;
    p.pid = process_id == 2 ? 201 : 200;
    p.parent_process_id = process_id == 0 ? TRACE_NONE : process_id - 1;
    p.exe = process_id == 0 ? "/bin/sh" : "/path/tool";
    p.argc = process_id == 0 ? 3 : 1;
    p.argv = process_id == 0 ? shell_argv : tool_argv;
    p.flags = TRACE_PROC_SHIM_SEEN | flags;
    p.exit_status = process_id == 2 ? 7 : 0;
    p.allocations = process_id == 0 ? 5 : process_id == 1 ? 20 : 500;
    return p;
}

static uint32_t headline_of(uint32_t primary_flag)
{
    char dir[] = "/tmp/memslope-primary.XXXXXX", path[64], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/primary.trace", dir);
    struct trace_writer *w = trace_writer_create(path, err, sizeof err);
    assert_non_null(w);
    struct trace_process shell = image(0, TRACE_PROC_EXECED | primary_flag);
    struct trace_process tool = image(1, TRACE_PROC_EXITED | primary_flag);
    struct trace_process child = image(2, TRACE_PROC_EXITED);
    assert_int_equal(trace_write_process(w, &shell), 0);
    assert_int_equal(trace_write_process(w, &child), 0); /* the child ends first */
    assert_int_equal(trace_write_process(w, &tool), 0);
    assert_int_equal(trace_writer_finish(w, err, sizeof err), 0);
    struct trace_model model;
    if (trace_read_file(path, &model, err, sizeof err) != 0)
        fail_msg("%s", err);
    const struct trace_model_process *primary = report_primary_process(&model);
    assert_non_null(primary);
    uint32_t process_id = primary->process_id;
    trace_model_free(&model);
    unlink(path);
    rmdir(dir);
    return process_id;
}

static void test_flagged_exec_chain_end_is_the_headline(void **state)
{
    (void)state;
    assert_int_equal(headline_of(TRACE_PROC_PRIMARY), 1);
}

static void test_unflagged_trace_keeps_the_old_rule(void **state)
{
    (void)state;
    assert_int_equal(headline_of(0), 2); /* 500 allocations, more than ten times the tool's 20 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flagged_exec_chain_end_is_the_headline),
        cmocka_unit_test(test_unflagged_trace_keeps_the_old_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_attribution.c - the frame that names a site (report/attribution.h):
 * whose code each module is, the first frame of the user's code in a
 * synthetic stack (Python frames are the user's; allocator frames are not
 * counted; all in the interpreter falls back to the first visible frame),
 * and the one-line name of a frame. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../report/attribution.h"
#include "test_stacks.h"

static void test_module_owner(void **state)
{
    (void)state;
    assert_int_equal(attribution_module_owner("/usr/bin/python3.11"), MODULE_OWNER_INTERPRETER);
    assert_int_equal(attribution_module_owner("/opt/py/lib/libpython3.12.so.1.0"), MODULE_OWNER_INTERPRETER);
    assert_int_equal(attribution_module_owner("/usr/lib/x86_64-linux-gnu/libffi.so.8.1.2"), MODULE_OWNER_INTERPRETER);
    assert_int_equal(attribution_module_owner("/usr/lib/python3.11/lib-dynload/_decimal.cpython-311-x86_64-linux-gnu.so"),
                     MODULE_OWNER_INTERPRETER);
    assert_int_equal(attribution_module_owner(module_ext.path), MODULE_OWNER_USER);
    assert_int_equal(attribution_module_owner("/lib/x86_64-linux-gnu/libc.so.6"), MODULE_OWNER_LIBC);
    assert_int_equal(attribution_module_owner("/lib/libc-2.31.so"), MODULE_OWNER_LIBC);
    assert_int_equal(attribution_module_owner("/lib64/ld-linux-x86-64.so.2"), MODULE_OWNER_LIBC);
    assert_int_equal(attribution_module_owner("/lib/x86_64-linux-gnu/libm.so.6"), MODULE_OWNER_LIBC);
    assert_int_equal(attribution_module_owner("/lib/x86_64-linux-gnu/libpthread.so.0"), MODULE_OWNER_LIBC);
    assert_int_equal(attribution_module_owner("/lib/x86_64-linux-gnu/libstdc++.so.6"), MODULE_OWNER_CXX_RUNTIME);
    assert_int_equal(attribution_module_owner("/lib/x86_64-linux-gnu/libgcc_s.so.1"), MODULE_OWNER_CXX_RUNTIME);
    assert_int_equal(attribution_module_owner("/x/lib/memslope/libmemslope.so"), MODULE_OWNER_ALLOCATOR);
    assert_int_equal(attribution_module_owner("/usr/lib/libtcmalloc_minimal.so.4"), MODULE_OWNER_ALLOCATOR);
    assert_int_equal(attribution_module_owner("/usr/lib/libjemalloc.so.2"), MODULE_OWNER_ALLOCATOR);
    assert_int_equal(attribution_module_owner("/usr/lib/libmimalloc.so.2"), MODULE_OWNER_ALLOCATOR);
    assert_int_equal(attribution_module_owner("/home/u/libcalc.so"), MODULE_OWNER_USER);
    assert_int_equal(attribution_module_owner("/home/u/mypython3tool"), MODULE_OWNER_USER);
    assert_int_equal(attribution_module_owner(""), MODULE_OWNER_USER);
}

static int user_index(struct trace_model_stack *stack, const char **name)
{
    const struct trace_model_frame *frame;
    int index = attribution_user_frame(&model, stack, &frame);
    *name = frame ? frame->function : NULL;
    return index;
}

static void test_user_frame(void **state)
{
    (void)state;
    struct stack s;
    const char *name;
    /* The first frame outside the interpreter: index among the visible frames. */
    assert_int_equal(user_index(make_stack(&s, F_PYLONG, F_BUILD, F_EVAL, F_COUNT), &name), 1);
    assert_string_equal(name, "build_items");
    assert_int_equal(user_index(make_stack(&s, F_NEW, F_PYLONG, F_BUILD, F_COUNT), &name), 1); /* new is hidden */
    assert_int_equal(user_index(make_stack(&s, F_ALLOC_DTV, F_ALLOC_TLS, F_PTHREAD, F_MAIN, F_COUNT), &name), 3);
    assert_string_equal(name, "main");
    /* A Python frame is the user's code; so is code in no known module. */
    assert_int_equal(user_index(make_stack(&s, F_PYLONG, F_EVAL, F_PYFRAME, F_COUNT), &name), 2);
    assert_string_equal(name, "step");
    assert_int_equal(user_index(make_stack(&s, F_PYLONG, F_PYMODULE, F_COUNT), &name), 1);
    assert_string_equal(name, "run");
    /* The import system and the standard library are the interpreter's;
     * an installed package (dist-packages, site-packages) is the user's. */
    assert_int_equal(user_index(make_stack(&s, F_PYLONG, F_STDLIB, F_FROZEN, F_PYFRAME, F_COUNT), &name), 3);
    assert_string_equal(name, "step");
    assert_int_equal(user_index(make_stack(&s, F_PYLONG, F_SITEPKG, F_COUNT), &name), 1);
    assert_string_equal(name, "handle");
    /* All in the interpreter: the first visible frame. */
    assert_int_equal(user_index(make_stack(&s, F_NEW, F_PYLONG, F_EVAL, F_INIT, F_COUNT), &name), 0);
    assert_string_equal(name, "PyLong_FromLong");
    assert_int_equal(user_index(make_stack(&s, F_LEAKY, F_MAIN, F_COUNT), &name), 0);
    assert_int_equal(user_index(make_stack(&s, F_NEW, F_COUNT), &name), -1);
    assert_null(name);
    assert_int_equal(attribution_user_frame(&model, NULL, &(const struct trace_model_frame *){NULL}), -1);
}

static void test_frame_name(void **state)
{
    (void)state;
    char buffer[128];
    assert_string_equal(attribution_frame_name(&frames[F_LEAKY], buffer, sizeof buffer), "leaky_site (leak.c:6)");
    assert_string_equal(attribution_frame_name(&frames[F_PYFRAME], buffer, sizeof buffer), "step (bench.py:9)");
    assert_string_equal(attribution_frame_name(&frames[F_EVAL], buffer, sizeof buffer), "_PyEval_EvalFrameDefault");
    assert_string_equal(attribution_frame_name(&frames[F_UNNAMED], buffer, sizeof buffer), "0x401000 (app+0x1000)");
}

/* A name longer than the buffer is shortened in its middle: its start, its
 * end and where it is stay (labels of std::thread's constructor, 2,000
 * characters, lost their file and line). */
static void test_long_frame_name_keeps_where(void **state)
{
    (void)state;
    char name[2200];
    memset(name, 'x', sizeof name - 1);
    memcpy(name, "std::thread::thread<", 20);
    memcpy(name + sizeof name - 1 - 7, ">(&&)ok", 7);
    name[sizeof name - 1] = '\0';
    struct trace_model_frame frame = {&module_app, name, "/usr/include/c++/12/bits/std_thread.h", 142, 0, 0, 0};
    char buffer[1024];
    const char *label = attribution_frame_name(&frame, buffer, sizeof buffer);
    assert_int_equal(strlen(label), sizeof buffer - 1);
    assert_memory_equal(label, "std::thread::thread<", 20);
    assert_non_null(strstr(label, "..."));
    const char *end = ">(&&)ok (std_thread.h:142)";
    assert_string_equal(label + strlen(label) - strlen(end), end);
    /* a buffer too small for the elision: cut as before */
    char small[24];
    assert_string_equal(attribution_frame_name(&frame, small, sizeof small), "std::thread::thread<xxx");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_owner),
        cmocka_unit_test(test_user_frame),
        cmocka_unit_test(test_frame_name),
        cmocka_unit_test(test_long_frame_name_keeps_where),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

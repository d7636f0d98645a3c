/*
 * test_stacks.h - synthetic frames and stacks, with modules of the user's
 * code, the interpreter, libc, ld.so and libstdc++, for the unit tests of
 * attribution and suppressions (included, not linked).
 */
#ifndef MEMSLOPE_TEST_STACKS_H
#define MEMSLOPE_TEST_STACKS_H

#include <stdarg.h>
#include <stdint.h>

#include "../../report/trace_reader.h"

static struct trace_model_module module_app = {.path = "/home/u/app"};
static struct trace_model_module module_ext = {.path = "/home/u/venv/lib/python3.11/site-packages/ext.cpython-311.so"};
static struct trace_model_module module_python = {.path = "/usr/bin/python3.11"};
static struct trace_model_module module_libc = {.path = "/usr/lib/x86_64-linux-gnu/libc.so.6"};
static struct trace_model_module module_ld = {.path = "/lib64/ld-linux-x86-64.so.2"};
static struct trace_model_module module_stdcxx = {.path = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"};

enum {
    F_NEW,        /* operator new(unsigned long), libstdc++, an allocator frame */
    F_ALLOC_DTV,  /* allocate_dtv, ld.so */
    F_ALLOC_TLS,  /* _dl_allocate_tls, ld.so */
    F_PTHREAD,    /* pthread_create, libc */
    F_MAIN,       /* main, the app */
    F_LEAKY,      /* leaky_site (leak.c:6), the app */
    F_WIDGET,     /* make_widget(long), the app */
    F_PYLONG,     /* PyLong_FromLong, python3.11 */
    F_BUILD,      /* build_items (ext.c:14), the user's extension */
    F_EVAL,       /* _PyEval_EvalFrameDefault, python3.11 */
    F_PYFRAME,    /* step (bench.py:9), a Python frame */
    F_UNNAMED,    /* ??? in the app */
    F_BAR,        /* foo::bar(int), the app (mangled _ZN3foo3barEi) */
    F_INIT,       /* Py_InitializeFromConfig, python3.11 */
    F_PYMODULE,   /* run (job.py:3), a Python frame that a tracer put in the interpreter's module */
    F_FROZEN,     /* _find_and_load (<frozen importlib._bootstrap>:1178), the import system */
    F_STDLIB,     /* dumps (/usr/lib/python3.11/json/__init__.py:231), the standard library */
    F_SITEPKG,    /* handle (/usr/lib/python3/dist-packages/app/h.py:7), an installed package */
    F_COUNT
};

static struct trace_model_frame frames[F_COUNT] = {
    [F_NEW] = {&module_stdcxx, "operator new(unsigned long)", "", 0, 0, 0, TRACE_FRAME_ALLOCATOR},
    [F_ALLOC_DTV] = {&module_ld, "allocate_dtv", "../elf/dl-tls.c", 401, 0, 0, 0},
    [F_ALLOC_TLS] = {&module_ld, "_dl_allocate_tls", "../elf/dl-tls.c", 670, 0, 0, 0},
    [F_PTHREAD] = {&module_libc, "pthread_create", "./nptl/pthread_create.c", 650, 0, 0, 0},
    [F_MAIN] = {&module_app, "main", "app.c", 20, 0, 0, 0},
    [F_LEAKY] = {&module_app, "leaky_site", "src/leak.c", 6, 0, 0, 0},
    [F_WIDGET] = {&module_app, "make_widget(long)", "widget.cpp", 33, 0, 0, 0},
    [F_PYLONG] = {&module_python, "PyLong_FromLong", "", 0, 0x500000, 0x100000, 0},
    [F_BUILD] = {&module_ext, "build_items", "ext.c", 14, 0, 0, 0},
    [F_EVAL] = {&module_python, "_PyEval_EvalFrameDefault", "", 0, 0, 0, 0},
    [F_PYFRAME] = {NULL, "step", "bench.py", 9, 0, 0, TRACE_FRAME_PYTHON},
    [F_UNNAMED] = {&module_app, "", "", 0, 0x401000, 0x1000, 0},
    [F_BAR] = {&module_app, "foo::bar(int)", "bar.cpp", 3, 0, 0, 0},
    [F_INIT] = {&module_python, "Py_InitializeFromConfig", "", 0, 0, 0, 0},
    [F_PYMODULE] = {&module_python, "run", "job.py", 3, 0, 0, TRACE_FRAME_PYTHON},
    [F_FROZEN] = {NULL, "_find_and_load", "<frozen importlib._bootstrap>", 1178, 0, 0, TRACE_FRAME_PYTHON},
    [F_STDLIB] = {NULL, "dumps", "/usr/lib/python3.11/json/__init__.py", 231, 0, 0, TRACE_FRAME_PYTHON},
    [F_SITEPKG] = {NULL, "handle", "/usr/lib/python3/dist-packages/app/h.py", 7, 0, 0, TRACE_FRAME_PYTHON},
};

static const struct trace_model model = {.frames = frames, .frame_count = F_COUNT};

struct stack {
    struct trace_model_stack stack;
    uint32_t ids[16];
};

/* A stack of frame ids, innermost first, ending at F_COUNT. */
static struct trace_model_stack *make_stack(struct stack *s, ...)
{
    va_list args;
    va_start(args, s);
    s->stack.depth = 0;
    for (int id = va_arg(args, int); id != F_COUNT; id = va_arg(args, int))
        s->ids[s->stack.depth++] = (uint32_t)id;
    va_end(args);
    s->stack.frame_ids = s->ids;
    return &s->stack;
}

#endif

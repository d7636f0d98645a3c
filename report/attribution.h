/*
 * attribution.h - whose code a frame is: the user's, or the interpreter's,
 * libc's, the C++ runtime's or an allocator's. Every place that names ONE
 * site (the gate's "top site", the text report's one-line names, the HTML
 * tables, the JSON "user_frame") names its first frame in the user's code,
 * so a leak in a C extension reads `build_items (ext.c:14)` rather than
 * `PyLong_FromLong (python3.11+0x...)`. The default suppressions use the
 * same test to stay clear of the user's code (suppressions.h).
 */
#ifndef MEMSLOPE_ATTRIBUTION_H
#define MEMSLOPE_ATTRIBUTION_H

#include <stddef.h>
#include <stdint.h>

#include "trace_reader.h"

enum module_owner {
    MODULE_OWNER_USER,        /* anything not listed below, and code in no known module */
    MODULE_OWNER_INTERPRETER, /* python3*, libpython3*.so*, CPython's own lib-dynload extensions, libffi */
    MODULE_OWNER_LIBC,        /* libc, ld.so, libm, libpthread, libdl, librt */
    MODULE_OWNER_CXX_RUNTIME, /* libstdc++, libgcc_s */
    MODULE_OWNER_ALLOCATOR,   /* libmemslope.so, tcmalloc, jemalloc, mimalloc */
};

/* The owner of the module at path, judged by its file name (and, for
 * CPython's extension modules, its lib-dynload folder); "" is the user's. */
enum module_owner attribution_module_owner(const char *path);

/* A frame is the user's when its module is (attribution_module_owner), when
 * it is a Python frame (TRACE_FRAME_PYTHON) of neither the frozen import
 * system nor the standard library (lib/python3.X/ outside site-packages and
 * dist-packages), and when it is in no known module; allocator frames
 * (TRACE_FRAME_ALLOCATOR) never are. */
int attribution_frame_is_user(const struct trace_model_frame *frame);

/* The frame that names a stack: its first visible frame (report_frame_visible)
 * that is the user's, or the first visible frame when none is. Returns its
 * index among the visible frames (the JSON report's "frames" array) and sets
 * *frame, or returns -1 (and NULL) when the stack has no visible frame. */
int attribution_user_frame(const struct trace_model *model, const struct trace_model_stack *stack,
                           const struct trace_model_frame **frame);

/* "function (file:line)" of a frame, on one line: file is cut to its last
 * component; an unnamed frame is "0xADDRESS (module+0xOFFSET)"; a Python
 * frame "qualname (file.py:line)". Returns buffer. */
const char *attribution_frame_name(const struct trace_model_frame *frame, char *buffer, size_t size);

#endif

/* attribution.c - see attribution.h. */
#include "attribution.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report_model.h"

struct owner_pattern {
    const char *base_name; /* fnmatch pattern for the file name */
    enum module_owner owner;
};

/* Versioned names come in two spellings: libc.so.6 and (older glibc) libc-2.31.so. */
static const struct owner_pattern owner_patterns[] = {
    {"python3*", MODULE_OWNER_INTERPRETER},
    {"libpython3*.so*", MODULE_OWNER_INTERPRETER},
    {"libc.so*", MODULE_OWNER_LIBC},
    {"libc-*.so", MODULE_OWNER_LIBC},
    {"ld-linux*.so*", MODULE_OWNER_LIBC},
    {"ld-*.so", MODULE_OWNER_LIBC},
    {"libm.so*", MODULE_OWNER_LIBC},
    {"libm-*.so", MODULE_OWNER_LIBC},
    {"libmvec.so*", MODULE_OWNER_LIBC},
    {"libpthread.so*", MODULE_OWNER_LIBC},
    {"libpthread-*.so", MODULE_OWNER_LIBC},
    {"libdl.so*", MODULE_OWNER_LIBC},
    {"libdl-*.so", MODULE_OWNER_LIBC},
    {"librt.so*", MODULE_OWNER_LIBC},
    {"librt-*.so", MODULE_OWNER_LIBC},
    {"libstdc++.so*", MODULE_OWNER_CXX_RUNTIME},
    {"libgcc_s.so*", MODULE_OWNER_CXX_RUNTIME},
    {"libc++.so*", MODULE_OWNER_CXX_RUNTIME},
    {"libc++abi.so*", MODULE_OWNER_CXX_RUNTIME},
    /* the call trampoline of ctypes and cffi: the site is what called through it
     * (a ctypes leak was named '??? (libffi.so.8.1.2+0x6f7a)') */
    {"libffi.so*", MODULE_OWNER_INTERPRETER},
    {"libmemslope.so", MODULE_OWNER_ALLOCATOR},
    {"libtcmalloc*", MODULE_OWNER_ALLOCATOR},
    {"libjemalloc*", MODULE_OWNER_ALLOCATOR},
    {"libmimalloc*", MODULE_OWNER_ALLOCATOR},
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

enum module_owner attribution_module_owner(const char *path)
{
    const char *name = base_name(path);
    for (size_t i = 0; i < sizeof owner_patterns / sizeof *owner_patterns; i++)
        if (fnmatch(owner_patterns[i].base_name, name, 0) == 0)
            return owner_patterns[i].owner;
    /* CPython's own extension modules (_decimal, _ctypes, ...); a user's
     * extension sits in site-packages or beside the script. */
    if (strstr(path, "/lib-dynload/"))
        return MODULE_OWNER_INTERPRETER;
    return MODULE_OWNER_USER;
}

/* A Python frame of the interpreter's own library: its frozen modules
 * (importlib's "<frozen importlib._bootstrap>") and the standard library
 * under lib/python3.X/, but not site-packages or dist-packages, where the
 * user's installed code lives. An import is the standard library's frames
 * above the module being imported: the site is that module's line. */
static int python_frame_is_interpreter(const char *file)
{
    if (strncmp(file, "<frozen ", 8) == 0)
        return 1;
    const char *library = strstr(file, "/lib/python3");
    return library && !strstr(library, "-packages/");
}

int attribution_frame_is_user(const struct trace_model_frame *frame)
{
    if (frame->flags & TRACE_FRAME_ALLOCATOR)
        return 0;
    if (frame->flags & TRACE_FRAME_PYTHON)
        return !python_frame_is_interpreter(frame->file);
    if (!frame->module)
        return 1;
    return attribution_module_owner(frame->module->path) == MODULE_OWNER_USER;
}

int attribution_user_frame(const struct trace_model *model, const struct trace_model_stack *stack,
                           const struct trace_model_frame **frame)
{
    int visible = 0, first = -1;
    *frame = NULL;
    for (uint32_t i = 0; stack && i < stack->depth; i++) {
        const struct trace_model_frame *candidate = &model->frames[stack->frame_ids[i]];
        if (!report_frame_visible(candidate))
            continue;
        if (first < 0) {
            first = visible;
            *frame = candidate;
        }
        if (attribution_frame_is_user(candidate)) {
            *frame = candidate;
            return visible;
        }
        visible++;
    }
    return first;
}

/* What is shortened of a function's name that does not fit beside where it
 * is: the middle (a C++ template's arguments), the start and the end kept. */
#define NAME_ELISION "..."

const char *attribution_frame_name(const struct trace_model_frame *frame, char *buffer, size_t size)
{
    if (!*frame->function) {
        snprintf(buffer, size, "0x%" PRIx64 " (%s+0x%" PRIx64 ")", frame->address,
                 frame->module ? base_name(frame->module->path) : "?", frame->module_offset);
        return buffer;
    }
    const char *file = base_name(frame->file);
    char where[512] = "";
    if (*file && frame->line)
        snprintf(where, sizeof where, " (%s:%u)", file, frame->line);
    else if (*file)
        snprintf(where, sizeof where, " (%s)", file);
    size_t function = strlen(frame->function), suffix = strlen(where), elision = strlen(NAME_ELISION);
    if (function + suffix < size || size < suffix + elision + 16) {
        snprintf(buffer, size, "%s%s", frame->function, where);
        return buffer;
    }
    /* shortened, so that the file and line stay (a C++ name can run to
     * 2,000 characters: std::thread's constructor's) */
    size_t keep = size - 1 - suffix - elision, tail = keep / 3, head = keep - tail;
    snprintf(buffer, size, "%.*s%s%s%s", (int)head, frame->function, NAME_ELISION,
             frame->function + function - tail, where);
    return buffer;
}

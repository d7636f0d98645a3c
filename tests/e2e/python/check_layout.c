/*
 * check_layout.c - built by test_python_layout.sh against one interpreter's
 * own headers (Py_BUILD_CORE, for its internal frame structures): compares
 * every offset of the shim's layout for that version (preload/python_layout.h)
 * with offsetof() in the real structures. Prints one line per mismatch and
 * exits 1, or prints "layout ok VERSION" and exits 0; exits 2 when the
 * shim has no layout for this version.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>

#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif

#include "../../../preload/python_layout.h"

static int mismatches;

static void check(const char *field, unsigned shim, size_t real)
{
    if (shim != real) {
        printf("%s: the shim says %u, CPython %d.%d says %zu\n", field, shim, PY_MAJOR_VERSION, PY_MINOR_VERSION,
               real);
        mismatches++;
    }
}

#define CHECK(field, type, member) check(#field, layout->field, offsetof(type, member))

int main(void)
{
    const struct python_layout *layout = NULL;
    for (size_t i = 0; i < sizeof python_layouts / sizeof python_layouts[0]; i++)
        if (python_layouts[i].version == (PY_VERSION_HEX >> 16))
            layout = &python_layouts[i];
    if (!layout) {
        printf("no layout for %s\n", PY_VERSION);
        return 2;
    }
#if PY_VERSION_HEX < 0x030B0000
    /* one PyFrameObject an evaluation, its place in f_lasti */
    check("tstate_cframe", layout->tstate_cframe, NO_FIELD);
    CHECK(current_frame, PyThreadState, frame);
    CHECK(frame_code, PyFrameObject, f_code);
    CHECK(frame_previous, PyFrameObject, f_back);
    CHECK(frame_lasti, PyFrameObject, f_lasti);
    check("frame_instr", layout->frame_instr, NO_FIELD);
    check("frame_owner", layout->frame_owner, NO_FIELD);
    check("frame_is_entry", layout->frame_is_entry, NO_FIELD);
    check("frame_function", layout->frame_function, NO_FIELD);
    check("frame_object_frame", layout->frame_object_frame, NO_FIELD);
    check("code_bytecode", layout->code_bytecode, NO_FIELD);
    CHECK(code_qualname, PyCodeObject, co_name);
#if PY_VERSION_HEX >= 0x030A0000
    CHECK(code_linetable, PyCodeObject, co_linetable);
    check("lasti_bytes", layout->lasti_bytes, sizeof(_Py_CODEUNIT));
    check("line_format", layout->line_format, PYTHON_LINES_310);
#else
    CHECK(code_linetable, PyCodeObject, co_lnotab);
    check("lasti_bytes", layout->lasti_bytes, 1);
    check("line_format", layout->line_format, PYTHON_LINES_LNOTAB);
#endif
#else
    check("frame_lasti", layout->frame_lasti, NO_FIELD);
    check("line_format", layout->line_format, PYTHON_LINES_LOCATIONS);
#if PY_VERSION_HEX >= 0x030D0000
    check("tstate_cframe", layout->tstate_cframe, NO_FIELD);
    CHECK(current_frame, PyThreadState, current_frame);
    CHECK(frame_code, _PyInterpreterFrame, f_executable);
    CHECK(frame_instr, _PyInterpreterFrame, instr_ptr);
#else
    CHECK(tstate_cframe, PyThreadState, cframe);
    CHECK(current_frame, _PyCFrame, current_frame);
    CHECK(frame_code, _PyInterpreterFrame, f_code);
    CHECK(frame_instr, _PyInterpreterFrame, prev_instr);
#endif
#if PY_VERSION_HEX >= 0x030C0000
    CHECK(frame_function, _PyInterpreterFrame, f_funcobj);
    check("frame_is_entry", layout->frame_is_entry, NO_FIELD);
    check("owned_by_cstack", layout->owned_by_cstack, FRAME_OWNED_BY_CSTACK);
#else
    CHECK(frame_function, _PyInterpreterFrame, f_func);
    CHECK(frame_is_entry, _PyInterpreterFrame, is_entry);
    check("owned_by_cstack", layout->owned_by_cstack, 0xff);
#endif
    CHECK(frame_previous, _PyInterpreterFrame, previous);
    CHECK(frame_owner, _PyInterpreterFrame, owner);
    CHECK(code_qualname, PyCodeObject, co_qualname);
    CHECK(code_linetable, PyCodeObject, co_linetable);
    CHECK(code_bytecode, PyCodeObject, co_code_adaptive);
    CHECK(frame_object_frame, PyFrameObject, f_frame);
#endif
    CHECK(code_filename, PyCodeObject, co_filename);
    CHECK(code_first_line, PyCodeObject, co_firstlineno);
    CHECK(str_length, PyASCIIObject, length);
    CHECK(str_state, PyASCIIObject, state);
    check("str_ascii_data", layout->str_ascii_data, sizeof(PyASCIIObject));
    check("str_compact_data", layout->str_compact_data, sizeof(PyCompactUnicodeObject));
    CHECK(bytes_size, PyVarObject, ob_size);
    CHECK(bytes_data, PyBytesObject, ob_sval);
    CHECK(function_module, PyFunctionObject, func_module);
    /* the state bits the shim tests */
    PyASCIIObject probe = {0};
    probe.state.compact = 1;
    probe.state.ascii = 1;
    probe.state.kind = 4;
    unsigned state;
    memcpy(&state, (const char *)&probe + offsetof(PyASCIIObject, state), sizeof state);
    check("str state bits", STR_COMPACT | STR_ASCII | (4u << STR_KIND_SHIFT), state);
    if (mismatches)
        return 1;
    printf("layout ok %s\n", PY_VERSION);
    return 0;
}

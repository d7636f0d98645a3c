/*
 * python_layout.h - where CPython keeps what the shim reads, by version:
 * offsets into its thread state, interpreter frames, code, str, bytes,
 * frame and function objects. Taken with offsetof() from each version's
 * own headers (Include/internal/pycore_frame.h, Include/cpython/code.h,
 * ...); tests/e2e/test_python_layout.sh checks them again, with the same
 * offsetof() expressions, against every interpreter 3.6+ whose headers
 * the machine that runs the tests has. Patch releases of one minor
 * version share a layout (3.11.2 and 3.11.7 checked).
 *
 * Before 3.11 a frame is a PyFrameObject, each call of the evaluation
 * function runs exactly one, and it says where it is with f_lasti (an
 * instruction's offset in bytes, in code units from 3.10; -1 before the
 * first) instead of a pointer; its code object has no qualified name
 * (code_qualname is co_name there) and keeps its lines in co_lnotab (3.6
 * to 3.9) or 3.10's co_linetable (python_linetable.h).
 */
#ifndef MEMSLOPE_PYTHON_LAYOUT_H
#define MEMSLOPE_PYTHON_LAYOUT_H

#include <stdint.h>

#define NO_FIELD 0xffffu /* a field the version does not have */

/* The format of code_linetable (python_linetable.h). */
enum python_line_format { PYTHON_LINES_LOCATIONS = 0, PYTHON_LINES_310 = 1, PYTHON_LINES_LNOTAB = 2 };

struct python_layout {
    uint32_t version; /* PY_VERSION_HEX >> 16: 0x030b for 3.11 */
    /* thread state -> current frame: tstate->cframe->current_frame (3.11,
     * 3.12) or tstate->current_frame (3.13: tstate_cframe is NO_FIELD) */
    uint16_t tstate_cframe, current_frame;
    /* _PyInterpreterFrame */
    uint16_t frame_code, frame_previous, frame_instr, frame_owner;
    uint16_t frame_is_entry; /* 3.11: the first frame an evaluation ran; NO_FIELD after */
    uint16_t frame_function;
    uint8_t owned_by_cstack; /* 3.12+: the entry frame each evaluation pushes; 0xff before */
    /* PyCodeObject */
    uint16_t code_qualname, code_filename, code_first_line, code_linetable, code_bytecode;
    /* str and bytes */
    uint16_t str_length, str_state, str_ascii_data, str_compact_data;
    uint16_t bytes_size, bytes_data;
    /* PyFrameObject -> its _PyInterpreterFrame; PyFunctionObject.__module__ */
    uint16_t frame_object_frame, function_module;
    /* before 3.11: PyFrameObject.f_lasti (NO_FIELD after), the bytes of
     * one of its units; the line table's format */
    uint16_t frame_lasti;
    uint8_t lasti_bytes, line_format;
};

/* What 3.6 to 3.10 share: PyThreadState.frame, PyFrameObject's f_back and
 * f_code, str and bytes; no interpreter frame, no bytecode inside the code
 * object, no qualified name. */
#define FRAME_OBJECT_LAYOUT                                                                                          \
    .tstate_cframe = NO_FIELD, .current_frame = 24, .frame_code = 32, .frame_previous = 24, .frame_instr = NO_FIELD, \
    .frame_owner = NO_FIELD, .frame_is_entry = NO_FIELD, .frame_function = NO_FIELD, .owned_by_cstack = 0xff,       \
    .code_bytecode = NO_FIELD, .str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,     \
    .bytes_size = 16, .bytes_data = 32, .frame_object_frame = NO_FIELD

static const struct python_layout python_layouts[] = {
    {.version = 0x0306, FRAME_OBJECT_LAYOUT, .code_qualname = 104, .code_filename = 96, .code_first_line = 36,
     .code_linetable = 112, .function_module = 88, .frame_lasti = 120, .lasti_bytes = 1,
     .line_format = PYTHON_LINES_LNOTAB},
    {.version = 0x0307, FRAME_OBJECT_LAYOUT, .code_qualname = 104, .code_filename = 96, .code_first_line = 36,
     .code_linetable = 112, .function_module = 88, .frame_lasti = 104, .lasti_bytes = 1,
     .line_format = PYTHON_LINES_LNOTAB},
    {.version = 0x0308, FRAME_OBJECT_LAYOUT, .code_qualname = 112, .code_filename = 104, .code_first_line = 40,
     .code_linetable = 120, .function_module = 88, .frame_lasti = 104, .lasti_bytes = 1,
     .line_format = PYTHON_LINES_LNOTAB},
    {.version = 0x0309, FRAME_OBJECT_LAYOUT, .code_qualname = 112, .code_filename = 104, .code_first_line = 40,
     .code_linetable = 120, .function_module = 88, .frame_lasti = 104, .lasti_bytes = 1,
     .line_format = PYTHON_LINES_LNOTAB},
    {.version = 0x030a, FRAME_OBJECT_LAYOUT, .code_qualname = 112, .code_filename = 104, .code_first_line = 40,
     .code_linetable = 120, .function_module = 104, .frame_lasti = 96, .lasti_bytes = 2,
     .line_format = PYTHON_LINES_310},
    {.version = 0x030b, .tstate_cframe = 56, .current_frame = 8,
     .frame_code = 32, .frame_previous = 48, .frame_instr = 56, .frame_owner = 69, .frame_is_entry = 68,
     .frame_function = 0, .owned_by_cstack = 0xff,
     .code_qualname = 128, .code_filename = 112, .code_first_line = 72, .code_linetable = 136, .code_bytecode = 184,
     .str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
     .bytes_size = 16, .bytes_data = 32, .frame_object_frame = 24, .function_module = 104,
     .frame_lasti = NO_FIELD},
    {.version = 0x030c, .tstate_cframe = 56, .current_frame = 0,
     .frame_code = 0, .frame_previous = 8, .frame_instr = 56, .frame_owner = 70, .frame_is_entry = NO_FIELD,
     .frame_function = 16, .owned_by_cstack = 3,
     .code_qualname = 128, .code_filename = 112, .code_first_line = 68, .code_linetable = 136, .code_bytecode = 192,
     .str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
     .bytes_size = 16, .bytes_data = 32, .frame_object_frame = 24, .function_module = 104,
     .frame_lasti = NO_FIELD},
    {.version = 0x030d, .tstate_cframe = NO_FIELD, .current_frame = 72,
     .frame_code = 0, .frame_previous = 8, .frame_instr = 56, .frame_owner = 70, .frame_is_entry = NO_FIELD,
     .frame_function = 16, .owned_by_cstack = 3,
     .code_qualname = 128, .code_filename = 112, .code_first_line = 68, .code_linetable = 136, .code_bytecode = 200,
     .str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
     .bytes_size = 16, .bytes_data = 32, .frame_object_frame = 24, .function_module = 104,
     .frame_lasti = NO_FIELD},
};

/* PyASCIIObject.state bits, the same in 3.6 to 3.13 (interned takes the
 * two lowest) */
#define STR_KIND_SHIFT 2
#define STR_KIND_MASK 0x7u
#define STR_COMPACT 0x20u
#define STR_ASCII 0x40u

#endif

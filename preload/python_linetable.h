/*
 * python_linetable.h - CPython's location table (co_linetable, 3.11 and
 * later): the source line of a bytecode offset, as PyCode_Addr2Line
 * computes it. Pure: used by the shim on its own copy of a table.
 */
#ifndef MEMSLOPE_PYTHON_LINETABLE_H
#define MEMSLOPE_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at byte_offset of a code object whose
 * location table is table (length bytes), counting from first_line; -1
 * when the instruction has no line or lies past the table. */
int python_linetable_line(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset);

#endif

/*
 * python_linetable.h - CPython's tables of source lines by bytecode offset,
 * read as PyCode_Addr2Line reads them: the location table of 3.11 and
 * later (co_linetable), 3.10's line table (co_linetable, PEP 626) and the
 * lnotab of 3.6 to 3.9 (co_lnotab). Pure: used by the shim on its own copy
 * of a table.
 */
#ifndef MEMSLOPE_PYTHON_LINETABLE_H
#define MEMSLOPE_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at byte_offset of a code object whose
 * location table is table (length bytes), counting from first_line; -1
 * when the instruction has no line or lies past the table. */
int python_linetable_line(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset);

/* Where a reading of one table found its instruction: the entry that holds
 * it. Code runs forwards (a module's body, a loop's body), so the next
 * instruction asked for mostly lies at or past that entry, and reading on
 * from there costs the entries in between, not the table from its start
 * (module bodies of thousands of entries made that reading a tenth of a
 * Python start-up's instructions under the shim). Zeroed: the start. */
struct python_linetable_cursor {
    uint32_t position; /* the entry's first byte in the table */
    uint32_t start;    /* the byte offset of the entry's first instruction */
    int64_t line;      /* the line before the entry's delta */
};

/* As python_linetable_line, reading from *cursor when byte_offset lies at
 * or past it (else from the start), and leaving *cursor at the entry that
 * holds byte_offset (unchanged when none does). The cursor must be one this
 * function left for the same table and first_line, or zeroed. */
int python_linetable_line_from(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                               struct python_linetable_cursor *cursor);

/* The same for 3.10's co_linetable: pairs of a byte-offset delta
 * (unsigned) and a line delta (signed; -128: no line). -1 when the
 * instruction has no line or lies past the table. */
int python_linetable310_line_from(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                                  struct python_linetable_cursor *cursor);

/* The same for 3.6 to 3.9's co_lnotab: pairs of a byte-offset increment
 * (unsigned) and a line increment (signed). An offset past the table has
 * the table's last line, as CPython gives it. */
int python_lnotab_line_from(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                            struct python_linetable_cursor *cursor);

#endif

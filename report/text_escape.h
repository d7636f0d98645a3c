/*
 * text_escape.h - names from a trace (function and file names, paths, case
 * names, a command's arguments, warnings) as the text outputs print them.
 * A trace carries whatever bytes a program's symbols, files and markers
 * held: printed raw, an ESC sequence in a file name could move the cursor,
 * recolour or retitle the terminal, and a newline forge a line of the
 * report (issue 19). Every control character (C0, DEL, and the C1 range
 * U+0080-U+009F in UTF-8) is written as \xNN, and a backslash that would
 * make such an escape ambiguous as \\; anything else, UTF-8 included,
 * passes unchanged. JSON and HTML escape on their own.
 */
#ifndef MEMSLOPE_TEXT_ESCAPE_H
#define MEMSLOPE_TEXT_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* Whether text needs escaping at all (most names do not). */
int text_needs_escape(const char *text);

/* Writes text escaped; returns the bytes written. */
int text_put(FILE *out, const char *text);

/* At most width bytes of text as written (an escape is not cut); returns
 * the bytes written. For "%.*s"-style columns. */
int text_put_width(FILE *out, const char *text, int width);

/* The bytes text_put would write for text. */
int text_escaped_width(const char *text);

/* text escaped into buffer (cut to fit); returns buffer. */
char *text_escape(const char *text, char *buffer, size_t size);

#endif

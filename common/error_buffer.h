/*
 * error_buffer.h - the one error convention of memslope: a function that
 * fails returns -1 and leaves a line in the caller's buffer (char *err,
 * size_t err_size) saying what went wrong and what to do.
 */
#ifndef MEMSLOPE_ERROR_BUFFER_H
#define MEMSLOPE_ERROR_BUFFER_H

#include <stddef.h>

/* Writes the message into err, cut to err_size; a NULL or empty buffer
 * (a caller that does not want the message) is left alone. */
void error_printf(char *err, size_t err_size, const char *format, ...) __attribute__((format(printf, 3, 4)));

#endif

/* error_buffer.c - see error_buffer.h. */
#include "error_buffer.h"

#include <stdarg.h>
#include <stdio.h>

void error_printf(char *err, size_t err_size, const char *format, ...)
{
    if (!err || err_size == 0)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(err, err_size, format, args);
    va_end(args);
}

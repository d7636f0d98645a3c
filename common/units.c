/* units.c - see units.h. */
#include "units.h"

#include <inttypes.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parses the leading decimal number (digits and at most one point). */
static int parse_number(const char *text, double *value, const char **rest)
{
    if (!isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    char *end;
    *value = strtod(text, &end);
    if (errno || end == text || !isfinite(*value) || *value < 0)
        return -1;
    *rest = end;
    return 0;
}

int units_parse_size(const char *text, uint64_t *bytes)
{
    static const struct { const char *suffix; double factor; } suffixes[] = {
        {"", 1}, {"b", 1},
        {"k", 1024.0}, {"kb", 1024.0}, {"kib", 1024.0},
        {"m", 1048576.0}, {"mb", 1048576.0}, {"mib", 1048576.0},
        {"g", 1073741824.0}, {"gb", 1073741824.0}, {"gib", 1073741824.0},
        {"t", 1099511627776.0}, {"tb", 1099511627776.0}, {"tib", 1099511627776.0},
    };
    double value;
    const char *rest;
    if (!text || parse_number(text, &value, &rest) < 0)
        return -1;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcasecmp(rest, suffixes[i].suffix) == 0) {
            double result = value * suffixes[i].factor;
            if (result > 1.8e19 || result != floor(result))
                return -1;
            *bytes = (uint64_t)result;
            return 0;
        }
    }
    return -1;
}

int units_parse_duration(const char *text, uint64_t *nanoseconds)
{
    static const struct { const char *suffix; double factor; } suffixes[] = {
        {"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"m", 60e9}, {"min", 60e9}, {"h", 3600e9},
    };
    double value;
    const char *rest;
    if (!text || parse_number(text, &value, &rest) < 0)
        return -1;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcmp(rest, suffixes[i].suffix) == 0) {
            double result = value * suffixes[i].factor;
            if (result > 1.8e19)
                return -1;
            *nanoseconds = (uint64_t)result;
            return 0;
        }
    }
    return -1;
}

int units_parse_count(const char *text, uint64_t *count)
{
    if (!text || !isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || *end)
        return -1;
    *count = value;
    return 0;
}

const char *units_format_bytes(double bytes, char *buffer, size_t size)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t unit = 0;
    double magnitude = fabs(bytes);
    while (magnitude >= 1024.0 && unit + 1 < sizeof names / sizeof *names) {
        magnitude /= 1024.0;
        bytes /= 1024.0;
        unit++;
    }
    if (unit == 0 && bytes == floor(bytes))
        snprintf(buffer, size, "%.0f B", bytes);
    else
        snprintf(buffer, size, "%.1f %s", bytes, names[unit]);
    return buffer;
}

const char *units_format_count(uint64_t value, char *buffer, size_t size)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, value);
    size_t out = 0;
    for (int i = 0; i < n && out + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buffer[out++] = ',';
        buffer[out++] = digits[i];
    }
    buffer[out] = '\0';
    return buffer;
}

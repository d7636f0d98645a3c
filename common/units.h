/*
 * units.h - sizes and durations on the command line and in reports.
 * SIZE: 48, 48B, 4K, 4KiB, 4KB, 1M, 1MiB, 1G (K = 1024). DURATION: 100ms,
 * 2s, 500us, 1m, or a plain number of seconds.
 */
#ifndef MEMSLOPE_UNITS_H
#define MEMSLOPE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Return 0 and the value, or -1 when text is not a valid size/duration. */
int units_parse_size(const char *text, uint64_t *bytes);
int units_parse_duration(const char *text, uint64_t *nanoseconds);
int units_parse_count(const char *text, uint64_t *count);

/* "48 B", "1.5 KiB", "12.0 MiB" (up to EiB) into buffer; returns buffer. */
const char *units_format_bytes(double bytes, char *buffer, size_t size);
/* 1234567 -> "1,234,567", as memcheck prints counts; returns buffer. */
const char *units_format_count(uint64_t value, char *buffer, size_t size);

#endif

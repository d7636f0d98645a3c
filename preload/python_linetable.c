/* python_linetable.c - see python_linetable.h. */
#include "python_linetable.h"

/* The format is CPython's Objects/locations.md: entries of one first byte
 * (bit 7 set; bits 3-6 a code; bits 0-2 the entry's length in code units,
 * minus one) and the code's operands, varints of 6-bit chunks, least
 * significant first, bit 6 set on all but the last. */
enum location_code {
    LOCATION_SHORT_MAX = 9,     /* 0-9: same line, one byte of columns */
    LOCATION_ONE_LINE0 = 10,    /* 10-12: line + 0..2, two bytes of columns */
    LOCATION_ONE_LINE2 = 12,
    LOCATION_NO_COLUMNS = 13,   /* signed varint line delta */
    LOCATION_LONG = 14,         /* signed varint line delta, three varints */
    LOCATION_NONE = 15,         /* no line */
};

struct table_reader {
    const uint8_t *at, *end;
};

static uint32_t read_varint(struct table_reader *reader)
{
    uint32_t value = 0;
    unsigned shift = 0;
    while (reader->at < reader->end) {
        uint8_t chunk = *reader->at++;
        if (shift < 32)
            value |= (uint32_t)(chunk & 63) << shift;
        shift += 6;
        if (!(chunk & 64))
            break;
    }
    return value;
}

static int32_t read_signed_varint(struct table_reader *reader)
{
    uint32_t value = read_varint(reader);
    return (value & 1) ? -(int32_t)(value >> 1) : (int32_t)(value >> 1);
}

/* The line delta of the entry at reader->at (advanced past its first
 * byte and operands); *no_line when it has no line. */
static int32_t entry_line_delta(struct table_reader *reader, int *no_line)
{
    unsigned code = (*reader->at++ >> 3) & 15;
    *no_line = code == LOCATION_NONE;
    int32_t delta = 0;
    if (code == LOCATION_NO_COLUMNS || code == LOCATION_LONG)
        delta = read_signed_varint(reader);
    else if (code >= LOCATION_ONE_LINE0 && code <= LOCATION_ONE_LINE2)
        delta = (int32_t)code - LOCATION_ONE_LINE0;
    /* the rest of the operands: skipped up to the next first byte */
    while (reader->at < reader->end && !(*reader->at & 128))
        reader->at++;
    return delta;
}

int python_linetable_line_from(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                               struct python_linetable_cursor *cursor)
{
    struct table_reader reader = {table, table + length};
    int64_t line = first_line;
    uint64_t end = 0; /* byte offset just past the entry */
    if (cursor->position && cursor->position < length && byte_offset >= cursor->start) {
        reader.at = table + cursor->position;
        line = cursor->line;
        end = cursor->start;
    }
    while (reader.at < reader.end) {
        if (!(*reader.at & 128)) {
            reader.at++; /* not a first byte: a damaged table */
            continue;
        }
        const uint8_t *entry = reader.at;
        uint64_t units = (*reader.at & 7u) + 1, start = end;
        int64_t line_before = line;
        int no_line;
        line += entry_line_delta(&reader, &no_line);
        end += units * 2;
        if (byte_offset < end) {
            if (start <= UINT32_MAX)
                *cursor = (struct python_linetable_cursor){(uint32_t)(entry - table), (uint32_t)start, line_before};
            return no_line || line < 0 || line > INT32_MAX ? -1 : (int)line;
        }
    }
    return -1;
}

int python_linetable_line(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset)
{
    struct python_linetable_cursor start = {0, 0, 0};
    return python_linetable_line_from(table, length, first_line, byte_offset, &start);
}

/* 3.10 (Objects/lnotab_notes.txt): each pair covers [start, start +
 * delta) with the line so far plus its line delta; pairs of no length
 * only move the line. */
int python_linetable310_line_from(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                                  struct python_linetable_cursor *cursor)
{
    size_t at = 0;
    int64_t line = first_line;
    uint64_t end = 0;
    if (cursor->position && cursor->position < length && byte_offset >= cursor->start) {
        at = cursor->position;
        line = cursor->line;
        end = cursor->start;
    }
    for (; at + 1 < length; at += 2) {
        uint64_t start = end;
        int64_t line_before = line;
        int8_t delta = (int8_t)table[at + 1];
        end += table[at];
        if (delta != -128)
            line += delta;
        if (byte_offset < end) {
            if (start <= UINT32_MAX)
                *cursor = (struct python_linetable_cursor){(uint32_t)at, (uint32_t)start, line_before};
            return delta == -128 || line < 0 || line > INT32_MAX ? -1 : (int)line;
        }
    }
    return -1;
}

/* 3.6 to 3.9: the line moves by each pair's increment once the offset
 * reaches the pair's cumulative byte offset. */
int python_lnotab_line_from(const uint8_t *table, size_t length, int first_line, uint32_t byte_offset,
                            struct python_linetable_cursor *cursor)
{
    size_t at = 0;
    int64_t line = first_line;
    uint64_t reached = 0; /* the offset every pair before `at` added up to */
    if (cursor->position && cursor->position < length && byte_offset >= cursor->start) {
        at = cursor->position;
        line = cursor->line;
        reached = cursor->start;
    }
    for (; at + 1 < length && reached + table[at] <= byte_offset; at += 2) {
        reached += table[at];
        line += (int8_t)table[at + 1];
    }
    if (reached <= UINT32_MAX)
        *cursor = (struct python_linetable_cursor){(uint32_t)at, (uint32_t)reached, line};
    return line < 0 || line > INT32_MAX ? -1 : (int)line;
}

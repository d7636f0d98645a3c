/* json_writer.c - see json_writer.h. */
#include "json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json_writer *json, FILE *out, int pretty)
{
    memset(json, 0, sizeof *json);
    json->out = out;
    json->pretty = pretty;
    json->first[0] = 1;
}

static void newline_indent(struct json_writer *json)
{
    if (!json->pretty)
        return;
    fputc('\n', json->out);
    for (int i = 0; i < json->depth; i++)
        fputs("  ", json->out);
}

/* Writes the separator a new value or key needs at the current depth. */
static void before_value(struct json_writer *json)
{
    if (json->after_key) {
        json->after_key = 0;
        return;
    }
    if (json->depth > 0) {
        if (!json->first[json->depth])
            fputc(',', json->out);
        newline_indent(json);
    }
    json->first[json->depth] = 0;
}

static void open_container(struct json_writer *json, char bracket)
{
    before_value(json);
    fputc(bracket, json->out);
    if (json->depth + 1 < JSON_MAX_DEPTH)
        json->depth++;
    json->first[json->depth] = 1;
}

static void close_container(struct json_writer *json, char bracket)
{
    int was_empty = json->first[json->depth];
    if (json->depth > 0)
        json->depth--;
    if (!was_empty)
        newline_indent(json);
    fputc(bracket, json->out);
    if (json->depth == 0 && json->pretty)
        fputc('\n', json->out);
}

void json_object_begin(struct json_writer *json) { open_container(json, '{'); }
void json_object_end(struct json_writer *json) { close_container(json, '}'); }
void json_array_begin(struct json_writer *json) { open_container(json, '['); }
void json_array_end(struct json_writer *json) { close_container(json, ']'); }

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0. */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    size_t length;
    uint32_t min;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0)
        length = 2, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0)
        length = 3, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0)
        length = 4, min = 0x10000;
    else
        return 0;
    if (length > n)
        return 0;
    uint32_t code = s[0] & (0x7f >> length);
    for (size_t i = 1; i < length; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        code = (code << 6) | (s[i] & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
        return 0;
    return length;
}

static void write_escaped(FILE *out, const char *value, size_t n)
{
    const unsigned char *s = (const unsigned char *)value;
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            i++;
        } else if (c < 0x20) {
            static const char short_escape[] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
            if (c < sizeof short_escape && short_escape[c])
                fprintf(out, "\\%c", short_escape[c]);
            else
                fprintf(out, "\\u%04x", c);
            i++;
        } else {
            size_t length = utf8_sequence_length(s + i, n - i);
            if (length == 0) {
                fputs("\\ufffd", out);
                i++;
            } else {
                fwrite(s + i, 1, length, out);
                i += length;
            }
        }
    }
    fputc('"', out);
}

void json_key(struct json_writer *json, const char *key)
{
    before_value(json);
    write_escaped(json->out, key, strlen(key));
    fputs(json->pretty ? ": " : ":", json->out);
    json->after_key = 1;
}

void json_string_len(struct json_writer *json, const char *value, size_t length)
{
    before_value(json);
    write_escaped(json->out, value, length);
}

void json_string(struct json_writer *json, const char *value)
{
    if (!value) {
        json_null(json);
        return;
    }
    json_string_len(json, value, strlen(value));
}

void json_uint(struct json_writer *json, uint64_t value)
{
    before_value(json);
    fprintf(json->out, "%" PRIu64, value);
}

void json_int(struct json_writer *json, int64_t value)
{
    before_value(json);
    fprintf(json->out, "%" PRId64, value);
}

void json_double(struct json_writer *json, double value)
{
    if (!isfinite(value)) {
        json_null(json);
        return;
    }
    before_value(json);
    /* Integral values print as "48.0" so readers keep them as floats. */
    if (value == floor(value) && fabs(value) < 1e15)
        fprintf(json->out, "%.1f", value);
    else
        fprintf(json->out, "%.17g", value);
}

void json_bool(struct json_writer *json, int value)
{
    before_value(json);
    fputs(value ? "true" : "false", json->out);
}

void json_null(struct json_writer *json)
{
    before_value(json);
    fputs("null", json->out);
}

void json_member_string(struct json_writer *json, const char *key, const char *value)
{
    json_key(json, key);
    json_string(json, value);
}

void json_member_uint(struct json_writer *json, const char *key, uint64_t value)
{
    json_key(json, key);
    json_uint(json, value);
}

void json_member_int(struct json_writer *json, const char *key, int64_t value)
{
    json_key(json, key);
    json_int(json, value);
}

void json_member_double(struct json_writer *json, const char *key, double value)
{
    json_key(json, key);
    json_double(json, value);
}

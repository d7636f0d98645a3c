/*
 * json_writer.h - streaming JSON output to a FILE, with commas and nesting
 * tracked for the caller. Strings are escaped per RFC 8259 (invalid UTF-8
 * bytes become U+FFFD, so the output always parses). Numbers: integers
 * exactly; doubles with 17 significant digits, non-finite ones as null.
 */
#ifndef MEMSLOPE_JSON_WRITER_H
#define MEMSLOPE_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

struct json_writer {
    FILE *out;
    int depth;
    int pretty;                       /* newline + indent between members */
    unsigned char first[JSON_MAX_DEPTH]; /* no member written yet at this depth */
    int after_key;                    /* a key was written; its value comes next */
};

void json_init(struct json_writer *json, FILE *out, int pretty);
void json_object_begin(struct json_writer *json);
void json_object_end(struct json_writer *json);
void json_array_begin(struct json_writer *json);
void json_array_end(struct json_writer *json);
void json_key(struct json_writer *json, const char *key);
void json_string(struct json_writer *json, const char *value);
void json_string_len(struct json_writer *json, const char *value, size_t length);
void json_uint(struct json_writer *json, uint64_t value);
void json_int(struct json_writer *json, int64_t value);
void json_double(struct json_writer *json, double value);
void json_bool(struct json_writer *json, int value);
void json_null(struct json_writer *json);

/* Key and value in one call, for the common flat members. */
void json_member_string(struct json_writer *json, const char *key, const char *value);
void json_member_uint(struct json_writer *json, const char *key, uint64_t value);
void json_member_int(struct json_writer *json, const char *key, int64_t value);
void json_member_double(struct json_writer *json, const char *key, double value);

#endif

/* protobuf.c - see protobuf.h. */
#include "protobuf.h"

#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LENGTH_DELIMITED = 2, VARINT_MAX_BYTES = 10 };

void pb_init(struct pb_buffer *buffer) { memset(buffer, 0, sizeof *buffer); }

void pb_free(struct pb_buffer *buffer)
{
    free(buffer->data);
    memset(buffer, 0, sizeof *buffer);
}

void pb_reset(struct pb_buffer *buffer) { buffer->length = 0; }

static int reserve(struct pb_buffer *buffer, size_t more)
{
    if (buffer->failed)
        return -1;
    if (more <= buffer->capacity - buffer->length)
        return 0;
    size_t wanted = buffer->length + more, capacity = buffer->capacity ? buffer->capacity : 256;
    while (capacity < wanted)
        capacity *= 2;
    uint8_t *data = realloc(buffer->data, capacity);
    if (!data) {
        buffer->failed = 1;
        return -1;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

static void append(struct pb_buffer *buffer, const void *data, size_t length)
{
    if (length && reserve(buffer, length) == 0) {
        memcpy(buffer->data + buffer->length, data, length);
        buffer->length += length;
    }
}

static size_t encode_varint(uint8_t *out, uint64_t value)
{
    size_t n = 0;
    do {
        uint8_t byte = value & 0x7f;
        value >>= 7;
        out[n++] = byte | (value ? 0x80 : 0);
    } while (value);
    return n;
}

static void append_varint(struct pb_buffer *buffer, uint64_t value)
{
    uint8_t bytes[VARINT_MAX_BYTES];
    append(buffer, bytes, encode_varint(bytes, value));
}

static void append_key(struct pb_buffer *buffer, uint32_t field, unsigned wire_type)
{
    append_varint(buffer, ((uint64_t)field << 3) | wire_type);
}

void pb_uint64_field(struct pb_buffer *buffer, uint32_t field, uint64_t value)
{
    append_key(buffer, field, WIRE_VARINT);
    append_varint(buffer, value);
}

void pb_int64_field(struct pb_buffer *buffer, uint32_t field, int64_t value)
{
    pb_uint64_field(buffer, field, (uint64_t)value); /* negative: ten bytes, as protobuf's int64 */
}

void pb_bytes_field(struct pb_buffer *buffer, uint32_t field, const void *data, size_t length)
{
    append_key(buffer, field, WIRE_LENGTH_DELIMITED);
    append_varint(buffer, length);
    append(buffer, data, length);
}

void pb_string_field(struct pb_buffer *buffer, uint32_t field, const char *value)
{
    pb_bytes_field(buffer, field, value, strlen(value));
}

void pb_message_field(struct pb_buffer *buffer, uint32_t field, const struct pb_buffer *message)
{
    if (message->failed)
        buffer->failed = 1;
    pb_bytes_field(buffer, field, message->data, message->length);
}

static size_t packed_length(const uint64_t *values, size_t count)
{
    uint8_t scratch[VARINT_MAX_BYTES];
    size_t length = 0;
    for (size_t i = 0; i < count; i++)
        length += encode_varint(scratch, values[i]);
    return length;
}

void pb_packed_uint64_field(struct pb_buffer *buffer, uint32_t field, const uint64_t *values, size_t count)
{
    if (count == 0)
        return; /* an empty packed field is the same as none */
    append_key(buffer, field, WIRE_LENGTH_DELIMITED);
    append_varint(buffer, packed_length(values, count));
    for (size_t i = 0; i < count; i++)
        append_varint(buffer, values[i]);
}

void pb_packed_int64_field(struct pb_buffer *buffer, uint32_t field, const int64_t *values, size_t count)
{
    /* int64 is encoded as the varint of its two's complement: the same bytes as uint64. */
    pb_packed_uint64_field(buffer, field, (const uint64_t *)(const void *)values, count);
}

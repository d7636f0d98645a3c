/*
 * protobuf.h - the little of the protocol buffers wire format that pprof's
 * profile.proto needs: varints, length-delimited strings and sub-messages,
 * packed repeated integers. A message is built in a growable buffer; a
 * sub-message is built in its own buffer and appended with its length.
 * Allocation failure is sticky (failed), so callers check once at the end.
 */
#ifndef MEMSLOPE_PROTOBUF_H
#define MEMSLOPE_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

struct pb_buffer {
    uint8_t *data;
    size_t length, capacity;
    int failed; /* an allocation failed: the contents are incomplete */
};

void pb_init(struct pb_buffer *buffer);
void pb_free(struct pb_buffer *buffer);
/* Empties the buffer for reuse, keeping its memory. */
void pb_reset(struct pb_buffer *buffer);

/* Wire type 0: uint64, and int64 / bool as their two's-complement varint. */
void pb_uint64_field(struct pb_buffer *buffer, uint32_t field, uint64_t value);
void pb_int64_field(struct pb_buffer *buffer, uint32_t field, int64_t value);
/* Wire type 2. */
void pb_bytes_field(struct pb_buffer *buffer, uint32_t field, const void *data, size_t length);
void pb_string_field(struct pb_buffer *buffer, uint32_t field, const char *value);
void pb_message_field(struct pb_buffer *buffer, uint32_t field, const struct pb_buffer *message);
/* Packed repeated fields (one length-delimited field of varints). */
void pb_packed_uint64_field(struct pb_buffer *buffer, uint32_t field, const uint64_t *values, size_t count);
void pb_packed_int64_field(struct pb_buffer *buffer, uint32_t field, const int64_t *values, size_t count);

#endif

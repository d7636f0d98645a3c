/* python_frames.c - see python_frames.h. */
#include "python_frames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/growable_array.h"
#include "../common/shm_layout.h"

void python_frames_init(struct python_frames *frames)
{
    memset(frames, 0, sizeof *frames);
}

void python_frames_free(struct python_frames *frames)
{
    for (size_t i = 0; i < frames->count; i++) {
        free((char *)frames->frames[i].function);
        free((char *)frames->frames[i].file);
    }
    free(frames->frames);
    word_map_free(&frames->by_word);
    python_frames_init(frames);
}

/* ---- code table entries -------------------------------------------------------- */

const char *python_version_text(uint32_t version, char *buffer, size_t size)
{
    snprintf(buffer, size, "%u.%u.%u", version >> 24, (version >> 16) & 0xff, (version >> 8) & 0xff);
    return buffer;
}

/* A NUL-terminated copy of the pool's bytes [offset, offset + length) if
 * they lie in the pool (a NUL the target wrote inside becomes '?'); NULL
 * when they do not, or memory ran out. */
static char *copy_text(const void *region, uint32_t offset, uint32_t length)
{
    if ((uint64_t)offset + length > SHM_PYTHON_TEXT_BYTES)
        return NULL;
    char *copy = malloc((size_t)length + 1);
    if (!copy)
        return NULL;
    memcpy(copy, shm_python_text_pool((void *)region) + offset, length);
    copy[length] = '\0';
    for (uint32_t i = 0; i < length; i++)
        if (copy[i] == '\0')
            copy[i] = '?';
    return copy;
}

/* A snapshot of the code entry of a word, if it is published and whole. */
static int read_code_entry(const void *region, uint64_t word, struct shm_python_code *entry)
{
    uint32_t index = shm_python_word_code(word);
    if (index == 0 || index >= SHM_PYTHON_CODE_ENTRIES)
        return 0;
    const struct shm_python_code *shared = &shm_python_code_table((void *)region)[index];
    if (__atomic_load_n(&shared->state, __ATOMIC_ACQUIRE) != SHM_STACK_READY)
        return 0;
    memcpy(entry, (const void *)shared, sizeof *entry);
    return entry->qualname_length > 0;
}

static int resolve_word(const void *region, uint64_t word, struct trace_frame *frame)
{
    *frame = (struct trace_frame){.module_id = TRACE_NONE,
                                  .line = shm_python_word_line(word),
                                  .address = word,
                                  .flags = TRACE_FRAME_PYTHON};
    struct shm_python_code entry;
    char *function = NULL, *file = NULL;
    if (read_code_entry(region, word, &entry)) {
        function = copy_text(region, entry.qualname_offset, entry.qualname_length);
        file = copy_text(region, entry.filename_offset, entry.filename_length);
    }
    frame->function = function ? function : strdup("<unknown Python function>");
    frame->file = file ? file : strdup("");
    if (!frame->function || !frame->file) {
        free((char *)frame->function);
        free((char *)frame->file);
        return -1;
    }
    return 0;
}

int python_frames_add(struct python_frames *frames, const void *region, uint64_t word)
{
    if (word_map_find(&frames->by_word, word))
        return 0;
    if (growable_array_reserve(&frames->frames, &frames->capacity, frames->count + 1, sizeof *frames->frames) < 0)
        return -1;
    struct trace_frame *frame = &frames->frames[frames->count];
    memset(frame, 0, sizeof *frame);
    if (resolve_word(region, word, frame) < 0)
        return -1;
    if (word_map_put(&frames->by_word, word, frames->count) < 0) {
        free((char *)frame->function);
        free((char *)frame->file);
        return -1;
    }
    frames->count++;
    return 0;
}

const struct trace_frame *python_frames_find(const struct python_frames *frames, uint64_t word)
{
    const uint64_t *index = word_map_find(&frames->by_word, word);
    return index ? &frames->frames[*index] : NULL;
}

void python_frames_read_header(struct python_frames *frames, const void *region)
{
    const struct shm_header *header = region;
    frames->version = __atomic_load_n(&header->python_version, __ATOMIC_RELAXED);
    frames->mode = __atomic_load_n(&header->python_mode, __ATOMIC_RELAXED);
    frames->frames_read = __atomic_load_n(&header->python_frames, __ATOMIC_RELAXED) == 1;
    frames->codes_dropped = __atomic_load_n(&header->python_codes_dropped, __ATOMIC_RELAXED);
}

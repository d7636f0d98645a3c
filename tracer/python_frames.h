/*
 * python_frames.h - the Python frames of a process image's backtraces: the
 * frame words the shim writes in place of the interpreter's C frames
 * (common/shm_layout.h) turned into frames with a qualified name, a file
 * and a line, from the code table the shim fills in the shared region.
 *
 * The region is writable by the target, so every index, state, offset and
 * length is checked against bounds the tracer knows; a word that does not
 * check out becomes an unnamed Python frame, never a wild read. Words are
 * resolved while the region is mapped (as sites appear), and kept for the
 * trace's output at the image's end.
 */
#ifndef MEMSLOPE_PYTHON_FRAMES_H
#define MEMSLOPE_PYTHON_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "../common/trace_format.h"
#include "../common/word_map.h"

struct python_frames {
    struct word_map by_word;  /* frame word -> its index in frames */
    struct trace_frame *frames; /* function and file owned here */
    size_t count, capacity;
    /* from the region's header at the image's end (python_frames_read_header) */
    uint32_t version;       /* PY_VERSION_HEX, 0: no interpreter */
    uint32_t mode;          /* enum shm_python_mode */
    uint32_t frames_read;   /* 1: Python frames were read */
    uint32_t codes_dropped; /* frames left unnamed: the code table or text pool was full */
};

void python_frames_init(struct python_frames *frames);
void python_frames_free(struct python_frames *frames);

/* Resolves a frame word from the mapped region (SHM_TOTAL_SIZE bytes at
 * region) unless it is known. 0, or -1 when out of memory. */
int python_frames_add(struct python_frames *frames, const void *region, uint64_t word);

/* The frame of a word added before (flags TRACE_FRAME_PYTHON, module
 * TRACE_NONE); NULL if it never was. Valid until the next python_frames_add
 * or python_frames_free. */
const struct trace_frame *python_frames_find(const struct python_frames *frames, uint64_t word);

/* The interpreter's version and mode as the region's header says them. */
void python_frames_read_header(struct python_frames *frames, const void *region);

/* "3.11.2" for PY_VERSION_HEX 0x030b02f0, into buffer. */
const char *python_version_text(uint32_t version, char *buffer, size_t size);

#endif

/*
 * trace_writer.h - appends sections to a trace file (format: common/trace_format.h).
 *
 * The path is opened by output_file.h's rule: a new file created beside it
 * and renamed over it at once (mode 0666 & ~umask, never through another
 * user's symlink), "-" standard output, a device or a FIFO written in place.
 * The 16-byte header is written first; from then on every section is
 * appended whole (header, payload, crc) with one write sequence, so a reader
 * never sees a half-written file as complete, and a memslope that is killed
 * leaves a trace that reads up to its last section. trace_writer_finish()
 * appends END. The new file stays locked (flock) while it is written: a
 * second recording to the same path is refused while the first runs.
 *
 * Strings are interned by the writer: pass C strings, and before a section
 * that names new strings the writer emits a STRINGS section defining them.
 * Every function returns 0 on success and -1 on an I/O error, with a message
 * naming the file and the error in the writer (trace_writer_error()).
 */
#ifndef MEMSLOPE_TRACE_WRITER_H
#define MEMSLOPE_TRACE_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/trace_format.h"

struct trace_writer;

/* Creates the file (see above). On failure returns NULL and writes a message
 * naming the path and the reason into err. */
struct trace_writer *trace_writer_create(const char *path, char *err, size_t err_size);

const char *trace_writer_error(const struct trace_writer *writer);

int trace_write_info(struct trace_writer *writer, const struct trace_info *info);
int trace_write_module(struct trace_writer *writer, const struct trace_module *module);
/* Frames get consecutive ids from 0 in the order written: the first frame of
 * this call gets *first_id (the writer keeps the count). */
int trace_write_frames(struct trace_writer *writer, const struct trace_frame *frames, uint32_t count,
                       uint32_t *first_id);
/* The id the next frame written will get. */
uint32_t trace_writer_next_frame_id(const struct trace_writer *writer);
int trace_write_process(struct trace_writer *writer, const struct trace_process *process);
/* One STACKS_SHARED section (trace_format.h), the stacks in the order
 * given: each lists the frame ids it does not share with the one before
 * it (its shared outermost ones, whose number the caller knows; stacks in
 * the order of their frames read from the outermost share the most). A
 * stack that claims more than it or the one before it has fails the
 * write. */
int trace_write_stacks(struct trace_writer *writer, uint32_t process_id, const struct trace_stack *stacks,
                       uint32_t count);
int trace_write_sites(struct trace_writer *writer, uint32_t process_id, const struct trace_site *sites,
                      uint32_t count);
/* A full snapshot (SNAPSHOT: every site with live blocks), as traces before
 * SNAPSHOT_DELTA held them; the tracer writes deltas. */
int trace_write_snapshot(struct trace_writer *writer, const struct trace_snapshot *snapshot);
/* A snapshot as the change since the process's previous one (entries sorted
 * by stack_id: see SNAPSHOT_DELTA in trace_format.h). */
int trace_write_snapshot_delta(struct trace_writer *writer, const struct trace_snapshot *delta);
int trace_write_timeline(struct trace_writer *writer, uint32_t process_id, uint64_t interval_ns,
                         const struct trace_timeline_point *points, uint32_t count);
int trace_write_case(struct trace_writer *writer, const struct trace_case *trace_case);
int trace_write_leaks(struct trace_writer *writer, const struct trace_leaks *leaks);
int trace_write_case_sites(struct trace_writer *writer, const struct trace_case_sites *case_sites);
int trace_write_python(struct trace_writer *writer, const struct trace_python *python);
int trace_write_warning(struct trace_writer *writer, uint32_t process_id, const char *message);

/* Appends END, flushes and closes; frees the writer whatever the outcome. */
int trace_writer_finish(struct trace_writer *writer, char *err, size_t err_size);

/* Closes without END (the trace stays readable, marked incomplete). */
void trace_writer_abandon(struct trace_writer *writer);

/* Closes and removes the file it created: nothing was recorded. A stream
 * (stdout, a device, a FIFO) is only closed. */
void trace_writer_remove(struct trace_writer *writer);

#endif

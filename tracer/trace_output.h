/*
 * trace_output.h - writes a process image to the trace: its PROCESS record,
 * then symbols for its stacks (resolved here, so `report` never needs the
 * binaries) as modules, frames and stacks, its sites, cases, snapshots,
 * timeline and leak checks.
 *
 * An image is written in pieces: at checkpoints while it runs, so that a
 * memslope killed by SIGKILL leaves what it had measured, and at its end.
 * Each output writes only what the trace lacks: the stacks of new sites
 * (each frame word symbolized once), the sites and case counters whose
 * figures changed (a later record replaces an earlier one), the cases not
 * yet written as ended, and the snapshots, timeline points and leak checks
 * not written yet. A checkpoint's PROCESS record is flagged
 * TRACE_PROC_CHECKPOINT, with the figures as they stood; the warnings come
 * with the image's end. docs/trace-format.md has the reader's rules.
 */
#ifndef MEMSLOPE_TRACE_OUTPUT_H
#define MEMSLOPE_TRACE_OUTPUT_H

#include <stdint.h>

struct symbol_store;
struct trace_writer;
struct traced_process;
struct trace_output_state; /* what the trace has of an image; its traced_process owns it */

/* The image's end. symbols: the recording's symbol store (symbolize.h).
 * module_base: module ids written so far (ids are global to the trace);
 * advanced past the modules written now. */
int trace_output_process(struct trace_writer *writer, struct symbol_store *symbols, struct traced_process *process,
                         uint32_t *module_base, uint32_t stacks_dropped, uint32_t slots_exhausted);

/* A checkpoint of a running image: its figures as they stand at now_ns. */
int trace_output_checkpoint(struct trace_writer *writer, struct symbol_store *symbols, struct traced_process *process,
                            uint32_t *module_base, uint64_t now_ns);

void trace_output_state_free(struct trace_output_state *state);

#endif

/*
 * trace_output.h - writes one ended process image to the trace: symbols for
 * its stacks (once, here, so `report` never needs the binaries), then its
 * modules, frames, stacks, sites, snapshots, timeline, cases, leak check and
 * the PROCESS record.
 */
#ifndef MEMSLOPE_TRACE_OUTPUT_H
#define MEMSLOPE_TRACE_OUTPUT_H

#include <stdint.h>

struct symbol_store;
struct trace_writer;
struct traced_process;

/* symbols: the recording's symbol store (symbolize.h). module_base: module
 * ids written so far (ids are global to the trace); advanced past this
 * image's modules. */
int trace_output_process(struct trace_writer *writer, struct symbol_store *symbols, struct traced_process *process,
                         uint32_t *module_base, uint32_t stacks_dropped, uint32_t slots_exhausted);

#endif

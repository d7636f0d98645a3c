/*
 * symbolize.h - addresses of a (possibly dead) process to frames, with
 * elfutils' libdwfl: module path and build-id, function (C++ demangled),
 * source file and line, and inlined frames as frames of their own. Without
 * debug info the ELF symbol table names the function; without that, the
 * frame is module+offset. Runs at the end of `record` (after a warm-up
 * while the process ran, see below), from the mappings the tracer saw
 * while the process lived, so the process need not exist any more (only
 * its files).
 */
#ifndef MEMSLOPE_SYMBOLIZE_H
#define MEMSLOPE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "../report/trace_format.h"
#include "proc_maps.h"

struct symbolizer;

/* maps: every file-backed mapping the process had (the tracer accumulates
 * them; overlapping or repeated entries from several reads are fine). */
struct symbolizer *symbolizer_create(const struct proc_maps *maps);

/* Resolves one address into frames, innermost first: the inlined functions
 * at that address (flag TRACE_FRAME_INLINED), then the function that
 * contains it. return_address: the address is a return address (every frame
 * of a backtrace but a signal frame), so the call's line is looked up at
 * address - 1. Fills at most max frames and returns how many (>= 1 when max
 * >= 1). Frames whose function is an allocator entry point (operator new,
 * operator new[], and their nothrow/aligned forms) get TRACE_FRAME_ALLOCATOR.
 * module_id indexes symbolizer_modules(). Strings stay valid until
 * symbolizer_destroy(). */
size_t symbolizer_resolve(struct symbolizer *symbolizer, uint64_t address, int return_address,
                          struct trace_frame *out, size_t max);

/* The modules that resolved addresses fell into, in module_id order. */
const struct trace_module *symbolizer_modules(const struct symbolizer *symbolizer, size_t *count);

void symbolizer_destroy(struct symbolizer *symbolizer);

/*
 * Symbolizing early, in a thread of its own, while the process still runs.
 * Most of the end's cost is libdw reading a module's debug info (60 ms for
 * Debian's compressed libc6-dbg), and the tracer's CPU is mostly idle while
 * the target runs: so the modules of the addresses known so far are loaded,
 * and those addresses resolved, in the background. At the end the result
 * is used if the process mapped no other files since; otherwise it is
 * dropped and the end symbolizes from scratch, as without a warm-up.
 * Start it with the thread's signals blocked as the tracer's main thread
 * has them: the new thread inherits the mask.
 */
struct symbolizer_warmup;

/* Copies maps and addresses (return addresses of backtraces). NULL when the
 * thread cannot start (then there is simply no warm-up). */
struct symbolizer_warmup *symbolizer_warmup_start(const struct proc_maps *maps, const uint64_t *addresses,
                                                  size_t count);

/* Waits for the warm-up and ends it: returns its symbolizer if it was
 * built from exactly the file mappings of maps, else symbolizer_create(maps).
 * maps NULL: only ends it (returns NULL). */
struct symbolizer *symbolizer_warmup_finish(struct symbolizer_warmup *warmup, const struct proc_maps *maps);

#endif

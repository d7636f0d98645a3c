/*
 * symbolize.h - addresses of a (possibly dead) process to frames, with
 * elfutils' libdwfl: module path and build-id, function (C++ demangled),
 * source file and line, and inlined frames as frames of their own. Without
 * debug info the ELF symbol table names the function (.symtab, else .dynsym
 * and the MiniDebugInfo of .gnu_debugdata); without that, the frame is
 * module+offset. Runs at the end of each process image (after a warm-up
 * while it ran, see below), from the mappings the tracer saw while the
 * image lived, so the process need not exist any more (only its files).
 *
 * What is costly (opening a module, decompressing its debug info, walking
 * its DWARF) lives in one symbol store for the whole recording: each
 * distinct module is opened and its debug sections decompressed once, only
 * when an address first falls into it, however many process images,
 * exec'd programs and fork children map it. Each image has a symbolizer of
 * its own, which is only its mappings: it maps an address to a module and
 * an offset, and asks the store.
 */
#ifndef MEMSLOPE_SYMBOLIZE_H
#define MEMSLOPE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/trace_format.h"
#include "../../common/proc_maps.h"
#include "symbol_cache.h"

/* --- the recording's store ------------------------------------------------ */

struct symbol_store;

/* Separate debug files are found offline, under /usr/lib/debug (by
 * build-id, then by .gnu_debuglink); a debuginfod server is asked only when
 * DEBUGINFOD_URLS is set and not empty when the store is created. NULL when
 * out of memory. */
struct symbol_store *symbol_store_create(void);

/* After every symbolizer and warm-up that uses it has ended. */
void symbol_store_destroy(struct symbol_store *store);

struct symbol_cache;

/* Frames resolved by earlier recordings come from cache (symbol_cache.h),
 * and a module all of whose offsets are there is not read at all. The
 * store closes cache (NULL: none). Before any symbolizer uses the store. */
void symbol_store_use_cache(struct symbol_store *store, struct symbol_cache *cache);

/* Adds the frames resolved with libdw since the last call to the symbol
 * cache, merged with what other recordings wrote there meanwhile. Returns
 * 0 (also without a cache), or -1 with a message in err when some could
 * not be added (they are resolved again next time). */
int symbol_store_save_cache(struct symbol_store *store, char *err, size_t err_size);

/* The cache's folder, or NULL when the store has none. */
const char *symbol_store_cache_directory(struct symbol_store *store);
/* The cache itself (the store's: it closes it), or NULL. */
struct symbol_cache *symbol_store_cache(struct symbol_store *store);
/* The running program's GNU build-id, as hex read from its loaded note
 * (dl_iterate_phdr), or "" when it has none. */
void symbol_store_own_build_id(char hex[SYMBOL_CACHE_MAX_BUILD_ID + 1]);

/* What the store has done so far, for tests and measurements. */
struct symbol_store_stats {
    size_t files_opened;      /* ELF files opened (each distinct file once) */
    size_t modules_reported;  /* distinct modules given to libdwfl (by build-id) */
    size_t debug_files_found; /* separate debug files libdwfl opened */
    size_t dwarf_loaded;      /* modules whose DWARF libdw read (and decompressed) */
    size_t offsets_resolved;  /* (module, offset) pairs resolved with libdw, not from the cache */
    size_t cache_hits;        /* (module, offset) pairs read from the symbol cache */
    size_t cache_files_read;  /* modules whose symbol cache file was used */
    size_t cache_files_rejected; /* cache files found invalid, stale or made by another memslope */
    size_t cache_files_written;
};

void symbol_store_stats(struct symbol_store *store, struct symbol_store_stats *out);

/* --- one process image ---------------------------------------------------- */

struct symbolizer;

/* maps: every file-backed mapping the image had (the tracer accumulates
 * them; overlapping or repeated entries from several reads are fine).
 * Opens nothing: a file is read when an address first falls into it. NULL
 * when store is NULL or out of memory. */
struct symbolizer *symbolizer_create(struct symbol_store *store, const struct proc_maps *maps);

/* Resolves one address into frames, innermost first: the inlined functions
 * at that address (flag TRACE_FRAME_INLINED), then the function that
 * contains it. return_address: the address is a return address (every frame
 * of a backtrace but a signal frame), so the call's line is looked up at
 * address - 1. Fills at most max frames and returns how many (>= 1 when max
 * >= 1). Frames whose function is an allocator entry point (operator new,
 * operator new[], and their nothrow/aligned forms) get TRACE_FRAME_ALLOCATOR.
 * module_id indexes symbolizer_modules(). An address with its top four bits
 * set (SYMBOLIZER_NOT_AN_ADDRESS: the tag of a Python frame) is one unknown
 * frame, found in no module. Strings stay valid until the store is
 * destroyed. The store may be shared with other threads' symbolizers; one
 * symbolizer is used by one thread at a time. */
size_t symbolizer_resolve(struct symbolizer *symbolizer, uint64_t address, int return_address,
                          struct trace_frame *out, size_t max);

#define SYMBOLIZER_NOT_AN_ADDRESS 0xF000000000000000ull

/* The modules that resolved addresses fell into, in module_id order. */
const struct trace_module *symbolizer_modules(const struct symbolizer *symbolizer, size_t *count);

void symbolizer_destroy(struct symbolizer *symbolizer);

/*
 * Symbolizing early, in a thread of its own, while the image still runs.
 * Most of the end's cost is libdw reading a module's debug info (60 ms for
 * Debian's compressed libc6-dbg), and the tracer's CPU is mostly idle while
 * the target runs: so the modules of the addresses known so far are loaded
 * into the store, and those addresses resolved there, in the background.
 * At the end the image's symbolizer finds them in the store, whatever the
 * image mapped since. Start it with the thread's signals blocked as the
 * tracer's main thread has them: the new thread inherits the mask.
 */
struct symbolizer_warmup;

/* Copies maps and addresses (return addresses of backtraces). NULL when the
 * thread cannot start (then there is simply no warm-up). done_signal, if
 * not 0, is sent to the process as the thread ends: a caller that sleeps
 * in sigtimedwait for it learns of the end at once. */
struct symbolizer_warmup *symbolizer_warmup_start(struct symbol_store *store, const struct proc_maps *maps,
                                                  const uint64_t *addresses, size_t count, int done_signal);

/* Asks the warm-up to stop after the address it is resolving, without
 * waiting (NULL: nothing to do). At an image's end, whose output resolves
 * what is left itself: a warm-up still at work when python3 -c pass ended
 * (its thread runs at the target's priority, behind it and the tracer)
 * held the end for up to 34 ms, to resolve what the end then found. */
void symbolizer_warmup_stop(struct symbolizer_warmup *warmup);

/* Whether the warm-up's thread has ended (NULL: 1), without waiting. */
int symbolizer_warmup_done(const struct symbolizer_warmup *warmup);

/* Waits for the warm-up and ends it (NULL: nothing to do). */
void symbolizer_warmup_finish(struct symbolizer_warmup *warmup);

#endif

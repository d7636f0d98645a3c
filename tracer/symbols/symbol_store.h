/*
 * symbol_store.h - the recording-wide half of the symbolizer (see
 * symbolize.h): files by identity, modules by build-id in one libdwfl
 * session, frames by (module, offset). Only symbolize.c uses it, and it
 * holds the store's lock around every call below but the lock's own.
 */
#ifndef MEMSLOPE_SYMBOL_STORE_H
#define MEMSLOPE_SYMBOL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize.h"

/* One ELF file on disk that an address fell into. */
struct stored_file;

void symbol_store_lock(struct symbol_store *store);
void symbol_store_unlock(struct symbol_store *store);

/* A copy of text that lives as long as the store; "" for NULL. Equal texts
 * give the same pointer. */
const char *symbol_store_intern(struct symbol_store *store, const char *text);

/* The file now at path (" (deleted)" removed: a reinstalled file may be
 * back) if it is a readable ELF executable or shared object; NULL if not.
 * Files are known by device, inode, size and modification time, so each is
 * opened once, the first time. */
struct stored_file *symbol_store_file(struct symbol_store *store, const char *path);

/* Lower-case hex of the file's GNU build-id, "" if it has none. */
const char *stored_file_build_id(const struct stored_file *file);

/* Where file was loaded, given one of its mappings (run-time start and file
 * offset): the load bias, and the run-time span [*low, *high) of all its
 * PT_LOAD segments. Returns 0, or -1 if the mapping is no segment of file. */
int stored_file_load(const struct stored_file *file, uint64_t map_start, uint64_t map_offset, uint64_t *bias,
                     uint64_t *low, uint64_t *high);

/* The frames, innermost first, of the code at offset (a virtual address
 * of the file, as its ELF headers and symbols count them). return_address:
 * look the line up at offset - 1. The frames' module_id, address and
 * module_offset are the caller's to fill. Returns the frames (valid until
 * the store is destroyed) and their count, or NULL when the module cannot
 * be read (then the caller has only the mapping). */
const struct trace_frame *symbol_store_resolve(struct symbol_store *store, struct stored_file *file, uint64_t offset,
                                               bool return_address, size_t *count);

#endif

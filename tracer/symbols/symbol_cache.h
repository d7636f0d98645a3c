/*
 * symbol_cache.h - the user's symbol cache: the frames earlier recordings
 * resolved, kept across runs so that recording the same binaries again
 * reads no debug info (the symbol store, symbol_store.c, is its only user).
 *
 * One file per module, named by the module's GNU build-id and file size
 * (the store's module key), in $XDG_CACHE_HOME/memslope/symbols or
 * ~/.cache/memslope/symbols; beside it, the unwind rules the shim looked
 * up in the module (symbol_cache_read_rules). A file holds, for each (file offset, return
 * address or not) it has seen, the frames the store resolved there
 * (function, source file, line, flags; inlined frames first), and a header
 * that says what they were resolved from: the memslope and libdw that did
 * it and the module's debug file (docs/internals.md, "Symbols cached
 * across runs").
 *
 * Every file is untrusted input: a reader checks its size, a CRC, and
 * every count, index and string before it is used, and a file that fails
 * is ignored (the store resolves without it and writes a good one). Files
 * are written whole to a temporary name and renamed into place, so a
 * reader sees an old file or a new one, never part of one; writers take
 * the directory's lock (flock) and merge with what another recording wrote
 * meanwhile. The directory is bounded: after a write, the least recently
 * used files go until it holds at most three quarters of its bound.
 */
#ifndef MEMSLOPE_SYMBOL_CACHE_H
#define MEMSLOPE_SYMBOL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The bound of the whole directory, and of one module's file. */
#define SYMBOL_CACHE_DEFAULT_MAX_BYTES (128ull << 20)
#define SYMBOL_CACHE_MAX_FILE_BYTES (32u << 20)
/* Frames of one offset (inlined ones and the function that holds them), and
 * the longest string, a file accepts. The store never makes more. */
#define SYMBOL_CACHE_MAX_FRAMES 256u
#define SYMBOL_CACHE_MAX_STRING 65535u
/* Longest build-id accepted, in hex digits (ld writes 40). */
#define SYMBOL_CACHE_MAX_BUILD_ID 128u

/* What stat says of a file. */
struct symbol_cache_file_identity {
    uint64_t device, inode, size, mtime_seconds, mtime_nanoseconds;
};

enum symbol_cache_debug_kind {
    SYMBOL_CACHE_DEBUG_NOT_SEARCHED = 0, /* the module's own file had what libdwfl needed */
    SYMBOL_CACHE_DEBUG_NONE_FOUND = 1,   /* searched for, not found */
    SYMBOL_CACHE_DEBUG_FOUND = 2,        /* read from path, which had identity */
};

/* Where the module's debug information came from. */
struct symbol_cache_debug_source {
    uint32_t kind;   /* enum symbol_cache_debug_kind */
    bool debuginfod; /* DEBUGINFOD_URLS was set */
    const char *path; /* FOUND: the debug file; else "" */
    struct symbol_cache_file_identity identity; /* FOUND: of path; else zero */
};

/* What a file is about. Two files with equal headers hold interchangeable
 * frames. */
struct symbol_cache_header {
    const char *producer; /* the memslope and libdw that resolved the frames */
    const char *build_id; /* lower-case hex */
    uint64_t file_size;   /* of the module's ELF file */
    struct symbol_cache_debug_source debug;
};

bool symbol_cache_header_equal(const struct symbol_cache_header *a, const struct symbol_cache_header *b);

/* One frame; the strings are NUL-terminated. */
struct symbol_cache_frame {
    const char *function, *file;
    uint32_t line;
    uint32_t flags; /* TRACE_FRAME_INLINED and TRACE_FRAME_ALLOCATOR only */
};

/* --- reading one file ---------------------------------------------------- */

/* A validated file; points into the bytes given to symbol_cache_parse,
 * which must outlive it. */
struct symbol_cache_view {
    struct symbol_cache_header header;
    size_t entry_count; /* offsets, in increasing (offset, return address) order */
    const unsigned char *entries, *frames, *strings, *blob;
    size_t frame_count, string_count;
};

/* Checks every byte of a file's contents. Returns 0 and fills view, or -1
 * when the bytes are not a whole, consistent cache file. */
int symbol_cache_parse(const void *bytes, size_t size, struct symbol_cache_view *view);

/* The index of the entry for (offset, return_address), or -1. */
ssize_t symbol_cache_find(const struct symbol_cache_view *view, uint64_t offset, bool return_address);

/* Entry index's key and number of frames (at least 1). */
void symbol_cache_entry(const struct symbol_cache_view *view, size_t index, uint64_t *offset, bool *return_address,
                        size_t *frame_count);

/* Frame number `frame` of entry index, innermost first. */
void symbol_cache_frame(const struct symbol_cache_view *view, size_t index, size_t frame,
                        struct symbol_cache_frame *out);

/* --- writing one file ---------------------------------------------------- */

/* Entries gathered for one file; the strings they point to are the
 * caller's and must outlive the builder. */
struct symbol_cache_builder;

struct symbol_cache_builder *symbol_cache_builder_create(void);
void symbol_cache_builder_destroy(struct symbol_cache_builder *builder);

/* Adds the frames of (offset, return_address) unless that key is there
 * already (the first one added wins). Returns 0, or -1 when out of memory
 * or the frames are more, or their strings longer, than a file accepts
 * (then nothing is added). */
int symbol_cache_builder_add(struct symbol_cache_builder *builder, uint64_t offset, bool return_address,
                             const struct symbol_cache_frame *frames, size_t count);

/* Adds every entry of view not there already. */
int symbol_cache_builder_add_view(struct symbol_cache_builder *builder, const struct symbol_cache_view *view);

size_t symbol_cache_builder_count(const struct symbol_cache_builder *builder);

/* The file's contents (to free()), or NULL when out of memory or larger
 * than SYMBOL_CACHE_MAX_FILE_BYTES. */
void *symbol_cache_builder_serialize(const struct symbol_cache_builder *builder,
                                     const struct symbol_cache_header *header, size_t *size);

/* A build-id's bytes as the lower-case hex that names its files: out has
 * room for 2 * size + 1 characters. */
void symbol_cache_build_id_hex(const uint8_t *bytes, size_t size, char *out);

/* --- the directory ------------------------------------------------------- */

struct symbol_cache;

/* The user's memslope cache, $XDG_CACHE_HOME/memslope (XDG_CACHE_HOME
 * absolute), else $HOME/.cache/memslope, with name appended ("/symbols",
 * "/clock"). Returns 0, or -1 when neither is set or the path does not
 * fit. */
int memslope_cache_path(const char *name, char *path, size_t size);

/* memslope_cache_path's "/symbols". */
int symbol_cache_default_directory(char *path, size_t size);

/* Opens directory, creating it and its missing parents (mode 0700). It
 * must be a folder of this user that no one else may write to. NULL (and
 * a message in err) when it cannot be used. */
struct symbol_cache *symbol_cache_open(const char *directory, uint64_t max_bytes, char *err, size_t err_size);

/* The user's cache at symbol_cache_default_directory, bounded by
 * SYMBOL_CACHE_DEFAULT_MAX_BYTES; NULL when there is no such folder, or,
 * with a line on stderr that says why, when it cannot be used. */
struct symbol_cache *symbol_cache_open_user(void);

void symbol_cache_close(struct symbol_cache *cache);

const char *symbol_cache_directory(const struct symbol_cache *cache);

/* The contents of the module's file (to free()), or NULL when there is
 * none, or it is no regular file or larger than a cache file may be. A file
 * read is marked used (its modification time, at most once an hour). */
void *symbol_cache_read(struct symbol_cache *cache, const char *build_id, uint64_t file_size, size_t *size);

/* The same for the module's kept unwind rules, BUILDID-SIZE.rules
 * (common/unwind_rules_file.h), which the shim reads and the recording
 * adds to (tracer/symbols/kept_rules.h). */
void *symbol_cache_read_rules(struct symbol_cache *cache, const char *build_id, uint64_t file_size, size_t *size);

/* The writers' lock: waits at most a second. Returns 0, or -1. */
int symbol_cache_lock(struct symbol_cache *cache);
void symbol_cache_unlock(struct symbol_cache *cache);

/* Replaces the module's file with bytes: written to a temporary file, then
 * renamed. Returns 0, or -1. */
int symbol_cache_write(struct symbol_cache *cache, const char *build_id, uint64_t file_size, const void *bytes,
                       size_t size);

int symbol_cache_write_rules(struct symbol_cache *cache, const char *build_id, uint64_t file_size, const void *bytes,
                             size_t size);

/* While the directory's cache files (frames and rules alike) take more
 * than its bound, removes the least recently used until they take at most
 * three quarters of it; also
 * removes temporary files an interrupted writer left over an hour ago.
 * Call it with the lock held. Returns the number of files removed. */
size_t symbol_cache_evict(struct symbol_cache *cache);

#endif

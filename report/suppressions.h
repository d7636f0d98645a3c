/*
 * suppressions.h - leak suppressions, read from LeakSanitizer's and
 * Valgrind's file formats, so that existing files (CPython's
 * valgrind-python.supp, a project's lsan.supp) work unchanged.
 *
 * LeakSanitizer: one `leak:PATTERN` a line (`#` starts a comment; lines of
 * other sanitizers' types are ignored). PATTERN matches a loss record when
 * it matches the function, the source file or the module path of any of
 * its frames: as a substring, `*` matching any run of characters, `^` at the
 * start and `$` at the end anchoring it.
 *
 * Valgrind: entries `{ NAME  Memcheck:Leak  [match-leak-kinds: K,...]
 * LOCATION... }`, where a LOCATION is `fun:PATTERN` (function), `obj:PATTERN`
 * (module path), `src:PATTERN[:LINE]` (source file name) or `...` (any
 * number of frames); `*` and `?` are wildcards. The locations match the
 * stack from the top, as memcheck's do: the first one the allocator entry
 * point itself, which memslope does not record. That implicit frame matches
 * any allocator name (fun:malloc, fun:calloc, fun:_Znwm, ...): the trace
 * does not say which entry point was called. The recorded allocator frames
 * below it (operator new calling malloc, ld.so's inlined malloc) may be
 * matched or skipped, as memcheck sees one of them or the other. Entries
 * for other tools or other kinds of error are read and ignored.
 *
 * memcheck compares fun: with mangled C++ names; a trace keeps demangled
 * ones. A fun: pattern that is a mangled name without wildcards is
 * demangled when read, and compared both ways; a mangled pattern with a
 * wildcard cannot be demangled and only matches names the trace left
 * mangled: the set's warnings say so.
 *
 * Default suppressions (read with is_default) apply to a stack only when
 * every frame their locations reach, from the allocation down to the last
 * frame matched, lies outside the user's code (attribution.h): they never
 * hide a block that the user's code allocated or asked a library for.
 */
#ifndef MEMSLOPE_SUPPRESSIONS_H
#define MEMSLOPE_SUPPRESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_reader.h"

enum suppression_location_kind {
    SUPPRESSION_FUN,        /* fun:PATTERN */
    SUPPRESSION_OBJ,        /* obj:PATTERN */
    SUPPRESSION_SRC,        /* src:PATTERN[:LINE] */
    SUPPRESSION_ANY_FRAMES, /* ... */
};

struct suppression_location {
    enum suppression_location_kind kind;
    char *pattern;
    char *demangled; /* fun: a mangled name without wildcards, demangled; else NULL */
    uint32_t line;   /* src: 0 for any line */
};

enum suppression_format { SUPPRESSION_FORMAT_LSAN, SUPPRESSION_FORMAT_VALGRIND };

struct suppression {
    enum suppression_format format;
    char *name;              /* Valgrind: the entry's name; LSan: the pattern */
    const char *file;        /* the file it was read from (owned by the set) */
    unsigned line;           /* where it begins */
    unsigned kinds;          /* bit (1 << enum trace_leak_category) per kind it applies to */
    bool is_default;         /* from the default file: stays clear of the user's code */
    char *lsan_pattern;      /* LSan: the glob equivalent (anchors resolved) */
    struct suppression_location *locations; /* Valgrind */
    size_t location_count;
};

struct suppressions {
    struct suppression *items;
    size_t count, capacity;
    char **files; /* names the items point to */
    size_t file_count;
    char **allocator_names; /* what the implicit allocator frame is called: mangled and demangled */
    size_t allocator_name_count;
    char **warnings;
    size_t warning_count;
};

/* An empty set. Returns 0, or -1 when out of memory. */
int suppressions_init(struct suppressions *set);
void suppressions_free(struct suppressions *set);

/* Reads a suppression file (either format, told apart by its first line)
 * into the set. Returns 0, or -1 with one line in err naming the file, the
 * line and the problem. */
int suppressions_load(struct suppressions *set, const char *path, bool is_default, char *err, size_t err_size);

/* The same for text already in memory; name is used in messages. */
int suppressions_parse(struct suppressions *set, const char *text, size_t length, const char *name, bool is_default,
                       char *err, size_t err_size);

/* The first suppression that matches a loss record of this stack and
 * category (enum trace_leak_category), or NULL. */
const struct suppression *suppressions_match(const struct suppressions *set, const struct trace_model *model,
                                             const struct trace_model_stack *stack, uint32_t category);

/* Where the default suppressions are: share/memslope/default.supp beside
 * the lib/ and bin/ of the running memslope (its build tree or its install
 * prefix). Returns 0, or -1 when /proc/self/exe cannot be read. */
int suppressions_default_path(char *path, size_t size);

/* The default file (unless without_default) and then each of files. A
 * default file that is missing is a warning in the set, not an error.
 * Returns 0, or -1 with err as suppressions_load's. */
int suppressions_load_all(struct suppressions *set, const char *const *files, size_t file_count,
                          bool without_default, char *err, size_t err_size);

/* The mangled name of an allocator entry point given its demangled one
 * ("operator new(unsigned long)" -> "_Znwm"), or NULL; for --format
 * suppressions, which writes what memcheck would see. */
const char *suppressions_mangled_allocator(const char *demangled);

/* Valgrind's wildcard match: '*' any run of characters, '?' any one (when
 * question_mark is true; LeakSanitizer has no '?'); nothing else is special. */
bool suppressions_glob_match(const char *pattern, const char *text, bool question_mark);

#endif

/*
 * output_file.h - opening a file the user named for output (`record -o`,
 * `report -o`, `perf -o`), one rule for every command:
 *
 *   "-"                     standard output.
 *   a device, a FIFO        written in place: replacing /dev/null or
 *   (or /dev/stdout)        /dev/stdout with a regular file is never right
 *                           (issue 19: as root, `-o /dev/null` did so).
 *   anything else           a new file (O_CREAT|O_EXCL|O_NOFOLLOW, mode
 *                           0666 & ~umask) beside the path, renamed over it
 *                           when published: a reader never sees it half
 *                           written, and a symlink at the path is replaced,
 *                           never written through.
 *
 * A symbolic link at the path is followed only when its owner is the caller
 * or root (/dev/stdout is root's; a link the user made is the user's): one
 * planted by another user, in /tmp say, is refused with a message, as the
 * kernel's protected_symlinks refuses it in sticky directories (issue 19:
 * `perf -o` wrote through such a link into its target).
 */
#ifndef MEMSLOPE_OUTPUT_FILE_H
#define MEMSLOPE_OUTPUT_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum output_kind {
    OUTPUT_STANDARD_OUTPUT, /* "-" */
    OUTPUT_IN_PLACE,        /* a device or a FIFO */
    OUTPUT_NEW_FILE,        /* created beside the path, renamed over it */
    OUTPUT_DIRECTORY,       /* an existing directory: output_file_open refuses it */
};

enum output_flags {
    /* The new file stays locked (flock) until closed, and a path whose file
     * another writer holds locked is refused: two `record -o X` at once
     * would otherwise each say "written" while the second replaced the
     * first's trace. */
    OUTPUT_EXCLUSIVE = 1u << 0,
};

struct output_file {
    int fd;                 /* -1 once closed */
    FILE *stream;           /* output_file_stream's, owning fd; or NULL */
    enum output_kind kind;
    char *path;             /* as given */
    char *temp_path;        /* OUTPUT_NEW_FILE until published, else NULL */
    int published;
    dev_t device;           /* the file written (to tell whether the path still names it) */
    ino_t inode;
};

/* How path would be written, without opening it: the kind, or -1 with a
 * message in err (no name, or a symbolic link another user owns). For a
 * command that hands the path to another program (`instruments`). */
int output_file_classify(const char *path, enum output_kind *kind, char *err, size_t err_size);

/* Whether writing path would replace the file other names (a program to
 * run, a trace to read; "-": what standard input reads): both name one
 * regular file, through the links a new file is written through. 1 or 0. */
int output_file_replaces(const char *path, const char *other);

/* Whether a writer that asked for OUTPUT_EXCLUSIVE (a recording that has
 * not ended) holds the regular file at path ("-": standard input): 1 or 0. */
int output_file_being_written(const char *path);

/* An input path as messages name it: "standard input" for "-". */
const char *output_file_input_name(const char *path);

/* Opens path as above. 0, or -1 with one line in err naming the path, the
 * reason and what to do. */
int output_file_open(struct output_file *output, const char *path, unsigned flags, char *err, size_t err_size);

/* A new file takes the path's name now (rename over it); nothing to do for
 * the other kinds, or once published. A recording publishes at once, so a
 * killed memslope leaves what it wrote; a report when it is whole. */
int output_file_publish(struct output_file *output, char *err, size_t err_size);

/* Whether the path still names the file written (1), or another program
 * replaced or removed it since (0). Always 1 for the other kinds. */
int output_file_still_there(const struct output_file *output);

/* A stdio stream on the descriptor (closed with it); NULL when out of memory. */
FILE *output_file_stream(struct output_file *output);

/* Flushes and closes, then publishes a new file if not yet. 0, or -1 with
 * err: a write or close that failed leaves a new file not yet published
 * out of the path (its temporary file removed). Frees the names. */
int output_file_close(struct output_file *output, char *err, size_t err_size);

/* Closes and removes what this created (the temporary file, or the
 * published one while the path still names it); a stream is only closed. */
void output_file_discard(struct output_file *output);

#endif

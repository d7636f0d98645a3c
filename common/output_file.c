/* output_file.c - see output_file.h. */
#include "output_file.h"
#include "detached_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* The owners whose symbolic links are followed: the caller, and root (who
 * could write the target directly anyway). */
static int link_owner_trusted(uid_t owner)
{
    return owner == geteuid() || owner == 0;
}

/* The path a chain of symbolic links at path leads to (path itself when
 * it is none), in *resolved (malloc'd): where a new file replaces the
 * regular file at the end of the chain, the links kept. Each link must be
 * trusted; -1 with err when one is not. A link whose target is no path
 * (/proc/self/fd/1 naming a pipe) ends the chain there. */
static int follow_links(const char *path, char **resolved, char *err, size_t err_size)
{
    char *current = strdup(path);
    for (int hops = 0; current && hops < 40; hops++) {
        struct stat status;
        if (lstat(current, &status) != 0 || !S_ISLNK(status.st_mode)) {
            *resolved = current;
            return 0;
        }
        if (!link_owner_trusted(status.st_uid)) {
            snprintf(err, err_size,
                     "%s is a symbolic link owned by another user (uid %u): memslope does not write through it; "
                     "remove it or choose another path",
                     current, (unsigned)status.st_uid);
            free(current);
            return -1;
        }
        char target[4096];
        ssize_t length = readlink(current, target, sizeof target - 1);
        if (length < 0) {
            *resolved = current;
            return 0;
        }
        target[length] = '\0';
        const char *slash = strrchr(current, '/');
        char *next = NULL;
        if (target[0] == '/' || !slash)
            next = strdup(target);
        else if (asprintf(&next, "%.*s/%s", (int)(slash - current), current, target) < 0)
            next = NULL;
        free(current);
        current = next;
    }
    snprintf(err, err_size, "%s: %s", path, current ? "too many levels of symbolic links" : "out of memory");
    free(current);
    return -1;
}

/* The kind of path, and where a new file goes (*final_path, malloc'd). */
static int classify(const char *path, enum output_kind *kind, char **final_path, char *err, size_t err_size)
{
    *final_path = NULL;
    if (!path || !*path) {
        snprintf(err, err_size, "no output file name given (name a file, or '-' for standard output)");
        return -1;
    }
    *kind = OUTPUT_STANDARD_OUTPUT;
    if (strcmp(path, "-") == 0)
        return 0;
    char *resolved;
    if (follow_links(path, &resolved, err, err_size) != 0)
        return -1;
    struct stat status, end_status;
    *kind = OUTPUT_NEW_FILE;
    if (stat(path, &status) != 0) {
        free(resolved); /* absent, or a dangling link: replaced, never followed */
        *final_path = strdup(path);
    } else if (S_ISDIR(status.st_mode)) {
        *kind = OUTPUT_DIRECTORY;
        *final_path = resolved;
    } else if (!S_ISREG(status.st_mode)) {
        *kind = OUTPUT_IN_PLACE;
        *final_path = resolved;
    } else if (lstat(resolved, &end_status) == 0 && end_status.st_ino == status.st_ino &&
               end_status.st_dev == status.st_dev) {
        *final_path = resolved;
    } else {
        snprintf(err, err_size, "%s: cannot tell which file this link leads to; give the file's own path", path);
        free(resolved);
        return -1;
    }
    if (!*final_path) {
        snprintf(err, err_size, "%s: out of memory", path);
        return -1;
    }
    return 0;
}

int output_file_replaces(const char *path, const char *other)
{
    struct stat written, input;
    if (!path || !other || strcmp(path, "-") == 0 || stat(path, &written) != 0)
        return 0;
    int read_from_stdin = strcmp(other, "-") == 0; /* report -o TRACE - < TRACE */
    if ((read_from_stdin ? fstat(STDIN_FILENO, &input) : stat(other, &input)) != 0)
        return 0;
    return S_ISREG(written.st_mode) && written.st_dev == input.st_dev && written.st_ino == input.st_ino;
}

const char *output_file_input_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "standard input" : path;
}

int output_file_classify(const char *path, enum output_kind *kind, char *err, size_t err_size)
{
    char *final_path;
    int rc = classify(path, kind, &final_path, err, err_size);
    free(final_path);
    return rc;
}

/* A device or a FIFO, opened where it is. O_NOFOLLOW unless the path was
 * a trusted link when classified, so a link swapped in since is refused;
 * what was opened must still be no regular file (O_WRONLY without O_TRUNC
 * would overwrite one from its start). */
static int open_in_place(struct output_file *output, char *err, size_t err_size)
{
    struct stat status;
    int follow = lstat(output->path, &status) == 0 && S_ISLNK(status.st_mode) && link_owner_trusted(status.st_uid);
    output->fd = open(output->path, O_WRONLY | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW));
    if (output->fd < 0) {
        snprintf(err, err_size, "cannot open %s for writing: %s", output->path, strerror(errno));
        return -1;
    }
    if (fstat(output->fd, &status) != 0 || S_ISREG(status.st_mode) || S_ISDIR(status.st_mode)) {
        snprintf(err, err_size, "%s changed while it was being opened (it is no device or FIFO any more); try again",
                 output->path);
        close(output->fd);
        output->fd = -1;
        return -1;
    }
    return 0;
}

/* Whether another writer holds the regular file at path locked (a
 * recording that has not ended): OUTPUT_EXCLUSIVE. "-" is standard input,
 * whose open file description may be shared: a lock taken to test is let go
 * of at once. */
static int locked_by_another_writer(const char *path)
{
    int read_from_stdin = strcmp(path, "-") == 0;
    int fd = read_from_stdin ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
                             : open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat status;
    int locked = 0;
    if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode)) {
        if (flock(fd, LOCK_SH | LOCK_NB) != 0)
            locked = errno == EWOULDBLOCK;
        else if (read_from_stdin)
            flock(fd, LOCK_UN);
    }
    close(fd);
    return locked;
}

int output_file_being_written(const char *path)
{
    return locked_by_another_writer(path);
}

/* A fresh file next to the path, under a name nobody else can have made. */
static int create_beside(struct output_file *output)
{
    const char *path = output->path;
    const char *slash = strrchr(path, '/');
    int dir_length = slash ? (int)(slash - path + 1) : 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t random_value = 0;
        if (getrandom(&random_value, sizeof random_value, GRND_NONBLOCK) != (ssize_t)sizeof random_value)
            random_value = ((uint64_t)getpid() << 32) ^ (uint64_t)attempt ^ (uint64_t)(uintptr_t)&random_value;
        if (asprintf(&output->temp_path, "%.*s.%s.%016llx.tmp", dir_length, path, slash ? slash + 1 : path,
                     (unsigned long long)random_value) < 0) {
            output->temp_path = NULL;
            return -1;
        }
        output->fd = open(output->temp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (output->fd >= 0 || errno != EEXIST)
            return output->fd;
        free(output->temp_path);
        output->temp_path = NULL;
    }
    errno = EEXIST;
    return -1;
}

static int open_new_file(struct output_file *output, unsigned flags, char *err, size_t err_size)
{
    if ((flags & OUTPUT_EXCLUSIVE) && locked_by_another_writer(output->path)) {
        snprintf(err, err_size,
                 "%s is being written by another memslope that has not finished: choose another path, or wait for "
                 "it to end",
                 output->path);
        return -1;
    }
    if (create_beside(output) < 0) {
        snprintf(err, err_size, "cannot create %s: %s; choose another path", output->path, strerror(errno));
        return -1;
    }
    struct stat status;
    if (fstat(output->fd, &status) == 0) {
        output->device = status.st_dev;
        output->inode = status.st_ino;
    }
    if (flags & OUTPUT_EXCLUSIVE)
        flock(output->fd, LOCK_EX | LOCK_NB); /* a fresh file: nobody else holds it */
    return 0;
}

int output_file_open(struct output_file *output, const char *path, unsigned flags, char *err, size_t err_size)
{
    memset(output, 0, sizeof *output);
    output->fd = -1;
    char *final_path;
    if (classify(path, &output->kind, &final_path, err, err_size) != 0)
        return -1;
    /* In place: opened by its own name, which the kernel follows where no
     * path leads (/dev/stdout to a pipe); a new file goes at the end of
     * the links. */
    output->path = output->kind == OUTPUT_IN_PLACE ? (free(final_path), strdup(path)) : final_path;
    if (!output->path && output->kind != OUTPUT_STANDARD_OUTPUT) {
        snprintf(err, err_size, "cannot open %s: out of memory", path);
        return -1;
    }
    int rc = 0;
    switch (output->kind) {
    case OUTPUT_STANDARD_OUTPUT:
        output->path = strdup("-");
        output->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (output->fd < 0) {
            snprintf(err, err_size, "cannot write to standard output: %s", strerror(errno));
            rc = -1;
        }
        break;
    case OUTPUT_IN_PLACE:
        rc = open_in_place(output, err, err_size);
        break;
    case OUTPUT_NEW_FILE:
        rc = open_new_file(output, flags, err, err_size);
        break;
    case OUTPUT_DIRECTORY:
        snprintf(err, err_size, "%s is a directory: give the name of a file to write", path);
        rc = -1;
        break;
    }
    if (rc != 0) {
        free(output->path);
        free(output->temp_path);
        memset(output, 0, sizeof *output);
        output->fd = -1;
    }
    return rc;
}

/* A replaced file smaller than this is let go of at once: freeing its
 * blocks costs less than a thread. */
#define REPLACED_KEPT_MIN_BYTES (256u << 10)

/* The file a rename is about to replace, held (an O_PATH descriptor: no
 * open of its own, no read permission needed, nothing done to a FIFO or
 * a device that took the path meanwhile) so that the rename does not drop
 * its last reference: freeing a large file's blocks (ext4: 1.3 ms for a
 * 3 MiB trace on the VM of docs/performance.md, 10 ms for 256 MiB) then
 * waits for let_go_of_replaced, instead of delaying a recording's launch
 * (`record -o X` in a loop replaces X every time). -1: nothing to hold. */
static int hold_replaced(const char *path)
{
    int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat status;
    if (fd >= 0 && (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_nlink != 1 ||
                    status.st_size < (off_t)REPLACED_KEPT_MIN_BYTES)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void *close_in_background(void *descriptor)
{
    close((int)(intptr_t)descriptor);
    return NULL;
}

/* Closes fd from hold_replaced in a detached thread of its own, which frees
 * the file's blocks while the caller goes on; at once if no thread starts. */
static void let_go_of_replaced(int fd)
{
    if (fd >= 0 && detached_thread_start(close_in_background, (void *)(intptr_t)fd) != 0)
        close(fd);
}

int output_file_publish(struct output_file *output, char *err, size_t err_size)
{
    if (output->kind != OUTPUT_NEW_FILE || output->published)
        return 0;
    int replaced = hold_replaced(output->path);
    if (rename(output->temp_path, output->path) != 0) {
        snprintf(err, err_size, "cannot put the new %s in place: rename: %s", output->path, strerror(errno));
        if (replaced >= 0)
            close(replaced);
        return -1;
    }
    let_go_of_replaced(replaced);
    free(output->temp_path);
    output->temp_path = NULL;
    output->published = 1;
    return 0;
}

int output_file_still_there(const struct output_file *output)
{
    if (output->kind != OUTPUT_NEW_FILE || !output->published)
        return 1;
    struct stat status;
    return lstat(output->path, &status) == 0 && status.st_dev == output->device && status.st_ino == output->inode;
}

static void release_names(struct output_file *output)
{
    free(output->path);
    free(output->temp_path);
    output->path = output->temp_path = NULL;
}

FILE *output_file_stream(struct output_file *output)
{
    if (!output->stream && output->fd >= 0)
        output->stream = fdopen(output->fd, "w");
    return output->stream;
}

/* What messages call the path. */
static const char *shown_name(const struct output_file *output)
{
    return output->kind == OUTPUT_STANDARD_OUTPUT ? "standard output" : output->path;
}

/* Flushes and closes; 0, or -1 with err (a full disk often shows here). */
static int close_descriptor(struct output_file *output, char *err, size_t err_size)
{
    int rc = 0;
    if (output->stream) {
        if ((fflush(output->stream) != 0 || ferror(output->stream)) && (rc = -1) != 0)
            snprintf(err, err_size, "cannot write %s: %s", shown_name(output), strerror(errno ? errno : EIO));
        if (fclose(output->stream) != 0 && rc == 0 && (rc = -1) != 0)
            snprintf(err, err_size, "cannot write %s: %s", shown_name(output), strerror(errno));
    } else if (output->fd >= 0 && close(output->fd) != 0) {
        snprintf(err, err_size, "cannot write %s: %s", shown_name(output), strerror(errno));
        rc = -1;
    }
    output->stream = NULL;
    output->fd = -1;
    return rc;
}

int output_file_close(struct output_file *output, char *err, size_t err_size)
{
    int rc = close_descriptor(output, err, err_size);
    if (rc == 0)
        rc = output_file_publish(output, err, err_size);
    else if (output->temp_path)
        unlink(output->temp_path); /* never put in place half written */
    release_names(output);
    return rc;
}

void output_file_discard(struct output_file *output)
{
    if (output->kind == OUTPUT_NEW_FILE) {
        if (output->temp_path)
            unlink(output->temp_path);
        else if (output->path && output_file_still_there(output))
            unlink(output->path);
    }
    char ignored[8];
    close_descriptor(output, ignored, sizeof ignored);
    release_names(output);
}

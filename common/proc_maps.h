/*
 * proc_maps.h - /proc/PID/maps, parsed. Used by the tracer (symbols), the
 * leak scan (roots) and `memslope leaks`.
 */
#ifndef MEMSLOPE_PROC_MAPS_H
#define MEMSLOPE_PROC_MAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum proc_map_perm { PROC_MAP_READ = 1, PROC_MAP_WRITE = 2, PROC_MAP_EXEC = 4, PROC_MAP_SHARED = 8 };

struct proc_map {
    uint64_t start, end;   /* [start, end) */
    uint64_t offset;       /* file offset of start */
    uint64_t inode;
    uint32_t perms;        /* enum proc_map_perm */
    char *path;            /* "" for anonymous; "[heap]", "[stack]", ... as the kernel names them */
};

struct proc_maps {
    struct proc_map *maps; /* sorted by start, as the kernel lists them */
    size_t count;
};

/* Reads /proc/PID/maps. Returns 0, or -1 with errno set (ENOENT: no such
 * process). */
int proc_maps_read(pid_t pid, struct proc_maps *out);

/* Reads a maps file from fd, from where it stands to its end (a fresh
 * descriptor: the whole file). Returns 0, or -1 with errno set (ENOMEM:
 * out of memory, or a text beyond 256 MiB). */
int proc_maps_read_fd(int fd, struct proc_maps *out);

/* Parses the text of a maps file (exposed for tests and fuzzing). Lines that
 * do not parse are skipped. Returns 0, or -1 on allocation failure. */
int proc_maps_parse(const char *text, size_t length, struct proc_maps *out);

/* The mapping that contains address, or NULL. */
const struct proc_map *proc_maps_find(const struct proc_maps *maps, uint64_t address);

/* qsort comparator: by start address. */
int proc_map_compare_start(const void *a, const void *b);

/* A deep copy of from into out (paths duplicated). Returns 0, or -1 on
 * allocation failure (out then empty). */
int proc_maps_copy(struct proc_maps *out, const struct proc_maps *from);

void proc_maps_free(struct proc_maps *maps);

#endif

/* proc_maps.c - see proc_maps.h. */
#include "proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A maps text longer than this is refused (a million mappings). */
#define PROC_MAPS_MAX_TEXT (256u << 20)

/* Parses one line: "start-end perms offset dev inode   path". */
static int parse_line(const char *line, size_t length, struct proc_map *map)
{
    char buffer[4096 + 256];
    if (length >= sizeof buffer)
        length = sizeof buffer - 1;
    memcpy(buffer, line, length);
    buffer[length] = '\0';

    char perms[8] = "";
    int path_at = -1;
    uint64_t start, end, offset, inode;
    unsigned dev_major, dev_minor;
    if (sscanf(buffer, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &start, &end, perms, &offset,
               &dev_major, &dev_minor, &inode, &path_at) < 7 ||
        path_at < 0 || end < start || strlen(perms) < 4)
        return -1;
    map->start = start;
    map->end = end;
    map->offset = offset;
    map->inode = inode;
    map->perms = (perms[0] == 'r' ? PROC_MAP_READ : 0) | (perms[1] == 'w' ? PROC_MAP_WRITE : 0) |
                 (perms[2] == 'x' ? PROC_MAP_EXEC : 0) | (perms[3] == 's' ? PROC_MAP_SHARED : 0);
    map->path = strdup(buffer + path_at);
    return map->path ? 0 : -1;
}

int proc_maps_parse(const char *text, size_t length, struct proc_maps *out)
{
    size_t capacity = 64;
    out->count = 0;
    out->maps = malloc(capacity * sizeof *out->maps);
    if (!out->maps)
        return -1;
    const char *end = text + length;
    for (const char *line = text; line < end;) {
        const char *newline = memchr(line, '\n', (size_t)(end - line));
        size_t line_length = newline ? (size_t)(newline - line) : (size_t)(end - line);
        struct proc_map map;
        if (parse_line(line, line_length, &map) == 0) {
            if (out->count == capacity) {
                struct proc_map *grown = realloc(out->maps, 2 * capacity * sizeof *grown);
                if (!grown) {
                    free(map.path);
                    proc_maps_free(out);
                    return -1;
                }
                out->maps = grown;
                capacity *= 2;
            }
            out->maps[out->count++] = map;
        }
        line += line_length + 1;
    }
    return 0;
}

int proc_maps_read_fd(int fd, struct proc_maps *out)
{
    size_t capacity = 1 << 16, length = 0;
    char *text = malloc(capacity);
    for (;;) {
        if (!text) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t n = read(fd, text + length, capacity - length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            free(text);
            errno = saved;
            return -1;
        }
        if (n == 0)
            break;
        length += (size_t)n;
        if (length == capacity) {
            char *grown = capacity < PROC_MAPS_MAX_TEXT ? realloc(text, capacity * 2) : NULL;
            if (!grown) {
                free(text);
                errno = ENOMEM;
                return -1;
            }
            text = grown;
            capacity *= 2;
        }
    }
    int rc = proc_maps_parse(text, length, out);
    free(text);
    if (rc < 0)
        errno = ENOMEM;
    return rc;
}

int proc_maps_read(pid_t pid, struct proc_maps *out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = proc_maps_read_fd(fd, out);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

const struct proc_map *proc_maps_find(const struct proc_maps *maps, uint64_t address)
{
    size_t low = 0, high = maps->count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (address < maps->maps[mid].start)
            high = mid;
        else if (address >= maps->maps[mid].end)
            low = mid + 1;
        else
            return &maps->maps[mid];
    }
    return NULL;
}

int proc_maps_copy(struct proc_maps *out, const struct proc_maps *from)
{
    out->count = 0;
    out->maps = calloc(from->count + 1, sizeof *out->maps);
    if (!out->maps)
        return -1;
    for (size_t i = 0; i < from->count; i++) {
        out->maps[i] = from->maps[i];
        out->maps[i].path = strdup(from->maps[i].path);
        if (!out->maps[i].path) {
            proc_maps_free(out);
            return -1;
        }
        out->count++;
    }
    return 0;
}

void proc_maps_free(struct proc_maps *maps)
{
    for (size_t i = 0; i < maps->count; i++)
        free(maps->maps[i].path);
    free(maps->maps);
    maps->maps = NULL;
    maps->count = 0;
}

int proc_map_compare_start(const void *a, const void *b)
{
    const struct proc_map *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* memfd_file.c - see memfd_file.h. */
#include "memfd_file.h"

#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static bool within(rlim_t limit, size_t size)
{
    return limit == RLIM_INFINITY || limit >= size;
}

int memfd_of_size(const char *name, size_t size)
{
    struct rlimit limit;
    bool raised = false;
    if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && !within(limit.rlim_cur, size)) {
        if (!within(limit.rlim_max, size))
            return -1;
        struct rlimit wider = {limit.rlim_max, limit.rlim_max};
        if (setrlimit(RLIMIT_FSIZE, &wider) != 0)
            return -1;
        raised = true;
    }
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        fd = -1;
    }
    if (raised)
        setrlimit(RLIMIT_FSIZE, &limit);
    return fd;
}

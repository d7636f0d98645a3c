/* thread_memory.c - see thread_memory.h. */
#include "thread_memory.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* Whether a file of size bytes may be made: past RLIMIT_FSIZE, ftruncate
 * raises SIGXFSZ, which ends the program unless it handles it. */
static int file_size_allowed(size_t size)
{
    struct rlimit limit;
    return getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= size;
}

void *thread_memory_create(size_t size, const char *name)
{
    int saved_errno = errno;
    void *memory = MAP_FAILED;
    int fd = file_size_allowed(size) ? memfd_create(name, MFD_CLOEXEC) : -1;
    if (fd >= 0) {
        if (ftruncate(fd, (off_t)size) == 0)
            memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        close(fd);
    }
    errno = saved_errno;
    return memory == MAP_FAILED ? NULL : memory;
}

void thread_memory_destroy(void *memory, size_t size)
{
    if (memory)
        munmap(memory, size);
}

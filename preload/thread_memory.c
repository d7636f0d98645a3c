/* thread_memory.c - see thread_memory.h. */
#include "thread_memory.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfd_file.h"

void *thread_memory_create(size_t size, const char *name)
{
    int saved_errno = errno;
    void *memory = MAP_FAILED;
    int fd = memfd_of_size(name, size);
    if (fd >= 0) {
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

/* thread_memory.c - see thread_memory.h. */
#include "thread_memory.h"

#include <sys/mman.h>
#include <unistd.h>

void *thread_memory_map(size_t size, const char *name)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *memory = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0)
        memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    close(fd);
    return memory == MAP_FAILED ? NULL : memory;
}

void thread_memory_unmap(void *memory, size_t size)
{
    if (memory)
        munmap(memory, size);
}

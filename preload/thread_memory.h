/*
 * thread_memory.h - the memory the recording threads of a process image
 * keep for themselves (their caches), outside their static TLS and outside
 * the allocator the shim wraps.
 *
 * glibc carves each thread's static TLS (that of every object loaded at
 * start, an LD_PRELOAD shim's included) out of the top of the thread's
 * stack, and refuses a stack too small to hold it (pthread_create:
 * EINVAL). The shim's caches once sat in __thread arrays, 31 KiB of them:
 * threads with stacks of 36 KiB or less could not be made under it
 * (fixtures/small_stack.c; node's inspector thread asks for 32 KiB), and a
 * 64 KiB stack lost half.
 *
 * One mapping an image, made with its region (in the constructor, and in
 * a fork child's handler), with a part for each ring slot: a thread uses
 * the part of the slot it holds. So a thread's start and end make no
 * system call for it (a first version mapped a memfd for each thread at its
 * first capture: a fork child that had forbidden memfd_create with a
 * seccomp filter that kills, as sshd's does, died at its first malloc). The
 * mapping is a memfd named memslope-NAME, MAP_SHARED (a page costs one
 * page, not a file page and a private copy): the leak scan leaves
 * /memfd:memslope* out of its roots (leakscan/process.c), and caches hold
 * stale words of the stack and the heap. Its file descriptor is closed at
 * once; pages come as they are first touched.
 */
#ifndef MEMSLOPE_THREAD_MEMORY_H
#define MEMSLOPE_THREAD_MEMORY_H

#include <stddef.h>

/* size bytes of zeroed memory; NULL when none could be had (no file
 * descriptor, a hard file size limit below size: memfd_file.h, no address
 * space). errno is left as it was. Only while the process has one thread
 * (memfd_of_size). */
void *thread_memory_create(size_t size, const char *name);

/* Unmaps memory from thread_memory_create (NULL: nothing). */
void thread_memory_destroy(void *memory, size_t size);

#endif

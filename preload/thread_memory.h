/*
 * thread_memory.h - memory a thread of the shim keeps for itself, outside
 * its static TLS and outside the allocator it wraps.
 *
 * glibc carves every thread's static TLS, that of each object loaded at
 * start (an LD_PRELOAD shim's included), out of the top of the thread's
 * stack, and refuses a stack too small to hold it (pthread_create:
 * EINVAL). The shim's caches once sat in __thread arrays, 31 KiB of them:
 * threads with stacks of 36 KiB or less could not be made under it
 * (fixtures/small_stack.c; node's inspector thread asks for 32 KiB), and a
 * 64 KiB stack lost half. They live here now, made at a thread's first use.
 *
 * The memory is a private mapping of a memfd named memslope-NAME, not an
 * anonymous one: the leak scan leaves /memfd:memslope* out of its roots
 * (leakscan/process.c), and caches hold stale words of the stack and the
 * heap. Private, so a fork child gets a copy it may use (one made past
 * glibc's fork runs no handler to drop it) and never writes its parent's;
 * a child's fork handler unmaps what it dropped. Pages are allocated as
 * they are first written. Only system calls: safe inside malloc.
 */
#ifndef MEMSLOPE_THREAD_MEMORY_H
#define MEMSLOPE_THREAD_MEMORY_H

#include <stddef.h>

/* size bytes of zeroed memory; NULL when none could be mapped (no file
 * descriptor left, no address space). */
void *thread_memory_map(size_t size, const char *name);

/* Unmaps memory from thread_memory_map (NULL: nothing). */
void thread_memory_unmap(void *memory, size_t size);

#endif

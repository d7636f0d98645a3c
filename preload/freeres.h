/*
 * freeres.h - glibc's and libstdc++'s freeres at the end of a process
 * image, as memcheck runs them by default (docs/internals.md, "freeres at
 * exit").
 *
 * glibc keeps some memory for the life of the process (stdio buffers, the
 * DTVs of exited threads' cached stacks, locale and NSS data, ...) and
 * frees it in __libc_freeres; libstdc++ frees its emergency exception pool
 * in __gnu_cxx::__freeres. memcheck calls both when the program exits, so
 * its frees, still-reachable and possibly-lost figures leave those blocks
 * out; the shim calls them at the same moment, before the leak check.
 */
#ifndef MEMSLOPE_FREERES_H
#define MEMSLOPE_FREERES_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/shm_layout.h"

/* From the shim's constructor, once the recording is decided: freeres will
 * run in this process image if it records and the tracer did not say
 * --no-freeres (SHM_ENV_NO_FREERES). */
void shm_freeres_arm(bool recording);

/* A fork child is an image of its own: freeres runs in it at its exit
 * (from the shim's atfork child handler). */
void shm_freeres_forked(void);

/* Runs __gnu_cxx::__freeres, then __libc_freeres, once per image, in the
 * thread that ends it: from exit() after every handler and destructor, or
 * from _exit. Does nothing when not armed, in another process (a vfork
 * child, which shares this memory), when other threads still run (they
 * may use what would be freed: memcheck kills them first), or in a signal
 * handler as far as can be told (a caught signal blocked: the handler may
 * have interrupted malloc or stdio holding its lock).
 * in_handler tells, where a caught signal is blocked, whether the caller
 * runs in a handler after all: 1 yes, 0 no, -1 cannot tell (restorer is
 * the return address such a handler has, stack_from the caller's frame,
 * above which the stack is the program's; see shim.c).
 * Returns what became of them, for the region's header: NOT_REACHED when
 * nothing was decided (not armed, another process, already run), the
 * count of threads that still ran in *other_threads for OTHER_THREADS. */
typedef int (*shm_freeres_handler_probe)(void *restorer, const void *stack_from);
enum shm_freeres_outcome shm_freeres_run(uint32_t *other_threads, shm_freeres_handler_probe in_handler,
                                         const void *stack_from);

#endif

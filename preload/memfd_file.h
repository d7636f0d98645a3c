/*
 * memfd_file.h - the shim's memfds made at a given size without SIGXFSZ.
 *
 * ftruncate past RLIMIT_FSIZE raises SIGXFSZ, which ends a program that
 * does not handle it: `ulimit -f` before `memslope record`, or a program
 * that lowers the limit and then forks (the child makes its region), died
 * that way. The limit is meant for the program's files; a memfd is memory.
 */
#ifndef MEMSLOPE_MEMFD_FILE_H
#define MEMSLOPE_MEMFD_FILE_H

#include <stddef.h>

/* A memfd named name (MFD_CLOEXEC) of size bytes, or -1. Under a soft
 * RLIMIT_FSIZE below size, the soft limit is raised to the hard one for
 * the ftruncate and put back (call only while the process has one thread:
 * the limit is the process's); a hard limit below size refuses. errno is
 * the caller's to keep. */
int memfd_of_size(const char *name, size_t size);

#endif

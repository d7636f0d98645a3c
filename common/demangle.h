/*
 * demangle.h - C++ names as people read them, with libstdc++'s demangler:
 * the tracer names frames with it and the reporter reads suppression
 * patterns with it, so the two always agree.
 */
#ifndef MEMSLOPE_DEMANGLE_H
#define MEMSLOPE_DEMANGLE_H

/* A demangled copy of a C++ (Itanium ABI) name, to free(); NULL when name
 * is NULL, is not mangled, or does not demangle. */
char *demangle_cxx(const char *name);

#endif

/*
 * elf_lookup.h - a function's definition among the loaded objects, read
 * from their dynamic symbol tables without the dynamic loader.
 *
 * dlsym searches a scope: RTLD_NEXT the global one after the caller, a
 * handle its object's dependencies. A C++ library dlopen'ed RTLD_LOCAL
 * brings a libstdc++ that is in neither (and the scope of an object loaded
 * as a dependency is empty), and dlopen of an object to get a handle
 * builds that scope, allocating and changing the loader's state under the
 * program. This walks the loaded objects (dl_iterate_phdr) and reads each
 * one's GNU hash table: no allocation, no error state, only the loader's
 * list lock.
 */
#ifndef MEMSLOPE_ELF_LOOKUP_H
#define MEMSLOPE_ELF_LOOKUP_H

#include <stdint.h>

/* The address of the first definition of function name (a defined
 * STT_FUNC symbol of the dynamic symbol table) in load order, skipping the
 * object whose executable segment starts in [skip_start, skip_end) (the
 * caller's own, to find the next definition); NULL when none defines it.
 * Objects without a GNU hash table (DT_GNU_HASH) are not searched. */
void *shm_find_function(const char *name, uintptr_t skip_start, uintptr_t skip_end);

#endif

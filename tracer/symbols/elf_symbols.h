/*
 * elf_symbols.h - function symbols of an ELF file, with libelf: for
 * `--iteration SYMBOL`, and the run-time address of a file's symbols in a
 * process from its mappings.
 */
#ifndef MEMSLOPE_ELF_SYMBOLS_H
#define MEMSLOPE_ELF_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/proc_maps.h"

struct elf_symbol_match {
    uint64_t value;  /* st_value: the address in the file's own address space */
    char *name;      /* the symbol as the file names it (mangled for C++) */
    int local;       /* STB_LOCAL */
};

/* Every function symbol (STT_FUNC, STT_GNU_IFUNC, defined) of the file at
 * path whose name, or demangled name, or demangled name without its
 * parameter list, equals wanted; .symtab and .dynsym both, duplicates (same
 * value) once. Returns the number found (0: none or not an ELF file), or -1
 * on allocation failure. *matches is malloc'ed; free with
 * elf_symbol_matches_free. */
int elf_find_functions(const char *path, const char *wanted, struct elf_symbol_match **matches);
void elf_symbol_matches_free(struct elf_symbol_match *matches, int count);

/* The load bias of the file mapped at path in maps (run-time address =
 * st_value + bias), from its executable mapping and the executable
 * PT_LOAD header it maps: never from another mapping of the same file (the
 * shim's libelf maps a file whole, read-only from offset 0, to read its
 * call-frame information; a stale page of an earlier load may remain).
 * Returns 0, or -1 when the file's code is not mapped or the file is not
 * readable. */
int elf_load_bias(const struct proc_maps *maps, const char *path, uint64_t *bias);

#endif

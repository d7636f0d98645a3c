/*
 * symbols.h - the interface of tracer/symbols/: addresses to frames
 * (symbolize.h), the user's symbol cache across runs (symbol_cache.h), the
 * shims' unwind rules kept in it (kept_rules.h) and an ELF file's function
 * symbols and load bias (elf_symbols.h). The rest of memslope includes
 * this header only; symbol_store.h is the symbolizer's own.
 */
#ifndef MEMSLOPE_SYMBOLS_H
#define MEMSLOPE_SYMBOLS_H

#include "elf_symbols.h"
#include "kept_rules.h"
#include "symbol_cache.h"
#include "symbolize.h"

#endif

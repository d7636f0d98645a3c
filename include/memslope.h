/*
 * memslope.h - markers that delimit benchmark cases and iterations for
 * memslope. No link-time dependency: the functions
 * are weak references, resolved only when the program runs under
 * `memslope record` (which preloads libmemslope.so). Without it the macros
 * cost one branch on a NULL function address and do nothing.
 *
 *   MEMSLOPE_CASE_BEGIN("parse");
 *   for (int i = 0; i < n; i++) {
 *       MEMSLOPE_ITERATION();      // an iteration boundary: a heap snapshot may be taken here
 *       parse(input);
 *   }
 *   MEMSLOPE_CASE_END();
 *
 * Semantics:
 *   - A case groups the iterations between its begin and its end; growth per
 *     iteration and setup are computed per case. The name is copied, so a
 *     temporary string is fine.
 *   - An iteration outside any case belongs to the whole-process case (named
 *     after the command).
 *   - MEMSLOPE_CASE_BEGIN while a case is open ends the open case first
 *     (cases do not nest).
 *   - MEMSLOPE_CASE_END without an open case is ignored.
 *   - Markers may be called from any thread; the order between threads is the
 *     order of their timestamps.
 *
 * Without changing code, `memslope record --iteration SYMBOL` makes every
 * entry to SYMBOL an iteration.
 */
#ifndef MEMSLOPE_H
#define MEMSLOPE_H

#ifdef __cplusplus
extern "C" {
#endif

void memslope_case_begin(const char *name) __attribute__((weak));
void memslope_iteration(void) __attribute__((weak));
void memslope_case_end(void) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#if defined(__PIC__) || defined(__PIE__)
/* Position-independent code reads the weak address through the GOT, which
 * the dynamic linker fills in when libmemslope.so is preloaded. */
#define MEMSLOPE__CALL(function, arguments)                                                         \
    do {                                                                                            \
        if (function)                                                                               \
            function arguments;                                                                     \
    } while (0)
#else
/* Non-PIE executable (-no-pie): the linker fixes the address of an
 * undefined weak function to 0 at link time, and preloading cannot change
 * it. Look the marker up at run time instead, once per call site (dlsym is
 * in libc since glibc 2.34; older glibc needs -ldl). */
#include <dlfcn.h>
#define MEMSLOPE__CALL(function, arguments)                                                         \
    do {                                                                                            \
        static __typeof__(&function) memslope__resolved;                                            \
        static int memslope__looked_up;                                                             \
        if (!__atomic_load_n(&memslope__looked_up, __ATOMIC_ACQUIRE)) {                             \
            void *memslope__symbol = dlsym((void *)0 /* RTLD_DEFAULT */, #function);                \
            __atomic_store_n(&memslope__resolved, __extension__(__typeof__(&function))memslope__symbol, \
                             __ATOMIC_RELAXED);                                                     \
            __atomic_store_n(&memslope__looked_up, 1, __ATOMIC_RELEASE);                            \
        }                                                                                           \
        __typeof__(&function) memslope__call = __atomic_load_n(&memslope__resolved, __ATOMIC_RELAXED); \
        if (memslope__call)                                                                         \
            memslope__call arguments;                                                               \
    } while (0)
#endif

#define MEMSLOPE_CASE_BEGIN(name) MEMSLOPE__CALL(memslope_case_begin, (name))
#define MEMSLOPE_ITERATION() MEMSLOPE__CALL(memslope_iteration, ())
#define MEMSLOPE_CASE_END() MEMSLOPE__CALL(memslope_case_end, ())

#endif

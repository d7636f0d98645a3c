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

#define MEMSLOPE_CASE_BEGIN(name)                                                                  \
    do {                                                                                           \
        if (memslope_case_begin)                                                                   \
            memslope_case_begin(name);                                                             \
    } while (0)
#define MEMSLOPE_ITERATION()                                                                       \
    do {                                                                                           \
        if (memslope_iteration)                                                                    \
            memslope_iteration();                                                                  \
    } while (0)
#define MEMSLOPE_CASE_END()                                                                        \
    do {                                                                                           \
        if (memslope_case_end)                                                                     \
            memslope_case_end();                                                                   \
    } while (0)

#endif

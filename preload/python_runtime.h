/*
 * python_runtime.h - CPython inside the traced process, seen from the shim.
 *
 * When the image runs a CPython whose symbols are in the global scope (the
 * python executable exports its API; a program linked with libpython has
 * it loaded before the shim's constructor runs), the shim:
 *
 *  - wraps the MEM and OBJ allocator domains (PyMem_SetAllocator), so every
 *    object pymalloc serves is recorded while pymalloc keeps serving it
 *    (unless the user chose an allocator with PYTHONMALLOC or -X dev, which
 *    is respected: see enum shm_python_mode), and then the arena allocator
 *    (PyObject_SetArenaAllocator), so the region lists pymalloc's arenas
 *    for the leak scan (shm_layout.h's allocator ranges);
 *  - reads the calling thread's Python frames into each backtrace, in place
 *    of the interpreter's C frames that ran them (3.6 to 3.13, whose frame
 *    layouts the shim knows; other versions get native frames only);
 *  - offers the marker API as a builtin module `_memslope`, so
 *    python/memslope.py needs no ctypes (whose allocations would show as
 *    the marker module's own leaks);
 *  - with --iteration py:[MODULE:]QUALNAME, sets a profile function that
 *    marks an iteration at every call of that function.
 *
 * Its state is process-wide (the interpreter is) and set once, in the
 * shim's constructor, before the interpreter starts: globals of the shim,
 * as documented in shim.c.
 */
#ifndef MEMSLOPE_PYTHON_RUNTIME_H
#define MEMSLOPE_PYTHON_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fast_unwind.h"

struct python_layout; /* python_layout.h */

/* CPython's PyMemAllocatorEx (stable since 3.5). */
struct python_allocator {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t count, size_t size);
    void *(*realloc)(void *ctx, void *pointer, size_t size);
    void (*free)(void *ctx, void *pointer);
};

/* One wrapped domain: the shim's wrapper functions (their ctx is this
 * struct) and the allocator they forward to, filled in by
 * python_runtime_start. */
struct python_domain {
    struct python_allocator wrapper;
    struct python_allocator inner;
    uint8_t alloc_fn; /* enum shm_alloc_fn of its allocations */
};

struct python_runtime_hooks {
    struct python_domain *mem, *object; /* the MEM and OBJ domains */
    void (*mark_iteration)(void);       /* for --iteration py:NAME */
    /* the marker API the _memslope module calls (the shim's exported
     * functions, on which the tracer plants its breakpoints) */
    void (*case_begin)(const char *name);
    void (*iteration)(void);
    void (*case_end)(void);
};

/* From the shim's constructor, once it records, with its guard up: finds
 * the interpreter, installs what applies, and says what it found in the
 * region's header (python_version, python_mode, python_frames). */
void python_runtime_start(void *region, const struct python_runtime_hooks *hooks);

/* In a fork child, once it has its own region: the child has its parent's
 * memory, so the region gets the parent's pymalloc arenas (see
 * python_runtime.c), and later arenas are published there (new_region
 * NULL: the child does not record). */
void python_runtime_fork(void *old_region, void *new_region);

/* Set once by python_runtime_start when Python frames can be read: the
 * capture path tests it before anything else. */
extern bool python_frames_enabled;

/* What reading frames takes of an interpreter: python_runtime_start finds
 * it with dlsym; the unit tests give it for frames they lay out
 * themselves. */
struct python_frame_source {
    const struct python_layout *layout;
    void *(*this_thread_state)(void); /* PyGILState_GetThisThreadState */
    const void *code_type, *str_type, *bytes_type;
    uintptr_t eval_start, eval_end; /* _PyEval_EvalFrameDefault: return addresses in (start, end] */
    /* The executable segment of the object that holds it (the python
     * executable or libpython): return addresses in (start, end]; both 0
     * when unknown, and then no frame is left out. */
    uintptr_t interpreter_start, interpreter_end;
};

/* Reads frames as source says from now on (python_frames_enabled), and
 * forgets what the calling thread cached from the frames it read before:
 * the shim calls it once, before any capture; a test calls it for each
 * region it merges into. */
void python_frames_use(const struct python_frame_source *source);

/* The calling thread's innermost Python frame (NULL: none, or no thread
 * state), where python_merge_frames starts, and in *instruction where it
 * is (its instruction pointer, or before 3.11 f_lasti; 0 without one). */
const void *python_current_frame(uint64_t *instruction);

/* Whether the chain of Python frames from frame outwards has at most most
 * frames (a merge reads at most PYTHON_MERGE_READS_PER_FRAME words of
 * each). */
bool python_frames_at_most(const void *frame, uint32_t most);
#define PYTHON_MERGE_READS_PER_FRAME 9u

/* Merges the calling thread's Python frames, from frame
 * (python_current_frame) outwards, into a native backtrace (innermost
 * first): every frame of the interpreter's evaluation function
 * is replaced by the Python frames it ran, as frame words (shm_layout.h),
 * and the result cut at max words. The interpreter's own frames between
 * two evaluations (the calls from one Python frame into the next:
 * _PyFunction_Vectorcall, PyObject_Call, the import machinery's C parts)
 * are left out, as py-spy and pystack leave them out: they name no code of
 * the program, and their varying return addresses would make a distinct
 * stack of every path through them. Frames of other objects there (an
 * extension calling back into Python) stay, and so do the interpreter's
 * frames before the first evaluation (what allocated) and after the
 * last. Code objects seen for the first time are copied into the region.
 * No allocation, no lock.
 *
 * Writes the merge's first `head` words to out; the others, up to depth,
 * are native frames from native[rest] on, left for python_merge_complete
 * to copy when the frames themselves are needed (a stack the thread's
 * cache does not know): the hash is what finds the stack's id.
 *
 * native_suffix: NULL, or for each native frame the fast_unwind memo frame
 * whose suffix_hash is the unfinished hash of native[i] and all outer ones
 * (fast_unwind_result.suffix): the native frames outside the outermost
 * evaluation that ran Python are then not hashed again.
 *
 * reads (read_set.h; NULL: none) gets every word of the target's memory
 * the merge read, in order: while they hold what they held, a merge from the same
 * frame and native frames gives the same result (the thread's caches and
 * the region's code table give the same word for the same code object,
 * instruction and identity). */
struct python_merge {
    uint32_t depth; /* words in the merge */
    uint32_t head;  /* words written to out so far */
    uint32_t rest;  /* the native frame that follows them */
    uint64_t hash;  /* stack_hash_unfinished of the merge's depth words */
};

struct read_set; /* read_set.h */

struct python_merge python_merge_frames(void *region, const void *frame, const uint64_t *native,
                                        uint32_t native_count, const struct fast_unwind_memo_frame *native_suffix,
                                        uint64_t *out, uint32_t max, struct read_set *reads);

/* Writes the rest of the merge to out (head becomes depth). */
void python_merge_complete(struct python_merge *merge, const uint64_t *native, uint64_t *out);

/* The bytes of a thread's caches of code entries, lines and frame words,
 * which live in memory the shim gives each thread (thread_memory.h). */
size_t python_thread_caches_size(void);

/* The calling thread's caches from now on: python_thread_caches_size()
 * bytes, 8-byte aligned, zeroed or as another thread of this region left
 * them; NULL: none, and its merges read no Python frames. */
void python_thread_caches_use(void *memory);

/* Set when --iteration py:NAME asked for a profile function: every OBJ
 * allocation then calls python_install_profile, which sets it once per
 * thread when the interpreter is ready. */
extern bool python_profile_wanted;
void python_install_profile(void);

#endif

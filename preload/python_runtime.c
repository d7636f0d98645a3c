/*
 * python_runtime.c - see python_runtime.h.
 *
 * Python's internal structures are read by offset, as py-spy and memray
 * do: the offsets below were taken with offsetof() from each version's own
 * headers (python_layout.h).
 */
#include "python_runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "near_probe.h"
#include "python_layout.h"
#include "python_linetable.h"
#include "read_set.h"
#include "../common/shm_layout.h"
#include "shm_region.h"
#include "stack_table.h"

/* Longest string or line table copied (longer ones are cut). */
#define MAX_NAME_BYTES 1024u
#define MAX_LINETABLE_BYTES (256u << 10)
/* Deepest Python stack walked: a bound against a corrupt chain. */
#define MAX_PYTHON_FRAMES 4096u

/* ---- what was found --------------------------------------------------------- */

/* CPython's PyObjectArenaAllocator (3.4+). */
struct python_arena_allocator {
    void *ctx;
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *pointer, size_t size);
};

typedef void *(*get_thread_state_fn)(void);
typedef int (*profile_fn)(void *object, void *frame, int what, void *argument);

struct python_symbols {
    get_thread_state_fn this_thread_state; /* PyGILState_GetThisThreadState */
    const void *code_type, *str_type, *bytes_type, *function_type;
    uintptr_t eval_start, eval_end; /* _PyEval_EvalFrameDefault */
    uintptr_t interpreter_start, interpreter_end; /* its object's executable segment */
    int (*is_initialized)(void);
    void (*set_profile)(profile_fn function, void *argument);
    int (*add_pending_call)(int (*function)(void *), void *argument);
    void (*get_allocator)(int domain, struct python_allocator *allocator);
    void (*set_allocator)(int domain, struct python_allocator *allocator);
    void (*get_arena_allocator)(struct python_arena_allocator *allocator);
    void (*set_arena_allocator)(struct python_arena_allocator *allocator);
    int (*append_inittab)(const char *name, void *(*init)(void));
    void *(*module_create)(void *definition, int api_version);
    const char *(*str_as_utf8)(void *str, long *size);
    char *(*bytes_as_string)(void *bytes);
    int (*is_subtype)(const void *type, const void *base);
    void (*incref)(void *object);
    void (*set_error)(void *type, const char *message);
    void **type_error;
    void *none;
};

bool python_frames_enabled;
bool python_profile_wanted;

static struct python_symbols py;
static const struct python_layout *layout;
/* What the frame walk reads of the layout, copied: a load each in the hot
 * loop rather than two (python_frames_use). */
static struct python_layout walk;
static void (*mark_iteration)(void);
static struct python_runtime_hooks markers; /* the marker functions the _memslope module calls */
/* --iteration py:[MODULE:]QUALNAME */
static char wanted_module[256], wanted_qualname[256];
static size_t wanted_module_length, wanted_qualname_length;

/* ---- reading the target's objects ---------------------------------------- */

static inline const void *load_pointer(const void *object, uint16_t offset)
{
    return *(const void *const *)((const char *)object + offset);
}

#define PYTHON_OB_TYPE 8 /* ob_type follows ob_refcnt */

static inline const void *type_of(const void *object)
{
    return load_pointer(object, PYTHON_OB_TYPE);
}

/* Loads of the frame walk, which a read set keeps (see python_merge_frames). */
static inline __attribute__((always_inline)) const void *read_pointer(struct read_set *reads, const void *object,
                                                                      uint16_t offset)
{
    const void *value = load_pointer(object, offset);
    read_set_add_word(reads, (uint64_t)(uintptr_t)object + offset, (uint64_t)(uintptr_t)value);
    return value;
}

static inline __attribute__((always_inline)) uint8_t read_byte(struct read_set *reads, const void *object,
                                                               uint16_t offset)
{
    const uint8_t *field = (const uint8_t *)object + offset;
    read_set_add_field(reads, (uint64_t)(uintptr_t)field, 1);
    return *field;
}

/* Code units of a str as UTF-8 into out (at most capacity bytes, whole
 * characters only); returns the bytes written, or 0 when the object is not
 * a compact str. */
static size_t str_to_utf8(const void *str, char *out, size_t capacity)
{
    if (!str || type_of(str) != py.str_type)
        return 0;
    uint32_t state = *(const uint32_t *)((const char *)str + layout->str_state);
    long length = *(const long *)((const char *)str + layout->str_length);
    if (!(state & STR_COMPACT) || length < 0)
        return 0;
    unsigned kind = (state >> STR_KIND_SHIFT) & STR_KIND_MASK;
    const char *data = (const char *)str + ((state & STR_ASCII) ? layout->str_ascii_data : layout->str_compact_data);
    size_t written = 0;
    for (long i = 0; i < length; i++) {
        uint32_t c = kind == 1 ? ((const uint8_t *)data)[i]
                     : kind == 2 ? ((const uint16_t *)data)[i]
                                 : ((const uint32_t *)data)[i];
        char encoded[4];
        size_t n;
        if (c < 0x80) {
            encoded[0] = (char)c, n = 1;
        } else if (c < 0x800) {
            encoded[0] = (char)(0xc0 | c >> 6), encoded[1] = (char)(0x80 | (c & 0x3f)), n = 2;
        } else if (c < 0x10000) {
            encoded[0] = (char)(0xe0 | c >> 12), encoded[1] = (char)(0x80 | ((c >> 6) & 0x3f));
            encoded[2] = (char)(0x80 | (c & 0x3f)), n = 3;
        } else {
            encoded[0] = (char)(0xf0 | (c >> 18 & 0x7)), encoded[1] = (char)(0x80 | ((c >> 12) & 0x3f));
            encoded[2] = (char)(0x80 | ((c >> 6) & 0x3f)), encoded[3] = (char)(0x80 | (c & 0x3f)), n = 4;
        }
        if (written + n > capacity)
            break;
        memcpy(out + written, encoded, n);
        written += n;
    }
    return written;
}

/* Whether a str equals the UTF-8 text (length bytes). Room for one more
 * character than the text: a longer name converts to more than length
 * bytes (str_to_utf8 stops before a character that would not fit, so with
 * exactly length + 1 bytes "run" + "é" converted to "run" and matched). */
static bool str_equals(const void *str, const char *text, size_t length)
{
    char buffer[sizeof wanted_qualname + 4];
    if (length >= sizeof wanted_qualname)
        return false;
    return str_to_utf8(str, buffer, length + 4) == length && memcmp(buffer, text, length) == 0;
}

/* ---- the code table in the region ------------------------------------------ */

/* What tells two code objects at one address apart: a code object holds
 * its name, file name and line table until it dies, so a new one at the
 * address of a dead one differs in at least one of them. reads gets the
 * words read. */
static inline __attribute__((always_inline)) uint64_t code_identity(const void *code, struct read_set *reads)
{
    const void *qualname = load_pointer(code, walk.code_qualname);
    const void *filename = load_pointer(code, walk.code_filename);
    const void *linetable = load_pointer(code, walk.code_linetable);
    const uint32_t *first_line = (const uint32_t *)((const char *)code + walk.code_first_line);
    read_set_add_word(reads, (uint64_t)(uintptr_t)code + walk.code_qualname, (uint64_t)(uintptr_t)qualname);
    read_set_add_word(reads, (uint64_t)(uintptr_t)code + walk.code_filename, (uint64_t)(uintptr_t)filename);
    read_set_add_word(reads, (uint64_t)(uintptr_t)code + walk.code_linetable, (uint64_t)(uintptr_t)linetable);
    read_set_add_field(reads, (uint64_t)(uintptr_t)first_line, sizeof *first_line);
    uint64_t identity = (uint64_t)(uintptr_t)qualname;
    identity = (identity ^ (uint64_t)(uintptr_t)filename) * 0x100000001b3ull;
    identity = (identity ^ (uint64_t)(uintptr_t)linetable) * 0x100000001b3ull;
    return identity ^ (uint64_t)*first_line;
}

static inline uint64_t code_key(uint64_t address, uint64_t identity)
{
    uint64_t key = (address ^ identity * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key ? key : 1;
}

/* Reserves length bytes of the text pool; UINT32_MAX when it is full. */
static uint32_t text_reserve(void *region, uint32_t length)
{
    struct shm_header *header = region;
    /* Once full, stop counting: the counter must never wrap back into the
     * pool, over text that earlier events point at. */
    if (__atomic_load_n(&header->python_text_used, __ATOMIC_RELAXED) >= SHM_PYTHON_TEXT_BYTES)
        return UINT32_MAX;
    uint32_t start = __atomic_fetch_add(&header->python_text_used, length, __ATOMIC_RELAXED);
    if ((uint64_t)start + length > SHM_PYTHON_TEXT_BYTES)
        return UINT32_MAX;
    return start;
}

/* Copies a str into the pool; *length 0 when it is not a str or the pool is full. */
static uint32_t copy_str(void *region, const void *str, uint32_t *length)
{
    char buffer[MAX_NAME_BYTES];
    size_t bytes = str_to_utf8(str, buffer, sizeof buffer);
    uint32_t offset = bytes ? text_reserve(region, (uint32_t)bytes) : UINT32_MAX;
    *length = offset == UINT32_MAX ? 0 : (uint32_t)bytes;
    if (*length)
        memcpy(shm_python_text_pool(region) + offset, buffer, bytes);
    return offset == UINT32_MAX ? 0 : offset;
}

static uint32_t copy_linetable(void *region, const void *bytes, uint32_t *length)
{
    *length = 0;
    if (!bytes || type_of(bytes) != py.bytes_type)
        return 0;
    long size = *(const long *)((const char *)bytes + layout->bytes_size);
    if (size <= 0)
        return 0;
    uint32_t wanted = size > (long)MAX_LINETABLE_BYTES ? MAX_LINETABLE_BYTES : (uint32_t)size;
    uint32_t offset = text_reserve(region, wanted);
    if (offset == UINT32_MAX)
        return 0;
    memcpy(shm_python_text_pool(region) + offset, (const char *)bytes + layout->bytes_data, wanted);
    *length = wanted;
    return offset;
}

static void fill_code_entry(void *region, struct shm_python_code *entry, const void *code, uint64_t identity)
{
    entry->code_address = (uint64_t)(uintptr_t)code;
    entry->identity = identity;
    entry->first_line = *(const uint32_t *)((const char *)code + layout->code_first_line);
    entry->qualname_offset = copy_str(region, load_pointer(code, layout->code_qualname), &entry->qualname_length);
    entry->filename_offset = copy_str(region, load_pointer(code, layout->code_filename), &entry->filename_length);
    entry->linetable_offset =
        copy_linetable(region, load_pointer(code, layout->code_linetable), &entry->linetable_length);
    if (!entry->qualname_length || !entry->linetable_length)
        __atomic_fetch_add(&((struct shm_header *)region)->python_codes_dropped, 1, __ATOMIC_RELAXED);
}

/* Spins waiting for another thread to publish an entry; bounded, as
 * stack_table.c's, so a signal handler never waits on its own thread. */
static bool code_entry_wait_ready(struct shm_python_code *entry)
{
    for (uint32_t spin = 0; spin < 100000u; spin++) {
        if (__atomic_load_n(&entry->state, __ATOMIC_ACQUIRE) == SHM_STACK_READY)
            return true;
        if (spin > 64)
            sched_yield();
    }
    return false;
}

#define CODE_TABLE_MAX_PROBES 64u
/* The table's near part (near_probe.h): 56 pages hold the code objects of
 * a program that runs up to a couple of thousand functions. */
#define CODE_TABLE_NEAR_ENTRIES (1u << 12)
#define CODE_TABLE_NEAR_PROBES 16u

/* The code table entries this process filled, in the order it filled them:
 * a fork child copies them into its own region at the same indices, so the
 * frame words of the sites it inherits still name the right functions. The
 * shim's own memory (never a root of the leak scan). */
static uint32_t entries_filled[SHM_PYTHON_CODE_ENTRIES];
static uint32_t entries_filled_count;

/* The code table index of a code object, copying it in on first sight; 0
 * when the table is full. Lock-free, as the stack table. */
static uint32_t code_table_intern(void *region, const void *code, uint64_t identity)
{
    struct shm_python_code *table = shm_python_code_table(region);
    uint64_t address = (uint64_t)(uintptr_t)code, key = code_key(address, identity);
    for (uint32_t probe = 0; probe < CODE_TABLE_NEAR_PROBES + CODE_TABLE_MAX_PROBES; probe++) {
        uint32_t index =
            near_probe_slot(key, probe, CODE_TABLE_NEAR_ENTRIES, CODE_TABLE_NEAR_PROBES, SHM_PYTHON_CODE_ENTRIES);
        if (index == 0)
            index = 1; /* 0 names no code */
        struct shm_python_code *entry = &table[index];
        uint64_t found = __atomic_load_n(&entry->key, __ATOMIC_ACQUIRE);
        if (found == 0) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&entry->key, &expected, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&entry->state, SHM_STACK_BUSY, __ATOMIC_RELAXED);
                fill_code_entry(region, entry, code, identity);
                __atomic_store_n(&entry->state, SHM_STACK_READY, __ATOMIC_RELEASE);
                uint32_t filled = __atomic_fetch_add(&entries_filled_count, 1, __ATOMIC_RELAXED);
                if (filled < SHM_PYTHON_CODE_ENTRIES)
                    entries_filled[filled] = index;
                return index;
            }
            found = expected;
        }
        if (found == key && code_entry_wait_ready(entry) && entry->code_address == address &&
            entry->identity == identity)
            return index;
    }
    __atomic_fetch_add(&((struct shm_header *)region)->python_codes_dropped, 1, __ATOMIC_RELAXED);
    return 0;
}

/* ---- the thread's caches ----------------------------------------------------
 *
 * In the thread's part of the image's thread memory (thread_memory.h), not
 * in static TLS: glibc takes that from every thread's stack. Every entry is
 * right for any thread of the region (a word, a line or a code index is a
 * function of the code object, its identity and the instruction), so a
 * thread that takes a slot keeps what its last thread left. Used only by
 * the outermost capture of a thread (capturing == 1, as the whole merge),
 * never by a signal handler's capture.
 */

/* A direct-mapped cache in front of the shared code table: a hot code
 * object costs its identity and one private load. */
#define CODE_CACHE_ENTRIES 128u

struct code_cache_entry {
    uint64_t address, identity;
    uint32_t index;
};

/* Lines by (code entry, instruction offset): a line is read from the
 * entry's copy of the location table once, then costs a private load. */
#define LINE_CACHE_ENTRIES 256u

struct line_cache_entry {
    uint32_t code_index; /* 0: empty (entry 0 names no code) */
    uint32_t offset;
    uint32_t line;
};

/* Behind the line cache, where each code's last reading of its location
 * table stopped (python_linetable.h): a module body read instruction by
 * instruction as it runs costs its table once, not once an instruction. */
#define LINE_CURSORS 64u

struct line_cursor_entry {
    uint32_t code_index; /* 0: none */
    struct python_linetable_cursor cursor;
};

/* Frame words by instruction address, in front of the code and line
 * caches (see frame_word). */
#define WORD_CACHE_ENTRIES 512u /* power of two */

struct word_cache_entry {
    uint64_t instruction, code, identity, word; /* code 0: empty */
};

struct thread_caches {
    struct code_cache_entry code[CODE_CACHE_ENTRIES];
    struct line_cache_entry lines[LINE_CACHE_ENTRIES];
    struct line_cursor_entry line_cursors[LINE_CURSORS];
    struct word_cache_entry words[WORD_CACHE_ENTRIES];
};

/* NULL while the thread has none (python_thread_caches_use): its merges
 * read no Python frames. */
static __thread struct thread_caches *caches __attribute__((tls_model("initial-exec")));

size_t python_thread_caches_size(void)
{
    return sizeof(struct thread_caches);
}

void python_thread_caches_use(void *memory)
{
    caches = memory;
}

static inline uint32_t code_index(void *region, const void *code, uint64_t identity)
{
    uint64_t address = (uint64_t)(uintptr_t)code;
    struct code_cache_entry *cached = &caches->code[(address >> 4 ^ address >> 12) & (CODE_CACHE_ENTRIES - 1)];
    if (cached->address == address && cached->identity == identity)
        return cached->index;
    uint32_t index = code_table_intern(region, code, identity);
    /* a signal handler that interrupts this sees a torn entry at worst, as
     * a miss: the address is written last and compared first */
    cached->address = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cached->identity = identity;
    cached->index = index;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cached->address = address;
    return index;
}

/* ---- the thread's Python frames -------------------------------------------- */

const void *python_current_frame(uint64_t *instruction)
{
    *instruction = 0;
    const void *tstate = py.this_thread_state();
    if (!tstate)
        return NULL;
    const void *frame;
    if (walk.tstate_cframe != NO_FIELD) {
        const void *cframe = load_pointer(tstate, walk.tstate_cframe);
        frame = cframe ? load_pointer(cframe, walk.current_frame) : NULL;
    } else {
        frame = load_pointer(tstate, walk.current_frame);
    }
    if (frame)
        *instruction = walk.frame_lasti != NO_FIELD
                           ? *(const uint32_t *)((const char *)frame + walk.frame_lasti)
                           : (uint64_t)(uintptr_t)load_pointer(frame, walk.frame_instr);
    return frame;
}

bool python_frames_at_most(const void *frame, uint32_t most)
{
    for (uint32_t seen = 0; frame; seen++) {
        if (seen == most)
            return false;
        frame = load_pointer(frame, walk.frame_previous);
    }
    return true;
}

/* The line of an instruction from the code entry's copy (the shim's own
 * bytes: the object itself may change its table, never this copy). */
static uint32_t line_from_entry(void *region, uint32_t code_index, uint32_t offset, bool started)
{
    const struct shm_python_code *entry = &shm_python_code_table(region)[code_index];
    if (!started)
        return entry->first_line; /* not started yet: its first line, as PyCode_Addr2Line for lasti < 0 */
    struct line_cursor_entry *at = &caches->line_cursors[(code_index * 0x9e3779b1u) >> 26];
    if (at->code_index != code_index)
        *at = (struct line_cursor_entry){code_index, {0, 0, 0}};
    const uint8_t *table = (const uint8_t *)shm_python_text_pool(region) + entry->linetable_offset;
    size_t length = entry->linetable_length;
    int first = (int)entry->first_line, line;
    if (walk.line_format == PYTHON_LINES_LNOTAB)
        line = python_lnotab_line_from(table, length, first, offset, &at->cursor);
    else if (walk.line_format == PYTHON_LINES_310)
        line = python_linetable310_line_from(table, length, first, offset, &at->cursor);
    else
        line = python_linetable_line_from(table, length, first, offset, &at->cursor);
    return line > 0 ? (uint32_t)line : 0;
}

static uint32_t line_of(void *region, uint32_t code_index, uint32_t offset, bool started)
{
    if (code_index == 0)
        return 0;
    uint32_t key = started ? offset : UINT32_MAX;
    struct line_cache_entry *cached = &caches->lines[(code_index * 0x9e3779b1u ^ key) & (LINE_CACHE_ENTRIES - 1)];
    if (cached->code_index == code_index && cached->offset == key)
        return cached->line;
    uint32_t line = line_from_entry(region, code_index, offset, started);
    /* code_index last and checked first: a signal handler sees a miss or a whole entry */
    cached->code_index = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cached->offset = key;
    cached->line = line;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cached->code_index = code_index;
    return line;
}

/*
 * The thread's cache of frame words by instruction address, in front of the
 * code and line caches: a hot frame costs its code's identity and one
 * private load instead of two lookups, two hashes and the offset's line.
 *
 * Why an entry that matches is right: a frame's word is a function of its
 * code object's address and identity (which give its code table entry:
 * the table never drops or changes an entry once published, so the same
 * pair always finds the same index) and of its instruction's address
 * (whose offset from the code's bytecode, and whether the frame started,
 * give the line, read from the entry's own copy of the line table). An
 * entry keeps all three of the frame it was computed for, and is used only
 * for a frame with the same three: a code object freed and another
 * allocated at its address, with an instruction at the same address,
 * differs in its identity as it does in the code table. So the word is the
 * one computing it again would give; tests/unit/test_python_frames.c
 * checks each of the three.
 *
 * Used only by the outermost capture of a thread (as every thread cache),
 * never by a signal handler's capture: no entry is read half-written.
 */

/* The byte offset of a frame's instruction in its code's bytecode, and
 * whether the frame has started. instruction: a pointer into the code
 * object (3.11+), or before 3.11 f_lasti (-1 before the first). */
static uint32_t instruction_offset(const void *code, uint64_t instruction, bool *started)
{
    if (walk.frame_lasti != NO_FIELD) {
        int32_t lasti = (int32_t)(uint32_t)instruction;
        *started = lasti >= 0 && lasti <= INT32_MAX / 2;
        return *started ? (uint32_t)lasti * walk.lasti_bytes : 0;
    }
    const char *bytecode = (const char *)code + walk.code_bytecode;
    const char *at = (const char *)(uintptr_t)instruction;
    /* a frame not started yet points before its first instruction */
    *started = at >= bytecode && at - bytecode < (ptrdiff_t)UINT32_MAX;
    return *started ? (uint32_t)(at - bytecode) : 0;
}

/* Computes the word of a frame running code at instruction, and keeps it
 * in the cache entry; 0 for a frame to leave out: code on no line, which
 * only the interpreter makes (3.13 runs a class's __init__ under a shim
 * code object named __init__, file "__init__", first line 0, between the
 * caller's frame and the real __init__'s). Out of line: the walk's loop
 * stays small. */
static __attribute__((noinline)) uint64_t fill_word_cache(void *region, struct word_cache_entry *cached,
                                                           const void *code, uint64_t instruction, uint64_t identity)
{
    bool started;
    uint32_t offset = instruction_offset(code, instruction, &started), index = 0;
    uint64_t word = 0;
    if (*(const uint32_t *)((const char *)code + walk.code_first_line) != 0) {
        index = code_index(region, code, identity);
        word = shm_python_word(index, line_of(region, index, offset, started));
    }
    *cached = (struct word_cache_entry){
        .instruction = instruction, .code = (uint64_t)(uintptr_t)code, .identity = identity, .word = word};
    return word;
}

/* The frame word of a frame running code (a code object) at instruction;
 * cache is the thread's caches->words. The word depends on the code's
 * identity besides the two (see above): reads gets what that read. */
static inline __attribute__((always_inline)) uint64_t frame_word(void *region, struct word_cache_entry *cache,
                                                                 const void *code, uint64_t instruction,
                                                                 struct read_set *reads)
{
    uint64_t identity = code_identity(code, reads);
    struct word_cache_entry *cached = &cache[(instruction * 0x9e3779b97f4a7c15ull) >> 32 & (WORD_CACHE_ENTRIES - 1)];
    if (cached->instruction == instruction && cached->code == (uint64_t)(uintptr_t)code &&
        cached->identity == identity)
        return cached->word;
    return fill_word_cache(region, cached, code, instruction, identity);
}

/* Before 3.11: append_evaluation of the one frame an evaluation runs, a
 * PyFrameObject where f_lasti says where it is. Apart, so that the walk of
 * 3.11+ keeps its registers and instructions. */
static __attribute__((noinline)) uint32_t append_frame_object(void *region, const void **cursor, uint64_t *out,
                                                               uint32_t room, uint32_t *walked, struct read_set *reads)
{
    const void *frame = *cursor;
    if (!frame || !room || (*walked)++ >= MAX_PYTHON_FRAMES)
        return 0;
    const void *code = read_pointer(reads, frame, walk.frame_code);
    const uint32_t *lasti = (const uint32_t *)((const char *)frame + walk.frame_lasti);
    read_set_add_field(reads, (uint64_t)(uintptr_t)lasti, sizeof *lasti);
    uint32_t appended = 0;
    if (code && read_pointer(reads, code, PYTHON_OB_TYPE) == py.code_type &&
        (out[0] = frame_word(region, caches->words, code, *lasti, reads)) != 0)
        appended = 1;
    *cursor = read_pointer(reads, frame, walk.frame_previous);
    return appended;
}

/* Appends the Python frames one evaluation ran, from *cursor outwards up to
 * its entry (3.11: the frame flagged is_entry; 3.12+: the entry frame
 * owned by the C stack, skipped; before 3.11: the one frame at *cursor),
 * and leaves *cursor at the next evaluation's frames. A frame that runs no
 * code object (3.13's f_executable may be something else), or code on no
 * line (fill_word_cache), is skipped. *walked counts the frames walked,
 * against a corrupt chain. reads: NULL, or the read set to add to.
 * Inlined into the two functions below only, each out of line, so its
 * loop has the registers to itself. */
static inline __attribute__((always_inline)) uint32_t evaluation_walk(void *region, const void **cursor,
                                                                      uint64_t *out, uint32_t room, uint32_t *walked,
                                                                      struct read_set *reads)
{
    if (__builtin_expect(walk.frame_lasti != NO_FIELD, 0))
        return append_frame_object(region, cursor, out, room, walked, reads);
    struct word_cache_entry *cache = caches->words;
    uint64_t *next = out, *end = out + room;
    uint32_t steps = *walked;
    const void *frame = *cursor;
    if (walk.frame_is_entry != NO_FIELD) {
        while (frame && next < end && steps++ < MAX_PYTHON_FRAMES) {
            const void *previous = read_pointer(reads, frame, walk.frame_previous);
            const void *code = read_pointer(reads, frame, walk.frame_code);
            if (code && read_pointer(reads, code, PYTHON_OB_TYPE) == py.code_type) {
                uint64_t instruction = (uint64_t)(uintptr_t)read_pointer(reads, frame, walk.frame_instr);
                next += (*next = frame_word(region, cache, code, instruction, reads)) != 0; /* 0: left out */
            }
            bool entry = read_byte(reads, frame, walk.frame_is_entry);
            frame = previous;
            if (entry)
                break; /* 3.11: the first frame this evaluation ran */
        }
    } else {
        while (frame && next < end && steps++ < MAX_PYTHON_FRAMES) {
            const void *previous = read_pointer(reads, frame, walk.frame_previous);
            if (read_byte(reads, frame, walk.frame_owner) == walk.owned_by_cstack) {
                frame = previous; /* 3.12+: the entry frame closes this evaluation's run */
                break;
            }
            const void *code = read_pointer(reads, frame, walk.frame_code);
            if (code && read_pointer(reads, code, PYTHON_OB_TYPE) == py.code_type) {
                uint64_t instruction = (uint64_t)(uintptr_t)read_pointer(reads, frame, walk.frame_instr);
                next += (*next = frame_word(region, cache, code, instruction, reads)) != 0; /* 0: left out */
            }
            frame = previous;
        }
    }
    *walked = steps;
    *cursor = frame;
    return (uint32_t)(next - out);
}

/* The walk twice over, so the merge that keeps no read set has none of
 * its code. */
static __attribute__((noinline)) uint32_t append_evaluation(void *region, const void **cursor, uint64_t *out,
                                                             uint32_t room, uint32_t *walked)
{
    return evaluation_walk(region, cursor, out, room, walked, NULL);
}

static __attribute__((noinline)) uint32_t append_evaluation_reading(void *region, const void **cursor, uint64_t *out,
                                                                     uint32_t room, uint32_t *walked,
                                                                     struct read_set *reads)
{
    return evaluation_walk(region, cursor, out, room, walked, reads);
}

/* Whether a return address lies in the evaluation function: (start, end]. */
static inline bool in_evaluation(uint64_t ip)
{
    return ip - py.eval_start - 1 < py.eval_end - py.eval_start;
}

/* Whether a return address lies in the interpreter's executable segment:
 * (start, end]; never when it is unknown (both 0). */
static inline bool in_interpreter(uint64_t ip)
{
    return ip - py.interpreter_start - 1 < py.interpreter_end - py.interpreter_start;
}

/* Appends native[from, to) to out[*written, max), leaving out the
 * interpreter's frames when between is set (a run between two
 * evaluations). Returns false when out filled up before the run's end and
 * the frame that follows it: the merge is cut there. */
static inline bool append_native_run(uint64_t *out, uint32_t *written, uint32_t max, const uint64_t *native,
                                     uint32_t from, uint32_t to, bool between)
{
    uint32_t at = *written;
    if (!between) {
        uint32_t run = to - from;
        if (run >= max - at) {
            memcpy(out + at, native + from, (max - at) * sizeof *out);
            *written = max;
            return false;
        }
        memcpy(out + at, native + from, run * sizeof *out);
        *written = at + run;
        return true;
    }
    for (uint32_t i = from; i < to; i++)
        if (!in_interpreter(native[i])) {
            if (at == max)
                break;
            out[at++] = native[i];
        }
    *written = at;
    return at < max;
}

struct python_merge python_merge_frames(void *region, const void *frame, const uint64_t *native,
                                        uint32_t native_count, const struct fast_unwind_memo_frame *native_suffix,
                                        uint64_t *out, uint32_t max, struct read_set *reads)
{
    /* without its caches (no memory for them) the thread's stacks stay native */
    const void *cursor = caches ? frame : NULL;
    uint32_t written = 0, walked = 0, next = 0;
    bool cut = false; /* out holds only the first max words of the merge (or may) */
    bool after_python = false; /* the last evaluation gave Python frames */
    /* the merge from kept_at on is native[kept_from, native_count), whose hash is known */
    uint32_t kept_at = 0, kept_from = 0;
    while (cursor && next < native_count) {
        uint32_t evaluation = next;
        while (evaluation < native_count && !in_evaluation(native[evaluation]))
            evaluation++;
        if (evaluation == native_count)
            break;
        if (!append_native_run(out, &written, max, native, next, evaluation, after_python)) {
            cut = true;
            break;
        }
        next = evaluation + 1;
        uint32_t room = max - written;
        uint32_t appended = reads ? append_evaluation_reading(region, &cursor, out + written, room, &walked, reads)
                                  : append_evaluation(region, &cursor, out + written, room, &walked);
        after_python = appended != 0;
        if (appended) {
            written += appended;
            kept_at = written;
            kept_from = next;
            if (written == max) {
                cut = true; /* perhaps not: then only hashed the long way */
                break;
            }
        } else {
            out[written++] = native[evaluation];
        }
    }
    struct python_merge merge = {.depth = written, .head = written, .rest = next};
    if (!cut) {
        uint32_t rest = native_count - next;
        cut = rest > max - written;
        merge.depth += cut ? max - written : rest;
    }
    if (native_suffix && !cut) {
        merge.hash = kept_from < native_count ? native_suffix[kept_from].suffix_hash : STACK_HASH_SEED;
        for (uint32_t i = kept_at; i-- > 0;)
            merge.hash = stack_hash_fold(merge.hash, out[i]);
    } else {
        python_merge_complete(&merge, native, out);
        merge.hash = stack_hash_unfinished(out, merge.depth);
    }
    return merge;
}

void python_merge_complete(struct python_merge *merge, const uint64_t *native, uint64_t *out)
{
    memcpy(out + merge->head, native + merge->rest, (merge->depth - merge->head) * sizeof *out);
    merge->head = merge->depth;
}

/* ---- finding the interpreter ----------------------------------------------- */

static void *symbol(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* PY_VERSION_HEX from Py_GetVersion()'s "3.11.2 (main, ...": a static
 * buffer formatted without allocating, in every version. */
static uint32_t interpreter_version(void)
{
    const char *(*get_version)(void) = (const char *(*)(void))symbol("Py_GetVersion");
    if (!get_version)
        return 0;
    const char *text = get_version();
    unsigned parts[3] = {0, 0, 0};
    for (int i = 0; i < 3 && *text >= '0' && *text <= '9'; i++) {
        while (*text >= '0' && *text <= '9')
            parts[i] = parts[i] * 10 + (unsigned)(*text++ - '0');
        if (*text == '.')
            text++;
    }
    return parts[0] << 24 | (parts[1] & 0xff) << 16 | (parts[2] & 0xff) << 8;
}

static bool find_eval_function(uintptr_t *start_address, uintptr_t *end_address)
{
    void *start = symbol("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *entry = NULL;
    if (!start || !dladdr1(start, &info, (void **)&entry, RTLD_DL_SYMENT) || !entry || !entry->st_size)
        return false;
    /* return addresses: after the call instruction, so (start, end] */
    *start_address = (uintptr_t)start;
    *end_address = (uintptr_t)start + entry->st_size;
    return true;
}

/* dl_iterate_phdr's callback: the executable segment holding the address
 * in range[0], stored as range[0, 1]. */
static int find_executable_segment(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t *range = data;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + segment->p_vaddr;
        if (segment->p_type == PT_LOAD && (segment->p_flags & PF_X) && range[0] >= start &&
            range[0] - start < segment->p_memsz) {
            range[0] = start;
            range[1] = start + segment->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* The interpreter's executable segment, from an address inside it; both 0
 * when no loaded object has it. */
static void find_interpreter_text(uintptr_t inside, uintptr_t *start, uintptr_t *end)
{
    uintptr_t range[2] = {inside, 0};
    if (!dl_iterate_phdr(find_executable_segment, range))
        range[0] = 0;
    *start = range[0];
    *end = range[1];
}

/* A free-threaded build (3.13t) lays its objects out otherwise (a larger
 * object header moves every field the layouts name) and has the same
 * version: it alone exports the reference counting of objects owned by
 * another thread. */
static bool free_threaded(void)
{
    return symbol("_Py_DecRefShared") != NULL;
}

/* Reads frames when the interpreter has everything the walk needs, in the
 * layout the shim knows. */
static bool find_frame_symbols(const struct python_layout *found)
{
    if (free_threaded())
        return false;
    struct python_frame_source source = {
        .layout = found,
        .this_thread_state = (get_thread_state_fn)symbol("PyGILState_GetThisThreadState"),
        .code_type = symbol("PyCode_Type"),
        .str_type = py.str_type,
        .bytes_type = py.bytes_type,
    };
    py.function_type = symbol("PyFunction_Type");
    if (!found || !source.this_thread_state || !source.code_type || !source.str_type || !source.bytes_type ||
        !py.function_type || !find_eval_function(&source.eval_start, &source.eval_end))
        return false;
    find_interpreter_text(source.eval_start, &source.interpreter_start, &source.interpreter_end);
    python_frames_use(&source);
    return true;
}

/* The calling thread's caches of code entries, lines and frame words name
 * entries of one region's code table by index: another region's table
 * (a fork child's, or each unit test's) gives the same index to other
 * code. */
static void forget_thread_caches(void)
{
    if (caches)
        memset(caches, 0, sizeof *caches);
}

void python_frames_use(const struct python_frame_source *source)
{
    forget_thread_caches();
    layout = source->layout;
    walk = *source->layout;
    py.this_thread_state = source->this_thread_state;
    py.code_type = source->code_type;
    py.str_type = source->str_type;
    py.bytes_type = source->bytes_type;
    py.eval_start = source->eval_start;
    py.eval_end = source->eval_end;
    py.interpreter_start = source->interpreter_start;
    py.interpreter_end = source->interpreter_end;
    python_frames_enabled = true;
}

static void find_api_symbols(void)
{
    py.str_type = symbol("PyUnicode_Type");
    py.bytes_type = symbol("PyBytes_Type");
    *(void **)&py.is_subtype = symbol("PyType_IsSubtype");
    *(void **)&py.is_initialized = symbol("Py_IsInitialized");
    *(void **)&py.set_profile = symbol("PyEval_SetProfile");
    *(void **)&py.add_pending_call = symbol("Py_AddPendingCall");
    *(void **)&py.get_allocator = symbol("PyMem_GetAllocator");
    *(void **)&py.set_allocator = symbol("PyMem_SetAllocator");
    *(void **)&py.get_arena_allocator = symbol("PyObject_GetArenaAllocator");
    *(void **)&py.set_arena_allocator = symbol("PyObject_SetArenaAllocator");
    *(void **)&py.append_inittab = symbol("PyImport_AppendInittab");
    *(void **)&py.module_create = symbol("PyModule_Create2");
    *(void **)&py.str_as_utf8 = symbol("PyUnicode_AsUTF8AndSize");
    *(void **)&py.bytes_as_string = symbol("PyBytes_AsString");
    *(void **)&py.incref = symbol("Py_IncRef");
    *(void **)&py.set_error = symbol("PyErr_SetString");
    py.type_error = symbol("PyExc_TypeError");
    py.none = symbol("_Py_NoneStruct");
}

static const struct python_layout *layout_for(uint32_t version_hex)
{
    for (size_t i = 0; i < sizeof python_layouts / sizeof python_layouts[0]; i++)
        if (python_layouts[i].version == version_hex >> 16)
            return &python_layouts[i];
    return NULL;
}

/* ---- the allocator domains ---------------------------------------------------- */

enum { PYMEM_DOMAIN_MEM = 1, PYMEM_DOMAIN_OBJ = 2 };

static bool argument_is(const char *argument, const char *a, const char *b)
{
    return strcmp(argument, a) == 0 || (b && strcmp(argument, b) == 0);
}

/* -X dev (or PYTHONDEVMODE) makes the interpreter install its debug
 * allocator over whatever was there: the user's choice, as PYTHONMALLOC. */
static bool development_mode(void)
{
    const char *env = getenv("PYTHONDEVMODE");
    if (env && *env)
        return true;
    char arguments[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t length = fd < 0 ? -1 : read(fd, arguments, sizeof arguments - 1);
    if (fd >= 0)
        close(fd);
    if (length <= 0)
        return false;
    arguments[length] = '\0';
    /* The interpreter's own options only: they end at the script, "-",
     * "--", or the argument of -c or -m; what follows is the program's
     * (python3 args.py -X dev is a script given "-X dev"). -W and the
     * hash-check option take an argument too. */
    bool after_x = false, takes_argument = false;
    const char *argument = arguments + strlen(arguments) + 1; /* past argv[0] */
    for (; argument < arguments + length; argument += strlen(argument) + 1) {
        if (takes_argument) {
            if (after_x && argument_is(argument, "dev", NULL))
                return true;
            takes_argument = after_x = false;
            continue;
        }
        if (argument[0] != '-' || argument_is(argument, "-", "--") || argument_is(argument, "-c", "-m"))
            return false;
        if (argument_is(argument, "-Xdev", NULL))
            return true;
        after_x = argument_is(argument, "-X", NULL);
        takes_argument = after_x || argument_is(argument, "-W", "--check-hash-based-pycs");
    }
    return false;
}

static uint32_t choose_allocator_mode(void)
{
    const char *chosen = getenv("PYTHONMALLOC");
    if (chosen && *chosen)
        return strncmp(chosen, "malloc", 6) == 0 ? SHM_PYTHON_MALLOC : SHM_PYTHON_USER_ALLOCATOR;
    if (development_mode())
        return SHM_PYTHON_USER_ALLOCATOR;
    return SHM_PYTHON_HOOKED;
}

static void wrap_domain(int domain, struct python_domain *wrapped)
{
    py.get_allocator(domain, &wrapped->inner);
    wrapped->wrapper.ctx = wrapped;
    py.set_allocator(domain, &wrapped->wrapper);
}

/* pymalloc's arenas, published in the region as allocator ranges: every
 * object in them is a recorded block once the domains are wrapped, so the
 * leak scan must never scan an arena as a root (its free blocks and empty
 * pools hold stale pointers), while scanning what the kernel merged into
 * the arena's mapping: the interpreter's frame stacks (3.11+), which it
 * also gets from the arena allocator, hold live frames' references. The
 * two are told apart by size: an arena is ARENA_SIZE, a frame-stack chunk
 * 16 KiB doubled as far as one frame needs (ARENA_SIZE only for a single
 * frame of over half of it). The region changes at fork. */
static struct {
    struct python_arena_allocator inner;
    void *region;
    size_t arena_size;
} arenas;

static void *wrapped_arena_alloc(void *ctx, size_t size)
{
    (void)ctx;
    void *arena = arenas.inner.alloc(arenas.inner.ctx, size);
    if (arena && size == arenas.arena_size && arenas.region)
        shm_allocator_range_add(arenas.region, (uint64_t)(uintptr_t)arena, size);
    return arena;
}

/* Forgotten once gone: a stopped world between the two sees a range that
 * is no longer mapped, which excludes nothing. */
static void wrapped_arena_free(void *ctx, void *arena, size_t size)
{
    (void)ctx;
    arenas.inner.free(arenas.inner.ctx, arena, size);
    if (size == arenas.arena_size && arenas.region)
        shm_allocator_range_remove(arenas.region, (uint64_t)(uintptr_t)arena);
}

/* obmalloc.c's ARENA_SIZE: 1 MiB on 64-bit builds from 3.10
 * (USE_LARGE_ARENAS), 256 KiB before. */
static void wrap_arenas(void *region, uint32_t version)
{
    if (!py.get_arena_allocator || !py.set_arena_allocator)
        return;
    arenas.region = region;
    arenas.arena_size = version >= 0x030a0000 ? (size_t)1 << 20 : (size_t)256 << 10;
    py.get_arena_allocator(&arenas.inner);
    if (!arenas.inner.alloc || !arenas.inner.free)
        return;
    struct python_arena_allocator wrapper = {NULL, wrapped_arena_alloc, wrapped_arena_free};
    py.set_arena_allocator(&wrapper);
}

/* The child's region, made empty, gets what the parent's said of the
 * interpreter and every code entry at its index with the text pool under
 * it: the sites the child inherits carry the parent's frame words. */
static void copy_python_state(struct shm_header *to, const struct shm_header *from)
{
    to->python_version = from->python_version;
    to->python_mode = from->python_mode;
    to->python_frames = from->python_frames;
    uint32_t text_used = __atomic_load_n(&from->python_text_used, __ATOMIC_ACQUIRE);
    if (text_used > SHM_PYTHON_TEXT_BYTES)
        text_used = SHM_PYTHON_TEXT_BYTES;
    memcpy(shm_python_text_pool(to), shm_python_text_pool((void *)from), text_used);
    to->python_text_used = text_used;
    const struct shm_python_code *old_table = shm_python_code_table((void *)from);
    struct shm_python_code *new_table = shm_python_code_table(to);
    uint32_t filled = __atomic_load_n(&entries_filled_count, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < filled && i < SHM_PYTHON_CODE_ENTRIES; i++)
        new_table[entries_filled[i]] = old_table[entries_filled[i]];
}

void python_runtime_fork(void *old_region, void *new_region)
{
    const struct shm_header *old_header = old_region;
    if (!old_header || !old_header->python_version)
        return;
    /* the forking thread's caches name entries of the parent's table by
     * index and line: valid in the child only once the table is copied,
     * and a child that records nothing must not use them either */
    forget_thread_caches();
    if (new_region)
        copy_python_state(new_region, old_region);
    if (!arenas.region)
        return;
    if (new_region)
        shm_allocator_ranges_copy(new_region, old_region);
    arenas.region = new_region;
}

/* Wrapped before the interpreter starts: from 3.7 on it keeps what it
 * finds unless told otherwise; 3.6 and older set their default allocators
 * as they start, and Python 2 has no domains. */
static uint32_t hook_allocators(void *region, uint32_t version, const struct python_runtime_hooks *hooks)
{
    uint32_t mode = choose_allocator_mode();
    if (mode != SHM_PYTHON_HOOKED)
        return mode;
    if (version < 0x03070000 || !py.get_allocator || !py.set_allocator)
        return SHM_PYTHON_NOT_WRAPPED;
    wrap_domain(PYMEM_DOMAIN_MEM, hooks->mem);
    wrap_domain(PYMEM_DOMAIN_OBJ, hooks->object);
    wrap_arenas(region, version);
    return SHM_PYTHON_HOOKED;
}

/* ---- the _memslope builtin module ---------------------------------------------- */

/* The stable ABI's PyMethodDef and PyModuleDef. */
struct method_definition {
    const char *name;
    void *function;
    int flags;
    const char *doc;
};

struct module_definition {
    long refcount;
    void *type;
    void *init;
    long index;
    void *copy;
    const char *name, *doc;
    long size;
    struct method_definition *methods;
    void *slots, *traverse, *clear, *free;
};

#define METH_NOARGS 0x0004
#define METH_O 0x0008
#define PYTHON_API_VERSION 1013

static void *none(void)
{
    py.incref(py.none);
    return py.none;
}

static void *module_case_begin(void *self, void *name)
{
    (void)self;
    const char *text = NULL;
    long size = 0;
    if (py.is_subtype(type_of(name), py.str_type))
        text = py.str_as_utf8(name, &size);
    else if (py.is_subtype(type_of(name), py.bytes_type))
        text = py.bytes_as_string(name);
    else
        py.set_error(*py.type_error, "memslope.case_begin: the name must be str or bytes");
    if (!text)
        return NULL;
    markers.case_begin(text);
    return none();
}

static void *module_iteration(void *self, void *unused)
{
    (void)self, (void)unused;
    markers.iteration();
    return none();
}

static void *module_case_end(void *self, void *unused)
{
    (void)self, (void)unused;
    markers.case_end();
    return none();
}

static struct method_definition module_methods[] = {
    {"case_begin", (void *)module_case_begin, METH_O, "Begins a case (ends any open one)."},
    {"iteration", (void *)module_iteration, METH_NOARGS, "Marks an iteration boundary."},
    {"case_end", (void *)module_case_end, METH_NOARGS, "Ends the open case."},
    {NULL, NULL, 0, NULL},
};

static struct module_definition module_definition = {
    .refcount = 1,
    .name = "_memslope",
    .doc = "memslope's marker API, built into a recorded interpreter (python/memslope.py uses it).",
    .size = -1,
    .methods = module_methods,
};

static void *init_module(void)
{
    return py.module_create(&module_definition, PYTHON_API_VERSION);
}

static void offer_marker_module(void)
{
    if (py.append_inittab && py.module_create && py.str_as_utf8 && py.bytes_as_string && py.is_subtype &&
        py.str_type && py.bytes_type && py.incref && py.set_error && py.type_error && py.none)
        py.append_inittab("_memslope", init_module);
}

/* ---- --iteration py:NAME ---------------------------------------------------------- */

#define PYTRACE_CALL 0

static bool function_matches(const void *frame)
{
    const void *code = load_pointer(frame, layout->frame_code);
    if (!code || type_of(code) != py.code_type ||
        !str_equals(load_pointer(code, layout->code_qualname), wanted_qualname, wanted_qualname_length))
        return false;
    if (!wanted_module_length)
        return true;
    const void *function = load_pointer(frame, layout->frame_function);
    return function && type_of(function) == py.function_type &&
           str_equals(load_pointer(function, layout->function_module), wanted_module, wanted_module_length);
}

static int on_profile_event(void *object, void *frame_object, int what, void *argument)
{
    (void)object, (void)argument;
    if (what != PYTRACE_CALL || !frame_object)
        return 0;
    const void *frame = load_pointer(frame_object, layout->frame_object_frame);
    if (frame && function_matches(frame))
        mark_iteration();
    return 0;
}

static __thread bool profile_installed __attribute__((tls_model("initial-exec")));
static int main_thread_pending; /* the main thread's install is queued */

static int install_on_main_thread(void *unused)
{
    (void)unused;
    py.set_profile(on_profile_event, NULL);
    return 0;
}

/* The main thread's profile is set by a pending call, which the interpreter
 * runs at a safe point between two instructions; another thread sets its
 * own at its first object allocation once the interpreter is ready (pending
 * calls run on the main thread only). */
void python_install_profile(void)
{
    if (profile_installed || !py.is_initialized())
        return;
    profile_installed = true;
    if (getpid() == (pid_t)gettid()) {
        if (!__atomic_exchange_n(&main_thread_pending, 1, __ATOMIC_ACQ_REL))
            py.add_pending_call(install_on_main_thread, NULL);
    } else {
        py.set_profile(on_profile_event, NULL);
    }
}

/* "py:[MODULE:]QUALNAME" from the environment (the tracer checked its form). */
static void want_iterations(void)
{
    const char *name = getenv(SHM_ENV_PY_ITERATION);
    if (!name || !*name || !py.is_initialized || !py.set_profile || !py.add_pending_call)
        return;
    const char *colon = strchr(name, ':');
    const char *qualname = colon ? colon + 1 : name;
    size_t module_length = colon ? (size_t)(colon - name) : 0, qualname_length = strlen(qualname);
    if (module_length >= sizeof wanted_module || qualname_length >= sizeof wanted_qualname || !qualname_length)
        return;
    memcpy(wanted_module, name, module_length);
    memcpy(wanted_qualname, qualname, qualname_length);
    wanted_module_length = module_length;
    wanted_qualname_length = qualname_length;
    python_profile_wanted = true;
}

/* ---- start -------------------------------------------------------------------------- */

void python_runtime_start(void *region, const struct python_runtime_hooks *hooks)
{
    struct shm_header *header = region;
    uint32_t version = interpreter_version();
    if (!version)
        return;
    header->python_version = version;
    find_api_symbols();
    mark_iteration = hooks->mark_iteration;
    markers = *hooks;
    header->python_mode = hook_allocators(region, version, hooks);
    if (find_frame_symbols(layout_for(version))) {
        header->python_frames = 1;
        if (layout->frame_lasti == NO_FIELD)
            want_iterations(); /* qualified names are in code objects from 3.11 on */
    }
    offer_marker_module();
}

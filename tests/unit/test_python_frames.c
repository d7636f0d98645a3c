/*
 * test_python_frames.c - the shim's merge of Python frames into a native
 * backtrace (preload/python_runtime.c: python_merge_frames), on frames,
 * code objects, strings and line tables laid out in memory here as each
 * supported CPython version (3.6 to 3.13) lays them out
 * (preload/python_layout.h). The
 * interpreter's evaluation function is a made-up address range.
 *
 * Each expected word is built from what the test laid out (the code's
 * name, the line its instruction is on), not from the shim's own tables;
 * and each of what the thread's cache of frame words keys on (the
 * instruction, the code object, the code object's identity) is changed in
 * turn under a cached frame, which must then give the new word.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../preload/python_layout.h"
#include "../../preload/python_runtime.h"
#include "../../preload/read_set.h"
#include "../../preload/stack_table.h"
#include "test_region.h"

/* ---- CPython's objects, as far as the shim reads them -------------------- */

static char code_type[64], str_type[64], bytes_type[64]; /* only their addresses matter */

/* Objects are never freed nor reused, except where a test means to: the
 * thread's caches key on their addresses. */
static _Alignas(16) char pool[1 << 20];
static size_t pool_used;

static char *new_object(size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    assert_true(pool_used + bytes <= sizeof pool);
    char *object = pool + pool_used;
    pool_used += bytes;
    memset(object, 0, bytes);
    return object;
}

static void set_pointer(char *object, uint16_t offset, const void *value)
{
    memcpy(object + offset, &value, sizeof value);
}

static void set_type(char *object, const void *type)
{
    set_pointer(object, 8, type);
}

static char *new_str(const struct python_layout *layout, const char *text)
{
    size_t length = strlen(text);
    char *str = new_object(layout->str_ascii_data + length + 1);
    set_type(str, str_type);
    long stored = (long)length;
    memcpy(str + layout->str_length, &stored, sizeof stored);
    uint32_t state = STR_COMPACT | STR_ASCII | 1u << STR_KIND_SHIFT;
    memcpy(str + layout->str_state, &state, sizeof state);
    memcpy(str + layout->str_ascii_data, text, length);
    return str;
}

/* A line table where every entry covers two code units (4 bytes) and
 * moves one line on: the instruction at byte offset o is on line
 * first_line + 1 + o / 4, in the layout's format: a location table
 * (CPython's Objects/locations.md, code 13), 3.10's pairs (4 bytes, +1),
 * or an lnotab (a first pair of (0, +1), then (4, +1)). More entries than
 * the shim's cache of frame words has (512), so that some two instructions
 * of one code object share a cache entry. */
#define ENTRIES 1024
#define BYTECODE_BYTES (ENTRIES * 4)

static char *new_linetable(const struct python_layout *layout)
{
    char *bytes = new_object(layout->bytes_data + 2 * ENTRIES);
    set_type(bytes, bytes_type);
    long size = 2 * ENTRIES;
    memcpy(bytes + layout->bytes_size, &size, sizeof size);
    for (int i = 0; i < ENTRIES; i++) {
        char *pair = bytes + layout->bytes_data + 2 * i;
        if (layout->line_format == PYTHON_LINES_LNOTAB) {
            pair[0] = i == 0 ? 0 : 4; /* the line moves on when the offset reaches 4 i */
            pair[1] = 1;
        } else if (layout->line_format == PYTHON_LINES_310) {
            pair[0] = 4; /* [4 i, 4 i + 4): one line further */
            pair[1] = 1;
        } else {
            pair[0] = (char)(0x80 | 13 << 3 | 1); /* no columns, two code units */
            pair[1] = 2;                          /* line delta +1 as a signed varint */
        }
    }
    return bytes;
}

static uint32_t line_at(uint32_t first_line, uint32_t offset)
{
    return first_line + 1 + offset / 4;
}

struct code {
    char *object;
    const char *name;
    uint32_t first_line;
};

static void set_code_fields(const struct python_layout *layout, struct code *code, const char *name,
                            uint32_t first_line)
{
    code->name = name;
    code->first_line = first_line;
    set_type(code->object, code_type);
    set_pointer(code->object, layout->code_qualname, new_str(layout, name));
    set_pointer(code->object, layout->code_filename, new_str(layout, "test.py"));
    set_pointer(code->object, layout->code_linetable, new_linetable(layout));
    memcpy(code->object + layout->code_first_line, &first_line, sizeof first_line);
}

/* Before 3.11 the bytecode is an object of its own (the frame's f_lasti
 * says where it is): the code object is only as large as its fields. */
static size_t code_bytes(const struct python_layout *layout)
{
    return layout->frame_lasti != NO_FIELD ? 256 : layout->code_bytecode + BYTECODE_BYTES;
}

static struct code new_code(const struct python_layout *layout, const char *name, uint32_t first_line)
{
    struct code code = {.object = new_object(code_bytes(layout))};
    set_code_fields(layout, &code, name, first_line);
    return code;
}

static const char *instruction_of(const struct python_layout *layout, const struct code *code, uint32_t offset)
{
    return code->object + layout->code_bytecode + offset;
}

/* Where a frame is: before 3.11 its f_lasti, in the version's units (-1:
 * not started); after, a pointer into its code's bytecode. */
static void set_instruction(const struct python_layout *layout, char *frame, const struct code *code,
                            int64_t offset)
{
    if (layout->frame_lasti != NO_FIELD) {
        int32_t lasti = offset < 0 ? -1 : (int32_t)(offset / layout->lasti_bytes);
        memcpy(frame + layout->frame_lasti, &lasti, sizeof lasti);
    } else {
        set_pointer(frame, layout->frame_instr, code ? instruction_of(layout, code, (uint32_t)offset) : NULL);
    }
}

/* An interpreter frame running code at a byte offset; 3.11 marks the first
 * frame of each evaluation, 3.12+ pushes an entry frame after it (below);
 * before 3.11 each evaluation runs one frame. */
static char *new_frame(const struct python_layout *layout, const struct code *code, uint32_t offset, char *previous)
{
    char *frame = new_object(128);
    set_pointer(frame, layout->frame_code, code ? code->object : NULL);
    set_instruction(layout, frame, code, offset);
    set_pointer(frame, layout->frame_previous, previous);
    return frame;
}

/* The frame that closes an evaluation's run, to be linked in outside its
 * frames: 3.11 flags its first frame (the one passed); 3.12+ links an entry
 * frame owned by the C stack, returned to be the next frame's previous. */
static char *close_evaluation(const struct python_layout *layout, char *first_frame, char *outside)
{
    if (layout->frame_is_entry != NO_FIELD) {
        first_frame[layout->frame_is_entry] = 1;
        set_pointer(first_frame, layout->frame_previous, outside);
        return first_frame;
    }
    char *entry = new_frame(layout, NULL, 0, outside);
    entry[layout->frame_owner] = (char)layout->owned_by_cstack;
    set_pointer(first_frame, layout->frame_previous, entry);
    return first_frame;
}

static void *current_thread_state;

static void *this_thread_state(void)
{
    return current_thread_state;
}

static void set_current_frame(const struct python_layout *layout, char *frame)
{
    char *tstate = new_object(256);
    if (layout->tstate_cframe != NO_FIELD) {
        char *cframe = new_object(64);
        set_pointer(tstate, layout->tstate_cframe, cframe);
        set_pointer(cframe, layout->current_frame, frame);
    } else {
        set_pointer(tstate, layout->current_frame, frame);
    }
    current_thread_state = tstate;
}

/* ---- the native backtrace ----------------------------------------------------- */

#define EVAL_START 0x10000u
#define EVAL_END 0x20000u
#define IN_EVAL(n) (EVAL_START + 0x10u * (n) + 1) /* a return address in the evaluation function */
#define NATIVE(n) (0x400000u + 0x10u * (n))      /* anywhere else */
/* The interpreter's executable segment holds the evaluation function and
 * the C functions between evaluations (INTERP). */
#define INTERPRETER_START 0x8000u
#define INTERPRETER_END 0x30000u
#define INTERP(n) (EVAL_END + 0x10u * (n) + 1)

static const struct python_layout *layout_of(uint32_t version)
{
    for (size_t i = 0; i < sizeof python_layouts / sizeof python_layouts[0]; i++)
        if (python_layouts[i].version == version)
            return &python_layouts[i];
    fail_msg("no layout for version %x", version);
    return NULL;
}

static void use_layout(const struct python_layout *layout)
{
    struct python_frame_source source = {
        .layout = layout,
        .this_thread_state = this_thread_state,
        .code_type = code_type,
        .str_type = str_type,
        .bytes_type = bytes_type,
        .eval_start = EVAL_START,
        .eval_end = EVAL_END,
        .interpreter_start = INTERPRETER_START,
        .interpreter_end = INTERPRETER_END,
    };
    python_frames_use(&source);
}

/* What a word names: its code's qualified name (from the region's copy)
 * and line. */
static void assert_word(void *region, uint64_t word, const char *name, uint32_t line)
{
    assert_true(shm_is_python_word(word));
    uint32_t index = shm_python_word_code(word);
    assert_true(index != 0);
    const struct shm_python_code *entry = &shm_python_code_table(region)[index];
    assert_int_equal(entry->qualname_length, strlen(name));
    assert_memory_equal(shm_python_text_pool(region) + entry->qualname_offset, name, strlen(name));
    assert_int_equal(shm_python_word_line(word), line);
}

/* The calling thread's caches (python_thread_caches_use), made in main. */
static void *thread_caches_of_tests;

struct merged {
    uint64_t words[64];
    uint32_t depth;
};

static bool in_read_set(const struct read_set *reads, uint64_t address)
{
    for (uint32_t i = 0; i < reads->count; i++)
        if (reads->words[i].address == address)
            return true;
    return false;
}

/* What the capture cache relies on (capture_cache.h): the merge read set
 * holds every word of the frames, code objects and strings the result
 * depends on. Each word of the objects laid out so far is changed in turn:
 * one in the set then fails the check; one outside it leaves the merge's
 * result as it was. */
static void assert_reads_complete(void *region, const void *frame, const uint64_t *native, uint32_t count,
                                  uint32_t max, const struct read_set *reads, const struct merged *expected)
{
    assert_false(reads->overflow);
    assert_true(read_set_holds(reads->words, reads->count));
    uint64_t *words = (uint64_t *)(void *)pool;
    for (size_t i = 0; i < pool_used / 8; i++) {
        uint64_t address = (uint64_t)(uintptr_t)&words[i], saved = words[i];
        words[i] ^= 0x5a5a5a5a5a5a5a5aull;
        if (in_read_set(reads, address)) {
            assert_false(read_set_holds(reads->words, reads->count));
        } else {
            struct read_set again;
            read_set_clear(&again);
            struct merged changed = {0};
            struct python_merge merge = python_merge_frames(region, frame, native, count, NULL, changed.words, max,
                                                            &again);
            python_merge_complete(&merge, native, changed.words);
            assert_int_equal(merge.depth, expected->depth);
            assert_memory_equal(changed.words, expected->words, merge.depth * sizeof(uint64_t));
        }
        words[i] = saved;
    }
}

/* Merges, with the native frames' suffix hashes and a read set and with
 * neither, checks that both agree with each other and that the hash is
 * that of the words, and that the merge's read set is complete. */
static struct merged merge(void *region, const uint64_t *native, uint32_t count, uint32_t max)
{
    struct fast_unwind_memo_frame suffix[64];
    for (uint32_t i = 0; i < count; i++)
        suffix[i].suffix_hash = stack_hash_unfinished(native + i, count - i);
    struct merged with = {0}, without = {0};
    uint64_t instruction;
    const void *frame = python_current_frame(&instruction);
    static struct read_set reads;
    read_set_clear(&reads);
    /* with the suffix hashes and a read set, and with neither */
    struct python_merge a = python_merge_frames(region, frame, native, count, suffix, with.words, max, &reads);
    struct python_merge b = python_merge_frames(region, frame, native, count, NULL, without.words, max, NULL);
    assert_true(a.head <= a.depth && a.depth <= max);
    python_merge_complete(&a, native, with.words);
    python_merge_complete(&b, native, without.words);
    assert_int_equal(a.depth, b.depth);
    assert_memory_equal(with.words, without.words, a.depth * sizeof(uint64_t));
    assert_int_equal(a.hash, stack_hash_unfinished(with.words, a.depth));
    assert_int_equal(b.hash, a.hash);
    with.depth = a.depth;
    assert_reads_complete(region, frame, native, count, max, &reads, &with);
    return with;
}

/* ---- the tests ---------------------------------------------------------------- */

/* Two evaluations (a C function between them called back into Python):
 * each evaluation frame gives way to the Python frames it ran. */
static void evaluations_replaced_by_their_frames(void **state, const struct python_layout *layout)
{
    void *region = *state;
    use_layout(layout);
    struct code outer = new_code(layout, "outer", 10), callback = new_code(layout, "callback", 40),
                inner = new_code(layout, "inner", 70);
    /* the outer evaluation: outer -> callback (which called into C); the inner: inner */
    char *outer_frame = new_frame(layout, &outer, 8, NULL);
    char *callback_frame = new_frame(layout, &callback, 20, outer_frame);
    char *outer_run = close_evaluation(layout, outer_frame, NULL);
    (void)outer_run;
    char *inner_frame = new_frame(layout, &inner, 4, NULL);
    close_evaluation(layout, inner_frame, callback_frame);
    set_current_frame(layout, inner_frame);

    const uint64_t native[] = {NATIVE(0), NATIVE(1), IN_EVAL(0), NATIVE(2), IN_EVAL(1), NATIVE(3), NATIVE(4)};
    struct merged got = merge(region, native, 7, 64);
    assert_int_equal(got.depth, 8);
    assert_int_equal(got.words[0], NATIVE(0));
    assert_int_equal(got.words[1], NATIVE(1));
    assert_word(region, got.words[2], "inner", line_at(70, 4));
    assert_int_equal(got.words[3], NATIVE(2));
    assert_word(region, got.words[4], "callback", line_at(40, 20));
    assert_word(region, got.words[5], "outer", line_at(10, 8));
    assert_int_equal(got.words[6], NATIVE(3));
    assert_int_equal(got.words[7], NATIVE(4));

    /* again, from the caches: the same words */
    struct merged again = merge(region, native, 7, 64);
    assert_int_equal(again.depth, got.depth);
    assert_memory_equal(again.words, got.words, got.depth * sizeof(uint64_t));

    /* cut at max inside the Python frames, and inside the native ones */
    for (uint32_t max = 1; max < 8; max++) {
        struct merged cut = merge(region, native, 7, max);
        assert_int_equal(cut.depth, max);
        assert_memory_equal(cut.words, got.words, max * sizeof(uint64_t));
    }

    /* an evaluation frame with no Python frames left stays as it is */
    const uint64_t more[] = {IN_EVAL(0), NATIVE(5), IN_EVAL(1), IN_EVAL(2), NATIVE(6)};
    struct merged extra = merge(region, more, 5, 64);
    assert_int_equal(extra.depth, 6);
    assert_word(region, extra.words[0], "inner", line_at(70, 4));
    assert_int_equal(extra.words[1], NATIVE(5));
    assert_word(region, extra.words[2], "callback", line_at(40, 20));
    assert_word(region, extra.words[3], "outer", line_at(10, 8));
    assert_int_equal(extra.words[4], IN_EVAL(2));
    assert_int_equal(extra.words[5], NATIVE(6));
}

static void evaluations_replaced_3_11(void **state)
{
    evaluations_replaced_by_their_frames(state, layout_of(0x030b));
}

static void evaluations_replaced_3_12(void **state)
{
    evaluations_replaced_by_their_frames(state, layout_of(0x030c));
}

static void evaluations_replaced_3_13(void **state)
{
    evaluations_replaced_by_their_frames(state, layout_of(0x030d));
}

/* Before 3.11 (one PyFrameObject an evaluation, its f_lasti, the line
 * table of 3.10 or the lnotab): each evaluation frame gives way to its
 * frame, the interpreter's frames between two are left out, and a frame
 * not started yet is on its first line. */
static void one_frame_an_evaluation_before_3_11(void **state)
{
    void *region = *state;
    for (uint32_t version = 0x0306; version <= 0x030a; version++) {
        const struct python_layout *layout = layout_of(version);
        use_layout(layout);
        struct code outer = new_code(layout, "outer", 10), callback = new_code(layout, "callback", 40),
                    inner = new_code(layout, "inner", 70), fresh = new_code(layout, "fresh", 90);
        char *outer_frame = new_frame(layout, &outer, 8, NULL);
        char *callback_frame = new_frame(layout, &callback, 20, outer_frame);
        char *inner_frame = new_frame(layout, &inner, 4, callback_frame);
        set_current_frame(layout, inner_frame);
        const uint64_t native[] = {NATIVE(0), IN_EVAL(0), INTERP(1), IN_EVAL(1), NATIVE(2), IN_EVAL(2), NATIVE(3)};
        struct merged got = merge(region, native, 7, 64);
        assert_int_equal(got.depth, 6);
        assert_int_equal(got.words[0], NATIVE(0));
        assert_word(region, got.words[1], "inner", line_at(70, 4));
        assert_word(region, got.words[2], "callback", line_at(40, 20));
        assert_int_equal(got.words[3], NATIVE(2));
        assert_word(region, got.words[4], "outer", line_at(10, 8));
        assert_int_equal(got.words[5], NATIVE(3));
        /* the frame moves through every line, and back to not started */
        for (uint32_t offset = 0; offset < BYTECODE_BYTES; offset += 4) {
            set_instruction(layout, inner_frame, &inner, offset);
            assert_word(region, merge(region, native, 7, 64).words[1], "inner", line_at(70, offset));
        }
        char *not_started = new_frame(layout, &fresh, 0, inner_frame);
        set_instruction(layout, not_started, &fresh, -1);
        set_current_frame(layout, not_started);
        const uint64_t deeper[] = {IN_EVAL(3), IN_EVAL(0), NATIVE(4)};
        struct merged more = merge(region, deeper, 3, 64);
        assert_int_equal(more.depth, 3);
        assert_word(region, more.words[0], "fresh", 90);
        assert_word(region, more.words[1], "inner", line_at(70, BYTECODE_BYTES - 4));
        assert_int_equal(more.words[2], NATIVE(4));
    }
}

/* The interpreter's frames between two evaluations (how one Python frame
 * called the next) are left out; another object's frames there (an
 * extension that called back into Python) stay, and so do the
 * interpreter's frames before the first evaluation and after the last. */
static void interpreter_frames_between_evaluations_left_out(void **state)
{
    void *region = *state;
    const struct python_layout *layout = layout_of(0x030b);
    use_layout(layout);
    struct code outer = new_code(layout, "outer", 10), middle = new_code(layout, "middle", 40),
                inner = new_code(layout, "inner", 70);
    char *outer_frame = new_frame(layout, &outer, 8, NULL);
    close_evaluation(layout, outer_frame, NULL);
    char *middle_frame = new_frame(layout, &middle, 20, NULL);
    close_evaluation(layout, middle_frame, outer_frame);
    char *inner_frame = new_frame(layout, &inner, 4, NULL);
    close_evaluation(layout, inner_frame, middle_frame);
    set_current_frame(layout, inner_frame);

    const uint64_t native[] = {INTERP(0), NATIVE(0), INTERP(1), IN_EVAL(0), /* inner */
                               INTERP(2), INTERP(3), IN_EVAL(1),            /* middle */
                               INTERP(4), NATIVE(1), INTERP(5), IN_EVAL(2), /* outer */
                               INTERP(6), NATIVE(2)};
    struct merged got = merge(region, native, 13, 64);
    assert_int_equal(got.depth, 9);
    assert_int_equal(got.words[0], INTERP(0));
    assert_int_equal(got.words[1], NATIVE(0));
    assert_int_equal(got.words[2], INTERP(1));
    assert_word(region, got.words[3], "inner", line_at(70, 4));
    assert_word(region, got.words[4], "middle", line_at(40, 20));
    assert_int_equal(got.words[5], NATIVE(1));
    assert_word(region, got.words[6], "outer", line_at(10, 8));
    assert_int_equal(got.words[7], INTERP(6));
    assert_int_equal(got.words[8], NATIVE(2));

    /* cut anywhere: the first words of the whole merge */
    for (uint32_t max = 1; max < 9; max++) {
        struct merged cut = merge(region, native, 13, max);
        assert_int_equal(cut.depth, max);
        assert_memory_equal(cut.words, got.words, max * sizeof(uint64_t));
    }

    /* after an evaluation that gave no Python frame, nothing is left out */
    char *codeless = new_frame(layout, NULL, 0, NULL);
    close_evaluation(layout, codeless, outer_frame);
    set_current_frame(layout, codeless);
    const uint64_t unknown[] = {IN_EVAL(0), INTERP(7), IN_EVAL(1), INTERP(8), NATIVE(3)};
    struct merged kept = merge(region, unknown, 5, 64);
    assert_int_equal(kept.depth, 5);
    assert_int_equal(kept.words[0], IN_EVAL(0));
    assert_int_equal(kept.words[1], INTERP(7));
    assert_word(region, kept.words[2], "outer", line_at(10, 8));
    assert_int_equal(kept.words[3], INTERP(8));
    assert_int_equal(kept.words[4], NATIVE(3));
}

/* One frame, merged once (its word cached), then changed under it. */
struct one_frame {
    const struct python_layout *layout;
    struct code code;
    char *frame;
    uint64_t native[3];
    uint64_t word; /* its word, as first merged */
};

static struct one_frame cached_frame(void *region, const char *name)
{
    const struct python_layout *layout = layout_of(0x030b);
    use_layout(layout);
    struct one_frame one = {.layout = layout, .code = new_code(layout, name, 100)};
    one.frame = new_frame(layout, &one.code, 12, NULL);
    close_evaluation(layout, one.frame, NULL);
    set_current_frame(layout, one.frame);
    one.native[0] = NATIVE(7);
    one.native[1] = IN_EVAL(3);
    one.native[2] = NATIVE(8);
    struct merged got = merge(region, one.native, 3, 64);
    assert_int_equal(got.depth, 3);
    assert_word(region, got.words[1], name, line_at(100, 12));
    one.word = got.words[1];
    return one;
}

/* The frame moves through every line of its code: more instructions than
 * the cache has entries, so some share one, and each must give its own
 * line. */
static void cached_word_follows_the_instruction(void **state)
{
    void *region = *state;
    struct one_frame one = cached_frame(region, "moves_on");
    for (int round = 0; round < 2; round++)
        for (uint32_t offset = 0; offset < BYTECODE_BYTES; offset += 4) {
            set_pointer(one.frame, one.layout->frame_instr, instruction_of(one.layout, &one.code, offset));
            struct merged got = merge(region, one.native, 3, 64);
            assert_word(region, got.words[1], "moves_on", line_at(100, offset));
        }
}

/* Another code object in the frame, at the same instruction address (it
 * points before the new code's bytecode: not started, its first line),
 * with the same identity: code.replace() makes one that shares its name,
 * file name and line table objects and first line. */
static void cached_word_follows_the_code(void **state)
{
    void *region = *state;
    struct one_frame one = cached_frame(region, "first_code");
    struct code other = {.object = new_object(one.layout->code_bytecode + BYTECODE_BYTES), .name = "first_code",
                         .first_line = one.code.first_line};
    memcpy(other.object, one.code.object, one.layout->code_bytecode);
    set_pointer(one.frame, one.layout->frame_code, other.object);
    struct merged got = merge(region, one.native, 3, 64);
    assert_word(region, got.words[1], "first_code", other.first_line);
    assert_true(shm_python_word_code(got.words[1]) != shm_python_word_code(one.word)); /* another object */
}

/* The code object freed and another allocated at its address: a new
 * name, file name and line table (and first line), with the frame at the
 * same instruction address. */
static void cached_word_follows_the_identity(void **state)
{
    void *region = *state;
    struct one_frame one = cached_frame(region, "before_reuse");
    set_code_fields(one.layout, &one.code, "after_reuse", 200);
    struct merged got = merge(region, one.native, 3, 64);
    assert_word(region, got.words[1], "after_reuse", line_at(200, 12));
}

/* The same frame merged into a second region (another code table, as a
 * fork child's or the next test's): its word names the second table's
 * entry, not the one the thread cached from the first. */
static void caches_start_over_in_a_new_region(void **state)
{
    void *first = *state, *second;
    struct one_frame one = cached_frame(first, "in_both");
    assert_int_equal(setup_region((void **)&second), 0);
    use_layout(one.layout);
    struct merged got = merge(second, one.native, 3, 64);
    assert_word(second, got.words[1], "in_both", line_at(100, 12));
    void *gone = second;
    teardown_region(&gone);
}

/* A frame that runs no code object is left out (3.13's f_executable). */
static void frame_without_code_left_out(void **state)
{
    void *region = *state;
    const struct python_layout *layout = layout_of(0x030d);
    use_layout(layout);
    struct code code = new_code(layout, "has_code", 5);
    char *outer = new_frame(layout, &code, 0, NULL);
    char *shim = new_frame(layout, NULL, 0, outer);
    set_pointer(shim, layout->frame_code, str_type); /* some other object */
    close_evaluation(layout, outer, NULL);
    set_current_frame(layout, shim);
    const uint64_t native[] = {IN_EVAL(4), NATIVE(9)};
    struct merged got = merge(region, native, 2, 64);
    assert_int_equal(got.depth, 2);
    assert_word(region, got.words[0], "has_code", line_at(5, 0));
    assert_int_equal(got.words[1], NATIVE(9));
}

/* A frame whose code is on no line (first line 0: 3.13's shim code object
 * that runs a class's __init__, between the caller and the real __init__,
 * in the same evaluation) is left out. */
static void frame_of_code_on_no_line_left_out(void **state)
{
    void *region = *state;
    const uint32_t versions[] = {0x030d, 0x030b};
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        const struct python_layout *layout = layout_of(versions[v]);
        use_layout(layout);
        struct code caller = new_code(layout, "caller", 20), shim = new_code(layout, "__init__", 0),
                    init = new_code(layout, "Klass.__init__", 30);
        char *caller_frame = new_frame(layout, &caller, 4, NULL);
        char *shim_frame = new_frame(layout, &shim, 0, caller_frame);
        char *init_frame = new_frame(layout, &init, 8, shim_frame);
        close_evaluation(layout, caller_frame, NULL);
        set_current_frame(layout, init_frame);
        const uint64_t native[] = {NATIVE(0), IN_EVAL(0), NATIVE(1)};
        struct merged got = merge(region, native, 3, 64);
        assert_int_equal(got.depth, 4);
        assert_int_equal(got.words[0], NATIVE(0));
        assert_word(region, got.words[1], "Klass.__init__", line_at(30, 8));
        assert_word(region, got.words[2], "caller", line_at(20, 4));
        assert_int_equal(got.words[3], NATIVE(1));
    }
}

/* A thread without caches (the shim could not have its thread memory)
 * merges no Python frames: its stack stays the native one. */
static void without_caches_the_native_frames(void **state)
{
    void *region = *state;
    const struct python_layout *layout = layout_of(0x030b);
    use_layout(layout);
    struct code code = new_code(layout, "unseen", 10);
    char *frame = new_frame(layout, &code, 2, NULL);
    close_evaluation(layout, frame, NULL);
    set_current_frame(layout, frame);
    const uint64_t native[] = {NATIVE(0), IN_EVAL(0), NATIVE(1)};
    void *caches = thread_caches_of_tests;
    python_thread_caches_use(NULL);
    uint64_t instruction, out[8];
    struct python_merge merge =
        python_merge_frames(region, python_current_frame(&instruction), native, 3, NULL, out, 8, NULL);
    python_merge_complete(&merge, native, out);
    python_thread_caches_use(caches);
    assert_int_equal(merge.depth, 3);
    assert_memory_equal(out, native, sizeof native);
}

int main(void)
{
    /* the thread memory the shim gives each thread, here for this one */
    thread_caches_of_tests = calloc(1, python_thread_caches_size());
    assert_non_null(thread_caches_of_tests);
    python_thread_caches_use(thread_caches_of_tests);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(evaluations_replaced_3_11, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(evaluations_replaced_3_12, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(evaluations_replaced_3_13, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(one_frame_an_evaluation_before_3_11, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(interpreter_frames_between_evaluations_left_out, setup_region,
                                        teardown_region),
        cmocka_unit_test_setup_teardown(cached_word_follows_the_instruction, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(cached_word_follows_the_code, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(cached_word_follows_the_identity, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(caches_start_over_in_a_new_region, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(frame_without_code_left_out, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(frame_of_code_on_no_line_left_out, setup_region, teardown_region),
        cmocka_unit_test_setup_teardown(without_caches_the_native_frames, setup_region, teardown_region),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_leakscan.c - memcheck's leak categories on synthetic memory images. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../leakscan/leakscan.h"

/* A fake address space: one heap region and one root region. */
#define HEAP_BASE 0x10000000ull
#define HEAP_SIZE (1u << 20)
#define ROOT_BASE 0x20000000ull
#define ROOT_SIZE 4096u

struct image {
    uint8_t heap[HEAP_SIZE];
    uint8_t root[ROOT_SIZE];
    struct leakscan_block blocks[4096];
    size_t count;
    size_t root_used; /* bytes of root words written */
    uint64_t registers[16];
    size_t register_count;
    uint32_t python_version; /* for the python heuristic */
};

static uint8_t *host(struct image *m, uint64_t address)
{
    if (address >= HEAP_BASE && address < HEAP_BASE + HEAP_SIZE)
        return &m->heap[address - HEAP_BASE];
    if (address >= ROOT_BASE && address < ROOT_BASE + ROOT_SIZE)
        return &m->root[address - ROOT_BASE];
    return NULL;
}

static int fake_read(void *context, uint64_t address, void *buffer, size_t length)
{
    struct image *m = context;
    for (size_t i = 0; i < length; i++) {
        uint8_t *byte = host(m, address + i);
        ((uint8_t *)buffer)[i] = byte ? *byte : 0;
    }
    return 0;
}

static struct image *new_image(void)
{
    struct image *m = calloc(1, sizeof *m);
    assert_non_null(m);
    return m;
}

/* Adds a block at HEAP_BASE + offset; returns its address. */
static uint64_t block(struct image *m, uint64_t offset, uint64_t size)
{
    m->blocks[m->count++] = (struct leakscan_block){.address = HEAP_BASE + offset, .size = size,
                                                    .stack_id = (uint32_t)m->count, .category = 99};
    return HEAP_BASE + offset;
}

static void store(struct image *m, uint64_t address, uint64_t value)
{
    memcpy(host(m, address), &value, 8);
}

static void root_word(struct image *m, uint64_t value)
{
    store(m, ROOT_BASE + m->root_used, value);
    m->root_used += 8;
}

static uint32_t category(struct image *m, uint64_t address)
{
    for (size_t i = 0; i < m->count; i++)
        if (m->blocks[i].address == address)
            return m->blocks[i].category;
    fail_msg("no block at 0x%llx", (unsigned long long)address);
    return 99;
}

/* Classifies the image's blocks, looking words up both ways (at once,
 * and through the pipeline): each test's categories must come out of
 * either the same. */
static void run(struct image *m, struct leakscan_totals *totals)
{
    struct leakscan_range root = {ROOT_BASE, ROOT_BASE + ROOT_SIZE};
    struct leakscan_image image = {.memory = {.read = fake_read, .context = m},
                                   .roots = &root,
                                   .root_count = 1,
                                   .root_words = m->registers,
                                   .root_word_count = m->register_count,
                                   .word_lookup = LEAKSCAN_WORDS_PIPELINED,
                                   .python_version = m->python_version};
    static struct leakscan_block pipelined[4096];
    memcpy(pipelined, m->blocks, m->count * sizeof *pipelined);
    char err[256] = "";
    struct leakscan_totals ignored, pipelined_totals;
    assert_int_equal(leakscan_classify(&image, pipelined, m->count, &pipelined_totals, NULL, err, sizeof err), 0);
    image.word_lookup = LEAKSCAN_WORDS_DIRECT;
    assert_int_equal(leakscan_classify(&image, m->blocks, m->count, totals ? totals : &ignored, NULL, err, sizeof err),
                     0);
    for (size_t i = 0; i < m->count; i++) {
        assert_int_equal(pipelined[i].address, m->blocks[i].address);
        assert_int_equal(pipelined[i].category, m->blocks[i].category);
    }
    assert_memory_equal(&pipelined_totals, totals ? totals : &ignored, sizeof pipelined_totals);
}

static void test_start_pointer_from_root_is_reachable(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x100, 32), b = block(m, 0x200, 32);
    root_word(m, a);
    store(m, a + 8, b); /* a -> b: reachable through a reachable block */
    uint64_t lost = block(m, 0x300, 48);
    struct leakscan_totals totals;
    run(m, &totals);
    assert_int_equal(category(m, a), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, b), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, lost), TRACE_LEAK_DEFINITE);
    assert_int_equal(totals.blocks[TRACE_LEAK_REACHABLE], 2);
    assert_int_equal(totals.bytes[TRACE_LEAK_REACHABLE], 64);
    assert_int_equal(totals.blocks[TRACE_LEAK_DEFINITE], 1);
    assert_int_equal(totals.bytes[TRACE_LEAK_DEFINITE], 48);
    free(m);
}

static void test_interior_pointer_is_possible_and_taints_chain(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x100, 64), b = block(m, 0x200, 32);
    root_word(m, a + 16);  /* interior only */
    store(m, a + 8, b);    /* start pointer from a possible block */
    run(m, NULL);
    assert_int_equal(category(m, a), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, b), TRACE_LEAK_POSSIBLE);
    free(m);
}

static void test_later_start_pointer_upgrades_possible(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x100, 64), b = block(m, 0x200, 32);
    root_word(m, a + 16);  /* interior first */
    root_word(m, a);       /* then a start pointer */
    store(m, a + 8, b);
    run(m, NULL);
    assert_int_equal(category(m, a), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, b), TRACE_LEAK_REACHABLE);
    free(m);
}

static void test_chain_of_indirect_blocks(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x500, 16), b = block(m, 0x100, 16), c = block(m, 0x300, 16), d = block(m, 0x700, 16);
    store(m, a, b);
    store(m, b, c + 8); /* an interior pointer between lost blocks also makes it indirect */
    store(m, c, d);
    struct leakscan_totals totals;
    run(m, &totals);
    assert_int_equal(category(m, a), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, b), TRACE_LEAK_INDIRECT);
    assert_int_equal(category(m, c), TRACE_LEAK_INDIRECT);
    assert_int_equal(category(m, d), TRACE_LEAK_INDIRECT);
    assert_int_equal(totals.blocks[TRACE_LEAK_INDIRECT], 3);
    assert_int_equal(totals.blocks[TRACE_LEAK_DEFINITE], 1);
    free(m);
}

static void test_dropped_cycle_is_one_definite_rest_indirect(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x300, 16), b = block(m, 0x100, 16), c = block(m, 0x200, 16);
    store(m, a, b);
    store(m, b, c);
    store(m, c, a);
    run(m, NULL);
    /* memcheck's leader is the lowest-address block of the cycle */
    assert_int_equal(category(m, b), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, a), TRACE_LEAK_INDIRECT);
    assert_int_equal(category(m, c), TRACE_LEAK_INDIRECT);
    free(m);
}

static void test_clique_order_matches_memcheck(void **state)
{
    (void)state;
    /* x <-> z is a cycle that y also points into. memcheck visits by
     * address: x leads {x, z}; then y finds z already indirect and stays a
     * leader of its own. Both x and y are definitely lost. */
    struct image *m = new_image();
    uint64_t x = block(m, 0x100, 16), y = block(m, 0x200, 16), z = block(m, 0x300, 16);
    store(m, x, z);
    store(m, z, x);
    store(m, y, z);
    run(m, NULL);
    assert_int_equal(category(m, x), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, y), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, z), TRACE_LEAK_INDIRECT);
    free(m);
}

static void test_later_leader_absorbs_earlier_leader(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t early = block(m, 0x100, 16), late = block(m, 0x400, 16);
    store(m, late, early);
    run(m, NULL);
    assert_int_equal(category(m, early), TRACE_LEAK_INDIRECT);
    assert_int_equal(category(m, late), TRACE_LEAK_DEFINITE);
    free(m);
}

static void test_zero_size_block_only_via_start_pointer(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t z1 = block(m, 0x100, 0), z2 = block(m, 0x200, 0), after = block(m, 0x201, 15);
    root_word(m, z1);
    root_word(m, z2 + 1); /* that is after's start, not z2 */
    struct leakscan_totals totals;
    run(m, &totals);
    assert_int_equal(category(m, z1), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, z2), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, after), TRACE_LEAK_REACHABLE);
    assert_int_equal(totals.bytes[TRACE_LEAK_DEFINITE], 0);
    assert_int_equal(totals.blocks[TRACE_LEAK_DEFINITE], 1);
    free(m);
}

static void test_one_past_end_is_not_a_pointer(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x100, 32);
    root_word(m, a + 32);
    run(m, NULL);
    assert_int_equal(category(m, a), TRACE_LEAK_DEFINITE);
    free(m);
}

/* glibc's link of a chunk to itself, left in a block malloc handed out
 * again (fd_nextsize and bk_nextsize, 16 and 24 bytes in, both its own
 * header's address), reaches the last byte of the block before when that
 * one fills its chunk: not a pointer. A program's intrusive list whose
 * link is the last word of a 24-byte item, pushed at its head, holds the
 * same value once per item: still a pointer, as for memcheck. */
static void test_glibc_self_link_is_not_a_pointer(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x100, 0x1021), b = block(m, 0x1130, 64);
    root_word(m, b);
    store(m, b + 16, b - 16); /* b's stale fd_nextsize and bk_nextsize: its own header, a's last byte */
    store(m, b + 24, b - 16);
    uint64_t items[3];
    for (int k = 0; k < 3; k++) {
        items[k] = block(m, 0x2000 + 32 * (uint64_t)k, 24);
        if (k > 0)
            store(m, items[k] + 16, items[k - 1] + 16); /* the next link: this item's own header */
    }
    root_word(m, items[2] + 16); /* the list's head: its first link */
    uint64_t c = block(m, 0x3000, 0x21), d = block(m, 0x3030, 64);
    root_word(m, d);
    store(m, d + 16, d - 16); /* once only: a pointer into c's last byte */
    run(m, NULL);
    assert_int_equal(category(m, a), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, b), TRACE_LEAK_REACHABLE);
    for (int k = 0; k < 3; k++)
        assert_int_equal(category(m, items[k]), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, c), TRACE_LEAK_POSSIBLE);
    free(m);
}

static void test_register_words_are_roots(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t a = block(m, 0x100, 32), b = block(m, 0x200, 32);
    m->registers[m->register_count++] = a;
    m->registers[m->register_count++] = b + 4;
    run(m, NULL);
    assert_int_equal(category(m, a), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, b), TRACE_LEAK_POSSIBLE);
    free(m);
}

static void test_partial_last_word_is_not_scanned(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t holder = block(m, 0x100, 12), target = block(m, 0x200, 16);
    root_word(m, holder);
    store(m, holder + 8, target); /* bytes 8..15: only 4 belong to the block */
    run(m, NULL);
    assert_int_equal(category(m, target), TRACE_LEAK_DEFINITE);
    free(m);
}

static void test_length64_and_newarray_heuristics(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t length64 = block(m, 0x100, 40), newarray = block(m, 0x200, 8 + 3 * 16), plain = block(m, 0x300, 40);
    store(m, length64, 32);   /* size - 8 */
    store(m, newarray, 3);    /* three elements */
    root_word(m, length64 + 8);
    root_word(m, newarray + 8);
    root_word(m, plain + 8);  /* plain's first word is 0: no heuristic */
    run(m, NULL);
    assert_int_equal(category(m, length64), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, newarray), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, plain), TRACE_LEAK_POSSIBLE);
    free(m);
}

static void test_stdstring_heuristic(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t s = block(m, 0x100, 24 + 15 + 1);
    store(m, s, 5);       /* length */
    store(m, s + 8, 15);  /* capacity */
    root_word(m, s + 24);
    run(m, NULL);
    assert_int_equal(category(m, s), TRACE_LEAK_REACHABLE);
    free(m);
}

/* CPython's layout (leakscan/classify.c): ob_type 8 bytes into an object,
 * tp_flags 168 bytes into a type. Type objects live in a module's data,
 * here the root range past the root words the tests write. */
#define PY_TYPE_FLAGS 168u
#define PY_MANAGED_WEAKREF (1ull << 3)
#define PY_MANAGED_DICT (1ull << 4)
#define PY_HAVE_GC (1ull << 14)
#define PY_TYPE_SUBCLASS (1ull << 31)

/* A type object at ROOT_BASE + at whose type is metatype (0: itself, as
 * `type` is). */
static uint64_t python_type(struct image *m, uint64_t at, uint64_t metatype, uint64_t flags)
{
    uint64_t type = ROOT_BASE + at;
    store(m, type + 8, metatype ? metatype : type);
    store(m, type + PY_TYPE_FLAGS, flags);
    return type;
}

static void test_python_object_heuristic(void **state)
{
    (void)state;
    struct image *m = new_image();
    m->python_version = 0x030b02f0; /* 3.11.2 */
    uint64_t type_type = python_type(m, 0x400, 0, PY_TYPE_SUBCLASS);
    uint64_t tuple_type = python_type(m, 0x500, type_type, PY_HAVE_GC);
    uint64_t class_type = python_type(m, 0x600, type_type, PY_HAVE_GC | PY_MANAGED_DICT);
    uint64_t int_type = python_type(m, 0x700, type_type, 0);
    uint64_t not_a_type = python_type(m, 0x800, int_type, PY_HAVE_GC); /* its type's instances are no types */
    /* a "type" whose type's type is neither itself nor its own type */
    uint64_t stray = python_type(m, 0xa00, int_type, PY_TYPE_SUBCLASS);
    uint64_t unrooted = python_type(m, 0x900, stray, PY_HAVE_GC);

    /* an untracked tuple: its GC header, then the object */
    uint64_t tuple = block(m, 0x100, 16 + 40);
    store(m, tuple + 16 + 8, tuple_type);
    root_word(m, tuple + 16);
    /* an instance with a managed dict: two words, the GC header, the
     * object; pointed to at the object, and at its GC header */
    uint64_t instance = block(m, 0x200, 32 + 16), linked = block(m, 0x280, 32 + 16);
    store(m, instance + 32 + 8, class_type);
    store(m, linked + 32 + 8, class_type);
    root_word(m, instance + 32);
    root_word(m, linked + 16);
    /* pointers that are not where the type puts its object */
    uint64_t early = block(m, 0x300, 64), number = block(m, 0x380, 32), fake = block(m, 0x400, 32);
    uint64_t half_made = block(m, 0x480, 32);
    store(m, early + 16 + 8, class_type); /* its object would be 32 bytes in */
    store(m, number + 16 + 8, int_type);  /* no GC header */
    store(m, fake + 16 + 8, not_a_type);
    store(m, half_made + 16 + 8, unrooted);
    root_word(m, early + 16);
    root_word(m, number + 16);
    root_word(m, fake + 16);
    root_word(m, half_made + 16);
    run(m, NULL);
    assert_int_equal(category(m, tuple), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, instance), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, linked), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, early), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, number), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, fake), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, half_made), TRACE_LEAK_POSSIBLE);

    /* 3.10 had no managed dicts: a class's instance starts past its GC header */
    m->python_version = 0x030a0000;
    run(m, NULL);
    assert_int_equal(category(m, tuple), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, instance), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, early), TRACE_LEAK_REACHABLE);

    /* 3.6's and 3.7's GC header is 32 bytes: their collected objects start
     * there, and only there */
    const uint32_t before_3_8[] = {0x03060f00, 0x03071000};
    for (size_t v = 0; v < 2; v++) {
        m->python_version = before_3_8[v];
        run(m, NULL);
        assert_int_equal(category(m, tuple), TRACE_LEAK_POSSIBLE);
        assert_int_equal(category(m, instance), TRACE_LEAK_REACHABLE);
        assert_int_equal(category(m, linked), TRACE_LEAK_POSSIBLE);
        assert_int_equal(category(m, early), TRACE_LEAK_POSSIBLE);
    }

    /* without CPython, memcheck's rules alone */
    m->python_version = 0;
    run(m, NULL);
    assert_int_equal(category(m, tuple), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, instance), TRACE_LEAK_POSSIBLE);
    free(m);
}

static void test_python_dict_values_heuristic(void **state)
{
    (void)state;
    struct image *m = new_image();
    m->python_version = 0x030c01f0; /* 3.12.1 */
    /* ten values after a prefix of 10 + 2 bytes rounded up to 16, whose
     * last byte says 16 */
    uint64_t values = block(m, 0x100, 16 + 10 * 8), wrong = block(m, 0x200, 16 + 10 * 8);
    uint64_t tagged = block(m, 0x300, 16 + 10 * 8), usable = block(m, 0x400, 16 + 10 * 8 + 16);
    m->heap[values + 15 - HEAP_BASE] = 16;
    m->heap[wrong + 15 - HEAP_BASE] = 8;
    m->heap[tagged + 15 - HEAP_BASE] = 16;
    m->heap[usable + 15 - HEAP_BASE] = 16;
    root_word(m, values + 16); /* a dict's ma_values */
    root_word(m, wrong + 16);
    root_word(m, tagged + 15); /* 3.12's object: its values pointer one byte early */
    root_word(m, usable + 16); /* a block known by glibc's usable size, 16 bytes over */
    run(m, NULL);
    assert_int_equal(category(m, values), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, wrong), TRACE_LEAK_POSSIBLE);
    assert_int_equal(category(m, tagged), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, usable), TRACE_LEAK_REACHABLE);
    /* 3.11 tags nothing */
    m->python_version = 0x030b02f0;
    run(m, NULL);
    assert_int_equal(category(m, values), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, tagged), TRACE_LEAK_POSSIBLE);
    /* 3.13 keeps no prefix */
    m->python_version = 0x030d00f0;
    run(m, NULL);
    assert_int_equal(category(m, values), TRACE_LEAK_POSSIBLE);
    free(m);
}

static void test_python_immortal_objects_are_roots(void **state)
{
    (void)state;
    struct image *m = new_image();
    m->python_version = 0x030d00f0; /* 3.13.0 */
    uint64_t type_type = python_type(m, 0x400, 0, PY_TYPE_SUBCLASS);
    uint64_t str_type = python_type(m, 0x500, type_type, 0);
    uint64_t tuple_type = python_type(m, 0x600, type_type, PY_HAVE_GC);
    /* an interned string nothing points to any more, holding a block */
    uint64_t interned = block(m, 0x100, 64), held = block(m, 0x180, 32);
    store(m, interned, 0xffffffffull); /* 3.12's and 3.13's immortal count */
    store(m, interned + 8, str_type);
    store(m, interned + 16, held);
    /* an immortal tuple, its object past the GC header */
    uint64_t constants = block(m, 0x200, 16 + 40);
    store(m, constants + 16, 0xffffffffull);
    store(m, constants + 16 + 8, tuple_type);
    /* a leaked string (a count of 1), and one whose word at 8 is no type */
    uint64_t leaked = block(m, 0x300, 64), plain = block(m, 0x380, 32);
    store(m, leaked, 1);
    store(m, leaked + 8, str_type);
    store(m, plain, 0xffffffffull);
    /* an immortal instance of a class with a managed weakref: its object 32 bytes in */
    uint64_t weak_type = python_type(m, 0x700, type_type, PY_HAVE_GC | PY_MANAGED_WEAKREF);
    uint64_t instance = block(m, 0x400, 32 + 16);
    store(m, instance + 32, 0xffffffffull);
    store(m, instance + 32 + 8, weak_type);
    /* C records in a ring, prev at 8 and a flags-like word at 168 with the
     * type-subclass bit set: no chain of types, no CPython object */
    uint64_t ring[4];
    for (int r = 0; r < 4; r++)
        ring[r] = block(m, 0x1000 + 0x100 * (uint64_t)r, 192);
    for (int r = 0; r < 4; r++) {
        store(m, ring[r], 0xffffffffull);
        store(m, ring[r] + 8, ring[(r + 3) % 4]);
        store(m, ring[r] + 168, PY_TYPE_SUBCLASS);
    }
    run(m, NULL);
    assert_int_equal(category(m, instance), TRACE_LEAK_REACHABLE);
    for (int r = 0; r < 4; r++)
        assert_int_not_equal(category(m, ring[r]), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, interned), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, held), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, constants), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, leaked), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, plain), TRACE_LEAK_DEFINITE);

    /* 3.11 had no immortal objects: memcheck's rules */
    m->python_version = 0x030b02f0;
    run(m, NULL);
    assert_int_equal(category(m, interned), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, held), TRACE_LEAK_INDIRECT);
    free(m);
}

static void test_unsorted_input(void **state)
{
    (void)state;
    struct image *m = new_image();
    uint64_t c = block(m, 0x900, 10), a = block(m, 0x100, 20), b = block(m, 0x500, 30);
    root_word(m, a);
    run(m, NULL);
    assert_int_equal(category(m, a), TRACE_LEAK_REACHABLE);
    assert_int_equal(category(m, b), TRACE_LEAK_DEFINITE);
    assert_int_equal(category(m, c), TRACE_LEAK_DEFINITE);
    free(m);
}

/* leakscan_sort_blocks, and leakscan_sort_blocks_through with a scratch
 * (its own sort from 16,384 blocks on), on short runs (insertion sort),
 * long random ones, sorted backwards or as an organ pipe, all equal, two
 * far clusters (a radix level each) and the whole 64-bit range; the result
 * must be ordered and a permutation. */
static void check_sort(struct leakscan_block *blocks, size_t n, struct leakscan_block *scratch)
{
    uint64_t sum = 0, sum_after = 0;
    for (size_t i = 0; i < n; i++) {
        blocks[i].stack_id = (uint32_t)i;
        sum += blocks[i].address * 31 + i;
    }
    if (scratch)
        leakscan_sort_blocks_through(blocks, n, scratch);
    else
        leakscan_sort_blocks(blocks, n);
    for (size_t i = 0; i < n; i++) {
        sum_after += blocks[i].address * 31 + blocks[i].stack_id;
        if (i > 0)
            assert_true(blocks[i - 1].address <= blocks[i].address);
    }
    assert_true(sum == sum_after);
}

static void check_sorts(struct leakscan_block *blocks, size_t n)
{
    struct leakscan_block *copy = malloc((n ? n : 1) * sizeof *copy), *scratch = malloc((n ? n : 1) * sizeof *scratch);
    assert_non_null(copy);
    assert_non_null(scratch);
    memcpy(copy, blocks, n * sizeof *copy);
    memset(scratch, 0xa5, (n ? n : 1) * sizeof *scratch);
    check_sort(blocks, n, NULL);
    check_sort(copy, n, scratch);
    for (size_t i = 0; i < n; i++)
        assert_true(copy[i].address == blocks[i].address);
    free(copy);
    free(scratch);
}

static void test_sort_blocks(void **state)
{
    (void)state;
    enum { MAX = 20000 };
    struct leakscan_block *blocks = calloc(MAX, sizeof *blocks);
    assert_non_null(blocks);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (size_t n = 0; n <= 40; n++) {
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            blocks[i].address = 0x1000 + (rng >> 40) % 64 * 16; /* repeats likely */
        }
        check_sorts(blocks, n);
    }
    for (size_t i = 0; i < MAX; i++) { /* random */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        blocks[i].address = rng >> 16;
    }
    check_sorts(blocks, MAX);
    for (size_t i = 0; i < MAX; i++) /* descending */
        blocks[i].address = (MAX - i) * 32;
    check_sorts(blocks, MAX);
    for (size_t i = 0; i < MAX; i++) /* organ pipe: up, then down */
        blocks[i].address = (i < MAX / 2 ? i : MAX - i) * 48;
    check_sorts(blocks, MAX);
    for (size_t i = 0; i < MAX; i++) /* all equal */
        blocks[i].address = 0x7000;
    check_sorts(blocks, MAX);
    for (size_t i = 0; i < MAX; i++) { /* a brk heap and an mmap'd region, far apart, in random order */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t offset = (rng >> 33) % (1u << 22) * 16;
        blocks[i].address = (rng >> 20 & 1 ? 0x7f0000000000ull : 0x555500000000ull) + offset;
    }
    check_sorts(blocks, MAX);
    for (size_t i = 0; i < MAX; i++) /* the whole address space, and two values at its ends */
        blocks[i].address = i == 0 ? 0 : i == 1 ? UINT64_MAX : (uint64_t)i * 0x9e3779b97f4a7c15ull;
    check_sorts(blocks, MAX);
    /* The out-of-place sort's digits start at the lowest bit the keys (the
     * addresses less the lowest) do not share and end at the span's top:
     * a span whose top bit alone makes a digit, for each digit boundary
     * (11 bits) from a shared low bit of 0 and of 4, off an unaligned base
     * whose keys carry across the base's low bits, and random bit ranges. */
    for (unsigned low_bit = 0; low_bit <= 4; low_bit += 4)
        for (unsigned top = low_bit + 11; top < 64; top += 11) {
            for (size_t i = 0; i < MAX; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                uint64_t key = ((rng >> 11) & ((1ull << (top - low_bit)) - 1)) << low_bit;
                blocks[i].address = 0x12345ff0ull + (i == 0 ? 0 : i == 1 ? 1ull << top : key);
            }
            check_sorts(blocks, MAX);
        }
    for (int round = 0; round < 16; round++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        unsigned low_bit = (unsigned)(rng >> 58) % 8, span = 1 + (unsigned)(rng >> 40) % (63 - low_bit);
        uint64_t base = rng >> 3;
        for (size_t i = 0; i < MAX; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t key = (rng & ((span >= 64 ? 0 : 1ull << span) - 1)) << low_bit;
            blocks[i].address = base + key; /* may wrap past 2^64: low and high then lie apart */
        }
        check_sorts(blocks, MAX);
    }
    free(blocks);
}

static void test_overlapping_blocks_are_refused(void **state)
{
    (void)state;
    struct image *m = new_image();
    block(m, 0x100, 32);
    block(m, 0x110, 32);
    struct leakscan_image image = {.memory = {.read = fake_read, .context = m}};
    char err[256] = "";
    assert_int_equal(leakscan_classify(&image, m->blocks, m->count, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "overlap"));
    free(m);
}

static void test_no_blocks(void **state)
{
    (void)state;
    struct image *m = new_image();
    struct leakscan_totals totals;
    run(m, &totals);
    assert_int_equal(totals.blocks[TRACE_LEAK_DEFINITE], 0);
    free(m);
}

/* ---- a naive transcription of memcheck's algorithm, as an oracle --------- */

enum { N_RANDOM = 300 };

static long naive_find(const struct image *m, const size_t *sorted, uint64_t word)
{
    for (size_t k = 0; k < m->count; k++) {
        const struct leakscan_block *b = &m->blocks[sorted[k]];
        uint64_t end = b->address + (b->size ? b->size : 1);
        if (word >= b->address && word < end)
            return (long)k;
    }
    return -1;
}

static void naive_classify(const struct image *m, uint32_t *out)
{
    size_t sorted[N_RANDOM];
    for (size_t i = 0; i < m->count; i++)
        sorted[i] = i;
    for (size_t i = 0; i < m->count; i++) /* insertion sort by address */
        for (size_t j = i; j > 0 && m->blocks[sorted[j]].address < m->blocks[sorted[j - 1]].address; j--) {
            size_t t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    int st[N_RANDOM] = {0}; /* 0 unreached 1 possible 2 reachable 3 indirect */
    /* roots to fixpoint: repeat until nothing changes */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t off = 0; off + 8 <= m->root_used; off += 8) {
            uint64_t w;
            memcpy(&w, &m->root[off], 8);
            long k = naive_find(m, sorted, w);
            if (k < 0)
                continue;
            int want = w == m->blocks[sorted[k]].address ? 2 : 1;
            if (want > st[k]) st[k] = want, changed = 1;
        }
        for (size_t j = 0; j < m->count; j++) {
            if (st[j] != 1 && st[j] != 2)
                continue;
            const struct leakscan_block *b = &m->blocks[sorted[j]];
            for (uint64_t a = (b->address + 7) & ~7ull; a + 8 <= b->address + b->size; a += 8) {
                uint64_t w;
                memcpy(&w, &m->heap[a - HEAP_BASE], 8);
                long k = naive_find(m, sorted, w);
                if (k < 0)
                    continue;
                int want = (w == m->blocks[sorted[k]].address && st[j] == 2) ? 2 : 1;
                if (want > st[k]) st[k] = want, changed = 1;
            }
        }
    }
    for (size_t leader = 0; leader < m->count; leader++) {
        if (st[leader] != 0)
            continue;
        size_t todo[N_RANDOM], top = 0;
        todo[top++] = leader;
        while (top) {
            const struct leakscan_block *b = &m->blocks[sorted[todo[--top]]];
            for (uint64_t a = (b->address + 7) & ~7ull; a + 8 <= b->address + b->size; a += 8) {
                uint64_t w;
                memcpy(&w, &m->heap[a - HEAP_BASE], 8);
                long k = naive_find(m, sorted, w);
                if (k >= 0 && st[k] == 0 && (size_t)k != leader)
                    st[k] = 3, todo[top++] = (size_t)k;
            }
        }
    }
    static const uint32_t map[4] = {TRACE_LEAK_DEFINITE, TRACE_LEAK_POSSIBLE, TRACE_LEAK_REACHABLE,
                                    TRACE_LEAK_INDIRECT};
    for (size_t k = 0; k < m->count; k++)
        out[sorted[k]] = map[st[k]];
}

static void test_random_graphs_match_naive_memcheck(void **state)
{
    (void)state;
    srand(12345);
    for (int round = 0; round < 40; round++) {
        struct image *m = new_image();
        uint64_t offset = 64;
        for (int i = 0; i < N_RANDOM; i++) {
            uint64_t size = (uint64_t)(rand() % 5) * 8 + (uint64_t)(rand() % 3 == 0 ? rand() % 8 : 0);
            block(m, offset, size);
            offset += size + 16 + (uint64_t)(rand() % 4) * 16;
        }
        for (size_t i = 0; i < m->count; i++) { /* random pointers, some interior */
            struct leakscan_block *b = &m->blocks[i];
            for (uint64_t a = b->address; a + 8 <= b->address + b->size; a += 8) {
                if (rand() % 3)
                    continue;
                const struct leakscan_block *t = &m->blocks[rand() % m->count];
                store(m, a, t->address + (rand() % 4 == 0 && t->size > 1 ? (uint64_t)rand() % t->size : 0));
            }
        }
        for (int r = 0; r < 6; r++) {
            const struct leakscan_block *t = &m->blocks[rand() % m->count];
            root_word(m, t->address + (rand() % 3 == 0 && t->size > 1 ? (uint64_t)rand() % t->size : 0));
        }
        uint32_t expected[N_RANDOM];
        naive_classify(m, expected);
        run(m, NULL);
        for (size_t i = 0; i < m->count; i++) /* the scan sorted the blocks; stack_id is their order of creation */
            assert_int_equal(m->blocks[i].category, expected[m->blocks[i].stack_id - 1]);
        free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_pointer_from_root_is_reachable),
        cmocka_unit_test(test_interior_pointer_is_possible_and_taints_chain),
        cmocka_unit_test(test_later_start_pointer_upgrades_possible),
        cmocka_unit_test(test_chain_of_indirect_blocks),
        cmocka_unit_test(test_dropped_cycle_is_one_definite_rest_indirect),
        cmocka_unit_test(test_clique_order_matches_memcheck),
        cmocka_unit_test(test_later_leader_absorbs_earlier_leader),
        cmocka_unit_test(test_zero_size_block_only_via_start_pointer),
        cmocka_unit_test(test_one_past_end_is_not_a_pointer),
        cmocka_unit_test(test_glibc_self_link_is_not_a_pointer),
        cmocka_unit_test(test_register_words_are_roots),
        cmocka_unit_test(test_partial_last_word_is_not_scanned),
        cmocka_unit_test(test_length64_and_newarray_heuristics),
        cmocka_unit_test(test_stdstring_heuristic),
        cmocka_unit_test(test_python_object_heuristic),
        cmocka_unit_test(test_python_dict_values_heuristic),
        cmocka_unit_test(test_python_immortal_objects_are_roots),
        cmocka_unit_test(test_unsorted_input),
        cmocka_unit_test(test_sort_blocks),
        cmocka_unit_test(test_overlapping_blocks_are_refused),
        cmocka_unit_test(test_no_blocks),
        cmocka_unit_test(test_random_graphs_match_naive_memcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The shim's cached CFI unwinder (preload/fast_unwind.h) against libunwind:
 * the same return addresses through this program's frames, libc's (qsort
 * calling back into us) and a recursion deep enough to reach max. And its
 * memo of the previous backtrace: always the same frames as without it,
 * whatever changed on the stack in between. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "../../preload/fast_unwind.h"
#include "../../preload/read_set.h"
#include "../../preload/stack_table.h"

#define MAX 64

struct capture {
    uint64_t fast[MAX], reference[MAX], memoised[MAX];
    int fast_count, reference_count, memoised_count;
    uint64_t memoised_hash; /* fast_unwind's hash of memoised */
    struct fast_unwind_memo *memo; /* also unwind with this memo, into memoised */
    /* with memo: the words the memoised unwind came from, and its start */
    struct read_set reads;
    bool reads_taken, bp_matters;
    struct fast_unwind_regs start;
    /* a capture before this one: whether its words held when this one
     * started from the same registers (-1: another start) */
    const struct capture *before;
    int before_held;
};

/* Both unwinders from the caller of this function. */
static __attribute__((noinline)) void capture_here(struct capture *c)
{
    struct fast_unwind_regs start = FAST_UNWIND_CALLER_REGS();
    c->fast_count = fast_unwind(&start, start.sp + (256u << 20), c->fast, MAX, 1, NULL, NULL);
    if (c->memo) {
        uint64_t buffer[MAX];
        struct fast_unwind_result result;
        const struct capture *before = c->before;
        c->before_held = -1;
        if (before && before->start.ip == start.ip && before->start.sp == start.sp &&
            (!before->bp_matters || before->start.bp == start.bp))
            c->before_held = read_set_holds(before->reads.words, before->reads.count);
        c->memoised_count = fast_unwind(&start, start.sp + (256u << 20), buffer, MAX, 1, c->memo, &result);
        for (int i = 0; i < c->memoised_count; i++)
            c->memoised[i] = result.frames[i];
        c->memoised_hash = result.hash;
        c->start = start;
        read_set_clear(&c->reads);
        c->reads_taken = fast_unwind_memo_reads(c->memo, &start, c->memoised_count, MAX, &c->reads, &c->bp_matters);
    }
    void *frames[MAX + 1];
    int n = unw_backtrace(frames, MAX + 1);
    c->reference_count = n - 1; /* without capture_here itself */
    for (int i = 1; i < n; i++)
        c->reference[i - 1] = (uint64_t)(uintptr_t)frames[i];
    __asm__ volatile("" ::: "memory"); /* not a tail call site */
}

static void assert_same(const struct capture *c)
{
    assert_true(c->fast_count > 0);
    assert_int_equal(c->fast_count, c->reference_count);
    for (int i = 0; i < c->fast_count; i++)
        assert_int_equal(c->fast[i], c->reference[i]);
    if (c->memo) {
        assert_int_equal(c->memoised_count, c->fast_count);
        for (int i = 0; i < c->fast_count; i++)
            assert_int_equal(c->memoised[i], c->fast[i]);
        assert_int_equal(stack_hash_finish(c->memoised_hash, (uint32_t)c->memoised_count),
                         stack_hash(c->memoised, (uint32_t)c->memoised_count));
    }
}

static __attribute__((noinline)) int recurse(struct capture *c, int depth)
{
    if (depth == 0) {
        capture_here(c);
        return 0;
    }
    volatile char pad[32 + depth]; /* frames of different sizes */
    pad[0] = (char)depth;
    return recurse(c, depth - 1) + pad[0];
}

static void same_as_libunwind_through_our_frames(void **state)
{
    (void)state;
    struct capture c = {0};
    recurse(&c, 5);
    assert_same(&c);
    recurse(&c, 20);
    assert_same(&c);
}

static struct capture *in_qsort;

static int compare_and_capture(const void *a, const void *b)
{
    if (in_qsort) {
        capture_here(in_qsort);
        in_qsort = NULL;
    }
    return *(const int *)a - *(const int *)b;
}

static void same_as_libunwind_through_libc(void **state)
{
    (void)state;
    struct capture c = {0};
    int values[64];
    for (int i = 0; i < 64; i++)
        values[i] = (i * 7919) % 64;
    in_qsort = &c;
    qsort(values, 64, sizeof values[0], compare_and_capture);
    assert_same(&c);
}

static void without_lookup_only_cached_rules(void **state)
{
    (void)state;
    struct capture c = {0};
    recurse(&c, 3); /* caches every rule on this path */
    struct fast_unwind_regs start = FAST_UNWIND_CALLER_REGS();
    uint64_t frames[MAX];
    int n = fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 0, NULL, NULL);
    assert_true(n > 0 || n == FAST_UNWIND_NEEDS_LOOKUP);
    n = fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 1, NULL, NULL);
    assert_true(n > 0);
    assert_int_equal(fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 0, NULL, NULL), n);
}

static void stops_at_max(void **state)
{
    (void)state;
    struct capture c = {0};
    recurse(&c, 100);
    assert_true(c.fast_count == MAX || c.fast_count == FAST_UNWIND_UNSUPPORTED);
    if (c.fast_count == MAX)
        for (int i = 0; i < MAX; i++)
            assert_int_equal(c.fast[i], c.reference[i]);
}


/* Two callers of the same chain, different only in where they return to:
 * at the same depth every inner frame has the same ip and stack pointer,
 * and only the return address into outer_a or outer_b tells them apart. */
static __attribute__((noinline)) int middle(struct capture *c)
{
    capture_here(c);
    __asm__ volatile("" ::: "memory");
    return 1;
}

static __attribute__((noinline)) int outer_a(struct capture *c)
{
    volatile int mark = 11; /* not folded into outer_b */
    return middle(c) + mark;
}

static __attribute__((noinline)) int outer_b(struct capture *c)
{
    volatile int mark = 22;
    return middle(c) + mark * 3;
}

static void memo_sees_a_different_caller_at_the_same_depth(void **state)
{
    (void)state;
    struct fast_unwind_memo memo = {0};
    struct capture a = {.memo = &memo}, b = {.memo = &memo};
    outer_a(&a);
    assert_same(&a);
    outer_b(&b);
    assert_same(&b);
    /* the memo matched middle's frame and must have seen the other caller */
    assert_true(a.fast_count >= 3 && b.fast_count >= 3);
    assert_true(a.memoised[2] != b.memoised[2]);
    uint64_t reused_before = memo.reused;
    for (int round = 0; round < 2; round++) { /* one call site: the same path twice */
        outer_b(&b);
        assert_same(&b);
    }
    assert_true(memo.reused > reused_before);
}

/* fast_unwind_memo_reads: the stack words of a whole unwind hold again
 * when the same path is taken from the same registers, and not when a
 * frame further out is another (outer_b calls middle at the same depth as
 * outer_a). What capture_cache.h relies on: they hold only if the unwind
 * would give the same frames. */
static void memo_reads_hold_only_for_the_same_frames(void **state)
{
    (void)state;
    static struct fast_unwind_memo memo;
    static struct capture captures[5];
    int (*const paths[5])(struct capture *) = {outer_a, outer_a, outer_b, outer_b, outer_a};
    for (int i = 0; i < 5; i++) {
        memset(&captures[i], 0, sizeof captures[i]);
        captures[i].memo = &memo;
        captures[i].before = i ? &captures[i - 1] : NULL;
        paths[i](&captures[i]);
        assert_same(&captures[i]);
        assert_true(captures[i].reads_taken);
        assert_true(captures[i].reads.count >= (uint32_t)captures[i].memoised_count - 1);
    }
    const int expected[5] = {-1, 1, 0, 1, 0}; /* start, same, other caller, same, other */
    for (int i = 1; i < 5; i++) {
        assert_int_equal(captures[i].before_held, expected[i]);
        bool same = captures[i].memoised_count == captures[i - 1].memoised_count &&
                    memcmp(captures[i].memoised, captures[i - 1].memoised,
                           (size_t)captures[i].memoised_count * sizeof(uint64_t)) == 0;
        assert_int_equal(same, expected[i] == 1);
    }
}

/* Two chains that differ in one middle frame: leaf's frame has the same ip
 * and stack pointer in both, so the memo matches it, and the return
 * address into middle_a or middle_b tells them apart; the frames outside
 * caller_of_middles differ too (two call sites), and the ones outside
 * two_paths are the same. An unwind along the other chain must take those
 * from the memo, not walk them again. */
static __attribute__((noinline)) int leaf(struct capture *c)
{
    capture_here(c);
    __asm__ volatile("" ::: "memory");
    return 1;
}

static __attribute__((noinline)) int middle_a(struct capture *c)
{
    volatile int mark = 5;
    return leaf(c) + mark;
}

static __attribute__((noinline)) int middle_b(struct capture *c)
{
    volatile int mark = 7;
    return leaf(c) + mark * 2;
}

static __attribute__((noinline)) int caller_of_middles(struct capture *c, int which)
{
    return which ? middle_b(c) : middle_a(c);
}

static __attribute__((noinline)) int two_paths(struct capture *c, int which)
{
    int got = caller_of_middles(c, which);
    __asm__ volatile("" ::: "memory");
    return got;
}

static void memo_matches_again_past_a_changed_frame(void **state)
{
    (void)state;
    struct fast_unwind_memo memo = {0};
    struct capture a = {.memo = &memo}, b = {.memo = &memo};
    two_paths(&a, 0);
    assert_same(&a);
    for (int round = 0; round < 3; round++) {
        uint64_t reused = memo.reused;
        two_paths(&b, (round & 1) == 0);
        assert_same(&b);
        assert_true((b.fast[1] != a.fast[1]) == ((round & 1) == 0)); /* into middle_b, then middle_a */
        assert_int_equal(memo.reused, reused + 1);          /* main and the test runner's frames from the memo */
    }
}

static void memo_across_depths_and_paths(void **state)
{
    (void)state;
    struct fast_unwind_memo memo = {0};
    struct capture c = {.memo = &memo};
    static const int depths[] = {5, 5, 20, 3, 20, 20, 0, 7, 100, 30, 100, 100, 2, 2};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        recurse(&c, depths[i]);
        if (depths[i] < MAX - 8)
            assert_same(&c);
        assert_int_equal(c.memoised_count, c.fast_count); /* also where max cuts the stack */
        for (int f = 0; f < c.fast_count; f++)
            assert_int_equal(c.memoised[f], c.fast[f]);
        assert_int_equal(stack_hash_finish(c.memoised_hash, (uint32_t)c.memoised_count),
                         stack_hash(c.memoised, (uint32_t)c.memoised_count));
        outer_a(&c);
        assert_same(&c);
    }
    assert_true(memo.reused > 0);
}

static void memo_through_libc(void **state)
{
    (void)state;
    struct fast_unwind_memo memo = {0};
    for (int round = 0; round < 3; round++) {
        struct capture c = {.memo = &memo};
        int values[64];
        for (int i = 0; i < 64; i++)
            values[i] = (i * 7919 + round) % 64;
        in_qsort = &c;
        qsort(values, 64, sizeof values[0], compare_and_capture);
        assert_same(&c);
        recurse(&c, round);
        assert_same(&c);
    }
}

/* Frames of one size at every level: a deeper call's frames line up with
 * a shallower one's from the outermost level in, so the memo of the
 * shallow backtrace matches inside the deep one, which max then cuts
 * short of the memo's outer frames. */
static __attribute__((noinline)) int uniform_recurse(struct capture *c, int depth)
{
    if (depth == 0) {
        capture_here(c);
        return 0;
    }
    volatile int mark = depth;
    return uniform_recurse(c, depth - 1) + mark;
}

static void memo_cut_by_max_inside_it(void **state)
{
    (void)state;
    struct fast_unwind_memo memo = {0};
    struct capture c = {.memo = &memo};
    static const int depths[] = {5, 60, 5, 58, 61, 3, 70, 5};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        uint64_t reused = memo.reused;
        uniform_recurse(&c, depths[i]);
        assert_int_equal(c.memoised_count, c.fast_count);
        for (int f = 0; f < c.fast_count; f++)
            assert_int_equal(c.memoised[f], c.fast[f]);
        if (c.fast_count < MAX)
            assert_same(&c);
        else
            for (int f = 0; f < MAX; f++)
                assert_int_equal(c.fast[f], c.reference[f]);
        if (i == 1)
            assert_int_equal(memo.reused, reused + 1); /* the 5-deep memo, cut at max */
    }
}

/* Deeper than the memo holds (FAST_UNWIND_MEMO_FRAMES): it keeps the inner
 * frames it can and the result stays that of the plain unwind. */
#define DEEP_MAX 160
static __attribute__((noinline)) void unwind_deep(struct fast_unwind_memo *memo, int depth, uint64_t *plain,
                                                  int *plain_count, uint64_t *memoised, int *memoised_count)
{
    if (depth > 0) {
        volatile char pad[16 + depth % 7];
        pad[0] = 1;
        unwind_deep(memo, depth - 1, plain, plain_count, memoised, memoised_count);
        __asm__ volatile("" ::"r"(pad[0]) : "memory");
        return;
    }
    struct fast_unwind_regs start = FAST_UNWIND_CALLER_REGS();
    *plain_count = fast_unwind(&start, start.sp + (256u << 20), plain, DEEP_MAX, 1, NULL, NULL);
    uint64_t buffer[DEEP_MAX];
    struct fast_unwind_result result;
    *memoised_count = fast_unwind(&start, start.sp + (256u << 20), buffer, DEEP_MAX, 1, memo, &result);
    for (int i = 0; i < *memoised_count; i++)
        memoised[i] = result.frames[i];
    __asm__ volatile("" ::: "memory");
}

static void memo_deeper_than_it_holds(void **state)
{
    (void)state;
    struct fast_unwind_memo memo = {0};
    static const int depths[] = {90, 90, 150, 150, 40, 90, 200, 200, 61, 62, 63, 62};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        uint64_t plain[DEEP_MAX], memoised[DEEP_MAX];
        int plain_count = 0, memoised_count = 0;
        unwind_deep(&memo, depths[i], plain, &plain_count, memoised, &memoised_count);
        assert_true(plain_count > 0);
        assert_int_equal(memoised_count, plain_count);
        for (int f = 0; f < plain_count; f++)
            assert_int_equal(memoised[f], plain[f]);
    }
    assert_true(memo.reused > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_as_libunwind_through_our_frames),
        cmocka_unit_test(same_as_libunwind_through_libc),
        cmocka_unit_test(without_lookup_only_cached_rules),
        cmocka_unit_test(stops_at_max),
        cmocka_unit_test(memo_sees_a_different_caller_at_the_same_depth),
        cmocka_unit_test(memo_reads_hold_only_for_the_same_frames),
        cmocka_unit_test(memo_matches_again_past_a_changed_frame),
        cmocka_unit_test(memo_across_depths_and_paths),
        cmocka_unit_test(memo_through_libc),
        cmocka_unit_test(memo_cut_by_max_inside_it),
        cmocka_unit_test(memo_deeper_than_it_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The shim's cached CFI unwinder (preload/fast_unwind.h) against libunwind:
 * the same return addresses through this program's frames, libc's (qsort
 * calling back into us) and a recursion deep enough to reach max. */
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

#define MAX 64

struct capture {
    uint64_t fast[MAX], reference[MAX];
    int fast_count, reference_count;
};

/* Both unwinders from the caller of this function. */
static __attribute__((noinline)) void capture_here(struct capture *c)
{
    const uint64_t *frame_pointer = __builtin_frame_address(0);
    struct fast_unwind_regs start = {
        .ip = (uint64_t)(uintptr_t)__builtin_return_address(0),
        .sp = (uint64_t)(uintptr_t)(frame_pointer + 2),
        .bp = frame_pointer[0],
    };
    c->fast_count = fast_unwind(&start, start.sp + (256u << 20), c->fast, MAX, 1);
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
    struct capture c;
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
    struct capture c;
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
    struct capture c;
    recurse(&c, 3); /* caches every rule on this path */
    const uint64_t *frame_pointer = __builtin_frame_address(0);
    struct fast_unwind_regs start = {
        .ip = (uint64_t)(uintptr_t)__builtin_return_address(0),
        .sp = (uint64_t)(uintptr_t)(frame_pointer + 2),
        .bp = frame_pointer[0],
    };
    uint64_t frames[MAX];
    int n = fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 0);
    assert_true(n > 0 || n == FAST_UNWIND_NEEDS_LOOKUP);
    n = fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 1);
    assert_true(n > 0);
    assert_int_equal(fast_unwind(&start, start.sp + (256u << 20), frames, MAX, 0), n);
}

static void stops_at_max(void **state)
{
    (void)state;
    struct capture c;
    recurse(&c, 100);
    assert_true(c.fast_count == MAX || c.fast_count == FAST_UNWIND_UNSUPPORTED);
    if (c.fast_count == MAX)
        for (int i = 0; i < MAX; i++)
            assert_int_equal(c.fast[i], c.reference[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_as_libunwind_through_our_frames),
        cmocka_unit_test(same_as_libunwind_through_libc),
        cmocka_unit_test(without_lookup_only_cached_rules),
        cmocka_unit_test(stops_at_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_tsc_check.c - the check that decides whether events may be stamped
 * with the TSC (tracer/tsc_check.h): the processor flags it needs, and a
 * warp check that finds a processor reading behind another. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../tracer/tsc_check.h"

static void test_flags_need_constant_and_nonstop(void **state)
{
    (void)state;
    assert_true(cpuinfo_says_tsc_constant("processor\t: 0\nflags\t\t: fpu tsc constant_tsc rep_good nonstop_tsc cpuid\n"));
    assert_true(cpuinfo_says_tsc_constant("flags\t\t: nonstop_tsc constant_tsc"));
    assert_false(cpuinfo_says_tsc_constant("flags\t\t: fpu tsc constant_tsc rep_good\n"));
    assert_false(cpuinfo_says_tsc_constant("flags\t\t: fpu tsc nonstop_tsc\n"));
    /* words inside other words do not count */
    assert_false(cpuinfo_says_tsc_constant("flags\t\t: xconstant_tsc nonstop_tsc_x\n"));
    /* only the flags line: not a word of the next one */
    assert_false(cpuinfo_says_tsc_constant("flags\t\t: constant_tsc\nbugs\t\t: nonstop_tsc\n"));
    assert_false(cpuinfo_says_tsc_constant("model name\t: constant_tsc nonstop_tsc\n"));
    assert_false(cpuinfo_says_tsc_constant(""));
}

/* Two processors this test may run on, or the same one twice. */
static void two_processors(int *a, int *b)
{
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    *a = *b = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (*a < 0)
            *a = cpu;
        else if (*b < 0)
            *b = cpu;
    }
    assert_true(*a >= 0);
    if (*b < 0)
        *b = *a;
}

#if defined(__x86_64__)
/* One processor's TSC never goes back: handovers on one processor see no
 * warp, however few of them the scheduler allows. */
static void test_one_processor_never_warps(void **state)
{
    (void)state;
    int a, b;
    two_processors(&a, &b);
    struct tsc_warp warp;
    assert_int_equal(tsc_warp_between(a, a, 0, 200, 20000000, &warp), 0);
    assert_true(warp.rounds >= 1);
    assert_int_equal(warp.backward_ticks, 0);
}

/* A processor made to read 100 million ticks (~50 ms) behind is found, by
 * about that much: its readings follow the other's by less than that
 * (a handover takes microseconds; on one busy processor, a time slice). */
static void test_a_processor_behind_is_found(void **state)
{
    (void)state;
    int a, b;
    two_processors(&a, &b);
    struct tsc_warp warp;
    const uint64_t behind = 100000000;
    assert_int_equal(tsc_warp_between(a, b, behind, 200, 1000000000, &warp), 0);
    assert_true(warp.rounds >= 1);
    assert_true(warp.backward_ticks > behind / 2);
    assert_true(warp.backward_ticks <= behind);
}
#endif

/* A processor the process may not run on: no check, an error. */
static void test_processor_not_allowed(void **state)
{
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int outside = CPU_SETSIZE - 1;
    while (outside > 0 && CPU_ISSET(outside, &allowed))
        outside--;
    int a, b;
    two_processors(&a, &b);
    struct tsc_warp warp;
    assert_int_equal(tsc_warp_between(a, outside, 0, 10, 1000000, &warp), -1);
}

static void read_text(const char *path, char *text, size_t size)
{
    FILE *file = fopen(path, "r");
    size_t n = file ? fread(text, 1, size - 1, file) : 0;
    text[n] = '\0';
    if (file)
        fclose(file);
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs(text, file);
    fclose(file);
}

static int kernel_clock_is_tsc(void)
{
    char name[32];
    read_text("/sys/devices/system/clocksource/clocksource0/current_clocksource", name, sizeof name);
    return strcmp(name, "tsc\n") == 0;
}

/* The verdict is kept for the boot and the processors allowed, read back
 * instead of checking again (a verdict turned by hand is believed), and
 * a line for another boot or a damaged one is checked again and
 * replaced by a whole line. */
static void the_verdict_is_kept_for_the_boot(void **state)
{
    (void)state;
    char file[] = "/tmp/memslope-test-clock-XXXXXX";
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    close(fd);
    unlink(file);
    bool first = tsc_orders_events_cached(file);
    char line[1024];
    read_text(file, line, sizeof line);
    /* A check that could not hand over often enough (this machine busy
     * with other tests) keeps nothing, by design: ask again. */
    for (int tries = 1; tries < 40 && line[0] == '\0' && !kernel_clock_is_tsc(); tries++) {
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        first = tsc_orders_events_cached(file);
        read_text(file, line, sizeof line);
    }
    if (line[0] == '\0' && !kernel_clock_is_tsc())
        skip(); /* 40 checks in 2 s, none conclusive: nothing to read back */
    char boot[64];
    read_text("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    boot[strcspn(boot, "\n")] = '\0';
    if (kernel_clock_is_tsc()) { /* the kernel's word: no check, nothing kept */
        assert_true(first);
        assert_string_equal(line, "");
        return;
    }
    assert_int_equal(strncmp(line, boot, strlen(boot)), 0);
    char *verdict = strrchr(line, ' ');
    assert_non_null(verdict);
    assert_string_equal(verdict, first ? " tsc\n" : " monotonic\n");
    /* turned by hand: believed */
    char turned[1024];
    snprintf(turned, sizeof turned, "%.*s %s\n", (int)(verdict - line), line, first ? "monotonic" : "tsc");
    write_text(file, turned);
    assert_int_equal(tsc_orders_events_cached(file), !first);
    /* older than ten minutes: checked again, written with a new time */
    char boot_field[64], mask[300], word[16];
    long long checked;
    assert_int_equal(sscanf(line, "%63s %299s %lld %15s", boot_field, mask, &checked, word), 4);
    char old[1024];
    snprintf(old, sizeof old, "%s %s %lld %s\n", boot_field, mask, checked - 700, first ? "monotonic" : "tsc");
    int rewritten = 0;
    for (int attempt = 0; attempt < 40 && !rewritten; attempt++) { /* a check that cannot tell writes nothing */
        if (attempt)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        write_text(file, old);
        (void)tsc_orders_events_cached(file);
        read_text(file, line, sizeof line);
        rewritten = strcmp(line, old) != 0;
    }
    assert_true(rewritten);
    long long again;
    assert_int_equal(sscanf(line, "%63s %299s %lld %15s", boot_field, mask, &again, word), 4);
    assert_true(again >= checked);
    /* another boot's line, a damaged one: checked again, a whole line
     * written (unless the check could not tell, on a loaded machine: then
     * nothing is written) */
    const char *stale[] = {"00000000-0000-0000-0000-000000000000 0, tsc\n", "", "garbage"};
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        write_text(file, stale[i]);
        (void)tsc_orders_events_cached(file);
        read_text(file, line, sizeof line);
        if (strcmp(line, stale[i]) == 0)
            continue;
        assert_int_equal(strncmp(line, boot, strlen(boot)), 0);
        assert_true(strcmp(strrchr(line, ' '), " tsc\n") == 0 || strcmp(strrchr(line, ' '), " monotonic\n") == 0);
    }
    unlink(file);
    /* nowhere to keep it: decided all the same */
    (void)tsc_orders_events_cached(NULL);
    (void)tsc_orders_events_cached("/nonexistent-folder/clock");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags_need_constant_and_nonstop),
#if defined(__x86_64__)
        cmocka_unit_test(test_one_processor_never_warps),
        cmocka_unit_test(test_a_processor_behind_is_found),
#endif
        cmocka_unit_test(test_processor_not_allowed),
        cmocka_unit_test(the_verdict_is_kept_for_the_boot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_suppressions.c - the suppression files (report/suppressions.h):
 * Valgrind's and LeakSanitizer's formats read, their patterns matched
 * against synthetic stacks (the implicit allocator frame, `*`, `?`, `...`,
 * mangled and demangled C++ names, kinds, the default files' rule of
 * staying above the user's code), CPython's own file read unchanged; and a
 * report built with suppressions counting them apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../report/report_model.h"
#include "../../report/suppressions.h"
#include "test_stacks.h"
#include "test_trace_sample.h"

/* A set read from text, the test failing on any error. */
static void parse(struct suppressions *set, const char *text, bool is_default)
{
    char err[512] = "";
    assert_int_equal(suppressions_init(set), 0);
    if (suppressions_parse(set, text, strlen(text), "test.supp", is_default, err, sizeof err) != 0)
        fail_msg("%s", err);
}

static const char *matched_name(const char *text, bool is_default, const struct trace_model_stack *stack,
                                uint32_t category, char *name, size_t size)
{
    struct suppressions set;
    parse(&set, text, is_default);
    const struct suppression *s = suppressions_match(&set, &model, stack, category);
    snprintf(name, size, "%s", s ? s->name : "(none)");
    suppressions_free(&set);
    return name;
}

static bool matches(const char *text, const struct trace_model_stack *stack, uint32_t category)
{
    char name[256];
    return strcmp(matched_name(text, false, stack, category, name, sizeof name), "(none)") != 0;
}

static void parse_fails(const char *text, const char *expected)
{
    struct suppressions set;
    char err[512] = "";
    assert_int_equal(suppressions_init(&set), 0);
    assert_int_equal(suppressions_parse(&set, text, strlen(text), "bad.supp", false, err, sizeof err), -1);
    if (!strstr(err, expected))
        fail_msg("error '%s' does not say '%s'", err, expected);
    suppressions_free(&set);
}

/* --- wildcards ---------------------------------------------------------------- */

static void test_glob(void **state)
{
    (void)state;
    assert_true(suppressions_glob_match("malloc", "malloc", true));
    assert_false(suppressions_glob_match("malloc", "malloc2", true));
    assert_false(suppressions_glob_match("malloc", "mallo", true));
    assert_true(suppressions_glob_match("*alloc", "calloc", true));
    assert_true(suppressions_glob_match("*alloc*", "posix_memalign", false) == false);
    assert_true(suppressions_glob_match("*al*oc*", "posix_memalloc_x", true));
    assert_true(suppressions_glob_match("a*b*c", "aXbYbZc", true));
    assert_false(suppressions_glob_match("a*b*c", "aXbYbZ", true));
    assert_true(suppressions_glob_match("ma?loc", "malloc", true));
    assert_false(suppressions_glob_match("ma?loc", "malloc", false)); /* LeakSanitizer: '?' is itself */
    assert_true(suppressions_glob_match("ma?loc", "ma?loc", false));
    assert_false(suppressions_glob_match("ma?loc", "maloc", true));
    /* Nothing else is special: brackets and backslashes are themselves. */
    assert_true(suppressions_glob_match("operator[](unsigned long)", "operator[](unsigned long)", true));
    assert_false(suppressions_glob_match("[ab]", "a", true));
    assert_true(suppressions_glob_match("*", "", true));
    assert_false(suppressions_glob_match("?", "", true));
}

/* --- LeakSanitizer's format ------------------------------------------------------- */

static void test_lsan(void **state)
{
    (void)state;
    struct stack s;
    struct trace_model_stack *leak = make_stack(&s, F_LEAKY, F_MAIN, F_COUNT);
    assert_true(matches("leak:leaky_site\n", leak, TRACE_LEAK_DEFINITE));
    assert_true(matches("leak:aky_si\n", leak, TRACE_LEAK_DEFINITE)); /* a substring */
    assert_true(matches("leak:^leaky_site$\n", leak, TRACE_LEAK_DEFINITE));
    assert_false(matches("leak:^aky_site\n", leak, TRACE_LEAK_DEFINITE));
    assert_false(matches("leak:leaky$\n", leak, TRACE_LEAK_DEFINITE));
    assert_true(matches("leak:l*y_s\n", leak, TRACE_LEAK_DEFINITE));
    assert_true(matches("leak:src/leak.c\n", leak, TRACE_LEAK_DEFINITE));        /* a file */
    assert_true(matches("leak:/home/u/app\n", leak, TRACE_LEAK_INDIRECT));       /* a module */
    assert_true(matches("# comment\n\n  leak:main  \n", leak, TRACE_LEAK_POSSIBLE)); /* any frame */
    assert_false(matches("leak:mai?\n", leak, TRACE_LEAK_DEFINITE));             /* '?' is no wildcard */
    assert_false(matches("race:leaky_site\nsignal:main\n", leak, TRACE_LEAK_DEFINITE)); /* other types */
    assert_false(matches("leak:malloc\n", leak, TRACE_LEAK_DEFINITE)); /* the implicit frame is memcheck's only */
    parse_fails("leak:x\nleaky_site\n", "bad.supp:2: 'leaky_site' is not a TYPE:PATTERN line");
    parse_fails("leak:\n", "bad.supp:1: leak: needs a pattern");
}

/* --- Valgrind's format ------------------------------------------------------------ */

static void test_valgrind_reading(void **state)
{
    (void)state;
    struct suppressions set;
    parse(&set,
          "# comment\n"
          "{\n   uninitialised\n   Memcheck:Cond\n   fun:strlen\n}\n"
          "{\n   param\n   Memcheck:Param\n   write(buf)\n   fun:write\n\n}\n"
          "{\n   helgrind\n   Helgrind:Race\n   fun:x\n}\n"
          "  {  \n   a leak\n   Memcheck:Leak\n   match-leak-kinds: definite,possible\n"
          "   # inside\n   fun:malloc\n   ...\n   obj:/lib/*.so\n   src:leak.c:6\n}\n"
          "{\n   two tools\n   Addrcheck,Memcheck:Leak\n   fun:calloc\n}\n",
          false);
    assert_int_equal(set.count, 2);
    const struct suppression *s = &set.items[0];
    assert_string_equal(s->name, "a leak");
    assert_int_equal(s->line, 19);
    assert_int_equal(s->kinds, (1u << TRACE_LEAK_DEFINITE) | (1u << TRACE_LEAK_POSSIBLE));
    assert_int_equal(s->location_count, 4);
    assert_int_equal(s->locations[0].kind, SUPPRESSION_FUN);
    assert_int_equal(s->locations[1].kind, SUPPRESSION_ANY_FRAMES);
    assert_int_equal(s->locations[2].kind, SUPPRESSION_OBJ);
    assert_string_equal(s->locations[2].pattern, "/lib/*.so");
    assert_int_equal(s->locations[3].kind, SUPPRESSION_SRC);
    assert_string_equal(s->locations[3].pattern, "leak.c");
    assert_int_equal(s->locations[3].line, 6);
    assert_int_equal(set.items[1].kinds, (1u << TRACE_LEAK_CATEGORIES) - 1);
    suppressions_free(&set);

    parse_fails("{\n  x\n  Memcheck:Leak\n  fun:malloc\n", "add its closing '}')");
    parse_fails("{\n  x\n  Memcheck:Leak\n}\n", "bad.supp:4: the suppression 'x' names no frame");
    parse_fails("{\n  x\n  Memcheck:Leak\n  func:malloc\n}\n", "bad.supp:4: 'func:malloc' is not a frame");
    parse_fails("{\n  x\n  Memcheck:Leak\n  match-leak-kinds: lost\n  fun:f\n}\n", "unknown kind 'lost'");
    parse_fails("{\n  x\n  Memcheck\n  fun:f\n}\n", "is not a TOOL:KIND line");
    parse_fails("{\n  x\n}\n", "needs a name and a TOOL:KIND line");
    parse_fails("{\n  x\n  Memcheck:Leak\n  fun:f\n}\nfun:g\n", "bad.supp:6: expected '{'");
    struct suppressions set2;
    char err[256];
    assert_int_equal(suppressions_init(&set2), 0);
    assert_int_equal(suppressions_parse(&set2, "leak:x\0y\n", 9, "bin.supp", false, err, sizeof err), -1);
    assert_string_equal(err, "bin.supp: not a suppression file (it holds a NUL byte)");
    suppressions_free(&set2);
}

#define LEAK_ENTRY(frames) "{\n   e\n   Memcheck:Leak\n" frames "}\n"

static void test_valgrind_implicit_allocator(void **state)
{
    (void)state;
    struct stack s, c;
    struct trace_model_stack *leak = make_stack(&s, F_LEAKY, F_MAIN, F_COUNT);
    struct trace_model_stack *cxx = make_stack(&c, F_NEW, F_WIDGET, F_MAIN, F_COUNT);
    /* memcheck's first frame is the allocator: any of its names. */
    assert_true(matches(LEAK_ENTRY("fun:malloc\nfun:leaky_site\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:calloc\nfun:leaky_site\nfun:main\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:*alloc\nfun:leaky_site\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:leaky_site\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:free\nfun:leaky_site\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("obj:/home/u/app\nfun:leaky_site\n"), leak, TRACE_LEAK_DEFINITE));
    /* operator new: memcheck shows _Znwm where the trace shows operator new calling malloc. */
    assert_true(matches(LEAK_ENTRY("fun:_Znwm\nfun:_Z11make_widgetl\n"), cxx, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:malloc\nfun:_Znwm\nfun:make_widget(long)\n"), cxx, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:operator new*\nfun:make_widget*\n"), cxx, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:_Znwm\nfun:main\n"), cxx, TRACE_LEAK_DEFINITE));
}

static void test_valgrind_frames(void **state)
{
    (void)state;
    struct stack s, d;
    struct trace_model_stack *leak = make_stack(&s, F_LEAKY, F_MAIN, F_COUNT);
    struct trace_model_stack *dtv = make_stack(&d, F_ALLOC_DTV, F_ALLOC_TLS, F_PTHREAD, F_MAIN, F_COUNT);
    /* From the top; the stack may go on after the last location, not before the first. */
    assert_true(matches(LEAK_ENTRY("fun:malloc\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:malloc\nfun:main\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:malloc\nfun:leaky_site\nfun:main\nfun:_start\n"), leak, TRACE_LEAK_DEFINITE));
    /* ... is any number of frames, none included. */
    assert_true(matches(LEAK_ENTRY("fun:malloc\n...\nfun:main\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:malloc\n...\nfun:leaky_site\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("...\nfun:main\n...\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:calloc\n...\nfun:_dl_allocate_tls\n...\nfun:main\n"), dtv, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:calloc\n...\nfun:pthread_create\nfun:_dl_allocate_tls\n"), dtv,
                         TRACE_LEAK_DEFINITE));
    /* Wildcards, objects, sources. */
    assert_true(matches(LEAK_ENTRY("fun:*\nfun:leaky_sit?\nfun:ma*\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:*\nfun:leaky_sit\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:*\nobj:*/app\nobj:/home/?/app\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:*\n...\nobj:*ld-linux*\n"), dtv, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:*\nsrc:leak.c:6\n"), leak, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:*\nsrc:src/leak.c\n"), leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:*\nsrc:leak.c:7\n"), leak, TRACE_LEAK_DEFINITE));
}

static void test_valgrind_names(void **state)
{
    (void)state;
    struct stack s, u;
    struct trace_model_stack *bar = make_stack(&s, F_BAR, F_MAIN, F_COUNT);
    struct trace_model_stack *unnamed = make_stack(&u, F_UNNAMED, F_MAIN, F_COUNT);
    /* A mangled name is demangled when read; the demangled one matches as it is. */
    assert_true(matches(LEAK_ENTRY("fun:malloc\nfun:_ZN3foo3barEi\n"), bar, TRACE_LEAK_DEFINITE));
    assert_false(matches(LEAK_ENTRY("fun:malloc\nfun:_ZN3foo3barEl\n"), bar, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:malloc\nfun:foo::bar(int)\n"), bar, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:malloc\nfun:foo::*\n"), bar, TRACE_LEAK_DEFINITE));
    /* A mangled name with a wildcard cannot be demangled: it matches no demangled name, and says so. */
    struct suppressions set;
    parse(&set, LEAK_ENTRY("fun:malloc\nfun:_ZN3foo*\n") LEAK_ENTRY("fun:_ZN3x*\n"), false);
    assert_null(suppressions_match(&set, &model, bar, TRACE_LEAK_DEFINITE));
    assert_int_equal(set.warning_count, 1);
    assert_non_null(strstr(set.warnings[0], "test.supp: 2 fun: lines use a mangled C++ name with a wildcard "
                                            "(the first at line 5)"));
    suppressions_free(&set);
    /* memcheck calls an unknown function ???; obj: still names its module. */
    assert_true(matches(LEAK_ENTRY("fun:malloc\nfun:???\n"), unnamed, TRACE_LEAK_DEFINITE));
    assert_true(matches(LEAK_ENTRY("fun:malloc\nobj:/home/u/app\nfun:main\n"), unnamed, TRACE_LEAK_DEFINITE));
}

static void test_valgrind_kinds(void **state)
{
    (void)state;
    struct stack s;
    struct trace_model_stack *leak = make_stack(&s, F_LEAKY, F_MAIN, F_COUNT);
    const char *possible = "{\n e\n Memcheck:Leak\n match-leak-kinds: possible,reachable\n fun:malloc\n}\n";
    assert_false(matches(possible, leak, TRACE_LEAK_DEFINITE));
    assert_false(matches(possible, leak, TRACE_LEAK_INDIRECT));
    assert_true(matches(possible, leak, TRACE_LEAK_POSSIBLE));
    assert_true(matches(possible, leak, TRACE_LEAK_REACHABLE));
    assert_true(matches("{\n e\n Memcheck:Leak\n match-leak-kinds: all\n fun:malloc\n}\n", leak, TRACE_LEAK_INDIRECT));
    assert_false(matches("{\n e\n Memcheck:Leak\n match-leak-kinds: none\n fun:malloc\n}\n", leak, TRACE_LEAK_INDIRECT));
    /* The first entry that matches is the one named. */
    char name[64];
    assert_string_equal(matched_name(LEAK_ENTRY("fun:free\n") "{\n second\n Memcheck:Leak\n fun:malloc\n}\n"
                                                                "{\n third\n Memcheck:Leak\n fun:*\n}\n",
                                     false, leak, TRACE_LEAK_DEFINITE, name, sizeof name),
                        "second");
}

/* A default entry may not reach past the user's code: the thread vector is
 * glibc's, but a block under a frame of the user's never is. */
static void test_default_stays_above_user_code(void **state)
{
    (void)state;
    struct stack d, e, p;
    struct trace_model_stack *dtv = make_stack(&d, F_ALLOC_DTV, F_ALLOC_TLS, F_PTHREAD, F_MAIN, F_COUNT);
    struct trace_model_stack *ext = make_stack(&e, F_PYLONG, F_BUILD, F_EVAL, F_INIT, F_COUNT);
    struct trace_model_stack *init = make_stack(&p, F_PYLONG, F_EVAL, F_INIT, F_COUNT);
    const char *to_tls = LEAK_ENTRY("fun:calloc\n...\nfun:_dl_allocate_tls\n");
    const char *to_main = LEAK_ENTRY("fun:calloc\n...\nfun:main\n");
    const char *to_init = LEAK_ENTRY("fun:*alloc*\n...\nfun:Py_InitializeFromConfig\n");
    char name[64];
    assert_string_equal(matched_name(to_tls, true, dtv, TRACE_LEAK_POSSIBLE, name, sizeof name), "e");
    assert_string_equal(matched_name(to_main, true, dtv, TRACE_LEAK_POSSIBLE, name, sizeof name), "(none)");
    assert_string_equal(matched_name(to_main, false, dtv, TRACE_LEAK_POSSIBLE, name, sizeof name), "e");
    assert_string_equal(matched_name(to_init, true, init, TRACE_LEAK_DEFINITE, name, sizeof name), "e");
    assert_string_equal(matched_name(to_init, true, ext, TRACE_LEAK_DEFINITE, name, sizeof name), "(none)");
    assert_string_equal(matched_name(to_init, false, ext, TRACE_LEAK_DEFINITE, name, sizeof name), "e");
    assert_string_equal(matched_name("leak:_dl_allocate_tls\n", true, dtv, 0, name, sizeof name), "_dl_allocate_tls");
    assert_string_equal(matched_name("leak:main\n", true, dtv, 0, name, sizeof name), "(none)");
}

/* CPython's own file (Debian: /usr/lib/valgrind/python3.supp) reads
 * unchanged, and its entries match the interpreter's stacks as memcheck
 * sees them. */
static void test_cpython_file(void **state)
{
    (void)state;
    const char *path = "/usr/lib/valgrind/python3.supp";
    if (access(path, R_OK) != 0)
        skip();
    struct suppressions set;
    char err[512] = "";
    assert_int_equal(suppressions_init(&set), 0);
    if (suppressions_load(&set, path, false, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(set.warning_count, 0);
    assert_int_equal(set.count, 10); /* its Memcheck:Leak entries; the other 38 are other errors */
    static struct trace_model_frame gil[] = {
        {&module_python, "PyThread_allocate_lock", "", 0, 0, 0, 0},
        {&module_python, "PyEval_InitThreads", "", 0, 0, 0, 0},
        {&module_python, "Py_BytesMain", "", 0, 0, 0, 0},
    };
    struct trace_model gil_model = {.frames = gil, .frame_count = 3};
    uint32_t ids[] = {0, 1, 2};
    struct trace_model_stack stack = {.depth = 3, .frame_ids = ids};
    const struct suppression *s = suppressions_match(&set, &gil_model, &stack, TRACE_LEAK_DEFINITE);
    assert_non_null(s);
    assert_string_equal(s->name, "Suppress leaking the GIL.  Happens once per process, see comment in ceval.c.");
    stack.depth = 1; /* PyThread_allocate_lock alone: no entry */
    assert_null(suppressions_match(&set, &gil_model, &stack, TRACE_LEAK_DEFINITE));
    suppressions_free(&set);
}

/* --- a report with suppressions ------------------------------------------------------ */

static void test_report_counts_suppressed_apart(void **state)
{
    (void)state;
    char dir[64] = "/tmp/memslope-supp.XXXXXX", err[512], command[128];
    char *path = sample_path(dir, "sample.trace");
    assert_non_null(path);
    assert_int_equal(write_sample_trace(path, 0), 0);
    struct trace_model trace;
    assert_int_equal(trace_read_file(path, &trace, err, sizeof err), 0);
    /* The sample's records: leaky_site definite 432/9 and indirect 48/1; stack 9 reachable 16/1. */
    struct suppressions set;
    parse(&set, "{\n   ind\n   Memcheck:Leak\n   match-leak-kinds: indirect,reachable\n   fun:malloc\n}\n", false);
    struct report report;
    assert_int_equal(report_build_with_suppressions(&report, &trace, "t", REPORT_METRIC_LEAKED, NULL, &set, err,
                                                    sizeof err), 0);
    const struct trace_leaks *exit_leaks = report.exit_leaks;
    assert_int_equal(exit_leaks->bytes[TRACE_LEAK_DEFINITE], 432);
    assert_int_equal(exit_leaks->blocks[TRACE_LEAK_DEFINITE], 9);
    assert_int_equal(exit_leaks->bytes[TRACE_LEAK_INDIRECT], 0);
    assert_int_equal(exit_leaks->bytes[TRACE_LEAK_REACHABLE], 0);
    assert_int_equal(exit_leaks->count, 1);
    assert_int_equal(report.exit_suppressed.bytes, 64);
    assert_int_equal(report.exit_suppressed.blocks, 2);
    assert_int_equal(report.cases[0].suppressed.bytes, 64);
    assert_ptr_equal(report.cases[0].leaks, exit_leaks);
    assert_int_equal(report.used_suppression_count, 1);
    assert_string_equal(report.used_suppressions[0].suppression->name, "ind");
    assert_int_equal(report.used_suppressions[0].amount.bytes, 64);
    assert_int_equal(report.used_suppressions[0].amount.blocks, 2);
    for (size_t i = 0; i < report.cases[0].site_count; i++)
        if (report.cases[0].sites[i].stack_id == 7) /* the indirect 48 bytes no longer count as leaked */
            assert_int_equal(report.cases[0].sites[i].leaked_bytes, 432);
    report_free(&report);
    suppressions_free(&set);
    trace_model_free(&trace);
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    assert_int_equal(system(command), 0);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_lsan),
        cmocka_unit_test(test_valgrind_reading),
        cmocka_unit_test(test_valgrind_implicit_allocator),
        cmocka_unit_test(test_valgrind_frames),
        cmocka_unit_test(test_valgrind_names),
        cmocka_unit_test(test_valgrind_kinds),
        cmocka_unit_test(test_default_stays_above_user_code),
        cmocka_unit_test(test_cpython_file),
        cmocka_unit_test(test_report_counts_suppressed_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

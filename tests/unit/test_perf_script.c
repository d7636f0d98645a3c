/* Unit tests of the `perf script` parser and the speedscope and collapsed
 * writers (tracer/wrappers/perf_script.h), on checked-in perf output
 * (tests/unit/data/perf_script_*.txt) and on made-up odd input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tracer/wrappers/external_tool.h"
#include "../../tracer/wrappers/perf_script.h"

/* Tests run from the repository root (make and run-unit.sh do). */
#define DATA_DIR "tests/unit/data/"

static char *read_data(const char *name, size_t *length)
{
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "%s", name);
    FILE *file = fopen(path, "rb");
    if (!file)
        fail_msg("cannot open %s (run the test from the repository root)", path);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, file), (size_t)size);
    fclose(file);
    text[size] = '\0';
    *length = (size_t)size;
    return text;
}

static void parse_data(const char *name, struct perf_profile *profile)
{
    size_t length;
    char *text = read_data(name, &length);
    assert_int_equal(perf_script_parse(text, length, profile), 0);
    free(text); /* the profile must not point into the input */
}

static const struct perf_frame *find_frame(const struct perf_profile *profile, const char *function)
{
    for (size_t i = 0; i < profile->frame_count; i++)
        if (profile->frames[i].function && strcmp(profile->frames[i].function, function) == 0)
            return &profile->frames[i];
    fail_msg("no frame named %s", function);
    return NULL;
}

/* The stack of a sample as "outer;...;leaf" display names. */
static void stack_text(const struct perf_profile *profile, size_t sample, char *out, size_t size)
{
    uint32_t frames[PERF_MAX_STACK_DEPTH];
    size_t depth = 0;
    for (uint32_t n = profile->samples[sample].node; n != PERF_NO_NODE; n = profile->nodes[n].parent)
        frames[depth++] = profile->nodes[n].frame;
    out[0] = '\0';
    for (size_t i = depth; i-- > 0;) {
        char buffer[256];
        strncat(out, perf_frame_display_name(&profile->frames[frames[i]], buffer, sizeof buffer),
                size - strlen(out) - 1);
        if (i > 0)
            strncat(out, ";", size - strlen(out) - 1);
    }
}

static char *write_to_string(const struct perf_profile *profile, int collapsed)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    int result = collapsed ? perf_write_collapsed(profile, out) : perf_write_speedscope(profile, "cpu_burn", out);
    assert_int_equal(result, 0);
    fclose(out);
    return text;
}

static void srcline_output_with_threads_inlined_and_kernel_frames(void **state)
{
    (void)state;
    struct perf_profile profile;
    parse_data("perf_script_srcline.txt", &profile);
    assert_int_equal(profile.sample_count, 6);
    assert_int_equal(profile.skipped_lines, 0);
    assert_int_equal(profile.thread_count, 2);
    assert_string_equal(profile.threads[0].name, "cpu_burn");
    assert_int_equal(profile.threads[0].pid, 5121);
    assert_int_equal(profile.threads[0].tid, 5121);
    assert_int_equal(profile.threads[0].samples, 5);
    assert_string_equal(profile.threads[1].name, "burn worker");
    assert_int_equal(profile.threads[1].tid, 5123);

    const struct perf_frame *square = find_frame(&profile, "burn_square_sum");
    assert_string_equal(square->module, "/tmp/ptest/cpu_burn");
    assert_string_equal(square->file, "cpu_burn.c");
    assert_int_equal(square->line, 34); /* lowest of 34 and 35 */
    const struct perf_frame *inlined = find_frame(&profile, "dl_platform_init");
    assert_true(inlined->inlined);
    assert_string_equal(inlined->module, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
    assert_string_equal(inlined->file, "dl-machine.h");
    const struct perf_frame *kernel = find_frame(&profile, "handle_softirqs");
    assert_string_equal(kernel->module, "[kernel.kallsyms]");
    assert_null(kernel->file);
    assert_null(find_frame(&profile, "_start")->file); /* "??:0" and ":0" */

    char text[1024];
    stack_text(&profile, 3, text, sizeof text);
    assert_string_equal(text, "clone3;start_thread;burn_worker_loop;burn_xor_shift");
    stack_text(&profile, 4, text, sizeof text); /* cut short: the next header follows at once */
    assert_string_equal(text, "burn_xor_shift");
    stack_text(&profile, 5, text, sizeof text);
    assert_string_equal(text, "_start;__libc_start_main_impl;__libc_start_call_main;main;burn_main_loop;"
                              "burn_square_sum;asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;"
                              "__irq_exit_rcu;handle_softirqs");
    perf_profile_free(&profile);
}

static void default_fields_with_header_unknown_and_cxx_names(void **state)
{
    (void)state;
    struct perf_profile profile;
    parse_data("perf_script_default.txt", &profile);
    assert_int_equal(profile.sample_count, 3);
    assert_int_equal(profile.skipped_lines, 0);
    assert_int_equal(profile.thread_count, 2);
    assert_string_equal(profile.threads[0].name, "sh");
    assert_int_equal(profile.threads[0].tid, 4488);
    assert_string_equal(profile.threads[1].name, "Web Content");

    char text[1024];
    stack_text(&profile, 0, text, sizeof text);
    assert_string_equal(text, "[dash];__libc_start_main_impl;__libc_start_call_main;[dash];[dash];__strcmp_evex");
    stack_text(&profile, 1, text, sizeof text);
    assert_string_equal(text, "[unknown];[dash];__strcspn_sse42;_mm_cmpeq_epi8");
    assert_string_equal(find_frame(&profile, "_mm_cmpeq_epi8")->module, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    assert_null(find_frame(&profile, "__libc_start_main_impl")->module);

    const struct perf_frame *anonymous = find_frame(&profile, "(anonymous namespace)::Parser::next(int) const");
    assert_string_equal(anonymous->module, "/opt/app/lib (x86)/libparse.so");
    assert_string_equal(find_frame(&profile, "std::vector<int, std::allocator<int> >::push_back(int const&)")->module,
                        "/opt/app/lib (x86)/libparse.so");
    assert_null(find_frame(&profile, "operator()(int) const")->module);
    assert_string_equal(find_frame(&profile, "unlink_anon_vmas")->module, "[kernel.kallsyms]");
    perf_profile_free(&profile);
}

static void frames_on_header_lines_without_callchains(void **state)
{
    (void)state;
    struct perf_profile profile;
    parse_data("perf_script_nocallchain.txt", &profile);
    assert_int_equal(profile.sample_count, 6);
    assert_int_equal(profile.thread_count, 5);
    assert_string_equal(profile.threads[0].name, "perf-exec");
    assert_string_equal(profile.threads[1].name, "memcheck-amd64-");
    assert_int_equal(profile.threads[1].samples, 2);
    assert_string_equal(profile.threads[3].name, "swapper");
    assert_int_equal(profile.threads[3].tid, 0);
    assert_string_equal(profile.threads[4].name, "kworker/1:2 1");
    assert_int_equal(profile.threads[4].tid, 12500);
    assert_int_equal(profile.samples[5].node, PERF_NO_NODE); /* a tracepoint's payload is no frame */
    char text[256];
    stack_text(&profile, 2, text, sizeof text);
    assert_string_equal(text, "[cc1]");
    stack_text(&profile, 0, text, sizeof text);
    assert_string_equal(text, "unlink_anon_vmas");
    perf_profile_free(&profile);
}

static void input_cut_off_mid_line_with_crlf(void **state)
{
    (void)state;
    struct perf_profile profile;
    parse_data("perf_script_truncated.txt", &profile);
    assert_int_equal(profile.sample_count, 2);
    assert_int_equal(profile.skipped_lines, 1); /* "  cpu_bu" */
    char text[256];
    stack_text(&profile, 0, text, sizeof text);
    assert_string_equal(text, "burn_main_loop;burn_xor_shift");
    stack_text(&profile, 1, text, sizeof text);
    assert_string_equal(text, "burn_square_sum");
    assert_null(find_frame(&profile, "burn_square_sum")->file);
    perf_profile_free(&profile);
}

static void odd_lines_are_skipped_and_counted(void **state)
{
    (void)state;
    struct perf_profile profile;
    parse_data("perf_script_odd.txt", &profile);
    assert_int_equal(profile.sample_count, 2);
    assert_int_equal(profile.skipped_lines, 5);
    assert_int_equal(profile.thread_count, 2);
    assert_string_equal(profile.threads[0].name, "worker 2");
    assert_int_equal(profile.threads[0].pid, 700);
    assert_int_equal(profile.threads[1].tid, 702);
    const struct perf_frame *spin = find_frame(&profile, "spin");
    assert_string_equal(spin->file, "two.c");
    assert_int_equal(spin->line, 7);
    const struct perf_frame *main_frame = find_frame(&profile, "main");
    assert_string_equal(main_frame->file, "/src/dir with space/two.c");
    assert_int_equal(main_frame->line, 20);
    assert_int_equal(profile.samples[1].node, PERF_NO_NODE);

    char *collapsed = write_to_string(&profile, 1);
    assert_string_equal(collapsed, "worker 2 1\nworker 2;main;spin 1\n");
    free(collapsed);
    perf_profile_free(&profile);
}

static void collapsed_stacks_add_up_equal_lines(void **state)
{
    (void)state;
    const char text[] = "a;b 1/1 1.0: ev:\n\t1 f (/m1)\n\t2 main (/m)\n\n"
                        "a;b 1/2 1.1: ev:\n\t3 f (/m2)\n\t4 main (/m)\n\n"
                        "a;b 1/1 1.2: ev:\n\t1 f (/m1)\n\t2 main (/m)\n";
    struct perf_profile profile;
    assert_int_equal(perf_script_parse(text, sizeof text - 1, &profile), 0);
    assert_int_equal(profile.frame_count, 3); /* f in two modules is two frames */
    char *collapsed = write_to_string(&profile, 1);
    assert_string_equal(collapsed, "a:b;main;f 3\n");
    free(collapsed);
    perf_profile_free(&profile);
}

static void speedscope_has_one_sampled_profile_per_thread(void **state)
{
    (void)state;
    struct perf_profile profile;
    parse_data("perf_script_srcline.txt", &profile);
    char *json = write_to_string(&profile, 0);
    assert_non_null(strstr(json, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""));
    assert_non_null(strstr(json, "{\"name\":\"burn_xor_shift\",\"file\":\"cpu_burn.c\",\"line\":42}"));
    assert_non_null(strstr(json, "{\"name\":\"handle_softirqs\",\"file\":\"[kernel.kallsyms]\"}"));
    assert_non_null(strstr(json, "\"type\":\"sampled\",\"name\":\"cpu_burn (pid 5121)\",\"unit\":\"none\","
                                 "\"startValue\":0,\"endValue\":5"));
    assert_non_null(strstr(json, "\"name\":\"burn worker (pid 5121, tid 5123)\""));
    assert_non_null(strstr(json, "\"weights\":[1]"));
    assert_non_null(strstr(json, "\"activeProfileIndex\":0"));
    free(json);
    perf_profile_free(&profile);
}

static void consecutive_equal_stacks_become_one_weighted_sample(void **state)
{
    (void)state;
    const char text[] = "p 9/9 1.0: ev:\n\t1 f (/m)\n\np 9/9 1.1: ev:\n\t1 f (/m)\n\n"
                        "p 9/9 1.2: ev:\n\t2 g (/m)\n\np 9/9 1.3: ev:\n\t1 f (/m)\n";
    struct perf_profile profile;
    assert_int_equal(perf_script_parse(text, sizeof text - 1, &profile), 0);
    char *json = write_to_string(&profile, 0);
    assert_non_null(strstr(json, "\"samples\":[[0],[1],[0]],\"weights\":[2,1,1]"));
    free(json);
    perf_profile_free(&profile);
}

static void empty_and_binary_input(void **state)
{
    (void)state;
    struct perf_profile profile;
    assert_int_equal(perf_script_parse("", 0, &profile), 0);
    assert_int_equal(profile.sample_count, 0);
    char *json = write_to_string(&profile, 0);
    assert_non_null(strstr(json, "\"profiles\":[]"));
    free(json);
    perf_profile_free(&profile);

    const char binary[] = "x\0y 1/1 1.0: e:\n\t\0 f\n\tff \xff\xfe (\0)\n\n";
    assert_int_equal(perf_script_parse(binary, sizeof binary - 1, &profile), 0);
    json = write_to_string(&profile, 0);
    free(json);
    perf_profile_free(&profile);
}

static void stacks_deeper_than_the_cap_keep_the_innermost_frames(void **state)
{
    (void)state;
    size_t depth = PERF_MAX_STACK_DEPTH + 100;
    char *text = malloc(64 + depth * 32);
    assert_non_null(text);
    size_t length = (size_t)sprintf(text, "deep 1/1 1.0: ev:\n");
    for (size_t i = 0; i < depth; i++)
        length += (size_t)sprintf(text + length, "\t%zx f%zu (/m)\n  d.c:%zu\n", i + 1, i, i + 1);
    struct perf_profile profile;
    assert_int_equal(perf_script_parse(text, length, &profile), 0);
    assert_int_equal(profile.truncated_stacks, 1);
    assert_int_equal(profile.frame_count, PERF_MAX_STACK_DEPTH);
    assert_int_equal(profile.skipped_lines, 0); /* the dropped frames' srclines too */
    assert_string_equal(profile.frames[profile.nodes[profile.samples[0].node].frame].function, "f0");
    perf_profile_free(&profile);
    free(text);
}

static void perf_failures_are_told_apart(void **state)
{
    (void)state;
    assert_int_equal(perf_classify_output("perf version 6.1.187\n", 0), PERF_OK);
    assert_int_equal(perf_classify_output("E: linux-perf-5.10 is not installed.\n", 1), PERF_VERSION_MISMATCH);
    assert_int_equal(perf_classify_output("WARNING: perf not found for kernel 5.15.0-91\n\n  You may need to "
                                          "install the following packages for this specific kernel:\n"
                                          "    linux-tools-5.15.0-91-generic\n", 2),
                     PERF_VERSION_MISMATCH);
    assert_int_equal(perf_classify_output("Error:\nNo permission to enable cycles event.\n\nYou may not have "
                                          "permission to collect stats.\n\nConsider tweaking "
                                          "/proc/sys/kernel/perf_event_paranoid,\n", 255),
                     PERF_NOT_PERMITTED);
    assert_int_equal(perf_classify_output("<not supported>,,cycles,0,100.00,,\n", 0), PERF_EVENT_UNSUPPORTED);
    assert_int_equal(perf_classify_output("event syntax error: 'bogus'\n", 129), PERF_EVENT_UNSUPPORTED);
    assert_int_equal(perf_classify_output("Segmentation fault\n", 139), PERF_OTHER_FAILURE);
}


/* ---- the external-tool helpers that memslope perf and instruments share -- */

static void path_search_finds_executables_only(void **state)
{
    (void)state;
    char *sh = tool_find_in_path("sh");
    assert_non_null(sh);
    assert_true(sh[0] == '/');
    free(sh);
    assert_null(tool_find_in_path("memslope-no-such-program"));
    assert_null(tool_find_in_path("/etc/passwd")); /* not executable */
    assert_null(tool_find_in_path(""));
}

static void exit_codes_as_a_shell_reports_them(void **state)
{
    (void)state;
    assert_int_equal(tool_exit_code(7 << 8), 7);
    assert_int_equal(tool_exit_code(SIGKILL), 128 + SIGKILL);
    char output[64];
    char *exit3[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    assert_int_equal(tool_run_capture(exit3, output, sizeof output), 3);
    assert_string_equal(output, "out\nerr\n");
    char *killed[] = {"sh", "-c", "kill -TERM $$", NULL};
    assert_int_equal(tool_run(killed, -1), 128 + SIGTERM);
    char *missing[] = {"memslope-no-such-program", NULL};
    assert_int_equal(tool_run(missing, -1), -1);
}

static void captured_output_is_cut_to_the_buffer(void **state)
{
    (void)state;
    char output[8];
    char *seq[] = {"sh", "-c", "i=0; while [ $i -lt 5000 ]; do echo line $i; i=$((i+1)); done", NULL};
    assert_int_equal(tool_run_capture(seq, output, sizeof output), 0);
    assert_string_equal(output, "line 0\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(srcline_output_with_threads_inlined_and_kernel_frames),
        cmocka_unit_test(default_fields_with_header_unknown_and_cxx_names),
        cmocka_unit_test(frames_on_header_lines_without_callchains),
        cmocka_unit_test(input_cut_off_mid_line_with_crlf),
        cmocka_unit_test(odd_lines_are_skipped_and_counted),
        cmocka_unit_test(collapsed_stacks_add_up_equal_lines),
        cmocka_unit_test(speedscope_has_one_sampled_profile_per_thread),
        cmocka_unit_test(consecutive_equal_stacks_become_one_weighted_sample),
        cmocka_unit_test(empty_and_binary_input),
        cmocka_unit_test(stacks_deeper_than_the_cap_keep_the_innermost_frames),
        cmocka_unit_test(perf_failures_are_told_apart),
        cmocka_unit_test(path_search_finds_executables_only),
        cmocka_unit_test(exit_codes_as_a_shell_reports_them),
        cmocka_unit_test(captured_output_is_cut_to_the_buffer),
    };
    return cmocka_run_group_tests_name("perf_script", tests, NULL, NULL);
}

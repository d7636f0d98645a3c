/*
 * cmd_record.c - `memslope record [options] [--] COMMAND [ARG...]`.
 */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/options.h"
#include "../common/output_file.h"
#include "../common/shm_layout.h"
#include "../common/trace_format.h"
#include "../common/units.h"
#include "../tracer/session.h"
#include "../tracer/tsc_check.h"
#include "../tracer/wrappers/external_tool.h"
#include "commands.h"

/* [MODULE:]QUALNAME as --iteration py: takes it: a dotted module name and a
 * qualified name ("Bench.run", "outer.<locals>.inner"), each shorter than
 * the shim's 256-byte buffers. */
static int python_function_name_valid(const char *name)
{
    const char *colon = strchr(name, ':');
    const char *qualname = colon ? colon + 1 : name;
    if (!*qualname || strlen(qualname) >= 256 || strchr(qualname, ':') || (colon && (colon == name || colon - name >= 256)))
        return 0;
    for (const char *c = name; *c; c++)
        if (*c != ':' && *c != '.' && *c != '_' && *c != '<' && *c != '>' && !isalnum((unsigned char)*c) &&
            !((unsigned char)*c & 0x80))
            return 0;
    return 1;
}

/* The shim sits at ../lib/memslope/libmemslope.so from the memslope binary,
 * in the build tree and in an installed prefix alike. */
static int find_shim(char *path, size_t size)
{
    const char *override = getenv("MEMSLOPE_SHIM");
    if (override && *override) {
        snprintf(path, size, "%s", override);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n < 0)
            return -1;
        exe[n] = '\0';
        snprintf(path, size, "%s/../lib/memslope/libmemslope.so", dirname(exe));
    }
    char resolved[PATH_MAX];
    if (!realpath(path, resolved) || access(resolved, R_OK) < 0)
        return -1;
    snprintf(path, size, "%s", resolved);
    return 0;
}

/* The shortest --interval: a timeline point costs 24 bytes of trace. */
#define MIN_INTERVAL_NS 1000000ull
/* --checkpoint (session.c): the first after 5 s; never more often than
 * every 100 ms, each writes every site that changed. */
#define DEFAULT_CHECKPOINT_NS 5000000000ull
#define MIN_CHECKPOINT_NS 100000000ull

static int parse_iteration(const char *value, void *destination, char *err, size_t err_size)
{
    struct record_options *options = destination;
    if (!*value) {
        snprintf(err, err_size, "--iteration takes a function name");
        return -1;
    }
    if (strncmp(value, "py:", 3) != 0) {
        options->iteration_symbol = value;
        return 0;
    }
    if (!python_function_name_valid(value + 3)) {
        snprintf(err, err_size, "--iteration py: takes a Python function as QUALNAME or MODULE:QUALNAME (e.g. "
                                "py:step, py:Bench.run or py:mybench:step), not: %s", value);
        return -1;
    }
    options->python_iteration = value + 3;
    return 0;
}

static int parse_leak_check(const char *value, void *destination, char *err, size_t err_size)
{
    uint32_t *leak_check = destination;
    if (strcmp(value, "end") == 0)
        *leak_check = TRACE_LEAK_CHECK_END;
    else if (strcmp(value, "iterations") == 0)
        *leak_check = TRACE_LEAK_CHECK_ITERATIONS;
    else if (strcmp(value, "off") == 0)
        *leak_check = TRACE_LEAK_CHECK_OFF;
    else {
        snprintf(err, err_size, "--leak-check takes end, iterations or off, not: %s", value);
        return -1;
    }
    return 0;
}

static int parse_clock(const char *value, void *destination, char *err, size_t err_size)
{
    uint32_t *clock = destination;
    if (strcmp(value, "auto") == 0)
        *clock = EVENT_CLOCK_AUTO;
    else if (strcmp(value, "tsc") == 0) {
#if !defined(__x86_64__)
        snprintf(err, err_size, "--clock tsc needs an x86-64 processor (its time-stamp counter); use auto or monotonic");
        return -1;
#endif
        *clock = EVENT_CLOCK_TSC;
    }
    else if (strcmp(value, "monotonic") == 0)
        *clock = EVENT_CLOCK_MONOTONIC;
    else {
        snprintf(err, err_size, "--clock takes auto, tsc or monotonic, not: %s", value);
        return -1;
    }
    return 0;
}

static int parse_snapshots(const char *value, void *destination, char *err, size_t err_size)
{
    uint64_t count;
    if (units_parse_count(value, &count) < 0 || count < 3 || count > 1000000) {
        snprintf(err, err_size, "--snapshots takes a number from 3 to 1000000, not: %s", value);
        return -1;
    }
    *(uint32_t *)destination = (uint32_t)count;
    return 0;
}

/* A timeline point per interval: at 1ns a busy program wrote 170 MB of
 * timeline in 10 s (issue 19). */
static int parse_interval(const char *value, void *destination, char *err, size_t err_size)
{
    uint64_t *interval_ns = destination;
    if (units_parse_duration(value, interval_ns) < 0 || *interval_ns < MIN_INTERVAL_NS) {
        snprintf(err, err_size, "--interval takes a duration of at least 1ms, such as 100ms or 1s, not: %s", value);
        return -1;
    }
    return 0;
}

static int parse_checkpoint(const char *value, void *destination, char *err, size_t err_size)
{
    uint64_t *checkpoint_ns = destination;
    if (strcmp(value, "off") == 0) {
        *checkpoint_ns = 0;
        return 0;
    }
    if (units_parse_duration(value, checkpoint_ns) < 0 || *checkpoint_ns < MIN_CHECKPOINT_NS) {
        snprintf(err, err_size, "--checkpoint takes a duration of at least 100ms, such as 5s, or off, not: %s", value);
        return -1;
    }
    return 0;
}

static int parse_sample_rate(const char *value, void *destination, char *err, size_t err_size)
{
    if (units_parse_size(value, destination) < 0) {
        snprintf(err, err_size, "--sample-rate takes a size such as 512K, not: %s", value);
        return -1;
    }
    return 0;
}

static int parse_max_frames(const char *value, void *destination, char *err, size_t err_size)
{
    uint64_t frames;
    if (units_parse_count(value, &frames) < 0 || frames < 1 || frames > SHM_MAX_FRAMES_LIMIT) {
        snprintf(err, err_size, "--max-frames takes a number from 1 to %u, not: %s", SHM_MAX_FRAMES_LIMIT, value);
        return -1;
    }
    *(uint32_t *)destination = (uint32_t)frames;
    return 0;
}

static int no_follow(const char *value, void *destination, char *err, size_t err_size)
{
    (void)value, (void)err, (void)err_size;
    ((struct record_options *)destination)->follow_children = 0;
    return 0;
}

static const struct option_entry record_entries[] = {
    OPT_STRING('o', "output", "FILE", struct record_options, output,
               "trace file (default memslope.<command>.<pid>.trace)"),
    OPT_ACTION(0, "iteration", "SYMBOL", parse_iteration,
               "every entry to native function SYMBOL starts an iteration;\n"
               "py:[MODULE:]QUALNAME: every call of that Python function"),
    OPT_VALUE(0, "leak-check", "WHEN", struct record_options, leak_check, parse_leak_check,
              "end (default) | iterations | off"),
    OPT_VALUE(0, "snapshots", "N", struct record_options, snapshots_limit, parse_snapshots,
              "keep at most N iteration snapshots per case (default 200)"),
    OPT_VALUE(0, "interval", "DURATION", struct record_options, interval_ns, parse_interval,
              "heap-over-time sample period (default 100ms, at least 1ms)"),
    OPT_VALUE(0, "checkpoint", "DURATION", struct record_options, checkpoint_ns, parse_checkpoint,
              "write running processes to the trace after DURATION, then at\n"
              "doubling gaps, so a killed memslope leaves them (default 5s,\n"
              "at least 100ms; off: never)"),
    OPT_VALUE(0, "sample-rate", "BYTES", struct record_options, sample_rate, parse_sample_rate,
              "backtraces for a Poisson sample of allocations (default 0: all)"),
    OPT_VALUE(0, "max-frames", "N", struct record_options, max_frames, parse_max_frames,
              "deepest backtrace kept (default 64)"),
    OPT_VALUE(0, "clock", "CLOCK", struct record_options, clock, parse_clock,
              "what stamps events: auto (default: the TSC where it reads in\n"
              "step on every processor, else CLOCK_MONOTONIC), tsc, monotonic"),
    OPT_FLAG(0, "no-freeres", struct record_options, no_freeres,
             "skip glibc's and libstdc++'s freeres at exit (memcheck runs them by default)"),
    OPT_ACTION(0, "no-follow", NULL, no_follow, "do not trace child processes"),
    OPT_FLAG(0, "wait-all", struct record_options, wait_all,
             "record the processes the command started until they end, even\n"
             "after it has ended (default: when it ends, those still running\n"
             "are let go of, recorded until then)"),
    OPT_FLAG(0, "no-symbol-cache", struct record_options, no_symbol_cache,
             "resolve every frame from debug info, look every unwind rule up;\n"
             "neither read nor add to the symbol cache ($XDG_CACHE_HOME/memslope,\n"
             "~/.cache/memslope)"),
    OPT_FLAG(0, "quiet", struct record_options, quiet, "no status line on a terminal, no closing note"),
    OPT_FLAG(0, "verbose", struct record_options, verbose,
             "also say what symbols cost: frames from the symbol cache and from\n"
             "debug info, files opened, DWARF loaded, cache files read and written,\n"
             "unwind rules read from the cache and looked up"),
};

const struct option_table cmd_record_options = {
    .command = "record",
    .synopsis = "[options] [--] COMMAND [ARG...]",
    .mode = OPERANDS_END_OPTIONS,
    .entries = record_entries,
    .entry_count = OPTION_COUNT(record_entries),
    .notes = "Exits with the command's exit status (128 + signal when it was killed).\n",
    .failure_status = 1,
};

/* Fills options from argv; OPTIONS_RUN, or the exit status (options.h). */
static int parse_options(int argc, char **argv, struct record_options *options)
{
    *options = (struct record_options){
        .max_frames = SHM_DEFAULT_MAX_FRAMES,
        .snapshots_limit = 200,
        .interval_ns = 100000000ull,
        .checkpoint_ns = DEFAULT_CHECKPOINT_NS,
        .leak_check = TRACE_LEAK_CHECK_END,
        .follow_children = 1,
    };
    struct option_operands command;
    int rc = options_parse(&cmd_record_options, argc, argv, options, &command);
    if (rc != OPTIONS_RUN)
        return rc;
    if (command.count == 0)
        return options_usage_error(&cmd_record_options, "no command to record");
    options->command = command.items;
    options->command_argc = command.count;
    return OPTIONS_RUN;
}

/* -o naming the program to run: the trace would replace it before it
 * starts, the exec then fail, and the trace begun be removed, leaving
 * neither. */
static int output_replaces_command(const struct record_options *options)
{
    char *program = tool_find_in_path(options->command[0]);
    int replaces = program && output_file_replaces(options->output, program);
    if (replaces)
        fprintf(stderr, "memslope: -o %s names the program to record (%s): the trace would replace it; give "
                        "another file\n", options->output, program);
    free(program);
    return replaces;
}

int cmd_record(int argc, char **argv)
{
    struct record_options options = {0};
    int rc = parse_options(argc, argv, &options);
    if (rc != OPTIONS_RUN)
        return rc;
    if (output_replaces_command(&options))
        return 1;
    char shim[PATH_MAX];
    if (find_shim(shim, sizeof shim) < 0) {
        fprintf(stderr, "memslope: cannot find the shim libmemslope.so at %s (run memslope from its build tree or "
                        "install prefix, or set MEMSLOPE_SHIM to its path)\n", shim);
        return 1;
    }
    struct session *session = session_create(&options);
    if (!session) {
        fprintf(stderr, "memslope: out of memory before the command started: nothing was recorded\n");
        return 1;
    }
    rc = session_launch(session, shim);
    if (rc) {
        session_destroy(session);
        return rc;
    }
    int exit_code = session_finish(session, session_run(session));
    session_destroy(session);
    return exit_code;
}

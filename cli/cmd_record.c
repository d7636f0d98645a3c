/*
 * cmd_record.c - `memslope record [options] [--] COMMAND [ARG...]`.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/shm_layout.h"
#include "../common/units.h"
#include "commands.h"
#include "../tracer/session.h"
#include "../tracer/symbols/symbols.h"
#include "../tracer/trace_writer.h"

static int usage_error(const char *message, const char *argument)
{
    if (message)
        fprintf(stderr, "memslope record: %s%s%s\n", message, argument ? ": " : "", argument ? argument : "");
    fputs(command_usage("record"), stderr);
    return 2;
}

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

static int parse_leak_check(const char *text, uint32_t *value)
{
    if (strcmp(text, "end") == 0)
        *value = TRACE_LEAK_CHECK_END;
    else if (strcmp(text, "iterations") == 0)
        *value = TRACE_LEAK_CHECK_ITERATIONS;
    else if (strcmp(text, "off") == 0)
        *value = TRACE_LEAK_CHECK_OFF;
    else
        return -1;
    return 0;
}

/* The shortest --interval: a timeline point costs 24 bytes of trace. */
#define MIN_INTERVAL_NS 1000000ull
/* --checkpoint (session.c): the first after 5 s; never more often than
 * every 100 ms, each writes every site that changed. */
#define DEFAULT_CHECKPOINT_NS 5000000000ull
#define MIN_CHECKPOINT_NS 100000000ull

enum {
    OPT_ITERATION = 256,
    OPT_LEAK_CHECK,
    OPT_SNAPSHOTS,
    OPT_INTERVAL,
    OPT_SAMPLE_RATE,
    OPT_MAX_FRAMES,
    OPT_NO_FOLLOW,
    OPT_QUIET,
    OPT_NO_FREERES,
    OPT_CHECKPOINT
};

/* Fills options from argv; returns 0, or an exit status for a usage error. */
static int parse_options(int argc, char **argv, struct record_options *options)
{
    static const struct option long_options[] = {
        {"output", required_argument, NULL, 'o'},
        {"iteration", required_argument, NULL, OPT_ITERATION},
        {"leak-check", required_argument, NULL, OPT_LEAK_CHECK},
        {"snapshots", required_argument, NULL, OPT_SNAPSHOTS},
        {"interval", required_argument, NULL, OPT_INTERVAL},
        {"sample-rate", required_argument, NULL, OPT_SAMPLE_RATE},
        {"max-frames", required_argument, NULL, OPT_MAX_FRAMES},
        {"no-follow", no_argument, NULL, OPT_NO_FOLLOW},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"no-freeres", no_argument, NULL, OPT_NO_FREERES},
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *options = (struct record_options){
        .max_frames = SHM_DEFAULT_MAX_FRAMES,
        .snapshots_limit = 200,
        .interval_ns = 100000000ull,
        .checkpoint_ns = DEFAULT_CHECKPOINT_NS,
        .leak_check = TRACE_LEAK_CHECK_END,
        .follow_children = 1,
    };
    uint64_t value;
    int option;
    opterr = 0;
    optind = 1;
    while ((option = getopt_long(argc, argv, "+o:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'o':
            options->output = optarg;
            break;
        case OPT_ITERATION:
            if (!*optarg)
                return usage_error("--iteration takes a function name", NULL);
            if (strncmp(optarg, "py:", 3) == 0) {
                if (!python_function_name_valid(optarg + 3))
                    return usage_error("--iteration py: takes a Python function as QUALNAME or MODULE:QUALNAME "
                                       "(e.g. py:step, py:Bench.run or py:mybench:step), not",
                                       optarg);
                options->python_iteration = optarg + 3;
            } else {
                options->iteration_symbol = optarg;
            }
            break;
        case OPT_LEAK_CHECK:
            if (parse_leak_check(optarg, &options->leak_check) < 0)
                return usage_error("--leak-check takes end, iterations or off, not", optarg);
            break;
        case OPT_SNAPSHOTS:
            if (units_parse_count(optarg, &value) < 0 || value < 3 || value > 1000000)
                return usage_error("--snapshots takes a number from 3 to 1000000, not", optarg);
            options->snapshots_limit = (uint32_t)value;
            break;
        case OPT_INTERVAL:
            /* A timeline point per interval: at 1ns a busy program wrote
             * 170 MB of timeline in 10 s (issue 19). */
            if (units_parse_duration(optarg, &options->interval_ns) < 0 || options->interval_ns < MIN_INTERVAL_NS)
                return usage_error("--interval takes a duration of at least 1ms, such as 100ms or 1s, not", optarg);
            break;
        case OPT_CHECKPOINT:
            if (strcmp(optarg, "off") == 0)
                options->checkpoint_ns = 0;
            else if (units_parse_duration(optarg, &options->checkpoint_ns) < 0 ||
                     options->checkpoint_ns < MIN_CHECKPOINT_NS)
                return usage_error("--checkpoint takes a duration of at least 100ms, such as 5s, or off, not", optarg);
            break;
        case OPT_SAMPLE_RATE:
            if (units_parse_size(optarg, &options->sample_rate) < 0)
                return usage_error("--sample-rate takes a size such as 512K, not", optarg);
            break;
        case OPT_MAX_FRAMES:
            if (units_parse_count(optarg, &value) < 0 || value < 1 || value > SHM_MAX_FRAMES_LIMIT)
                return usage_error("--max-frames takes a number from 1 to 256, not", optarg);
            options->max_frames = (uint32_t)value;
            break;
        case OPT_NO_FOLLOW:
            options->follow_children = 0;
            break;
        case OPT_QUIET:
            options->quiet = 1;
            break;
        case OPT_NO_FREERES:
            options->no_freeres = 1;
            break;
        case 'h':
            fputs(command_usage("record"), stdout);
            return -1;
        default:
            return usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error("no command to record", NULL);
    options->command = argv + optind;
    options->command_argc = argc - optind;
    return 0;
}

int cmd_record(int argc, char **argv)
{
    struct session session = {0};
    int rc = parse_options(argc, argv, &session.options);
    if (rc)
        return rc < 0 ? 0 : rc;
    char shim[PATH_MAX];
    if (find_shim(shim, sizeof shim) < 0) {
        fprintf(stderr, "memslope: cannot find the shim libmemslope.so at %s (run memslope from its build tree or "
                        "install prefix, or set MEMSLOPE_SHIM to its path)\n", shim);
        return 1;
    }
    session.symbols = symbol_store_create();
    if (!session.symbols) {
        fprintf(stderr, "memslope: out of memory before the command started: nothing was recorded\n");
        return 1;
    }
    rc = session_launch(&session, shim);
    if (rc) {
        session_destroy(&session);
        symbol_store_destroy(session.symbols);
        return rc;
    }
    int exit_code = session_run(&session);
    progress_clear(&session.progress);
    char err[4096];
    if (trace_writer_finish(session.writer, err, sizeof err) < 0) {
        if (!session.write_failure_reported)
            fprintf(stderr, "memslope: %s\n", err);
        if (exit_code == 0)
            exit_code = 1;
    } else if (!session.options.quiet) {
        fprintf(stderr, "memslope: trace written to %s (memslope report %s)\n", session.output_path,
                session.output_path);
    }
    session_destroy(&session);
    symbol_store_destroy(session.symbols);
    return exit_code;
}

/*
 * cmd_instruments.c - `memslope instruments`: records COMMAND with an
 * Instruments template on macOS, through
 *
 *   xcrun xctrace record --template NAME --output OUT [--time-limit D]
 *         --target-stdout - --launch -- COMMAND ARG...
 *
 * so a benchmark runner has one command line on macOS and Linux. Template
 * names (with spaces) and .tracetemplate paths go to xctrace unchanged, and
 * xctrace's exit status is memslope's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/options.h"
#include "commands.h"
#include "../tracer/wrappers/wrappers.h"
#include "../common/output_file.h"

/* What xcrun exits with when the developer tool (xctrace) is missing:
 * EX_CONFIG, as with only the Command Line Tools installed. */
#define XCRUN_TOOL_NOT_FOUND 72

struct instruments_options {
    const char *template_name;
    const char *output; /* NULL: memslope.COMMAND.PID.trace */
    const char *time_limit;
    bool open;
    char **command;
};

static const struct option_entry instruments_entries[] = {
    OPT_STRING(0, "template", "NAME", struct instruments_options, template_name,
               "an Instruments template (Time Profiler, Allocations, Leaks, ...)\n"
               "or a .tracetemplate path", .wants = "a template name or path", .nonempty = true),
    OPT_STRING('o', "output", "OUT", struct instruments_options, output,
               "the .trace bundle (default memslope.COMMAND.PID.trace)", .wants = "a .trace path", .nonempty = true),
    OPT_STRING(0, "time-limit", "D", struct instruments_options, time_limit,
               "stop recording after D (xctrace's durations: 10s, 2m, ...)", .wants = "a duration such as 10s",
               .nonempty = true),
    OPT_FLAG(0, "open", struct instruments_options, open, "open the trace in Instruments when done"),
};

const struct option_table cmd_instruments_options = {
    .command = "instruments",
    .synopsis = "--template NAME [options] [--] COMMAND [ARG...]",
    .mode = OPERANDS_END_OPTIONS,
    .entries = instruments_entries,
    .entry_count = OPTION_COUNT(instruments_entries),
    .notes = "Records COMMAND with an Instruments template through `xcrun xctrace` on macOS with the\n"
             "full Xcode.\n",
    .failure_status = 1,
};

/* OPTIONS_RUN, or the exit status (options.h). */
static int parse_instruments_options(int argc, char **argv, struct instruments_options *options)
{
    *options = (struct instruments_options){0};
    struct option_operands command;
    int rc = options_parse(&cmd_instruments_options, argc, argv, options, &command);
    if (rc != OPTIONS_RUN)
        return rc;
    if (!options->template_name)
        return options_usage_error(&cmd_instruments_options,
                                   "--template is required (for example --template 'Time Profiler')");
    if (command.count == 0)
        return options_usage_error(&cmd_instruments_options, "no command to record");
    options->command = command.items;
    return OPTIONS_RUN;
}

static int explain_no_xcrun(void)
{
    fprintf(stderr,
            "memslope instruments: Instruments is not available here: no `xcrun` on PATH.\n"
            "  It needs macOS with the full Xcode (the Command Line Tools alone lack xctrace); after\n"
            "  installing Xcode select it with\n"
            "    sudo xcode-select -s /Applications/Xcode.app/Contents/Developer\n"
            "  On Linux, `memslope record -- COMMAND` gives allocations and leaks (with growth per\n"
            "  iteration), and `memslope perf -- COMMAND` CPU samples.\n");
    return 1;
}

static char *default_output(const char *command)
{
    const char *slash = strrchr(command, '/');
    const char *base = slash && slash[1] ? slash + 1 : command;
    char *path = NULL;
    if (asprintf(&path, "memslope.%s.%ld.trace", base, (long)getpid()) < 0)
        return NULL;
    return path;
}

/* The xctrace argument vector, exactly as documented at the top. */
static char **xctrace_argv(const char *xcrun, const struct instruments_options *options, const char *output)
{
    size_t command_count = 0;
    while (options->command[command_count])
        command_count++;
    char **argv = calloc(command_count + 16, sizeof *argv);
    if (!argv)
        return NULL;
    size_t n = 0;
    const char *head[] = {xcrun, "xctrace", "record", "--template", options->template_name, "--output", output};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[n++] = (char *)head[i];
    if (options->time_limit) {
        argv[n++] = "--time-limit";
        argv[n++] = (char *)options->time_limit;
    }
    const char *tail[] = {"--target-stdout", "-", "--launch", "--"};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[n++] = (char *)tail[i];
    memcpy(argv + n, options->command, command_count * sizeof *argv);
    return argv;
}

static int run_xctrace(const char *xcrun, const struct instruments_options *options, const char *output)
{
    char **argv = xctrace_argv(xcrun, options, output);
    if (!argv)
        return 1;
    int status = tool_run(argv, -1);
    free(argv);
    if (status < 0) {
        fprintf(stderr, "memslope instruments: cannot start %s: %s\n", xcrun, strerror(errno));
        return 1;
    }
    if (status == XCRUN_TOOL_NOT_FOUND)
        fprintf(stderr, "memslope instruments: xcrun found no xctrace: it ships with the full Xcode only;\n"
                        "  select it with `sudo xcode-select -s /Applications/Xcode.app/Contents/Developer`.\n");
    return status;
}

/* xctrace writes a .trace bundle, a directory, at the path: never through
 * a link another user planted (output_file.h), and not into a device, a
 * FIFO or standard output, which cannot hold one. */
static int output_refused(const char *output)
{
    enum output_kind kind;
    char err[512];
    if (output_file_classify(output, &kind, err, sizeof err) != 0) {
        fprintf(stderr, "memslope instruments: %s\n", err);
        return 1;
    }
    if (kind == OUTPUT_STANDARD_OUTPUT || kind == OUTPUT_IN_PLACE) {
        fprintf(stderr, "memslope instruments: %s cannot hold an Instruments .trace bundle (a directory): "
                        "give -o a path such as run.trace\n", output);
        return 1;
    }
    return 0;
}

int cmd_instruments(int argc, char **argv)
{
    struct instruments_options options;
    int parsed = parse_instruments_options(argc, argv, &options);
    if (parsed != OPTIONS_RUN)
        return parsed;
    char *xcrun = tool_find_in_path("xcrun");
    if (!xcrun)
        return explain_no_xcrun();
    char *output = options.output ? strdup(options.output) : default_output(options.command[0]);
    if (output && output_refused(output)) {
        free(output);
        free(xcrun);
        return 1;
    }
    int status = output ? run_xctrace(xcrun, &options, output) : 1;
    struct stat st;
    if (output && options.open && stat(output, &st) == 0)
        tool_open_artifact(output, ARTIFACT_INSTRUMENTS);
    else if (output && status == 0)
        fprintf(stderr, "memslope instruments: recorded %s\n", output);
    free(output);
    free(xcrun);
    return status;
}

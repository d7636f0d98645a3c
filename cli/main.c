/*
 * main.c - the memslope command: dispatches to one file per subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    const struct option_table *options; /* its usage, printed by `memslope help NAME` */
};

static const struct command commands[] = {
    {"record", cmd_record, "run a command and record its native allocations", &cmd_record_options},
    {"report", cmd_report, "summarise a trace", &cmd_report_options},
    {"gate", cmd_gate, "turn a trace's growth, leaks and peak into an exit code", &cmd_gate_options},
    {"diff", cmd_diff, "compare two traces, site by site", &cmd_diff_options},
    {"leaks", cmd_leaks, "leak check of a running process that was never preloaded", &cmd_leaks_options},
    {"perf", cmd_perf, "Linux CPU sampling with perf, to speedscope", &cmd_perf_options},
    {"instruments", cmd_instruments, "Instruments (xctrace) on macOS", &cmd_instruments_options},
};

#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(FILE *out)
{
    fputs("usage: memslope COMMAND [ARGS]\n\n"
          "memslope records every native allocation of a program, finds the sites that leak,\n"
          "and separates one-time setup from per-iteration growth.\n\ncommands:\n", out);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fputs("\nmemslope help COMMAND shows a command's options; memslope --version its version.\n", out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0) {
        printf("memslope %s\n", MEMSLOPE_VERSION);
        return 0;
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            print_help(stdout);
            return 0;
        }
        const struct command *command = find_command(argv[2]);
        if (!command) {
            fprintf(stderr, "memslope: no such command '%s' (memslope --help lists them)\n", argv[2]);
            return 2;
        }
        options_print_usage(command->options, stdout);
        return 0;
    }
    const struct command *command = find_command(name);
    if (command)
        return command->run(argc - 1, argv + 1);
    fprintf(stderr, "memslope: no such command '%s' (memslope --help lists them)\n", name);
    return 2;
}

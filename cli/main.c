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
    const char *usage;
};

static const struct command commands[] = {
    {"record", cmd_record, "run a command and record its native allocations",
     "usage: memslope record [options] [--] COMMAND [ARG...]\n"
     "  -o, --output FILE         trace file (default memslope.<command>.<pid>.trace)\n"
     "  --iteration SYMBOL        every entry to native function SYMBOL starts an iteration;\n"
     "                            py:[MODULE:]QUALNAME: every call of that Python function\n"
     "  --leak-check WHEN         end (default) | iterations | off\n"
     "  --snapshots N             keep at most N iteration snapshots per case (default 200)\n"
     "  --interval DURATION       heap-over-time sample period (default 100ms, at least 1ms)\n"
     "  --sample-rate BYTES       backtraces for a Poisson sample of allocations (default 0: all)\n"
     "  --max-frames N            deepest backtrace kept (default 64)\n"
     "  --no-freeres              skip glibc's and libstdc++'s freeres at exit (memcheck runs them by default)\n"
     "  --no-follow               do not trace child processes\n"
     "  --quiet                   no status line on a terminal, no closing note\n"
     "Exits with the command's exit status (128 + signal when it was killed).\n"},
    {"report", cmd_report, "summarise a trace",
     "usage: memslope report FILE [--format text|json|speedscope|collapsed|html|pprof|suppressions] [-o OUT]\n"
     "                      [--metric growth|leaked|peak|allocated|temporary] [--case NAME]\n"
     "                      [--suppressions FILE]... [--no-default-suppressions]\n"
     "Suppressed loss records (LeakSanitizer's or Valgrind's format) are counted apart; the default\n"
     "suppressions (share/memslope/default.supp) apply unless --no-default-suppressions.\n"},
    {"gate", cmd_gate, "turn a trace's growth, leaks and peak into an exit code",
     "usage: memslope gate FILE [--max-growth SIZE] [--max-leaked SIZE] [--max-leaked-blocks N] [--max-peak SIZE]\n"
     "                     [--baseline OLD.trace [--tolerance PCT|SIZE]] [--case GLOB]\n"
     "                     [--suppressions FILE]... [--no-default-suppressions]\n"
     "Checks every case of every traced process. --baseline fails a case whose growth, leaks or peak\n"
     "exceed OLD.trace's (plus the tolerance, 0 by default: 10% or 4K). Exits 0 within limits, 1 when\n"
     "a limit is exceeded, 2 on bad usage or an unreadable trace. Suppressed loss records count\n"
     "toward no limit.\n"},
    {"diff", cmd_diff, "compare two traces, site by site",
     "usage: memslope diff OLD.trace NEW.trace [--format text|json] [--case NAME]\n"
     "                     [--suppressions FILE]... [--no-default-suppressions]\n"
     "Per case, the sites whose growth per iteration, leaks, peak or allocations changed, matched by\n"
     "their function stack (never by address), largest change first; unchanged sites are left out.\n"},
    {"leaks", cmd_leaks, "leak check of a running process that was never preloaded",
     "usage: memslope leaks [--format text|json] [--verbose] PID\n"
     "A summary by default (the categories, the largest groups of lost blocks); --verbose lists every\n"
     "lost block. Exits 0 when no block is definitely or indirectly lost, 1 when some are (as macOS\n"
     "leaks), 2 on bad usage, 3 when the process cannot be scanned.\n"},
    {"perf", cmd_perf, "Linux CPU sampling with perf, to speedscope",
     "usage: memslope perf [--rate HZ] [--call-graph dwarf|fp] [--format speedscope|collapsed] [-o OUT] [--open]\n"
     "                     [--] COMMAND [ARG...]\n"},
    {"instruments", cmd_instruments, "Instruments (xctrace) on macOS",
     "usage: memslope instruments --template NAME [-o OUT] [--time-limit D] [--open] [--] COMMAND [ARG...]\n"},
};

#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

const char *command_usage(const char *name)
{
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].usage;
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
        const char *usage = command_usage(argv[2]);
        if (!usage) {
            fprintf(stderr, "memslope: no such command '%s' (memslope --help lists them)\n", argv[2]);
            return 2;
        }
        fputs(usage, stdout);
        return 0;
    }
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "memslope: no such command '%s' (memslope --help lists them)\n", name);
    return 2;
}

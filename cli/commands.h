/*
 * commands.h - the subcommands of the memslope CLI, one file each (as perf
 * does). cli/main.c dispatches argv[1] to these; each gets argv from the
 * subcommand name on (argv[0] == "record", ...) and returns the process exit
 * status: 0 success, 1 failure, 2 usage (record: the target's status).
 */
#ifndef MEMSLOPE_COMMANDS_H
#define MEMSLOPE_COMMANDS_H

#include "../common/options.h"

int cmd_record(int argc, char **argv);      /* cli/cmd_record.c */
int cmd_report(int argc, char **argv);      /* cli/cmd_report.c */
int cmd_gate(int argc, char **argv);        /* cli/cmd_gate.c */
int cmd_diff(int argc, char **argv);        /* cli/cmd_diff.c */
int cmd_leaks(int argc, char **argv);       /* cli/cmd_leaks.c */
int cmd_perf(int argc, char **argv);        /* cli/cmd_perf.c */
int cmd_instruments(int argc, char **argv); /* cli/cmd_instruments.c */

/* Each subcommand's option table, beside it: it parses the subcommand's
 * command line and prints its usage, for --help, usage errors and
 * `memslope help NAME` alike. */
extern const struct option_table cmd_record_options;
extern const struct option_table cmd_report_options;
extern const struct option_table cmd_gate_options;
extern const struct option_table cmd_diff_options;
extern const struct option_table cmd_leaks_options;
extern const struct option_table cmd_perf_options;
extern const struct option_table cmd_instruments_options;

#endif

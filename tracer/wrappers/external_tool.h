/*
 * external_tool.h - running the profilers memslope wraps (perf, xcrun
 * xctrace, the speedscope viewer): finding them on PATH, starting them with
 * an argument vector (never a shell), waiting for them while passing on the
 * signals meant for them, and opening what they produce.
 */
#ifndef MEMSLOPE_EXTERNAL_TOOL_H
#define MEMSLOPE_EXTERNAL_TOOL_H

#include <stddef.h>

/* The full path of the executable NAME, searched on PATH as execvp would
 * (NAME itself when it contains a '/'). Malloc'd; NULL when there is none. */
char *tool_find_in_path(const char *name);

/* A wait status as a shell reports it: the exit status, or 128 + signal. */
int tool_exit_code(int wait_status);

/* Runs argv (argv[0] as for execvp) with memslope's stdin, stdout and
 * stderr, or with stdout into out_fd when out_fd >= 0, and waits for it.
 * While it runs, SIGINT and SIGQUIT from the terminal are left to it (the
 * terminal signals the whole foreground group; memslope outlives the tool to
 * convert what it wrote); SIGTERM, SIGHUP and signals sent with kill() to
 * memslope alone are passed on to it. Returns tool_exit_code(), or -1 with
 * errno when it could not be started. */
int tool_run(char *const argv[], int out_fd);

/* Runs argv with stdin from /dev/null and stdout and stderr into output
 * (NUL-terminated; cut to size - 1 bytes). Returns as tool_run. */
int tool_run_capture(char *const argv[], char *output, size_t size);

enum artifact_kind {
    ARTIFACT_SPEEDSCOPE, /* speedscope JSON or collapsed stacks */
    ARTIFACT_INSTRUMENTS, /* an Instruments .trace bundle */
};

/* --open: opens path in its viewer where one exists (`open` on macOS, the
 * `speedscope` command on PATH), else tells on stderr where to open it.
 * Returns 0, or -1 when the viewer failed (it said why). */
int tool_open_artifact(const char *path, enum artifact_kind kind);

#endif

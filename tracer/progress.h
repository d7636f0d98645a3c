/*
 * progress.h - the status line `memslope record` keeps on a terminal:
 *
 *     memslope: 12.3 s, 1,234,567 events, 45.6 MiB live, case leaky iteration 37
 *
 * redrawn in place at most four times a second (after the first half
 * second, so a short run shows none), cut to the terminal's width, and
 * cleared at the end. Nothing is drawn when stderr is not a terminal (a CI
 * log, a pipe), for TERM=dumb, or with --quiet.
 */
#ifndef MEMSLOPE_PROGRESS_H
#define MEMSLOPE_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

struct session;

struct progress_line {
    int enabled;
    int shown;        /* a line is on the terminal now */
    uint64_t start_ns, next_ns;
};

void progress_init(struct progress_line *progress, int quiet, uint64_t now_ns);

/* Redraws the line when it is due. */
void progress_update(struct progress_line *progress, const struct session *session, uint64_t now_ns);

/* Erases the line, if one is shown. */
void progress_clear(struct progress_line *progress);

/* The line's text for these figures (without the erase sequence), cut to
 * width columns; case_name NULL when no case is open. Returns buffer. */
char *progress_format(char *buffer, size_t size, size_t width, double seconds, uint64_t events, uint64_t live_bytes,
                      const char *case_name, uint64_t iteration);

#endif

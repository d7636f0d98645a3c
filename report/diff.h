/*
 * diff.h - two reports side by side, as `memslope diff` and `gate
 * --baseline` compare them: cases matched by name, sites matched by their
 * function stack (each visible frame's function and module's file name, a
 * Python frame's qualname and file name; never an address or a line, so a
 * rebuilt or edited program still matches), figures summed over the stacks
 * of one function stack.
 */
#ifndef MEMSLOPE_DIFF_H
#define MEMSLOPE_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report_model.h"

/* A site's (or a function stack's) figures on one side. */
struct diff_figures {
    int present;     /* the side has a site with this function stack */
    int growth_known;
    double growth;   /* bytes per iteration */
    uint64_t leaked_bytes, leaked_blocks; /* definitely + indirectly lost */
    uint64_t peak_bytes;                  /* live when the case peaked */
    uint64_t allocations, allocated_bytes;
};

struct diff_site {
    char *key;                                 /* the function stack */
    const struct trace_model_stack *stack;     /* the largest of its stacks, NEW's when NEW has one */
    const struct report *report;               /* the report that stack is from */
    char *label;                               /* site_label.h, among the case's sites */
    struct diff_figures old, new;
    int changed;
    double change;                             /* the largest change in bytes, for the order */
};

/* A case's figures on one side (present 0: the side has no such case). */
struct diff_case_figures {
    int present;
    uint64_t iterations;
    int setup_known, growth_known;
    uint64_t setup_bytes;
    double growth;
    int leaks_known;
    uint64_t leaked_bytes, leaked_blocks;
    uint64_t peak_bytes;
};

struct diff_case {
    const char *name;
    const struct report_case *old_case, *new_case; /* NULL when the side has none */
    struct diff_case_figures old, new;
    struct diff_site *sites; /* changed ones first, largest change first; then the unchanged */
    size_t site_count, changed_count;
};

struct name_slot;

struct report_diff {
    const struct report *old_report, *new_report;
    struct diff_case *cases; /* NEW's order, then the cases only OLD has */
    size_t case_count;
    struct name_slot *names; /* the cases by name (report_diff_case) */
};

/* Compares the two reports' cases (case_name: only that one; NULL: all).
 * A case that only one side has is listed with the other side absent; the
 * one case of two traces without markers (named after two commands) is one
 * case. Returns 0, or -1 with a message in err (out of memory; no case
 * named case_name on either side). */
int report_diff_build(struct report_diff *diff, const struct report *old_report, const struct report *new_report,
                      const char *case_name, char *err, size_t err_size);
void report_diff_free(struct report_diff *diff);

/* The case named name, or NULL. */
const struct diff_case *report_diff_case(const struct report_diff *diff, const char *name);

/* The text and JSON renderings (`memslope diff`, docs/formats.md). */
void report_diff_write_text(const struct report_diff *diff, FILE *out);
void report_diff_write_json(const struct report_diff *diff, FILE *out);

#endif

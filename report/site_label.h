/*
 * site_label.h - one-line names that tell the sites of a list apart. A site
 * is named by its frame in the user's code (attribution_user_frame); when
 * sites listed together share that name (two callers of one allocating
 * line), each name goes on with its callers at the depths where its stack
 * first differs from another one's:
 *
 *     make_session (leak.c:11) <- open_user (leak.c:30)
 *     make_session (leak.c:11) <- open_admin (leak.c:41)
 *     make_session (leak.c:11) <- ... <- main (leak.c:60)    (a deeper first difference)
 *
 * Two calls on one line get the call's address; sites whose names are still
 * the same, their stacks differing inside the line, get the callees where
 * they first differ, right after the line's name:
 *
 *     make_session (leak.c:11) -> strdup <- open_user (leak.c:30)
 *
 * The text report, the gate and `memslope diff` name sites this way; the
 * HTML page does the same in its script (html_template.html, siteLabels
 * and withCallees).
 */
#ifndef MEMSLOPE_SITE_LABEL_H
#define MEMSLOPE_SITE_LABEL_H

#include <stddef.h>

#include "trace_reader.h"

/* labels[i] (malloc'd, the caller frees each; NULL for all on failure)
 * names stacks[i] among stacks[0..count). A NULL stack is "[unknown stack]".
 * Returns 0, or -1 when out of memory. */
int site_labels_build(const struct trace_model *model, const struct trace_model_stack *const *stacks, size_t count,
                      char **labels);

/* The same, with callers named by function alone ("make_session
 * (leak.c:11) <- open_user"), for sites matched by their function stack
 * (`memslope diff`), whose stacks may call from several lines. */
int site_labels_build_by_function(const struct trace_model *model, const struct trace_model_stack *const *stacks,
                                  size_t count, char **labels);

void site_labels_free(char **labels, size_t count);

#endif

/* site_label.c - see site_label.h. */
#include "site_label.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attribution.h"
#include "report_model.h"

/* One stack's frames from its user frame outwards, by name. */
struct named_stack {
    char **callers; /* callers[0]: the user frame; callers[d]: its caller d levels up */
    size_t depth;
    char **callees; /* callees[k]: the frame k + 1 levels inside the user frame, towards the allocator */
    size_t callee_count;
    bool *shown;        /* per depth: this depth tells the stack apart from another */
    bool *callee_shown; /* per callee: the same, where labels agree (add_callees) */
    const struct trace_model_frame *user;
};

static char *frame_name(const struct trace_model_frame *frame, bool function_only)
{
    char buffer[1024];
    if (!function_only || !*frame->function)
        return strdup(attribution_frame_name(frame, buffer, sizeof buffer));
    if (frame->flags & TRACE_FRAME_PYTHON) {
        const char *file = strrchr(frame->file, '/');
        snprintf(buffer, sizeof buffer, "%s (%s)", frame->function, file ? file + 1 : frame->file);
        return strdup(buffer);
    }
    return strdup(frame->function);
}

static int name_stack(const struct trace_model *model, const struct trace_model_stack *stack, bool by_function,
                      struct named_stack *named)
{
    memset(named, 0, sizeof *named);
    const struct trace_model_frame *user;
    int user_index = attribution_user_frame(model, stack, &user);
    named->user = user;
    size_t visible = 0;
    for (uint32_t i = 0; stack && i < stack->depth; i++)
        visible += report_frame_visible(&model->frames[stack->frame_ids[i]]);
    size_t depth = user_index >= 0 ? visible - (size_t)user_index : 0;
    size_t inner = user_index > 0 ? (size_t)user_index : 0;
    named->callers = calloc(depth + 1, sizeof *named->callers);
    named->shown = calloc(depth + 1, sizeof *named->shown);
    named->callees = calloc(inner + 1, sizeof *named->callees);
    named->callee_shown = calloc(inner + 1, sizeof *named->callee_shown);
    if (!named->callers || !named->shown || !named->callees || !named->callee_shown)
        return -1;
    named->callee_count = inner; /* filled below; free_named frees what was */
    int index = 0;
    for (uint32_t i = 0; stack && i < stack->depth; i++) {
        const struct trace_model_frame *frame = &model->frames[stack->frame_ids[i]];
        if (!report_frame_visible(frame))
            continue;
        if (index >= user_index && !(named->callers[named->depth++] = frame_name(frame, by_function && index > user_index)))
            return -1;
        if (index < user_index && !(named->callees[inner - 1 - (size_t)index] = frame_name(frame, by_function)))
            return -1;
        index++;
    }
    return 0;
}

static void free_named(struct named_stack *named)
{
    for (size_t d = 0; named->callers && d < named->depth; d++)
        free(named->callers[d]);
    free(named->callers);
    free(named->shown);
    for (size_t k = 0; named->callees && k < named->callee_count; k++)
        free(named->callees[k]);
    free(named->callees);
    free(named->callee_shown);
}

/* The first index from `from` on where two lists of names differ (one
 * ending before the other differs there), or SIZE_MAX when they do not. */
static size_t first_different(char *const *a, size_t a_count, char *const *b, size_t b_count, size_t from)
{
    for (size_t i = from; i < a_count || i < b_count; i++)
        if (i >= a_count || i >= b_count || strcmp(a[i], b[i]) != 0)
            return i;
    return SIZE_MAX;
}

/* names[from, count) that are shown, each after step, or after skip where
 * names before it were left out. */
static void write_shown(FILE *out, char *const *names, const bool *shown, size_t from, size_t count,
                        const char *step, const char *skip)
{
    size_t next = from; /* the index that follows without a skip */
    for (size_t i = from; i < count; i++) {
        if (!shown[i])
            continue;
        fputs(i > next ? skip : step, out);
        fputs(names[i], out);
        next = i + 1;
    }
}

/* The first depth (1 = the user frame's caller) where the two stacks'
 * callers differ, or 0 when they never do. */
static size_t first_difference(const struct named_stack *a, const struct named_stack *b)
{
    size_t d = first_different(a->callers, a->depth, b->callers, b->depth, 1);
    return d == SIZE_MAX ? 0 : d;
}

static bool same_user_frame(const struct named_stack *a, const struct named_stack *b)
{
    return a->depth && b->depth && strcmp(a->callers[0], b->callers[0]) == 0;
}

static char *compose(const struct named_stack *named)
{
    if (!named->depth)
        return strdup("[unknown stack]");
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (!out)
        return NULL;
    fputs(named->callers[0], out);
    write_shown(out, named->callers, named->shown, 1, named->depth, " <- ", " <- ... <- ");
    return fclose(out) == 0 ? text : (free(text), NULL);
}

/* Two calls on one line from the same callers (`a = malloc(32), b =
 * malloc(32)`) differ only in the call's address: such labels get it. */
static int add_call_addresses(const struct named_stack *named, char **labels, size_t count)
{
    bool *clash = calloc(count + 1, sizeof *clash);
    if (!clash)
        return -1;
    for (size_t i = 0; i < count; i++)
        for (size_t j = i + 1; j < count; j++)
            if (named[i].user && named[j].user && named[i].user->address != named[j].user->address &&
                strcmp(labels[i], labels[j]) == 0)
                clash[i] = clash[j] = true;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const struct trace_model_frame *user = named[i].user;
        char *longer = NULL;
        if (!clash[i])
            continue;
        const char *module = user->module ? strrchr(user->module->path, '/') : NULL;
        module = module ? module + 1 : user->module ? user->module->path : "";
        if (asprintf(&longer, "%s [call at %s+0x%llx]", labels[i], module,
                     (unsigned long long)(user->module ? user->module_offset : user->address)) < 0) {
            rc = -1;
            break;
        }
        free(labels[i]);
        labels[i] = longer;
    }
    free(clash);
    return rc;
}

/* Marks, for each pair of sites whose labels are still the same, the
 * callee where their stacks first differ. */
static void mark_callee_differences(struct named_stack *named, const struct trace_model_stack *const *stacks,
                                    char *const *labels, size_t count)
{
    for (size_t i = 0; i < count; i++)
        for (size_t j = i + 1; j < count; j++) {
            if (stacks[i] == stacks[j] || strcmp(labels[i], labels[j]) != 0)
                continue;
            size_t k = first_different(named[i].callees, named[i].callee_count, named[j].callees,
                                       named[j].callee_count, 0);
            if (k < named[i].callee_count)
                named[i].callee_shown[k] = true;
            if (k < named[j].callee_count)
                named[j].callee_shown[k] = true;
        }
}

/* The label with the shown callees after the user frame's name (before
 * any callers: 'make (x.c:11) -> strdup <- open_user (x.c:30)'), ' -> ...
 * -> ' where callees are skipped; NULL when out of memory. */
static char *label_with_callees(const struct named_stack *named, const char *label)
{
    char *text = NULL;
    size_t length = 0, own = strlen(named->callers[0]);
    FILE *out = open_memstream(&text, &length);
    if (!out)
        return NULL;
    fwrite(label, 1, own, out);
    write_shown(out, named->callees, named->callee_shown, 0, named->callee_count, " -> ", " -> ... -> ");
    fputs(label + own, out);
    return fclose(out) == 0 ? text : (free(text), NULL);
}

/* Sites whose labels are still the same, their stacks differing only
 * inside the user frame (one line that allocates through several library
 * calls), read apart by the callees where they first differ. */
static int add_callees(struct named_stack *named, const struct trace_model_stack *const *stacks, char **labels,
                       size_t count)
{
    mark_callee_differences(named, stacks, labels, count);
    for (size_t i = 0; i < count; i++) {
        bool any = false;
        for (size_t k = 0; k < named[i].callee_count && !any; k++)
            any = named[i].callee_shown[k];
        if (!any)
            continue;
        char *longer = label_with_callees(&named[i], labels[i]);
        if (!longer)
            return -1;
        free(labels[i]);
        labels[i] = longer;
    }
    return 0;
}

static int build_labels(const struct trace_model *model, const struct trace_model_stack *const *stacks, size_t count,
                        bool by_function, char **labels)
{
    struct named_stack *named = calloc(count + 1, sizeof *named);
    int rc = named ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = name_stack(model, stacks[i], by_function, &named[i]);
    for (size_t i = 0; rc == 0 && i < count; i++)
        for (size_t j = i + 1; j < count; j++) {
            if (stacks[i] == stacks[j] || !same_user_frame(&named[i], &named[j]))
                continue;
            size_t d = first_difference(&named[i], &named[j]);
            /* A stack that ends before d is told apart by ending. */
            if (d && d < named[i].depth)
                named[i].shown[d] = true;
            if (d && d < named[j].depth)
                named[j].shown[d] = true;
        }
    for (size_t i = 0; i < count; i++) {
        labels[i] = rc == 0 ? compose(&named[i]) : NULL;
        if (!labels[i])
            rc = -1;
    }
    if (rc == 0 && !by_function)
        rc = add_call_addresses(named, labels, count);
    if (rc == 0)
        rc = add_callees(named, stacks, labels, count);
    for (size_t i = 0; named && i < count; i++)
        free_named(&named[i]);
    free(named);
    if (rc != 0)
        site_labels_free(labels, count);
    return rc;
}

int site_labels_build(const struct trace_model *model, const struct trace_model_stack *const *stacks, size_t count,
                      char **labels)
{
    return build_labels(model, stacks, count, false, labels);
}

int site_labels_build_by_function(const struct trace_model *model, const struct trace_model_stack *const *stacks,
                                  size_t count, char **labels)
{
    return build_labels(model, stacks, count, true, labels);
}

void site_labels_free(char **labels, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(labels[i]);
        labels[i] = NULL;
    }
}

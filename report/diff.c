/* diff.c - see diff.h. */
#include "diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "site_label.h"

/* Growth figures are fitted; a change below this (what %.1f rounds away) is none. */
#define GROWTH_EPSILON 0.05

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The function stack of a stack: innermost first, one function a line. */
static char *function_stack_key(const struct trace_model *model, const struct trace_model_stack *stack)
{
    char *key = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&key, &length);
    if (!out)
        return NULL;
    for (uint32_t i = 0; stack && i < stack->depth; i++) {
        const struct trace_model_frame *frame = &model->frames[stack->frame_ids[i]];
        const char *module = frame->module ? base_name(frame->module->path) : "";
        if (!report_frame_visible(frame))
            continue;
        if (frame->flags & TRACE_FRAME_PYTHON)
            fprintf(out, "%s (%s) [python]\n", frame->function, base_name(frame->file));
        else if (*frame->function)
            fprintf(out, "%s [%s]\n", frame->function, module);
        else
            fprintf(out, "[%s]\n", *module ? module : "unknown");
    }
    if (!stack)
        fputs("[unknown stack]\n", out);
    return fclose(out) == 0 ? key : (free(key), NULL);
}

struct key_entry {
    char *key; /* owned by the diff_site */
    size_t index;
    UT_hash_handle hh;
};

struct site_builder {
    struct diff_site *sites;
    size_t count, capacity;
    struct key_entry *keys;
    int failed;
};

static struct diff_site *site_for(struct site_builder *b, const struct report *report,
                                  const struct report_site *site)
{
    char *key = function_stack_key(report->model, site->stack);
    struct key_entry *entry = NULL;
    if (!key) {
        b->failed = 1;
        return NULL;
    }
    HASH_FIND_STR(b->keys, key, entry);
    if (entry) {
        free(key);
        return &b->sites[entry->index];
    }
    if (b->count == b->capacity) {
        size_t grown = b->capacity ? 2 * b->capacity : 64;
        struct diff_site *sites = realloc(b->sites, grown * sizeof *sites);
        if (!sites) {
            free(key);
            b->failed = 1;
            return NULL;
        }
        b->sites = sites;
        b->capacity = grown;
    }
    if (!(entry = calloc(1, sizeof *entry))) {
        free(key);
        b->failed = 1;
        return NULL;
    }
    struct diff_site *added = &b->sites[b->count];
    memset(added, 0, sizeof *added);
    added->key = entry->key = key;
    entry->index = b->count++;
    HASH_ADD_KEYPTR(hh, b->keys, entry->key, strlen(entry->key), entry);
    return added;
}

static void add_figures(struct diff_figures *figures, const struct report_site *site)
{
    figures->present = 1;
    if (site->growth.known) {
        figures->growth_known = 1;
        figures->growth += site->growth.bytes_per_iteration;
    }
    figures->leaked_bytes += site->leaked_bytes;
    figures->leaked_blocks += site->leaked_blocks;
    figures->peak_bytes += site->peak_live_bytes;
    figures->allocations += site->allocations;
    figures->allocated_bytes += site->allocated_bytes;
}

/* Sites are sorted by growth, then leaks, live and allocated bytes: the
 * first of a function stack is its largest, the one that names it. */
static void add_case_sites(struct site_builder *b, const struct report *report, const struct report_case *c,
                           int is_new)
{
    for (size_t i = 0; c && i < c->site_count && !b->failed; i++) {
        struct diff_site *site = site_for(b, report, &c->sites[i]);
        if (!site)
            return;
        struct diff_figures *side = is_new ? &site->new : &site->old;
        if (!site->stack || (is_new && !site->new.present)) {
            site->stack = c->sites[i].stack;
            site->report = report;
        }
        add_figures(side, &c->sites[i]);
    }
}

static double growth_of(const struct diff_figures *figures)
{
    return figures->growth_known ? figures->growth : 0.0;
}

static double absolute_difference(uint64_t a, uint64_t b)
{
    return a > b ? (double)(a - b) : (double)(b - a);
}

/* Changed when a figure moved; the change is the largest in bytes (growth
 * over the case's iterations), which orders the list. */
static void measure_change(struct diff_site *site, uint64_t iterations)
{
    const struct diff_figures *o = &site->old, *n = &site->new;
    double growth = fabs(growth_of(n) - growth_of(o));
    site->changed = growth >= GROWTH_EPSILON || o->leaked_bytes != n->leaked_bytes ||
                    o->leaked_blocks != n->leaked_blocks || o->peak_bytes != n->peak_bytes ||
                    o->allocations != n->allocations;
    double change = growth * (double)(iterations ? iterations : 1);
    double others[] = {absolute_difference(o->leaked_bytes, n->leaked_bytes),
                       absolute_difference(o->peak_bytes, n->peak_bytes),
                       absolute_difference(o->allocated_bytes, n->allocated_bytes)};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (others[i] > change)
            change = others[i];
    site->change = change;
}

static int compare_sites(const void *left, const void *right)
{
    const struct diff_site *a = left, *b = right;
    if (a->changed != b->changed)
        return a->changed ? -1 : 1;
    if (a->change != b->change)
        return a->change > b->change ? -1 : 1;
    return strcmp(a->key, b->key);
}

/* Labels among the case's sites of the same report (site_label.h). */
static int label_sites(struct diff_site *sites, size_t count, const struct report *report)
{
    const struct trace_model_stack **stacks = calloc(count + 1, sizeof *stacks);
    size_t *which = calloc(count + 1, sizeof *which), n = 0;
    char **labels = calloc(count + 1, sizeof *labels);
    int rc = stacks && which && labels ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (sites[i].report == report && !sites[i].label) { /* labelled once, when both sides are one report */
            stacks[n] = sites[i].stack;
            which[n++] = i;
        }
    if (rc == 0 && n && (rc = site_labels_build_by_function(report->model, stacks, n, labels)) == 0)
        for (size_t i = 0; i < n; i++)
            sites[which[i]].label = labels[i];
    free(stacks);
    free(which);
    free(labels);
    return rc;
}

static void case_figures(struct diff_case_figures *figures, const struct report_case *c)
{
    memset(figures, 0, sizeof *figures);
    if (!c)
        return;
    figures->present = 1;
    figures->iterations = c->iterations;
    figures->setup_known = c->setup_known;
    figures->setup_bytes = c->setup_bytes;
    figures->growth_known = c->growth.known;
    figures->growth = c->growth.bytes_per_iteration;
    figures->leaks_known = c->leaks != NULL;
    if (c->leaks) {
        figures->leaked_bytes = c->leaks->bytes[TRACE_LEAK_DEFINITE] + c->leaks->bytes[TRACE_LEAK_INDIRECT];
        figures->leaked_blocks = c->leaks->blocks[TRACE_LEAK_DEFINITE] + c->leaks->blocks[TRACE_LEAK_INDIRECT];
    }
    figures->peak_bytes = c->peak_bytes;
}

static int build_case(struct diff_case *d, const struct report_diff *diff)
{
    struct site_builder b = {0};
    case_figures(&d->old, d->old_case);
    case_figures(&d->new, d->new_case);
    add_case_sites(&b, diff->old_report, d->old_case, 0);
    add_case_sites(&b, diff->new_report, d->new_case, 1);
    struct key_entry *entry, *next;
    HASH_ITER(hh, b.keys, entry, next) {
        HASH_DEL(b.keys, entry);
        free(entry);
    }
    d->sites = b.sites;
    d->site_count = b.count;
    if (b.failed)
        return -1;
    uint64_t iterations = d->new.iterations > d->old.iterations ? d->new.iterations : d->old.iterations;
    for (size_t i = 0; i < d->site_count; i++) {
        measure_change(&d->sites[i], iterations);
        d->changed_count += (size_t)d->sites[i].changed;
    }
    if (d->site_count)
        qsort(d->sites, d->site_count, sizeof *d->sites, compare_sites);
    if (label_sites(d->sites, d->site_count, diff->new_report) != 0 ||
        label_sites(d->sites, d->site_count, diff->old_report) != 0)
        return -1;
    return 0;
}

/* The whole-process case a report makes up for a trace without named cases. */
static int is_process_case(const struct report_case *c)
{
    return c->case_id == TRACE_NONE || !c->source || (c->source->flags & TRACE_CASE_IMPLICIT) != 0;
}

/* Names in sorted order, each with its position: the first case of a name
 * is found by a binary search, not by comparing with every case (a diff of
 * two 20,000-case traces took 2 s). */
struct name_slot {
    const char *name;
    size_t index;
};

static int compare_slots(const void *left, const void *right)
{
    const struct name_slot *a = left, *b = right;
    int order = strcmp(a->name, b->name);
    return order ? order : (a->index > b->index) - (a->index < b->index);
}

static struct name_slot *report_names(const struct report *report)
{
    struct name_slot *slots = malloc((report->case_count + 1) * sizeof *slots);
    for (size_t i = 0; slots && i < report->case_count; i++)
        slots[i] = (struct name_slot){report->cases[i].name, i};
    if (slots)
        qsort(slots, report->case_count, sizeof *slots, compare_slots);
    return slots;
}

/* The position of the first name equal to name, or SIZE_MAX. */
static size_t first_named(const struct name_slot *slots, size_t count, const char *name)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (strcmp(slots[middle].name, name) < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return low < count && strcmp(slots[low].name, name) == 0 ? slots[low].index : SIZE_MAX;
}

static const struct report_case *counterpart(const struct report *report, const struct name_slot *names,
                                             const struct report *other, const struct report_case *c)
{
    size_t found = first_named(names, report->case_count, c->name);
    if (found != SIZE_MAX)
        return &report->cases[found];
    /* Two traces without markers: one case each, named after the command. */
    if (report->case_count == 1 && other->case_count == 1 && is_process_case(&report->cases[0]) &&
        is_process_case(c))
        return &report->cases[0];
    return NULL;
}

static int wanted(const char *case_name, const struct report_case *a, const struct report_case *b)
{
    return !case_name || (a && strcmp(a->name, case_name) == 0) || (b && strcmp(b->name, case_name) == 0);
}

static int collect_cases(struct report_diff *diff, const char *case_name)
{
    const struct report *o = diff->old_report, *n = diff->new_report;
    diff->cases = calloc(o->case_count + n->case_count + 1, sizeof *diff->cases);
    struct name_slot *old_names = report_names(o), *new_names = report_names(n);
    if (!diff->cases || !old_names || !new_names) {
        free(old_names);
        free(new_names);
        return -1;
    }
    for (size_t i = 0; i < n->case_count; i++) {
        const struct report_case *old_case = counterpart(o, old_names, n, &n->cases[i]);
        if (wanted(case_name, old_case, &n->cases[i]))
            diff->cases[diff->case_count++] = (struct diff_case){.name = n->cases[i].name, .old_case = old_case,
                                                                 .new_case = &n->cases[i]};
    }
    for (size_t i = 0; i < o->case_count; i++)
        if (!counterpart(n, new_names, o, &o->cases[i]) && wanted(case_name, &o->cases[i], NULL))
            diff->cases[diff->case_count++] = (struct diff_case){.name = o->cases[i].name, .old_case = &o->cases[i]};
    free(old_names);
    free(new_names);
    return 0;
}

/* diff->names: the cases' names sorted, for report_diff_case. */
static int index_names(struct report_diff *diff)
{
    diff->names = malloc((diff->case_count + 1) * sizeof *diff->names);
    if (!diff->names)
        return -1;
    for (size_t i = 0; i < diff->case_count; i++)
        diff->names[i] = (struct name_slot){diff->cases[i].name, i};
    qsort(diff->names, diff->case_count, sizeof *diff->names, compare_slots);
    return 0;
}

int report_diff_build(struct report_diff *diff, const struct report *old_report, const struct report *new_report,
                      const char *case_name, char *err, size_t err_size)
{
    memset(diff, 0, sizeof *diff);
    diff->old_report = old_report;
    diff->new_report = new_report;
    int rc = collect_cases(diff, case_name);
    for (size_t i = 0; rc == 0 && i < diff->case_count; i++)
        rc = build_case(&diff->cases[i], diff);
    if (rc == 0)
        rc = index_names(diff);
    if (rc != 0) {
        snprintf(err, err_size, "out of memory");
        report_diff_free(diff);
        return -1;
    }
    if (case_name && diff->case_count == 0) {
        snprintf(err, err_size, "no case named '%s' in %s or %s", case_name, old_report->trace_name,
                 new_report->trace_name);
        report_diff_free(diff);
        return -1;
    }
    return 0;
}

void report_diff_free(struct report_diff *diff)
{
    for (size_t c = 0; diff->cases && c < diff->case_count; c++) {
        for (size_t i = 0; i < diff->cases[c].site_count; i++) {
            free(diff->cases[c].sites[i].key);
            free(diff->cases[c].sites[i].label);
        }
        free(diff->cases[c].sites);
    }
    free(diff->cases);
    free(diff->names);
    memset(diff, 0, sizeof *diff);
}

const struct diff_case *report_diff_case(const struct report_diff *diff, const char *name)
{
    size_t found = first_named(diff->names, diff->names ? diff->case_count : 0, name);
    return found != SIZE_MAX ? &diff->cases[found] : NULL;
}

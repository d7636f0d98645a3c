/* format_suppressions.c - `memslope report --format suppressions`: one
 * Valgrind-format entry per loss record (suppressions.h reads them back).
 *
 * Like memcheck's --gen-suppressions, an entry names the allocator first and
 * then the frames, innermost first, as many as memcheck shows by default (12,
 * its --num-callers) and none below main (memcheck hides those), so that
 * memcheck can match the entries too.
 * The trace does not say which allocator entry point was called, so the
 * first line is fun:* (memcheck's first frame is always the allocator), or
 * the mangled operator new that the stack shows. C++ names are
 * written as the trace holds them, demangled: memslope matches them, but
 * memcheck, which compares mangled names, does not. */
#include "formats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/growable_array.h"
#include "attribution.h"
#include "suppressions.h"

enum { MAX_LOCATIONS = 12 };

static const char *const kind_words[TRACE_LEAK_CATEGORIES] = {"definite", "indirect", "possible", "reachable"};
static const char *const category_names[TRACE_LEAK_CATEGORIES] = {"definitely lost", "indirectly lost",
                                                                   "possibly lost", "still reachable"};

/* A name on one line: control characters (which no suppression line can
 * hold) become '?', which matches them. */
static void write_name(FILE *out, const char *name)
{
    for (const char *c = name; *c; c++)
        fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, out);
}

static void write_location(FILE *out, const struct trace_model_frame *frame)
{
    if (*frame->function) {
        fputs("   fun:", out);
        write_name(out, frame->function);
    } else if (frame->module && *frame->module->path) {
        fputs("   obj:", out);
        write_name(out, frame->module->path);
    } else {
        fputs("   obj:*", out);
    }
    fputc('\n', out);
}

/* A loss record to write, and the process image whose stacks it names. */
struct lost_record {
    const struct trace_model_process *process;
    const struct trace_loss_record *record;
    char *body; /* the entry from its '{' on, to tell two images' equal entries apart */
    char name[512]; /* the site's, by its user frame (entry_body) */
    uint64_t bytes, blocks; /* the record's, with those of equal entries (other images', other sites') */
    uint32_t images;        /* how many images' records the entry stands for */
    const struct trace_model_process *last; /* the last of them (add_lost adds one image's records at a time) */
};

/* The entry's comment line, then its body. */
static void write_entry(FILE *out, const struct report *report, const struct lost_record *lost, size_t number,
                        size_t count)
{
    fprintf(out, "# loss record %zu of %zu: %s%" PRIu64 " bytes in %s%" PRIu64 " blocks, %s, at ", number, count,
            report_estimate_mark(report), lost->bytes, report_estimate_mark(report), lost->blocks,
            category_names[lost->record->category]);
    write_name(out, lost->name);
    if (lost->images > 1)
        fprintf(out, " (in %u processes)", lost->images);
    else if (lost->process != report->primary)
        fprintf(out, " (process %u, %s)", lost->process->info.pid,
                lost->process->info.exe ? lost->process->info.exe : "?");
    fputc('\n', out);
    fputs(lost->body, out);
}

/* An entry's body: the name of the site it suppresses (kept in
 * lost->name), the kind of leak, then the allocator and the frames. NULL
 * when out of memory. */
static char *entry_body(const struct report *report, struct lost_record *lost)
{
    const struct trace_model_stack *stack = trace_model_stack(lost->process, lost->record->stack_id);
    const struct trace_model_frame *user;
    attribution_user_frame(report->model, stack, &user);
    if (user)
        attribution_frame_name(user, lost->name, sizeof lost->name);
    else
        snprintf(lost->name, sizeof lost->name, "an unknown site");
    const char *name = lost->name;
    char *body = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&body, &size);
    if (!out)
        return NULL;
    fputs("{\n   memslope:", out);
    write_name(out, name);
    fprintf(out, "\n   Memcheck:Leak\n   match-leak-kinds: %s\n", kind_words[lost->record->category]);
    const struct trace_model_frame *top = stack && stack->depth ? &report->model->frames[stack->frame_ids[0]] : NULL;
    const char *mangled = top && (top->flags & TRACE_FRAME_ALLOCATOR) ? suppressions_mangled_allocator(top->function)
                                                                        : NULL;
    /* memcheck sees operator new itself where the trace shows it calling malloc. */
    fprintf(out, "   fun:%s\n", mangled ? mangled : "*");
    for (uint32_t i = mangled ? 1 : 0, lines = 1; stack && i < stack->depth && lines < MAX_LOCATIONS; i++, lines++) {
        const struct trace_model_frame *frame = &report->model->frames[stack->frame_ids[i]];
        write_location(out, frame);
        if (strcmp(frame->function, "main") == 0)
            break;
    }
    fputs("}\n", out);
    if (fclose(out) != 0) {
        free(body);
        return NULL;
    }
    return body;
}

struct lost_list {
    struct lost_record *items;
    size_t count, capacity;
};

/* Adds leaks' lost records (not still reachable) of process; an entry
 * equal to one listed (the same stack and kind in another image of one
 * program) is listed once, its comment counting the bytes and blocks of
 * both. -1 when out of memory. */
static int add_lost(struct lost_list *list, const struct report *report, const struct trace_model_process *process,
                    const struct trace_leaks *leaks)
{
    for (uint32_t i = 0; leaks && i < leaks->count; i++) {
        const struct trace_loss_record *record = &leaks->records[i];
        if (record->category >= TRACE_LEAK_REACHABLE)
            continue;
        struct lost_record lost = {process, record, NULL, "", record->bytes, record->blocks, 1, process};
        if (!(lost.body = entry_body(report, &lost)))
            return -1;
        struct lost_record *listed = NULL;
        for (size_t k = 0; k < list->count && !listed; k++)
            if (strcmp(list->items[k].body, lost.body) == 0)
                listed = &list->items[k];
        if (listed) {
            listed->bytes += record->bytes;
            listed->blocks += record->blocks;
            listed->images += listed->last != process;
            listed->last = process;
            free(lost.body);
            continue;
        }
        if (growable_array_reserve(&list->items, &list->capacity, list->count + 1, sizeof *list->items) < 0) {
            free(lost.body);
            return -1;
        }
        list->items[list->count++] = lost;
    }
    return 0;
}

static int compare_lost(const void *left, const void *right)
{
    const struct lost_record *a = left, *b = right;
    return report_compare_loss_records(&a->record, &b->record);
}

/* The primary's lost records at exit (without a check at exit, those of
 * every case), then every other image's at its exit: gate checks them all. */
static int lost_records(const struct report *report, struct lost_list *list)
{
    int rc = 0;
    if (report->exit_leaks)
        rc = add_lost(list, report, report->primary, report->exit_leaks);
    for (size_t c = 0; rc == 0 && !report->exit_leaks && c < report->case_count; c++)
        rc = add_lost(list, report, report->primary, report->cases[c].leaks);
    for (size_t p = 0; rc == 0 && p < report->process_count; p++)
        if (report->processes[p].process != report->primary)
            rc = add_lost(list, report, report->processes[p].process, report->processes[p].exit_leaks);
    if (rc == 0)
        qsort(list->items, list->count, sizeof *list->items, compare_lost);
    return rc;
}

static void free_lost(struct lost_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->items[i].body);
    free(list->items);
}

int report_write_suppressions(const struct report *report, FILE *out, char *err, size_t err_size)
{
    struct lost_list list = {0};
    if (lost_records(report, &list) < 0) {
        free_lost(&list);
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    fprintf(out, "# memslope suppressions for the loss records of %s (Valgrind's format; memslope report and\n"
                 "# gate read them with --suppressions FILE)\n", report->trace_name);
    if (list.count == 0)
        fputs("# no loss record to suppress: every block left at exit was reachable, or suppressed already\n", out);
    for (size_t i = 0; i < list.count; i++) {
        fputc('\n', out);
        write_entry(out, report, &list.items[i], i + 1, list.count);
    }
    free_lost(&list);
    return 0;
}

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
#include <stdlib.h>
#include <string.h>

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

static void write_entry(FILE *out, const struct report *report, const struct trace_loss_record *record, size_t number,
                        size_t count)
{
    const struct trace_model_stack *stack = trace_model_stack(report->primary, record->stack_id);
    const struct trace_model_frame *user;
    char where[512];
    attribution_user_frame(report->model, stack, &user);
    const char *name = user ? attribution_frame_name(user, where, sizeof where) : "an unknown site";
    fprintf(out, "# loss record %zu of %zu: %s%" PRIu64 " bytes in %s%" PRIu64 " blocks, %s, at ", number, count,
            report_estimate_mark(report), record->bytes, report_estimate_mark(report), record->blocks,
            category_names[record->category]);
    write_name(out, name);
    fputs("\n{\n   memslope:", out);
    write_name(out, name);
    fprintf(out, "\n   Memcheck:Leak\n   match-leak-kinds: %s\n", kind_words[record->category]);
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
}

static bool already_listed(const struct trace_loss_record **records, size_t count, const struct trace_loss_record *r)
{
    for (size_t i = 0; i < count; i++)
        if (records[i]->stack_id == r->stack_id && records[i]->category == r->category)
            return true;
    return false;
}

/* The lost (not still reachable) records at exit; without a check at exit,
 * those of every case, each stack and kind once. */
static const struct trace_loss_record **lost_records(const struct report *report, size_t *count)
{
    size_t capacity = 1;
    for (size_t c = 0; c < report->case_count; c++)
        capacity += report->cases[c].leaks ? report->cases[c].leaks->count : 0;
    capacity += report->exit_leaks ? report->exit_leaks->count : 0;
    const struct trace_loss_record **records = calloc(capacity, sizeof *records);
    *count = 0;
    for (size_t c = 0; records && c <= report->case_count; c++) {
        const struct trace_leaks *leaks = report->exit_leaks ? (c == 0 ? report->exit_leaks : NULL)
                                          : c < report->case_count ? report->cases[c].leaks
                                                                   : NULL;
        for (uint32_t i = 0; leaks && i < leaks->count; i++)
            if (leaks->records[i].category < TRACE_LEAK_REACHABLE &&
                !already_listed(records, *count, &leaks->records[i]))
                records[(*count)++] = &leaks->records[i];
    }
    if (records)
        qsort(records, *count, sizeof *records, report_compare_loss_records);
    return records;
}

int report_write_suppressions(const struct report *report, FILE *out, char *err, size_t err_size)
{
    size_t count;
    const struct trace_loss_record **records = lost_records(report, &count);
    if (!records) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    fprintf(out, "# memslope suppressions for the loss records of %s (Valgrind's format; memslope report and\n"
                 "# gate read them with --suppressions FILE)\n", report->trace_name);
    if (count == 0)
        fputs("# no loss record to suppress: every block left at exit was reachable, or suppressed already\n", out);
    for (size_t i = 0; i < count; i++) {
        fputc('\n', out);
        write_entry(out, report, records[i], i + 1, count);
    }
    free((void *)records);
    return 0;
}

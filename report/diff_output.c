/* diff_output.c - `memslope diff` as text and as JSON (diff.h). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "../common/units.h"
#include "attribution.h"
#include "diff.h"
#include "../common/json_writer.h"
#include "text_escape.h"

/* --- text ------------------------------------------------------------------------- */

/* "9,600 -> 14,400 (+4,800)", or "9,600" when equal. */
static const char *change_text(uint64_t old_value, uint64_t new_value, char *buffer, size_t size)
{
    char a[32], b[32], d[32];
    if (old_value == new_value)
        snprintf(buffer, size, "%s", units_format_count(new_value, b, sizeof b));
    else
        snprintf(buffer, size, "%s -> %s (%c%s)", units_format_count(old_value, a, sizeof a),
                 units_format_count(new_value, b, sizeof b), new_value > old_value ? '+' : '-',
                 units_format_count(new_value > old_value ? new_value - old_value : old_value - new_value, d, sizeof d));
    return buffer;
}

static void write_case_growth(FILE *out, const struct diff_case *c)
{
    if (c->old.growth_known && c->new.growth_known && fabs(c->new.growth - c->old.growth) < 0.05)
        fprintf(out, "  growth: %.1f B per iteration\n", c->new.growth);
    else if (c->old.growth_known && c->new.growth_known)
        fprintf(out, "  growth: %.1f -> %.1f B per iteration (%+.1f)\n", c->old.growth, c->new.growth,
                c->new.growth - c->old.growth);
    else if (c->new.growth_known || c->old.growth_known)
        fprintf(out, "  growth: %s -> %s\n", c->old.growth_known ? "known" : "not estimated",
                c->new.growth_known ? "known" : "not estimated");
    else
        fputs("  growth: not estimated on either side (no iterations)\n", out);
}

static void write_case_figures(FILE *out, const struct diff_case *c)
{
    char a[96], b[96], it[96];
    fputs("Case ", out);
    text_put(out, c->name);
    if (!c->old.present || !c->new.present) {
        fprintf(out, ": only in the %s trace\n", c->new.present ? "NEW" : "OLD");
        return;
    }
    fprintf(out, ": %s iterations\n", change_text(c->old.iterations, c->new.iterations, it, sizeof it));
    write_case_growth(out, c);
    if (c->old.leaks_known && c->new.leaks_known)
        fprintf(out, "  leaked: %s bytes in %s blocks\n",
                change_text(c->old.leaked_bytes, c->new.leaked_bytes, a, sizeof a),
                change_text(c->old.leaked_blocks, c->new.leaked_blocks, b, sizeof b));
    else
        fputs("  leaked: not checked on both sides\n", out);
    fprintf(out, "  peak:   %s bytes\n", change_text(c->old.peak_bytes, c->new.peak_bytes, a, sizeof a));
    if (c->old.setup_known && c->new.setup_known)
        fprintf(out, "  setup:  %s bytes\n", change_text(c->old.setup_bytes, c->new.setup_bytes, a, sizeof a));
}

static void write_site(FILE *out, const struct diff_site *site)
{
    const struct diff_figures *o = &site->old, *n = &site->new;
    char a[96], b[96];
    fputs("  ", out);
    text_put(out, site->label ? site->label : "[unknown stack]");
    fprintf(out, "%s\n", !o->present ? " (new site)" : !n->present ? " (gone)" : "");
    double old_growth = o->growth_known ? o->growth : 0, new_growth = n->growth_known ? n->growth : 0;
    if (fabs(new_growth - old_growth) >= 0.05)
        fprintf(out, "      growth %.1f -> %.1f B/iteration (%+.1f)\n", old_growth, new_growth, new_growth - old_growth);
    if (o->leaked_bytes != n->leaked_bytes || o->leaked_blocks != n->leaked_blocks)
        fprintf(out, "      leaked %s bytes in %s blocks\n", change_text(o->leaked_bytes, n->leaked_bytes, a, sizeof a),
                change_text(o->leaked_blocks, n->leaked_blocks, b, sizeof b));
    if (o->peak_bytes != n->peak_bytes)
        fprintf(out, "      peak %s bytes\n", change_text(o->peak_bytes, n->peak_bytes, a, sizeof a));
    if (o->allocations != n->allocations)
        fprintf(out, "      allocations %s, %s bytes allocated\n", change_text(o->allocations, n->allocations, a, sizeof a),
                change_text(o->allocated_bytes, n->allocated_bytes, b, sizeof b));
}

/* Each trace's image whose cases are compared, and the others left out
 * (a compiler driver's cc1 and as): gate --baseline compares them all. */
static void write_compared_processes(FILE *out, const struct report_diff *diff)
{
    const struct report *sides[2] = {diff->old_report, diff->new_report};
    const char *names[2] = {"OLD", "NEW"};
    for (int i = 0; i < 2; i++) {
        const struct trace_model_process *primary = sides[i]->primary;
        size_t others = sides[i]->process_count ? sides[i]->process_count - (primary != NULL) : 0;
        if (!others)
            continue;
        fprintf(out, "%s: the cases of pid %u (", names[i], primary ? primary->info.pid : 0);
        text_put(out, primary && primary->info.exe ? primary->info.exe : "?");
        fprintf(out, "); its %zu other process image%s not compared (gate --baseline compares every one)\n", others,
                others == 1 ? " is" : "s are");
    }
}

void report_diff_write_text(const struct report_diff *diff, FILE *out)
{
    fprintf(out, "memslope diff: OLD %s -> NEW %s\n", diff->old_report->trace_name, diff->new_report->trace_name);
    fputs("Sites are matched by their function stack; figures read OLD -> NEW (change).\n", out);
    write_compared_processes(out, diff);
    fputc('\n', out);
    for (size_t i = 0; i < diff->case_count; i++) {
        const struct diff_case *c = &diff->cases[i];
        write_case_figures(out, c);
        size_t unchanged = c->site_count - c->changed_count;
        if (!c->changed_count)
            fprintf(out, "  no site changed (%zu unchanged)\n\n", unchanged);
        else
            fprintf(out, "  %zu site%s changed, largest change first (%zu unchanged left out):\n\n", c->changed_count,
                    c->changed_count == 1 ? "" : "s", unchanged);
        for (size_t s = 0; s < c->changed_count; s++) {
            write_site(out, &c->sites[s]);
            fputc('\n', out);
        }
    }
}

/* --- JSON ------------------------------------------------------------------------- */

static void write_command(struct json_writer *json, const struct report *report)
{
    const struct trace_model *model = report->model;
    uint32_t argc = model->has_info ? model->info.argc : report->primary ? report->primary->info.argc : 0;
    const char *const *argv = model->has_info ? model->info.argv : report->primary ? report->primary->info.argv : NULL;
    json_object_begin(json);
    json_member_string(json, "trace", report->trace_name);
    json_key(json, "command");
    json_array_begin(json);
    for (uint32_t i = 0; i < argc; i++)
        json_string(json, argv[i]);
    json_array_end(json);
    json_object_end(json);
}

static void write_amount(struct json_writer *json, const char *key, int known, uint64_t bytes, uint64_t blocks)
{
    json_key(json, key);
    if (!known) {
        json_null(json);
        return;
    }
    json_object_begin(json);
    json_member_uint(json, "bytes", bytes);
    json_member_uint(json, "blocks", blocks);
    json_object_end(json);
}

static void write_case_side(struct json_writer *json, const char *key, const struct diff_case_figures *f)
{
    json_key(json, key);
    if (!f->present) {
        json_null(json);
        return;
    }
    json_object_begin(json);
    json_member_uint(json, "iterations", f->iterations);
    json_key(json, "setup_bytes");
    if (f->setup_known)
        json_uint(json, f->setup_bytes);
    else
        json_null(json);
    json_key(json, "growth_bytes_per_iteration");
    if (f->growth_known)
        json_double(json, f->growth);
    else
        json_null(json);
    write_amount(json, "leaked", f->leaks_known, f->leaked_bytes, f->leaked_blocks);
    json_member_uint(json, "peak_bytes", f->peak_bytes);
    json_object_end(json);
}

static void write_site_side(struct json_writer *json, const char *key, const struct diff_figures *f)
{
    json_key(json, key);
    if (!f->present) {
        json_null(json);
        return;
    }
    json_object_begin(json);
    json_key(json, "growth_bytes_per_iteration");
    if (f->growth_known)
        json_double(json, f->growth);
    else
        json_null(json);
    json_member_uint(json, "leaked_bytes", f->leaked_bytes);
    json_member_uint(json, "leaked_blocks", f->leaked_blocks);
    json_member_uint(json, "peak_bytes", f->peak_bytes);
    json_member_uint(json, "allocations", f->allocations);
    json_member_uint(json, "allocated_bytes", f->allocated_bytes);
    json_object_end(json);
}

static int64_t signed_change(uint64_t old_value, uint64_t new_value)
{
    return new_value >= old_value ? (int64_t)(new_value - old_value) : -(int64_t)(old_value - new_value);
}

static void write_change(struct json_writer *json, const struct diff_figures *o, const struct diff_figures *n)
{
    json_key(json, "change");
    json_object_begin(json);
    json_member_double(json, "growth_bytes_per_iteration",
                       (n->growth_known ? n->growth : 0) - (o->growth_known ? o->growth : 0));
    json_member_int(json, "leaked_bytes", signed_change(o->leaked_bytes, n->leaked_bytes));
    json_member_int(json, "leaked_blocks", signed_change(o->leaked_blocks, n->leaked_blocks));
    json_member_int(json, "peak_bytes", signed_change(o->peak_bytes, n->peak_bytes));
    json_member_int(json, "allocations", signed_change(o->allocations, n->allocations));
    json_member_int(json, "allocated_bytes", signed_change(o->allocated_bytes, n->allocated_bytes));
    json_object_end(json);
}

static void write_site_json(struct json_writer *json, const struct diff_site *site)
{
    json_object_begin(json);
    json_member_string(json, "label", site->label ? site->label : "");
    json_key(json, "function_stack");
    json_array_begin(json);
    for (const char *line = site->key; *line;) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        json_string_len(json, line, length);
        line += length + (end ? 1 : 0);
    }
    json_array_end(json);
    report_write_json_frames(json, site->report->model, site->stack);
    const struct trace_model_frame *user;
    int user_frame = attribution_user_frame(site->report->model, site->stack, &user);
    json_key(json, "user_frame");
    if (user_frame >= 0)
        json_int(json, user_frame);
    else
        json_null(json);
    write_site_side(json, "old", &site->old);
    write_site_side(json, "new", &site->new);
    write_change(json, &site->old, &site->new);
    json_object_end(json);
}

void report_diff_write_json(const struct report_diff *diff, FILE *out)
{
    struct json_writer json;
    json_init(&json, out, 1);
    json_object_begin(&json);
    json_member_string(&json, "format", "memslope-diff");
    json_member_uint(&json, "version", 1);
    json_key(&json, "old");
    write_command(&json, diff->old_report);
    json_key(&json, "new");
    write_command(&json, diff->new_report);
    json_key(&json, "cases");
    json_array_begin(&json);
    for (size_t i = 0; i < diff->case_count; i++) {
        const struct diff_case *c = &diff->cases[i];
        json_object_begin(&json);
        json_member_string(&json, "name", c->name);
        write_case_side(&json, "old", &c->old);
        write_case_side(&json, "new", &c->new);
        json_member_uint(&json, "sites_changed", c->changed_count);
        json_member_uint(&json, "sites_unchanged", c->site_count - c->changed_count);
        json_key(&json, "sites");
        json_array_begin(&json);
        for (size_t s = 0; s < c->changed_count; s++)
            write_site_json(&json, &c->sites[s]);
        json_array_end(&json);
        json_object_end(&json);
    }
    json_array_end(&json);
    json_object_end(&json);
    fputc('\n', out);
}

/*
 * cmd_leaks.c - `memslope leaks [--format text|json] [--verbose] PID`: a
 * leak check of a running process that was never started under memslope,
 * like macOS `leaks PID`. Stops every thread, walks glibc's heap from
 * outside, runs the leak scan, reads a preview of each leaked block, and
 * lets the process go exactly as it was. No backtraces: the process
 * recorded none, so lost blocks are grouped by category and size. Exit
 * status as macOS leaks: 0 nothing definitely or indirectly lost, 1 some
 * is, 2 usage, 3 the process could not be scanned.
 */
#include "commands.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "../common/options.h"
#include "../common/proc_stat.h"
#include "../leakscan/leakscan.h"
#include "../common/json_writer.h"

#define PREVIEW_BYTES 32u
#define GROUPS_SHOWN 10

enum { EXIT_NO_LEAKS = 0, EXIT_LEAKS = 1, EXIT_USAGE = 2, EXIT_SCAN_FAILED = 3 };

struct leaks_options {
    bool json;
    bool verbose;
    pid_t pid;
};

struct leaks_result {
    struct leakscan_heap heap;
    struct leakscan_totals totals;
    struct leakscan_stats stats;
    uint8_t (*previews)[PREVIEW_BYTES]; /* per block; only leaked ones are read */
    size_t thread_count;
    double walk_seconds, scan_seconds;         /* wall clock */
    double walk_cpu_seconds, scan_cpu_seconds; /* this process's CPU time (a busy machine inflates wall time) */
};

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int parse_format(const char *value, void *destination, char *err, size_t err_size)
{
    if (strcmp(value, "json") != 0 && strcmp(value, "text") != 0) {
        snprintf(err, err_size, "--format takes text or json, not: %s", value);
        return -1;
    }
    *(bool *)destination = strcmp(value, "json") == 0;
    return 0;
}

static const struct option_entry leaks_entries[] = {
    OPT_VALUE(0, "format", "text|json", struct leaks_options, json, parse_format, "text (default) or JSON"),
    OPT_FLAG('v', "verbose", struct leaks_options, verbose, "list every lost block, with its address and first bytes"),
};

const struct option_table cmd_leaks_options = {
    .command = "leaks",
    .synopsis = "[options] PID",
    .mode = OPERANDS_ANYWHERE,
    .entries = leaks_entries,
    .entry_count = OPTION_COUNT(leaks_entries),
    .notes = "Leak check of a running process that was never started under memslope: stops its threads\n"
             "(ptrace), walks glibc's heap, classifies every block as memcheck does, and lets the process\n"
             "continue. Prints the categories and the largest groups of lost blocks (by category and size,\n"
             "with a preview of their bytes); --verbose lists every lost block.\n"
             "Exit status (as macOS leaks): 0 nothing definitely or indirectly lost, 1 some blocks are,\n"
             "2 usage, 3 the process could not be scanned.\n",
    .failure_status = EXIT_SCAN_FAILED,
};

/* OPTIONS_RUN, or the exit status (options.h). */
static int parse_options(int argc, char **argv, struct leaks_options *options)
{
    struct option_operands pids;
    int rc = options_parse(&cmd_leaks_options, argc, argv, options, &pids);
    if (rc != OPTIONS_RUN)
        return rc;
    if (pids.count != 1)
        return options_usage_error(&cmd_leaks_options, "%s", pids.count == 0 ? "missing PID" : "give exactly one PID");
    const char *pid_text = pids.items[0];
    char *end;
    errno = 0;
    long pid = strtol(pid_text, &end, 10);
    if (errno || *end || end == pid_text || pid <= 0 || pid > 0x3fffffff)
        return options_usage_error(&cmd_leaks_options, "'%s' is not a process id (a positive number)", pid_text);
    options->pid = (pid_t)pid;
    return OPTIONS_RUN;
}

/* Reads the first bytes of every leaked block while the process is stopped. */
static int read_previews(pid_t pid, struct leaks_result *result)
{
    size_t n = result->heap.block_count;
    result->previews = calloc(n ? n : 1, sizeof *result->previews);
    if (!result->previews)
        return -1;
    struct leakscan_target target;
    leakscan_target_open(&target, pid);
    for (size_t i = 0; i < n; i++) {
        const struct leakscan_block *b = &result->heap.blocks[i];
        if (b->category == TRACE_LEAK_REACHABLE)
            continue;
        size_t length = b->size < PREVIEW_BYTES ? (size_t)b->size : PREVIEW_BYTES;
        if (leakscan_target_read(&target, b->address, result->previews[i], length) < 0)
            break;
    }
    leakscan_target_close(&target);
    return 0;
}

/* The work done with the process stopped. */
static int scan_stopped(const struct leakscan_stopped *stopped, struct leaks_result *result, char *err,
                        size_t err_size)
{
    struct leakscan_target target;
    leakscan_target_open(&target, stopped->pid);
    double start = now_seconds(), start_cpu = cpu_seconds();
    int rc = leakscan_walk_glibc_heap(&target, stopped->tids, stopped->tid_count, &result->heap, err, err_size);
    double walked = now_seconds(), walked_cpu = cpu_seconds();
    if (rc == 0)
        rc = leakscan_process_target(&target, stopped->tids, stopped->tid_count, result->heap.blocks,
                                     result->heap.block_count, &result->totals, &result->stats, err, err_size);
    leakscan_target_close(&target);
    if (rc < 0)
        return -1;
    result->walk_seconds = walked - start;
    result->scan_seconds = now_seconds() - walked;
    result->walk_cpu_seconds = walked_cpu - start_cpu;
    result->scan_cpu_seconds = cpu_seconds() - walked_cpu;
    result->thread_count = stopped->tid_count;
    if (read_previews(stopped->pid, result) < 0) {
        snprintf(err, err_size, "out of memory for the previews of %zu blocks", result->heap.block_count);
        return -1;
    }
    return 0;
}

static void preview_hex(const uint8_t *bytes, size_t length, char *out)
{
    for (size_t i = 0; i < length; i++)
        sprintf(out + 3 * i, "%02x%s", bytes[i], i + 1 < length ? " " : "");
    if (length == 0)
        out[0] = '\0';
}

static void preview_ascii(const uint8_t *bytes, size_t length, char *out)
{
    for (size_t i = 0; i < length; i++)
        out[i] = bytes[i] >= 0x20 && bytes[i] < 0x7f ? (char)bytes[i] : '.';
    out[length] = '\0';
}

static size_t preview_length(const struct leakscan_block *b)
{
    return b->size < PREVIEW_BYTES ? (size_t)b->size : PREVIEW_BYTES;
}

static double scan_rate(const struct leaks_result *r, double seconds)
{
    uint64_t bytes = r->stats.root_bytes + r->stats.block_bytes;
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0;
}

/* Lost blocks of one category and one size: without backtraces, what
 * tells a leak apart (a thousand lost 48-byte sessions are one group). */
struct block_group {
    uint32_t category;
    uint64_t size, count;
    size_t first; /* the first block's index: its preview stands for the group */
};

static int compare_groups(const void *left, const void *right)
{
    const struct block_group *a = left, *b = right;
    uint64_t x = a->size * a->count, y = b->size * b->count;
    if (x != y)
        return x < y ? 1 : -1;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

static int compare_group_keys(const void *left, const void *right)
{
    const struct block_group *a = left, *b = right;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* The groups of lost blocks, largest total first. NULL when out of memory. */
static struct block_group *group_blocks(const struct leaks_result *r, size_t *count)
{
    struct block_group *groups = calloc(r->heap.block_count + 1, sizeof *groups);
    size_t n = 0;
    for (size_t i = 0; groups && i < r->heap.block_count; i++) {
        const struct leakscan_block *b = &r->heap.blocks[i];
        if (b->category != TRACE_LEAK_REACHABLE)
            groups[n++] = (struct block_group){b->category, b->size, 1, i};
    }
    if (!groups)
        return NULL;
    qsort(groups, n, sizeof *groups, compare_group_keys);
    size_t merged = 0;
    for (size_t i = 0; i < n; i++) {
        if (merged && groups[merged - 1].category == groups[i].category && groups[merged - 1].size == groups[i].size)
            groups[merged - 1].count++;
        else
            groups[merged++] = groups[i];
    }
    qsort(groups, merged, sizeof *groups, compare_groups);
    *count = merged;
    return groups;
}

static const char *const category_labels[TRACE_LEAK_CATEGORIES] = {"definitely lost", "indirectly lost",
                                                                   "possibly lost", "still reachable"};

static void print_block_line(const struct leaks_result *r, size_t i)
{
    const struct leakscan_block *b = &r->heap.blocks[i];
    char hex[3 * PREVIEW_BYTES + 1], ascii[PREVIEW_BYTES + 1];
    preview_hex(r->previews[i], preview_length(b), hex);
    preview_ascii(r->previews[i], preview_length(b), ascii);
    printf("  0x%016" PRIx64 " %10" PRIu64 "  %-16s %s  |%s|\n", b->address, b->size, category_labels[b->category],
           hex, ascii);
}

/* Every lost block, one a line (--verbose). */
static void print_every_block(const struct leaks_result *r)
{
    printf("\n  %-18s %10s  %-16s %s\n", "address", "size", "category", "first bytes");
    for (size_t i = 0; i < r->heap.block_count; i++)
        if (r->heap.blocks[i].category != TRACE_LEAK_REACHABLE)
            print_block_line(r, i);
}

/* The largest groups, with the first bytes of one block of each. */
static void print_groups(const struct leaks_result *r, const struct block_group *groups, size_t count)
{
    printf("\nLargest groups of lost blocks (same category and size), with the first bytes of one:\n");
    printf("  %8s %10s %12s  %-16s %s\n", "blocks", "size", "total", "category", "first bytes");
    for (size_t g = 0; g < count && g < GROUPS_SHOWN; g++) {
        const struct block_group *group = &groups[g];
        const struct leakscan_block *b = &r->heap.blocks[group->first];
        char hex[3 * 8 + 1], ascii[8 + 1];
        size_t length = preview_length(b) < 8 ? preview_length(b) : 8;
        preview_hex(r->previews[group->first], length, hex);
        preview_ascii(r->previews[group->first], length, ascii);
        printf("  %8" PRIu64 " %10" PRIu64 " %12" PRIu64 "  %-16s %-23s |%s|\n", group->count, group->size,
               group->count * group->size, category_labels[group->category], hex, ascii);
    }
    if (count > GROUPS_SHOWN)
        printf("  (%zu more groups)\n", count - GROUPS_SHOWN);
    printf("(--verbose lists every lost block, with its address and first %u bytes)\n", PREVIEW_BYTES);
}

static void print_text(const struct leaks_options *options, const struct leaks_result *r)
{
    uint64_t leaked_blocks = 0, leaked_bytes = 0;
    for (int c = 0; c < TRACE_LEAK_REACHABLE; c++)
        leaked_blocks += r->totals.blocks[c], leaked_bytes += r->totals.bytes[c];
    printf("Process %d: %zu threads, %zu heap blocks (%zu arenas, %zu mmapped)\n", (int)options->pid,
           r->thread_count, r->heap.block_count, r->heap.arena_count, r->heap.mmapped_count);
    printf("Process %d: %" PRIu64 " leaks for %" PRIu64 " total leaked bytes\n\n", (int)options->pid, leaked_blocks,
           leaked_bytes);
    for (int c = 0; c < TRACE_LEAK_CATEGORIES; c++)
        printf("  %-16s %" PRIu64 " bytes in %" PRIu64 " blocks\n", category_labels[c], r->totals.bytes[c],
               r->totals.blocks[c]);
    size_t group_count = 0;
    struct block_group *groups = leaked_blocks && !options->verbose ? group_blocks(r, &group_count) : NULL;
    if (leaked_blocks && (options->verbose || !groups))
        print_every_block(r);
    else if (groups)
        print_groups(r, groups, group_count);
    free(groups);
    printf("\n(sizes are usable sizes: glibc rounds requests up; scanned %.1f MiB in %.3f s, %.2f GB/s "
           "(CPU %.3f s); heap walk %.3f s)\n",
           (double)(r->stats.root_bytes + r->stats.block_bytes) / (1 << 20), r->scan_seconds,
           scan_rate(r, r->scan_seconds), r->scan_cpu_seconds, r->walk_seconds);
}

/* "groups": lost blocks by category and size, largest total first. */
static void write_json_groups(struct json_writer *json, const struct leaks_result *r)
{
    size_t count = 0;
    struct block_group *groups = group_blocks(r, &count);
    json_key(json, "groups");
    json_array_begin(json);
    for (size_t g = 0; groups && g < count; g++) {
        json_object_begin(json);
        json_member_string(json, "category", leakscan_category_name(groups[g].category));
        json_member_uint(json, "size", groups[g].size);
        json_member_uint(json, "blocks", groups[g].count);
        json_member_uint(json, "bytes", groups[g].size * groups[g].count);
        json_object_end(json);
    }
    json_array_end(json);
    free(groups);
}

static void print_json(const struct leaks_options *options, const struct leaks_result *r)
{
    struct json_writer json;
    json_init(&json, stdout, 1);
    json_object_begin(&json);
    json_member_int(&json, "pid", options->pid);
    json_key(&json, "leaks");
    json_object_begin(&json);
    for (uint32_t c = 0; c < TRACE_LEAK_CATEGORIES; c++) {
        json_key(&json, leakscan_category_name(c));
        json_object_begin(&json);
        json_member_uint(&json, "bytes", r->totals.bytes[c]);
        json_member_uint(&json, "blocks", r->totals.blocks[c]);
        json_object_end(&json);
    }
    json_object_end(&json);
    json_key(&json, "blocks");
    json_array_begin(&json);
    for (size_t i = 0; i < r->heap.block_count; i++) {
        const struct leakscan_block *b = &r->heap.blocks[i];
        if (b->category == TRACE_LEAK_REACHABLE)
            continue;
        char address[32], hex[3 * PREVIEW_BYTES + 1], ascii[PREVIEW_BYTES + 1];
        snprintf(address, sizeof address, "0x%" PRIx64, b->address);
        preview_hex(r->previews[i], preview_length(b), hex);
        preview_ascii(r->previews[i], preview_length(b), ascii);
        json_object_begin(&json);
        json_member_string(&json, "address", address);
        json_member_uint(&json, "size", b->size);
        json_member_string(&json, "category", leakscan_category_name(b->category));
        json_member_string(&json, "preview", hex);
        json_member_string(&json, "ascii", ascii);
        json_object_end(&json);
    }
    json_array_end(&json);
    write_json_groups(&json, r);
    json_key(&json, "scan");
    json_object_begin(&json);
    json_member_uint(&json, "threads", r->thread_count);
    json_member_uint(&json, "heap_blocks", r->heap.block_count);
    json_member_uint(&json, "arenas", r->heap.arena_count);
    json_member_uint(&json, "mmapped_blocks", r->heap.mmapped_count);
    json_member_uint(&json, "root_bytes", r->stats.root_bytes);
    json_member_uint(&json, "block_bytes", r->stats.block_bytes);
    json_member_uint(&json, "sweeps", r->stats.sweeps);
    json_member_uint(&json, "untouched_bytes", r->stats.untouched_bytes);
    json_member_double(&json, "heap_walk_seconds", r->walk_seconds);
    json_member_double(&json, "scan_seconds", r->scan_seconds);
    json_member_double(&json, "scan_gb_per_second", scan_rate(r, r->scan_seconds));
    json_member_double(&json, "heap_walk_cpu_seconds", r->walk_cpu_seconds);
    json_member_double(&json, "scan_cpu_seconds", r->scan_cpu_seconds);
    json_member_double(&json, "scan_gb_per_cpu_second", scan_rate(r, r->scan_cpu_seconds));
    json_object_end(&json);
    json_object_end(&json);
}

/* The state letter in /proc/PID/stat ('R', 'S', 'Z', ...) and the
 * process's thread group, or 0 when it cannot be read. */
static char process_state(pid_t pid, pid_t *thread_group)
{
    struct proc_stat fields;
    char tgid[32];
    proc_status_field(pid, "Tgid", tgid, sizeof tgid);
    *thread_group = *tgid ? (pid_t)strtol(tgid, NULL, 10) : pid;
    return proc_stat_read(pid, &fields) == 0 ? fields.state : 0;
}

/* What cannot be scanned, said as what it is (the attach would blame the
 * kernel's ptrace access check). 0 when pid is worth attaching to. */
static int refuse_unscannable(pid_t pid)
{
    pid_t thread_group;
    char state = process_state(pid, &thread_group);
    if (thread_group == getpid()) {
        fprintf(stderr, "memslope leaks: %d is memslope itself, which cannot scan its own memory; give the pid of "
                        "another process\n", (int)pid);
        return EXIT_SCAN_FAILED;
    }
    if (state == 'Z' || state == 'X') {
        fprintf(stderr, "memslope leaks: process %d has exited (a zombie until its parent collects its exit "
                        "status): it has no memory left to scan\n", (int)pid);
        return EXIT_SCAN_FAILED;
    }
    return 0;
}

int cmd_leaks(int argc, char **argv)
{
    struct leaks_options options = {0};
    int rc = parse_options(argc, argv, &options);
    if (rc != OPTIONS_RUN)
        return rc;
    if ((rc = refuse_unscannable(options.pid)) != 0)
        return rc;
    char err[512] = "";
    struct leakscan_stopped stopped;
    if (leakscan_stop_process(options.pid, &stopped, err, sizeof err) < 0) {
        fprintf(stderr, "memslope leaks: %s\n", err);
        return EXIT_SCAN_FAILED;
    }
    struct leaks_result result = {0};
    rc = scan_stopped(&stopped, &result, err, sizeof err);
    leakscan_detach(&stopped); /* before printing: the process waits as little as possible */
    if (rc == 0) {
        if (options.json)
            print_json(&options, &result);
        else
            print_text(&options, &result);
        fflush(stdout);
    } else {
        fprintf(stderr, "memslope leaks: %s\n", err);
    }
    uint64_t lost = result.totals.blocks[TRACE_LEAK_DEFINITE] + result.totals.blocks[TRACE_LEAK_INDIRECT];
    free(result.previews);
    leakscan_heap_free(&result.heap);
    if (rc != 0)
        return EXIT_SCAN_FAILED;
    return lost ? EXIT_LEAKS : EXIT_NO_LEAKS;
}

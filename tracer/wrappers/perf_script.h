/*
 * perf_script.h - `perf script` text to samples, and samples to speedscope
 * JSON or collapsed stacks (the converters live in perf_convert.c).
 *
 * The parser is a pure function from bytes to a profile: any byte string in,
 * no failure but running out of memory. It reads what perf script prints with
 * its default fields and with the ones `memslope perf` asks for
 * (comm,pid,tid,time,event,ip,sym,dso,srcline): a header line per sample
 * ("comm pid/tid [cpu] time: [period] event: [ip sym (dso)]"), then one
 * tab-indented line per frame, innermost first ("ip sym+0xoff (dso)"), each
 * optionally followed by a srcline line ("  file.c:42", "  x.h:7 (inlined)").
 * Comment lines (#), empty lines, [unknown] symbols and modules, inlined
 * frames, kernel frames, command names with spaces and input cut off
 * anywhere are all handled; lines it cannot place are counted and skipped.
 *
 * Frames and call paths are interned, so memory grows with distinct stacks,
 * not with samples (8 bytes a sample).
 */
#ifndef MEMSLOPE_PERF_SCRIPT_H
#define MEMSLOPE_PERF_SCRIPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PERF_NO_NODE UINT32_MAX     /* an empty stack, or the root's parent */
#define PERF_MAX_STACK_DEPTH 1024   /* deeper frames (outermost) are dropped */

struct perf_frame {
    char *function; /* NULL when perf printed [unknown] */
    char *module;   /* dso path, "[kernel.kallsyms]", ...; NULL when unknown */
    char *file;     /* source file from srcline; NULL when perf gave none */
    uint32_t line;  /* lowest line sampled in it (frames are functions, not
                     * lines, so a flame graph adds them up); 0 when unknown */
    int inlined;    /* inlined into the frame that follows it */
};

/* A call path: node = parent path + frame. Roots have parent PERF_NO_NODE. */
struct perf_node {
    uint32_t parent;
    uint32_t frame;
};

struct perf_thread {
    char *name; /* the command name of its latest sample (exec changes it) */
    long pid;   /* -1 when perf script printed the thread id only */
    long tid;
    uint64_t samples;
};

struct perf_sample {
    uint32_t thread;
    uint32_t node; /* the innermost frame's node; PERF_NO_NODE: no stack */
};

struct perf_profile {
    struct perf_frame *frames;
    size_t frame_count;
    struct perf_node *nodes;
    size_t node_count;
    struct perf_thread *threads; /* in order of first sample */
    size_t thread_count;
    struct perf_sample *samples; /* in input (time) order */
    size_t sample_count;
    uint64_t skipped_lines;      /* lines that were neither header, frame nor comment */
    uint64_t truncated_stacks;   /* samples deeper than PERF_MAX_STACK_DEPTH */
    void *index;                 /* the parser's hash tables; private */
};

/* Parses `perf script` output. Returns 0, or -1 with errno ENOMEM (the
 * profile is then empty but may be freed). Call perf_profile_free after. */
int perf_script_parse(const char *text, size_t length, struct perf_profile *profile);
void perf_profile_free(struct perf_profile *profile);

/* The name a frame is shown by: its function, else "[module basename]" (as
 * stackcollapse-perf does), else "[unknown]". Writes into buffer. */
const char *perf_frame_display_name(const struct perf_frame *frame, char *buffer, size_t size);

/* speedscope JSON (https://www.speedscope.app/file-format-schema.json): one
 * sampled profile per thread, unit "none", weight = samples (consecutive
 * identical stacks merged). name: the recording's name (the command).
 * Returns 0, or -1 when writing failed (errno set). */
int perf_write_speedscope(const struct perf_profile *profile, const char *name, FILE *out);

/* Collapsed stacks, one line per distinct stack: "comm;outer;...;leaf N",
 * the thread's command name first as stackcollapse-perf writes it. */
int perf_write_collapsed(const struct perf_profile *profile, FILE *out);

/* What went wrong with perf, from what it printed and how it exited. */
enum perf_problem {
    PERF_OK,
    PERF_VERSION_MISMATCH,   /* a distribution wrapper found no perf for this kernel */
    PERF_NOT_PERMITTED,      /* perf_event_paranoid, missing capability, seccomp */
    PERF_EVENT_UNSUPPORTED,  /* the event does not exist here (no PMU in a VM) */
    PERF_OTHER_FAILURE,
};

/* Classifies `perf --version` or `perf stat -x, -e EVENT -- true` output.
 * exit_status: the command's exit code (128+signal when killed). */
enum perf_problem perf_classify_output(const char *output, int exit_status);

#endif

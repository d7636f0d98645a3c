/*
 * trace_output.h - writes a process image to the trace: its PROCESS record,
 * then symbols for its stacks (resolved here, so `report` never needs the
 * binaries) as modules, frames and stacks, its sites, cases, snapshots,
 * timeline and leak checks.
 *
 * An image is written in pieces: at checkpoints while it runs, so that a
 * memslope killed by SIGKILL leaves what it had measured, and at its end.
 * Each output writes only what the trace lacks: the stacks of new sites
 * (each frame word symbolized once), the sites and case counters whose
 * figures changed (a later record replaces an earlier one), the cases not
 * yet written as ended, and the snapshots, timeline points and leak checks
 * not written yet. A checkpoint's PROCESS record is flagged
 * TRACE_PROC_CHECKPOINT, with the figures as they stood; the warnings come
 * with the image's end. docs/trace-format.md has the reader's rules.
 */
#ifndef MEMSLOPE_TRACE_OUTPUT_H
#define MEMSLOPE_TRACE_OUTPUT_H

#include <stdint.h>
#include <sys/types.h>

struct leak_results;
struct proc_maps;
struct python_frames;
struct recorder;
struct symbol_store;
struct trace_writer;
struct trace_output_state; /* what the trace has of an image; the image's owner keeps it */

/* What an image's LD_PRELOAD held when it started (/proc/PID/environ at
 * its exec): why the shim may not have loaded. */
enum trace_preload {
    TRACE_PRELOAD_UNKNOWN,      /* not read */
    TRACE_PRELOAD_WITH_SHIM,    /* it names memslope's shim */
    TRACE_PRELOAD_UNSET,        /* no LD_PRELOAD: removed on the way (env -i, env -u, a wrapper) */
    TRACE_PRELOAD_WITHOUT_SHIM, /* set, without the shim: replaced on the way (env LD_PRELOAD=...) */
};
#define TRACE_PRELOAD_VALUE_MAX 200 /* bytes of a replaced LD_PRELOAD kept for the warning */

/* What the trace is told of one process image, filled by its owner (the
 * recording engine) at each output. The recorder's figures are read, and
 * what was written is marked in it. */
struct trace_image {
    uint32_t process_id, parent_process_id;
    pid_t pid;
    const char *exe;                    /* NULL: not known */
    uint32_t argc;
    const char *const *argv;
    uint64_t start_ns, end_ns;          /* end_ns: at the image's end */
    uint32_t flags;                     /* enum trace_process_flags */
    int32_t exit_status, exit_signal;
    struct recorder *recorder;
    const struct python_frames *python; /* the Python frames of its sites */
    const struct proc_maps *maps;       /* every mapping seen while it lived: its frames are named from these */
    const struct leak_results *leaks;
    uint32_t stacks_dropped, slots_exhausted; /* its shim's counters */
    uint32_t freeres_outcome, freeres_other_threads; /* enum shm_freeres_outcome, as its shim wrote them */
    int freeres_off;                    /* --no-freeres */
    int region_found;                   /* its own shim region was found (not only a fork parent's copy) */
    int raw_fork_child;                 /* made past glibc's fork: 1 told to stop recording, 2 could not be */
    /* Why figures are missing, said at the image's end: */
    uint64_t invalid_events;            /* events of its region no shim writes, skipped */
    int vfork_child;                    /* it never ran a shim of its own */
    int secure_execution, statically_linked; /* why the shim may not have loaded */
    enum trace_preload preload;         /* what its LD_PRELOAD said at its exec */
    const char *preload_value;          /* TRACE_PRELOAD_WITHOUT_SHIM: the value, cut at TRACE_PRELOAD_VALUE_MAX */
    const char *leak_check_note;        /* why a leak check did not run; NULL: none */
    struct trace_output_state **output; /* *output NULL before the first output, which creates it */
};

/* When the shim never loaded in the image: 1, and message says why (as
 * far as the tracer can tell) and what to do; else 0. */
int trace_image_shim_absent(const struct trace_image *image, char *message, size_t size);

/* The image's end. symbols: the recording's symbol store (symbolize.h).
 * module_base: module ids written so far (ids are global to the trace);
 * advanced past the modules written now. */
int trace_output_process(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                         uint32_t *module_base);

/* A checkpoint of a running image: its figures as they stand at now_ns. */
int trace_output_checkpoint(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                            uint32_t *module_base, uint64_t now_ns);

/* The stacks (with their modules and frames) of the sites new since the
 * image's last output, once there are at least at_least of them (a run of
 * about a million frames a call), written while it runs so that its end
 * has less to do; the image's process record first (as at a checkpoint,
 * at now_ns) unless a checkpoint wrote its figures. 1 when written, 0 when
 * there were fewer, -1 when a write failed. */
int trace_output_new_stacks(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                            uint32_t *module_base, uint64_t now_ns, size_t at_least);

void trace_output_state_free(struct trace_output_state *state);

#endif

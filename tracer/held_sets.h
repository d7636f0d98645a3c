/*
 * held_sets.h - what the tracer does with the threads' held sets (common/
 * shm_layout.h, "The held set"; the shim's side is preload/held_set.h):
 * takes the blocks they hold into the live table when the threads are
 * stopped, so that a leak check sees every live block, and gives a fork
 * child the blocks its copy of the sets holds.
 */
#ifndef MEMSLOPE_HELD_SETS_H
#define MEMSLOPE_HELD_SETS_H

#include <stddef.h>
#include <sys/types.h>

#include "recorder.h"
#include "shm_consumer.h"

/* Takes every block the image's sets hold into recorder, and clears them
 * in its memory (read and written through reader, one of its threads that
 * is stopped: the main thread may be gone). Only while no thread of the
 * image can run its code: every one stopped, ending, or killed; another
 * thread's free takes blocks out of any set. The caller has drained the
 * rings first. The blocks enter the live table at time_ns, read once the
 * threads stopped (the sets keep no stamps). Once every set is taken, the
 * region's held_taken_state says so. Returns the blocks taken, or -1 when a
 * set could not be read or cleared (what was taken stays taken). */
long held_sets_take(struct shm_consumer *consumer, struct recorder *recorder, pid_t reader, uint64_t time_ns);

/* A fork child (pid child, not run yet) has a copy of every set of its
 * parent's threads at the instant of the fork: adds those blocks to the
 * child's live table at time_ns (the child's shim drops its copy).
 * Returns the blocks added, or -1 when a set could not be read. */
long held_sets_inherit(const struct shm_consumer *parent_shm, struct recorder *child, pid_t child_pid,
                       uint64_t time_ns);

#endif

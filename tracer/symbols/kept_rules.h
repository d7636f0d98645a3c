/*
 * kept_rules.h - the unwind rules a recording's shims looked up, kept for
 * the next recording of the same binaries (common/unwind_rules_file.h).
 *
 * A shim looks a call site's rule up in the module's CFI with libdw the
 * first time it unwinds through it, under a guard that blocks signals:
 * python3's start-up needs 1,564 such lookups, 5.8 ms of it. The shim
 * reports each module it meets (build-id, file size, bias) and each rule
 * it looks up in its region; at each image's end the recording collects
 * them, and at its end adds them to the modules' files in the symbol
 * cache's folder, which the shims of the next recording read.
 */
#ifndef MEMSLOPE_KEPT_RULES_H
#define MEMSLOPE_KEPT_RULES_H

#include <stddef.h>
#include <stdint.h>

struct kept_rules;
struct symbol_cache;

/* NULL when out of memory. */
struct kept_rules *kept_rules_create(void);
void kept_rules_destroy(struct kept_rules *kept);

/* Takes what an image's shim reported in its region (common/shm_layout.h,
 * struct shm_unwind_module), once the image has ended or is stopped. The
 * region is the target's: every count and entry is checked. */
void kept_rules_collect(struct kept_rules *kept, void *region);

/* Adds the rules collected to their modules' files in cache, merged with
 * what is there (files not whole are replaced), with the folder's lock
 * held; the files of the modules whose kept rules were read are marked
 * used. Returns 0, or -1 with a message in err when some could not be
 * written (their rules are looked up again next time). */
int kept_rules_save(struct kept_rules *kept, struct symbol_cache *cache, char *err, size_t err_size);

struct kept_rules_stats {
    uint64_t reused;    /* rules the shims read from kept files */
    uint64_t looked_up; /* rules the shims looked up in CFI, in any module */
    uint64_t kept;      /* of those, the ones collected to keep (in a module with a build-id) */
    size_t files_written;
};
void kept_rules_stats(const struct kept_rules *kept, struct kept_rules_stats *stats);

#endif

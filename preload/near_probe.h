/*
 * near_probe.h - the probe order of the shim's lock-free hash tables (the
 * shared stack index and Python code table, the unwinder's rule table):
 * first a short run of slots in the table's first near_slots (its near
 * part), then a longer run in the rest.
 *
 * Why: each page of these tables costs the process that first touches it a
 * page fault and a zeroed page, about 4 us on the machines measured
 * (docs/performance.md, "Round five"), and hashed keys land on random
 * pages: `python3 -c pass` touched every page of the 4 MiB stack index for
 * its ~10,000 stacks, and 500 of the rule table's 512. Keys that find room
 * in the near part stay on its few pages, while a table filling up still
 * has all of its slots.
 *
 * A key's sequence of slots is fixed and a slot, once taken, is never
 * emptied, so the first empty slot in the sequence still means "not in the
 * table", and lookups and inserts need no lock, as with one run of slots.
 */
#ifndef MEMSLOPE_NEAR_PROBE_H
#define MEMSLOPE_NEAR_PROBE_H

#include <stdint.h>

/* The probe-th slot of hash's sequence: near_probes slots from the low 32
 * bits of hash inside the near part, then slots from its high 32 bits past
 * it. The second run never enters the near part: once that is full, a run
 * starting there would find no room before its end. near_slots is a power
 * of two below slots. */
static inline uint32_t near_probe_slot(uint64_t hash, uint32_t probe, uint32_t near_slots, uint32_t near_probes,
                                       uint32_t slots)
{
    if (probe < near_probes)
        return ((uint32_t)hash + probe) & (near_slots - 1);
    uint64_t far = (uint64_t)(uint32_t)(hash >> 32) + (probe - near_probes);
    return near_slots + (uint32_t)(far % (slots - near_slots));
}

#endif

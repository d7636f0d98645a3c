/*
 * breakpoint.h - int3 breakpoints in a traced process (x86-64): planting,
 * recognising a hit, and stepping the displaced instruction. The caller
 * keeps every other thread of the process stopped while a thread steps over
 * a breakpoint, so no thread can run through the unplanted address.
 */
#ifndef MEMSLOPE_BREAKPOINT_H
#define MEMSLOPE_BREAKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum breakpoint_kind {
    BREAKPOINT_ENTRY,     /* the program's entry point: its libraries are loaded */
    BREAKPOINT_ITERATION, /* --iteration SYMBOL */
    BREAKPOINT_DLOPEN,    /* ld.so's _dl_debug_state: a library came or went */
    BREAKPOINT_CASE_END,  /* the shim's memslope_case_end: leak check at the case's end */
    BREAKPOINT_MARKER_ITERATION, /* the shim's memslope_iteration, for --leak-check iterations */
    BREAKPOINT_CASE_OPENS, /* the shim's memslope__case_opens: take the held sets before a case */
};

struct breakpoint {
    uint64_t address;
    uint8_t original; /* the byte int3 replaced */
    uint8_t kind;     /* enum breakpoint_kind */
    uint8_t planted;
};

struct breakpoint_set {
    struct breakpoint *items;
    size_t count;
};

/* Plants an int3 at address (once; planting twice is a no-op). 0 or -1. */
int breakpoint_plant(pid_t tid, struct breakpoint_set *set, uint64_t address, enum breakpoint_kind kind);

/* The breakpoint a SIGTRAP stop of tid was caused by (rip - 1), or NULL.
 * It may have been taken out since the thread trapped on it (a thread held
 * while another thread's stop removed it): planted is then 0, and the
 * thread only has to step over it. */
struct breakpoint *breakpoint_hit(pid_t tid, struct breakpoint_set *set);

/* Restores the original byte and rewinds rip to the breakpoint, executes
 * that one instruction, and plants the int3 again unless keep is 0. A
 * signal that arrived meanwhile is returned in *pending_signal for the
 * caller to deliver when it resumes the thread. 0, or -1 if the thread is
 * gone. */
int breakpoint_step_over(pid_t tid, struct breakpoint *breakpoint, int keep, int *pending_signal);

/* Removes every planted breakpoint (the process keeps running without us). */
void breakpoint_remove_all(pid_t tid, struct breakpoint_set *set);

/* A fork child's copy of the set (the child's memory holds the same int3s). */
int breakpoint_set_copy(struct breakpoint_set *to, const struct breakpoint_set *from);
void breakpoint_set_free(struct breakpoint_set *set);

#endif

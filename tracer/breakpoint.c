/* breakpoint.c - see breakpoint.h. */
#include "breakpoint.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#define INT3 0xcc

static int poke_byte(pid_t tid, uint64_t address, uint8_t byte, uint8_t *previous)
{
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, tid, (void *)address, 0);
    if (errno)
        return -1;
    if (previous)
        *previous = (uint8_t)(word & 0xff);
    word = (word & ~0xffL) | byte;
    return ptrace(PTRACE_POKEDATA, tid, (void *)address, (void *)word) < 0 ? -1 : 0;
}

int breakpoint_plant(pid_t tid, struct breakpoint_set *set, uint64_t address, enum breakpoint_kind kind)
{
    for (size_t i = 0; i < set->count; i++) {
        if (set->items[i].address != address)
            continue;
        if (set->items[i].planted)
            return 0;
        if (poke_byte(tid, address, INT3, &set->items[i].original) < 0)
            return -1;
        set->items[i].planted = 1;
        return 0;
    }
    struct breakpoint *grown = realloc(set->items, (set->count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    set->items = grown;
    struct breakpoint *breakpoint = &set->items[set->count];
    *breakpoint = (struct breakpoint){.address = address, .kind = (uint8_t)kind};
    if (poke_byte(tid, address, INT3, &breakpoint->original) < 0)
        return -1;
    breakpoint->planted = 1;
    set->count++;
    return 0;
}

struct breakpoint *breakpoint_hit(pid_t tid, struct breakpoint_set *set)
{
    struct user_regs_struct regs;
    if (!set->count || ptrace(PTRACE_GETREGS, tid, 0, &regs) < 0)
        return NULL;
    for (size_t i = 0; i < set->count; i++)
        if (set->items[i].address == regs.rip - 1)
            return &set->items[i];
    return NULL;
}

int breakpoint_step_over(pid_t tid, struct breakpoint *breakpoint, int keep, int *pending_signal)
{
    struct user_regs_struct regs;
    *pending_signal = 0;
    if (ptrace(PTRACE_GETREGS, tid, 0, &regs) < 0)
        return -1;
    regs.rip = breakpoint->address;
    if (ptrace(PTRACE_SETREGS, tid, 0, &regs) < 0 || poke_byte(tid, breakpoint->address, breakpoint->original, NULL) < 0)
        return -1;
    breakpoint->planted = 0;
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
            return -1;
        int status;
        pid_t got;
        do
            got = waitpid(tid, &status, __WALL);
        while (got < 0 && errno == EINTR);
        if (got != tid || !WIFSTOPPED(status))
            return -1;
        int signal = WSTOPSIG(status);
        if (signal == SIGTRAP && (status >> 16) == 0)
            break;
        /* A signal that came first: hold it back until the step is done
         * (the instruction has not run yet), deliver it on resume. */
        if ((status >> 16) == 0)
            *pending_signal = signal;
    }
    if (keep && poke_byte(tid, breakpoint->address, INT3, NULL) == 0)
        breakpoint->planted = 1;
    return 0;
}

void breakpoint_remove_all(pid_t tid, struct breakpoint_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        if (set->items[i].planted && poke_byte(tid, set->items[i].address, set->items[i].original, NULL) == 0)
            set->items[i].planted = 0;
}

int breakpoint_set_copy(struct breakpoint_set *to, const struct breakpoint_set *from)
{
    to->items = NULL;
    to->count = 0;
    if (!from->count)
        return 0;
    to->items = malloc(from->count * sizeof *to->items);
    if (!to->items)
        return -1;
    memcpy(to->items, from->items, from->count * sizeof *to->items);
    to->count = from->count;
    return 0;
}

void breakpoint_set_free(struct breakpoint_set *set)
{
    free(set->items);
    set->items = NULL;
    set->count = 0;
}

/*
 * sigtrap_guard.h - keeps the target's own SIGTRAP handler alive across our
 * breakpoints (x86-64).
 *
 * An int3 (or a single step) raises SIGTRAP by force: when SIGTRAP is
 * blocked in the thread, as it is inside the program's own SIGTRAP handler,
 * or ignored, the kernel resets its disposition to the default and unblocks
 * it before the tracer even sees the stop (force_sig_info_to_task). The
 * tracer then swallows the trap, but the handler is gone, and the program's
 * next SIGTRAP kills it (issue 19: `--iteration` on the program's SIGTRAP
 * handler ended it with signal 5 at its second trap).
 *
 * So, once the program has shown a SIGTRAP handler of its own (or ignores
 * SIGTRAP): the tracer reads the disposition (rt_sigaction run in the
 * stopped thread) whenever it passes the program a SIGTRAP, and after each
 * breakpoint it checks whether it was reset; if it was, it installs it
 * again and, for a handler, blocks SIGTRAP in that thread again, as it was. The system calls run in the stopped thread
 * on a `syscall` instruction of the vDSO, so no code is written and no other
 * thread can run into them.
 */
#ifndef MEMSLOPE_SIGTRAP_GUARD_H
#define MEMSLOPE_SIGTRAP_GUARD_H

#include <stdint.h>
#include <sys/types.h>

/* The kernel's struct sigaction for rt_sigaction (x86-64). */
struct kernel_sigaction {
    uint64_t handler, flags, restorer, mask;
};

struct sigtrap_guard {
    uint64_t syscall_address; /* a `syscall` instruction in the vDSO; 0: not looked for yet */
    int no_syscall;           /* none was found: the guard does nothing */
    int known;                /* action holds the program's SIGTRAP handler */
    struct kernel_sigaction action;
};

enum sigtrap_disposition { SIGTRAP_DEFAULT, SIGTRAP_IGNORED, SIGTRAP_CAUGHT };

/* What the program does with SIGTRAP, from /proc/TID/status. */
int sigtrap_disposition(pid_t tid);

/* tid, stopped with the program's own SIGTRAP about to be delivered (to its
 * handler, or ignored): remembers the disposition. */
void sigtrap_guard_remember(struct sigtrap_guard *guard, pid_t pid, pid_t tid);

/* tid, stopped after one of our breakpoints: if the trap reset the
 * remembered handler, installs it again and blocks SIGTRAP in tid again.
 * A signal that arrived meanwhile goes to *pending_signal (when it has none
 * yet). Returns 1 when it repaired, 0 when nothing was needed, -1 when it
 * could not. */
int sigtrap_guard_repair(struct sigtrap_guard *guard, pid_t pid, pid_t tid, int *pending_signal);

/* Runs one system call in the stopped thread tid at syscall_address (a
 * `syscall` instruction), its registers restored afterwards. 0 with the
 * call's return value in *result, or -1 when the thread could not be
 * stepped. */
int sigtrap_guard_syscall(pid_t tid, uint64_t syscall_address, long number, const long args[4], long *result,
                          int *pending_signal);

/* The address of a `syscall` instruction in pid's vDSO, or 0. */
uint64_t sigtrap_guard_find_syscall(pid_t pid);

#endif

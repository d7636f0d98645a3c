/*
 * exit_check.h - the shim's half of the leak check at exit in no-ptrace
 * mode (see shm_layout.h, "Messages on SHM_ENV_SOCKET", and
 * docs/internals.md, "Without ptrace").
 *
 * Without ptrace the tracer cannot read the target's memory. So at its
 * exit the process opens its own /proc/self/mem and /proc/self/maps, hands
 * them to the tracer with the exiting thread's stack pointer and
 * callee-saved registers, and waits while the tracer scans.
 *
 * Everything here uses system calls only: no allocator, no locks, errno
 * kept, so it may run from _exit in a signal handler or in a vfork child
 * (where it does nothing: the pid is not the armed one).
 */
#ifndef MEMSLOPE_EXIT_CHECK_H
#define MEMSLOPE_EXIT_CHECK_H

#include <stdbool.h>
#include <sys/types.h>

/* Called once per process image from the shim's constructor, after the
 * recording decision. Arms the check only in no-ptrace mode
 * (SHM_ENV_NO_PTRACE "1" and a socket in SHM_ENV_SOCKET) and when this
 * process records; the shim's exit handler then runs it after every
 * destructor (see exit_check.c). Does nothing otherwise. */
void shm_exit_check_arm(bool recording, pid_t tracer_pid);

/* Runs the check once per process image, from the thread that exits:
 * from exit() (the handler armed above) or from the interposed
 * _exit/_Exit. Returns at once when not armed, in another process (a fork
 * or vfork child), or when it already ran. */
void shm_exit_check_run(void);

/* exit_group(status), as glibc's _exit does it. */
__attribute__((noreturn)) void shm_exit_group(int status);

#endif

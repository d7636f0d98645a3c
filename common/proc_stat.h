/*
 * proc_stat.h - the fields of /proc/PID/stat that memslope asks about:
 * the process's state letter and its kernel flags. Used by `memslope leaks`
 * and the leak scan's attach, to say what a process is before blaming
 * permissions.
 */
#ifndef MEMSLOPE_PROC_STAT_H
#define MEMSLOPE_PROC_STAT_H

#include <stdint.h>
#include <sys/types.h>

#define PROC_STAT_KERNEL_THREAD 0x00200000u /* PF_KTHREAD in flags */

struct proc_stat {
    char state;     /* 'R', 'S', 'Z', ... */
    uint64_t flags; /* the task's PF_* flags */
};

/* Reads /proc/PID/stat. Returns 0, or -1 when it cannot be read or parsed
 * (the process is gone). */
int proc_stat_read(pid_t pid, struct proc_stat *fields);

#endif

/*
 * proc_stat.h - what memslope asks /proc/PID/stat and /proc/PID/status
 * about a process: its state letter, its kernel flags, a status field.
 * Used by `memslope leaks` and the leak scan's attach, to say what a
 * process is before blaming permissions.
 */
#ifndef MEMSLOPE_PROC_STAT_H
#define MEMSLOPE_PROC_STAT_H

#include <stddef.h>
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

/* The value of a field of /proc/PID/status ("Tgid", "TracerPid",
 * "CapEff"), its leading blanks and newline left out; "" when the file or
 * the field is missing. pid 0: this process's own. */
void proc_status_field(pid_t pid, const char *name, char *value, size_t size);

#endif

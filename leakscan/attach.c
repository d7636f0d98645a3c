/*
 * attach.c - stopping every thread of a running process for
 * `memslope leaks PID`, and letting it go exactly as it was.
 *
 * PTRACE_SEIZE does not stop or signal the thread; PTRACE_INTERRUPT then
 * stops it in a PTRACE_EVENT_STOP that the target cannot observe. A signal
 * that arrives meanwhile shows up as a signal-delivery-stop: that also
 * stops the thread, and the signal is handed back at detach.
 */
#include "leakscan.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "../common/error_buffer.h"
#include "../common/proc_stat.h"
#define MAX_PASSES 1000 /* re-listing /proc/PID/task until it is stable */

struct stopping {
    struct leakscan_stopped *stopped;
    size_t capacity;
};

static bool is_stopped(const struct stopping *s, pid_t tid)
{
    for (size_t i = 0; i < s->stopped->tid_count; i++)
        if (s->stopped->tids[i] == tid)
            return true;
    return false;
}

static int remember(struct stopping *s, pid_t tid, int signal)
{
    if (s->stopped->tid_count == s->capacity) {
        size_t capacity = s->capacity ? 2 * s->capacity : 16;
        pid_t *tids = realloc(s->stopped->tids, capacity * sizeof *tids);
        if (tids)
            s->stopped->tids = tids;
        int *signals = realloc(s->stopped->signals, capacity * sizeof *signals);
        if (signals)
            s->stopped->signals = signals;
        if (!tids || !signals)
            return -1;
        s->capacity = capacity;
    }
    s->stopped->signals[s->stopped->tid_count] = signal;
    s->stopped->tids[s->stopped->tid_count++] = tid;
    return 0;
}

static bool is_kernel_thread(pid_t pid)
{
    struct proc_stat fields;
    return proc_stat_read(pid, &fields) == 0 && (fields.flags & PROC_STAT_KERNEL_THREAD);
}

/* Why PTRACE_SEIZE said EPERM, as far as /proc tells, and what to do. */
static void explain_ptrace_refusal(pid_t pid, char *why, size_t size)
{
    char tracer[32], capabilities[32];
    proc_status_field(pid, "TracerPid", tracer, sizeof tracer);
    proc_status_field(0, "CapEff", capabilities, sizeof capabilities);
    bool may_ptrace_anyone = strtoull(capabilities, NULL, 16) >> 19 & 1; /* CAP_SYS_PTRACE */
    if (is_kernel_thread(pid))
        snprintf(why, size, "it is a kernel thread, which has no user memory to scan");
    else if (atoi(tracer) > 0)
        snprintf(why, size,
                 "it is already being traced, by process %d (a debugger, strace, or memslope record, whose "
                 "leak checks at each case end and at exit need no memslope leaks); detach that first",
                 atoi(tracer));
    else if (may_ptrace_anyone)
        snprintf(why, size,
                 "the kernel's ptrace access check refused although memslope has CAP_SYS_PTRACE: the process holds "
                 "capabilities memslope lacks, runs in a user namespace memslope is not privileged in, or a "
                 "security module (Yama's ptrace_scope 3, SELinux, AppArmor) forbids it");
    else
        snprintf(why, size,
                 "the kernel's ptrace access check refused: run memslope as the same user as the process (and "
                 "not against a setuid or otherwise undumpable program), or with CAP_SYS_PTRACE (e.g. sudo), "
                 "and check /proc/sys/kernel/yama/ptrace_scope (1 allows only descendants: set it to 0, or use "
                 "sudo)");
}

/* Waits for the stop of one seized and interrupted thread. Returns 1 when
 * stopped (with *signal to hand back), 0 when the thread exited, -1 on an
 * error. */
static int wait_for_stop(pid_t tid, int *signal)
{
    for (;;) {
        int status;
        pid_t got = waitpid(tid, &status, __WALL);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno == ECHILD ? 0 : -1;
        if (WIFEXITED(status) || WIFSIGNALED(status))
            return 0;
        if (!WIFSTOPPED(status))
            continue;
        int event = status >> 16, sig = WSTOPSIG(status);
        /* PTRACE_EVENT_STOP: our interrupt, or a group-stop (the process
         * was stopped already); both keep the thread as it was. */
        *signal = event == PTRACE_EVENT_STOP ? 0 : (event == 0 ? sig : 0);
        return 1;
    }
}

/* Seizes and stops one thread. Returns 1 stopped, 0 gone, -1 error. */
static int stop_thread(struct stopping *s, pid_t tid, char *err, size_t err_size)
{
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0) {
        if (errno == ESRCH)
            return 0;
        if (errno == EPERM) {
            char why[512];
            explain_ptrace_refusal(tid, why, sizeof why);
            error_printf(err, err_size, "cannot attach to process %d (thread %d): %s", (int)s->stopped->pid, (int)tid,
                         why);
        } else
            error_printf(err, err_size, "cannot attach to process %d (thread %d): %s", (int)s->stopped->pid, (int)tid,
                      strerror(errno));
        return -1;
    }
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 && errno != ESRCH) {
        error_printf(err, err_size, "cannot stop thread %d of process %d: %s", (int)tid, (int)s->stopped->pid,
                  strerror(errno));
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        return -1;
    }
    int signal = 0;
    int rc = wait_for_stop(tid, &signal);
    if (rc == 1 && remember(s, tid, signal) < 0) {
        ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)signal);
        error_printf(err, err_size, "out of memory while stopping process %d", (int)s->stopped->pid);
        return -1;
    }
    if (rc < 0)
        error_printf(err, err_size, "waiting for thread %d of process %d to stop failed: %s", (int)tid,
                  (int)s->stopped->pid, strerror(errno));
    return rc;
}

/* One pass over /proc/PID/task. Returns the number of threads newly
 * stopped, or -1. */
static int stop_listed_threads(struct stopping *s, char *err, size_t err_size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)s->stopped->pid);
    DIR *dir = opendir(path);
    if (!dir) {
        error_printf(err, err_size, "process %d exited while it was being stopped", (int)s->stopped->pid);
        return -1;
    }
    int added = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (tid <= 0 || is_stopped(s, tid))
            continue;
        int rc = stop_thread(s, tid, err, err_size);
        if (rc < 0) {
            closedir(dir);
            return -1;
        }
        added += rc;
    }
    closedir(dir);
    return added;
}

int leakscan_stop_process(pid_t pid, struct leakscan_stopped *stopped, char *err, size_t err_size)
{
    memset(stopped, 0, sizeof *stopped);
    stopped->pid = pid;
    if (kill(pid, 0) < 0 && errno == ESRCH) {
        error_printf(err, err_size, "no process with pid %d (check the number with ps)", (int)pid);
        return -1;
    }
    struct stopping s = {.stopped = stopped};
    int added = 0, passes = 0;
    do {
        added = stop_listed_threads(&s, err, err_size);
    } while (added > 0 && ++passes < MAX_PASSES);
    if (added == 0 && !is_stopped(&s, pid)) {
        error_printf(err, err_size, "process %d exited while it was being stopped", (int)pid);
        added = -1;
    }
    if (added != 0) {
        if (added > 0)
            error_printf(err, err_size, "process %d keeps creating threads; could not stop them all", (int)pid);
        leakscan_detach(stopped);
        return -1;
    }
    return 0;
}

void leakscan_detach(struct leakscan_stopped *stopped)
{
    for (size_t i = 0; i < stopped->tid_count; i++)
        ptrace(PTRACE_DETACH, stopped->tids[i], NULL, (void *)(long)stopped->signals[i]);
    free(stopped->tids);
    free(stopped->signals);
    stopped->tids = NULL;
    stopped->signals = NULL;
    stopped->tid_count = 0;
}

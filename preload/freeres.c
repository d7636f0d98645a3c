/*
 * freeres.c - see freeres.h.
 *
 * memcheck runs the two functions when the program ends (exit, _exit or a
 * raw exit_group; not when a signal kills it), in the thread that ends it,
 * after killing every other thread: __gnu_cxx::__freeres first, then
 * __libc_freeres. The shim runs them from exit() after every handler and
 * destructor (see exit_check.c for why its handler runs that late) and
 * from the interposed _exit/_Exit; the leak check comes after, at the
 * exit_group stop with ptrace or in the same handler without. The blocks
 * they free are recorded as frees, as memcheck counts them.
 *
 * A process cannot kill its other threads first, and they may still use
 * what freeres frees (locale, stdio, NSS data), so freeres runs only when
 * the calling thread is the last one (threads that are exiting do not
 * count: a joined thread may still be on its way out of the kernel).
 * Nor from a signal handler, which may have interrupted malloc or stdio
 * holding a lock that freeres would take again. Both are read from /proc
 * and the signal state with system calls only: no allocation, no lock.
 */
#include "freeres.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elf_lookup.h"
#include "../common/shm_layout.h"

/* The kernel's flag of a handler with a return address of its own
 * (arch/x86/include/uapi/asm/signal.h); glibc sets it on every handler it
 * installs, and its sigaction reports it, but its headers do not name it. */
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* The kernel's task flag set when a thread starts exiting (include/linux/sched.h). */
#define TASK_FLAG_EXITING 0x00000004u

static struct {
    bool armed;
    pid_t pid; /* the image's process: not a vfork child running in its memory */
    int done;
    void (*cxx_freeres)(void);
    void (*libc_freeres)(void);
} freeres;

/* Looked up once, from the constructor: among the objects loaded with the
 * program. memcheck's preload reaches __gnu_cxx::__freeres through a weak
 * reference bound when it is loaded, so a libstdc++ that a dlopen brings
 * later (a C++ extension of Python) keeps its pool there too. */
void shm_freeres_arm(bool recording)
{
    const char *skip = getenv(SHM_ENV_NO_FREERES);
    if (!recording || (skip && skip[0] == '1'))
        return;
    freeres.cxx_freeres = (void (*)(void))shm_find_function("_ZN9__gnu_cxx9__freeresEv", 0, 0);
    freeres.libc_freeres = (void (*)(void))shm_find_function("__libc_freeres", 0, 0);
    freeres.pid = getpid();
    freeres.armed = true;
}

void shm_freeres_forked(void)
{
    if (!freeres.armed)
        return;
    freeres.pid = getpid();
    __atomic_store_n(&freeres.done, 0, __ATOMIC_RELAXED);
}

/* Whether the task tid of this process still runs (or may run) user code:
 * not a zombie, not dead, not exiting. */
static bool task_still_runs(const char *tid)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT; /* gone meanwhile; anything else: assume it runs */
    ssize_t n = read(fd, text, sizeof text - 1);
    int read_errno = errno;
    close(fd);
    if (n < 0 && read_errno == ESRCH)
        return false; /* reaped between the open and the read */
    if (n <= 0)
        return true;
    text[n] = '\0';
    /* "tid (comm) S ppid pgrp session tty tpgid flags ...": comm may hold
     * anything, so fields are counted from its closing parenthesis. */
    const char *field = strrchr(text, ')');
    if (!field || field[1] != ' ')
        return true;
    char state = field[2];
    if (state == 'Z' || state == 'X' || state == 'x')
        return false;
    field += 2;
    for (int skip = 0; skip < 6 && field; skip++) {
        field = strchr(field, ' ');
        if (field)
            field++;
    }
    unsigned long flags = field ? strtoul(field, NULL, 10) : 0;
    return !(flags & TASK_FLAG_EXITING);
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* How many other threads of this process still run (0: the calling thread
 * is the last one), or THREADS_UNKNOWN when the task list cannot be read:
 * freeres must not run when that cannot be told. */
#define THREADS_UNKNOWN UINT32_MAX

static uint32_t other_threads_running(void)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return THREADS_UNKNOWN;
    char self[24];
    snprintf(self, sizeof self, "%ld", (long)syscall(SYS_gettid));
    uint32_t others = 0;
    _Alignas(8) char buffer[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buffer, sizeof buffer)) > 0) {
        for (long offset = 0; offset < n;) {
            const struct linux_dirent64 *entry = (const struct linux_dirent64 *)(buffer + offset);
            offset += entry->d_reclen;
            if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9' && strcmp(entry->d_name, self) != 0 &&
                task_still_runs(entry->d_name))
                others++;
        }
    }
    close(fd);
    return n == 0 ? others : THREADS_UNKNOWN;
}

/* A handler runs with its own signal blocked (unless SA_NODEFER): a
 * blocked signal that has a handler means this may be one. A program that
 * blocks a caught signal for its own reasons (GNU make blocks SIGCHLD for
 * its whole run) is told apart by the caller's stack: *restorer gets
 * the return address the kernel gives such a handler (sa_restorer, glibc's
 * __restore_rt), NULL if none is known. */
static bool maybe_in_signal_handler(void **restorer)
{
    *restorer = NULL;
    sigset_t blocked;
    if (sigprocmask(SIG_BLOCK, NULL, &blocked) != 0)
        return true;
    bool maybe = false;
    for (int signal = 1; signal < NSIG; signal++) {
        if (sigismember(&blocked, signal) != 1)
            continue;
        struct sigaction action;
        if (sigaction(signal, NULL, &action) != 0)
            continue; /* glibc's own signals (cancellation, setxid) */
        if (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN)
            continue;
        maybe = true;
        if (!(action.sa_flags & SA_RESTORER)) {
            *restorer = NULL; /* a handler that returns elsewhere: its stack cannot tell */
            return true;
        }
        if (*restorer && *restorer != (void *)action.sa_restorer) {
            *restorer = NULL;
            return true;
        }
        *restorer = (void *)action.sa_restorer;
    }
    return maybe;
}

enum shm_freeres_outcome shm_freeres_run(uint32_t *other_threads, shm_freeres_handler_probe in_handler,
                                         const void *stack_from)
{
    *other_threads = 0;
    /* The pid first: a vfork child shares this memory. */
    if (!freeres.armed || getpid() != freeres.pid || __atomic_load_n(&freeres.done, __ATOMIC_ACQUIRE))
        return SHM_FREERES_NOT_REACHED;
    int saved_errno = errno;
    enum shm_freeres_outcome outcome = SHM_FREERES_RAN;
    void *restorer;
    if (maybe_in_signal_handler(&restorer) && !(restorer && in_handler && in_handler(restorer, stack_from) == 0))
        outcome = SHM_FREERES_SIGNAL_HANDLER;
    else if ((*other_threads = other_threads_running()) == THREADS_UNKNOWN) {
        *other_threads = 0;
        outcome = SHM_FREERES_THREADS_UNKNOWN;
    } else if (*other_threads != 0)
        outcome = SHM_FREERES_OTHER_THREADS;
    else if (__atomic_exchange_n(&freeres.done, 1, __ATOMIC_ACQ_REL))
        outcome = SHM_FREERES_NOT_REACHED;
    else {
        if (freeres.cxx_freeres)
            freeres.cxx_freeres();
        if (freeres.libc_freeres)
            freeres.libc_freeres();
    }
    errno = saved_errno;
    return outcome;
}

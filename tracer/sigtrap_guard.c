/* sigtrap_guard.c - see sigtrap_guard.h. */
#include "sigtrap_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIG_DFL_VALUE 0
#define SIG_IGN_VALUE 1 /* the kernel's SIG_DFL and SIG_IGN */

int sigtrap_disposition(pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    FILE *status = fopen(path, "re");
    if (!status)
        return SIGTRAP_DEFAULT;
    unsigned long long caught = 0, ignored = 0;
    while (fgets(line, sizeof line, status)) {
        if (strncmp(line, "SigCgt:", 7) == 0)
            caught = strtoull(line + 7, NULL, 16);
        else if (strncmp(line, "SigIgn:", 7) == 0)
            ignored = strtoull(line + 7, NULL, 16);
    }
    fclose(status);
    unsigned long long bit = 1ull << (SIGTRAP - 1);
    return caught & bit ? SIGTRAP_CAUGHT : ignored & bit ? SIGTRAP_IGNORED : SIGTRAP_DEFAULT;
}

uint64_t sigtrap_guard_find_syscall(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "re");
    unsigned long long start = 0, end = 0;
    int found = 0;
    while (maps && !found && fgets(line, sizeof line, maps))
        found = strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &start, &end) == 2;
    if (maps)
        fclose(maps);
    if (!found || end <= start || end - start > (1u << 20))
        return 0;
    size_t size = (size_t)(end - start);
    unsigned char *code = malloc(size);
    struct iovec local = {code, size}, remote = {(void *)(uintptr_t)start, size};
    uint64_t address = 0;
    /* Any 0f 05 decodes as `syscall` when jumped to, whatever instruction
     * it sits inside. */
    if (code && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)size)
        for (size_t i = 0; i + 1 < size && !address; i++)
            if (code[i] == 0x0f && code[i + 1] == 0x05)
                address = start + i;
    free(code);
    return address;
}

int sigtrap_guard_syscall(pid_t tid, uint64_t syscall_address, long number, const long args[4], long *result,
                          int *pending_signal)
{
    struct user_regs_struct saved, regs;
    if (ptrace(PTRACE_GETREGS, tid, 0, &saved) < 0)
        return -1;
    regs = saved;
    regs.rip = syscall_address;
    regs.rax = (unsigned long long)number;
    regs.orig_rax = (unsigned long long)-1; /* no system call to restart */
    regs.rdi = (unsigned long long)args[0];
    regs.rsi = (unsigned long long)args[1];
    regs.rdx = (unsigned long long)args[2];
    regs.r10 = (unsigned long long)args[3];
    if (ptrace(PTRACE_SETREGS, tid, 0, &regs) < 0)
        return -1;
    int rc = -1;
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
            break;
        int status;
        pid_t got;
        do
            got = waitpid(tid, &status, __WALL);
        while (got < 0 && errno == EINTR);
        if (got != tid || !WIFSTOPPED(status))
            return -1; /* gone: nothing to restore */
        if (WSTOPSIG(status) == SIGTRAP && (status >> 16) == 0) {
            rc = ptrace(PTRACE_GETREGS, tid, 0, &regs) == 0 ? 0 : -1;
            break;
        }
        /* A signal that came first: delivered when the thread resumes. */
        if ((status >> 16) == 0 && pending_signal && !*pending_signal)
            *pending_signal = WSTOPSIG(status);
    }
    if (rc == 0)
        *result = (long)regs.rax;
    ptrace(PTRACE_SETREGS, tid, 0, &saved);
    return rc;
}

/* Where a struct kernel_sigaction fits in the thread's stack: below its
 * red zone, which nothing uses while it is stopped. */
static uint64_t scratch_address(pid_t tid)
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, 0, &regs) < 0)
        return 0;
    return (regs.rsp - 128 - sizeof(struct kernel_sigaction)) & ~15ull;
}

static int ensure_syscall(struct sigtrap_guard *guard, pid_t pid)
{
    if (!guard->syscall_address && !guard->no_syscall) {
        guard->syscall_address = sigtrap_guard_find_syscall(pid);
        guard->no_syscall = guard->syscall_address == 0;
    }
    return guard->syscall_address ? 0 : -1;
}

/* rt_sigaction(SIGTRAP, set, get) in tid; set and get are copied through
 * the thread's stack. */
static int thread_sigaction(struct sigtrap_guard *guard, pid_t tid, const struct kernel_sigaction *set,
                            struct kernel_sigaction *get, int *pending_signal)
{
    uint64_t scratch = scratch_address(tid);
    if (!scratch)
        return -1;
    uint64_t words[4];
    if (set) {
        memcpy(words, set, sizeof words);
        for (int i = 0; i < 4; i++)
            if (ptrace(PTRACE_POKEDATA, tid, (void *)(scratch + 8 * (uint64_t)i), (void *)words[i]) < 0)
                return -1;
    }
    long args[4] = {SIGTRAP, set ? (long)scratch : 0, get ? (long)scratch : 0, 8};
    long result;
    if (sigtrap_guard_syscall(tid, guard->syscall_address, SYS_rt_sigaction, args, &result, pending_signal) < 0 ||
        result != 0)
        return -1;
    for (int i = 0; get && i < 4; i++) {
        errno = 0;
        words[i] = (uint64_t)ptrace(PTRACE_PEEKDATA, tid, (void *)(scratch + 8 * (uint64_t)i), 0);
        if (errno)
            return -1;
    }
    if (get)
        memcpy(get, words, sizeof words);
    return 0;
}

void sigtrap_guard_remember(struct sigtrap_guard *guard, pid_t pid, pid_t tid)
{
    struct kernel_sigaction action;
    if (ensure_syscall(guard, pid) < 0 || thread_sigaction(guard, tid, NULL, &action, NULL) < 0)
        return;
    guard->action = action;
    guard->known = action.handler != SIG_DFL_VALUE;
}

int sigtrap_guard_repair(struct sigtrap_guard *guard, pid_t pid, pid_t tid, int *pending_signal)
{
    if (!guard->known || sigtrap_disposition(tid) != SIGTRAP_DEFAULT)
        return 0;
    /* Caught or ignored before, default now: our trap found SIGTRAP
     * ignored, or blocked (its handler was running), and reset it. */
    if (ensure_syscall(guard, pid) < 0 || thread_sigaction(guard, tid, &guard->action, NULL, pending_signal) < 0)
        return -1;
    if (guard->action.handler == SIG_IGN_VALUE)
        return 1; /* ignored: whether it was also blocked cannot be told */
    uint64_t mask; /* the kernel's sigset: 8 bytes */
    if (ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof mask, &mask) == 0) {
        mask |= 1ull << (SIGTRAP - 1);
        ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask);
    }
    return 1;
}

/*
 * exit_check.c - see exit_check.h.
 *
 * When it runs: from the shim's exit handler (preload/shim.c,
 * arm_end_of_image), after the program's atexit handlers and every
 * destructor, as late as the exit_group stop where ptrace mode checks, and
 * after glibc's and libstdc++'s freeres; or from the interposed _exit.
 */
#include "exit_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/shm_layout.h"
#include "shm_region.h"

/* How often the waiting thread checks that the tracer still exists. */
#define REPLY_POLL_MS 100
/* Dead stack zeroed below the caller before the request is built: what
 * the program's calls left there (pointers to blocks it has lost) would
 * otherwise show through the uninitialised slots of our own frames, which
 * the scan reads as the exiting thread's stack. */
#define DEAD_STACK_SCRUB 1024

/* The shim's process-wide state for the check; one per process image. */
static struct {
    int socket_fd;        /* -1: not armed */
    dev_t socket_device;  /* the socket as it was armed: the program may */
    ino_t socket_inode;   /* close it and reuse its number for another */
    pid_t pid;
    pid_t tracer_pid;
    int done;             /* the check ran (or is running) */
} armed = {.socket_fd = -1};

void shm_exit_check_arm(bool recording, pid_t tracer_pid)
{
    const char *no_ptrace = getenv(SHM_ENV_NO_PTRACE);
    uint64_t socket_fd = shm_parse_u64(getenv(SHM_ENV_SOCKET), UINT64_MAX);
    if (!recording || !no_ptrace || no_ptrace[0] != '1' || socket_fd > INT_MAX || armed.socket_fd >= 0)
        return;
    int saved_errno = errno;
    struct stat status;
    if (fstat((int)socket_fd, &status) == 0 && S_ISSOCK(status.st_mode)) {
        armed.socket_device = status.st_dev;
        armed.socket_inode = status.st_ino;
        armed.pid = getpid();
        armed.tracer_pid = tracer_pid;
        armed.socket_fd = (int)socket_fd;
    }
    errno = saved_errno;
}

/* Never hand /proc/self/mem to a stranger: the descriptor must still be
 * the socket memslope gave us. */
static bool socket_still_ours(void)
{
    struct stat status;
    return fstat(armed.socket_fd, &status) == 0 && S_ISSOCK(status.st_mode) &&
           status.st_dev == armed.socket_device && status.st_ino == armed.socket_inode;
}

static __attribute__((noinline)) void scrub_dead_stack(void)
{
    volatile char area[DEAD_STACK_SCRUB];
    for (size_t i = 0; i < sizeof area; i++)
        area[i] = 0;
}

/* Blocks until the tracer's reply, or until the tracer is gone. */
static void wait_for_reply(void)
{
    struct pollfd readable = {.fd = armed.socket_fd, .events = POLLIN};
    for (;;) {
        int ready = poll(&readable, 1, REPLY_POLL_MS);
        if (ready < 0 && errno != EINTR)
            return;
        if (ready > 0) {
            char byte;
            ssize_t n = recv(armed.socket_fd, &byte, 1, MSG_DONTWAIT);
            if (n == 1 && byte == SHM_EXIT_CHECK_REPLY)
                return;
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                return;
            if (n < 0 && (readable.revents & (POLLHUP | POLLERR)))
                return; /* the tracer's end is closed */
            continue;   /* a stray byte: keep waiting for ours */
        }
        if (ready == 0 && kill(armed.tracer_pid, 0) < 0 && errno == ESRCH)
            return;
    }
}

/* The calling thread's stack pointer and callee-saved registers, as roots:
 * they may hold the only pointer to a block (the caller's values are here,
 * or saved in our frames above the stack pointer, which are scanned). */
static inline __attribute__((always_inline)) void capture_thread_state(struct shm_exit_check_request *request)
{
#if defined(__x86_64__)
    uint64_t sp;
    __asm__ volatile("movq %%rbx, 0(%0)\n\t"
                     "movq %%rbp, 8(%0)\n\t"
                     "movq %%r12, 16(%0)\n\t"
                     "movq %%r13, 24(%0)\n\t"
                     "movq %%r14, 32(%0)\n\t"
                     "movq %%r15, 40(%0)\n\t"
                     :
                     : "r"(request->registers)
                     : "memory");
    __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
    request->register_count = SHM_EXIT_CHECK_REGISTERS;
    request->stack_pointer = sp;
#else
    /* Other architectures: no registers; a local's address is the stack
     * pointer near enough (the frames below it are ours). */
    volatile char here = 0;
    request->register_count = 0;
    request->stack_pointer = (uint64_t)(uintptr_t)&here;
#endif
}

static __attribute__((noinline)) void request_check(void)
{
    struct shm_exit_check_request request;
    memset(&request, 0, sizeof request);
    request.magic = SHM_EXIT_CHECK_MAGIC;
    request.version = SHM_EXIT_CHECK_VERSION;
    request.pid = (uint32_t)armed.pid;
    request.tid = (uint32_t)syscall(SYS_gettid);
    capture_thread_state(&request);
    /* Every event this thread wrote is published already (ring_write
     * publishes as it goes); the system call below orders them before the
     * request for the tracer, which drains every ring before it scans. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int fds[SHM_EXIT_CHECK_FDS] = {open("/proc/self/mem", O_RDONLY | O_CLOEXEC),
                                   open("/proc/self/maps", O_RDONLY | O_CLOEXEC)};
    bool sent = fds[0] >= 0 && fds[1] >= 0 &&
                shm_send_fds(armed.socket_fd, &request, sizeof request, fds, SHM_EXIT_CHECK_FDS) == 0;
    for (unsigned i = 0; i < SHM_EXIT_CHECK_FDS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (sent)
        wait_for_reply();
}

void shm_exit_check_run(void)
{
    if (armed.socket_fd < 0)
        return;
    int saved_errno = errno;
    /* The pid first: a vfork child shares this memory, and must neither
     * run the check nor spend the parent's. */
    if (getpid() == armed.pid && socket_still_ours() && !__atomic_exchange_n(&armed.done, 1, __ATOMIC_ACQ_REL)) {
        scrub_dead_stack();
        request_check();
    }
    errno = saved_errno;
}

void shm_exit_group(int status)
{
    for (;;) {
        syscall(SYS_exit_group, status);
        syscall(SYS_exit, status);
    }
}

/* socket_message.c - see socket_message.h. */
#include "socket_message.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* What to do about a rejected message, appended to every reason. */
#define REJECT_ADVICE                                                                                            \
    "; it was ignored and its descriptors closed (a shim of another memslope build, or the program wrote on "  \
    "memslope's socket: run the libmemslope.so installed with this memslope)"

__attribute__((format(printf, 3, 4))) static void reject(char *err, size_t err_size, const char *format, ...)
{
    if (!err || err_size == 0)
        return;
    char reason[256];
    va_list args;
    va_start(args, format);
    vsnprintf(reason, sizeof reason, format, args);
    va_end(args);
    snprintf(err, err_size, "a message on the shims' socket was malformed: %s%s", reason, REJECT_ADVICE);
}

static void close_all(const int *fds, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static int is_regular_file(int fd)
{
    struct stat status;
    return fstat(fd, &status) == 0 && S_ISREG(status.st_mode);
}

static enum socket_message_kind parse_region(size_t fd_count, const int *fds, struct socket_message *message,
                                             char *err, size_t err_size)
{
    if (fd_count != 1) {
        reject(err, err_size, "a region hand-over with %zu descriptors (expected 1)", fd_count);
        return SOCKET_MESSAGE_REJECTED;
    }
    message->region_fd = fds[0];
    return message->kind = SOCKET_MESSAGE_REGION;
}

static enum socket_message_kind parse_exit_check(const void *data, size_t length, size_t fd_count, const int *fds,
                                                 struct socket_message *message, char *err, size_t err_size)
{
    struct shm_exit_check_request request;
    if (length != sizeof request) {
        reject(err, err_size, "an exit-check request of %zu bytes (expected %zu)", length, sizeof request);
        return SOCKET_MESSAGE_REJECTED;
    }
    memcpy(&request, data, sizeof request);
    if (request.version != SHM_EXIT_CHECK_VERSION) {
        reject(err, err_size, "an exit-check request of version %u (expected %u)", request.version,
               SHM_EXIT_CHECK_VERSION);
        return SOCKET_MESSAGE_REJECTED;
    }
    if (request.register_count > SHM_EXIT_CHECK_REGISTERS || request.pid == 0 || request.stack_pointer == 0) {
        reject(err, err_size, "an exit-check request with %u registers (at most %u), pid %u, stack pointer 0x%llx",
               request.register_count, SHM_EXIT_CHECK_REGISTERS, request.pid,
               (unsigned long long)request.stack_pointer);
        return SOCKET_MESSAGE_REJECTED;
    }
    if (fd_count != SHM_EXIT_CHECK_FDS) {
        reject(err, err_size, "an exit-check request with %zu descriptors (expected %u: /proc/self/mem and "
               "/proc/self/maps)", fd_count, SHM_EXIT_CHECK_FDS);
        return SOCKET_MESSAGE_REJECTED;
    }
    /* A pipe or a device would block or mislead the reads: /proc files are
     * regular files. */
    if (!is_regular_file(fds[0]) || !is_regular_file(fds[1])) {
        reject(err, err_size, "an exit-check request whose descriptors are not both regular files "
               "(/proc/self/mem and /proc/self/maps are)");
        return SOCKET_MESSAGE_REJECTED;
    }
    message->exit_check = request;
    message->mem_fd = fds[0];
    message->maps_fd = fds[1];
    return message->kind = SOCKET_MESSAGE_EXIT_CHECK;
}

enum socket_message_kind socket_message_parse(const void *data, size_t length, int msg_flags, const int *fds,
                                              size_t fd_count, struct socket_message *message, char *err,
                                              size_t err_size)
{
    memset(message, 0, sizeof *message);
    message->region_fd = message->mem_fd = message->maps_fd = -1;
    message->kind = SOCKET_MESSAGE_REJECTED;
    enum socket_message_kind kind = SOCKET_MESSAGE_REJECTED;
    uint64_t magic = 0;
    if (length >= sizeof magic)
        memcpy(&magic, data, sizeof magic);
    if (msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        reject(err, err_size, "%s (more than %zu bytes or %u descriptors)",
               msg_flags & MSG_TRUNC ? "too long" : "too many descriptors", sizeof(struct shm_exit_check_request),
               SOCKET_MESSAGE_MAX_FDS);
    else if (length == 1 && ((const unsigned char *)data)[0] == SHM_MESSAGE_REGION)
        kind = parse_region(fd_count, fds, message, err, err_size);
    else if (magic == SHM_EXIT_CHECK_MAGIC)
        kind = parse_exit_check(data, length, fd_count, fds, message, err, err_size);
    else
        reject(err, err_size, "%zu bytes that are neither a region hand-over nor an exit-check request", length);
    if (kind == SOCKET_MESSAGE_REJECTED) {
        close_all(fds, fd_count);
        message->kind = SOCKET_MESSAGE_REJECTED;
    }
    return kind;
}

/* Every descriptor of every SCM_RIGHTS header, in order. */
static size_t collect_fds(struct msghdr *header, int *fds, size_t capacity)
{
    size_t count = 0;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(header); cmsg; cmsg = CMSG_NXTHDR(header, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len < CMSG_LEN(0))
            continue;
        size_t n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n && count < capacity; i++)
            memcpy(&fds[count++], CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
    }
    return count;
}

enum socket_message_kind socket_message_receive(int socket, struct socket_message *message, char *err,
                                                size_t err_size)
{
    /* One byte more than the longest message: a longer one is truncated,
     * and MSG_TRUNC says so. */
    unsigned char data[sizeof(struct shm_exit_check_request) + 1];
    struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(SOCKET_MESSAGE_MAX_FDS * sizeof(int))];
    } control;
    struct msghdr header = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                            .msg_controllen = sizeof control.space};
    ssize_t length;
    do
        length = recvmsg(socket, &header, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (length < 0 && errno == EINTR);
    memset(message, 0, sizeof *message);
    message->region_fd = message->mem_fd = message->maps_fd = -1;
    if (length < 0)
        return message->kind = SOCKET_MESSAGE_NONE;
    int fds[SOCKET_MESSAGE_MAX_FDS];
    size_t fd_count = collect_fds(&header, fds, SOCKET_MESSAGE_MAX_FDS);
    return socket_message_parse(data, (size_t)length, header.msg_flags, fds, fd_count, message, err, err_size);
}

void socket_message_close(struct socket_message *message)
{
    int *fds[] = {&message->region_fd, &message->mem_fd, &message->maps_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}

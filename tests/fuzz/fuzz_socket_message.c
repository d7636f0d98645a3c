/* fuzz_socket_message.c - libFuzzer target: any datagram a target could
 * send on the shims' socket (tracer/socket_message.h). The first byte picks
 * recvmsg's flags (MSG_TRUNC, MSG_CTRUNC) and how many descriptors came with
 * it (regular files, so that the accepting paths are reached); the rest is
 * the datagram. Whatever the verdict, no memory error, and every
 * descriptor is closed afterwards (by the parser when it rejects). */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../tracer/socket_message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The Makefile links every core object into a fuzz target, and the command
 * files call command_usage() from cli/main.c, which is not among them. */
const char *command_usage(const char *name) __attribute__((weak));
const char *command_usage(const char *name)
{
    (void)name;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int flags = (data[0] & 1 ? MSG_TRUNC : 0) | (data[0] & 2 ? MSG_CTRUNC : 0);
    size_t fd_count = (data[0] >> 2) % 4;
    int fds[3];
    for (size_t i = 0; i < fd_count; i++)
        if ((fds[i] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)) < 0)
            abort();
    struct socket_message message;
    char err[512];
    enum socket_message_kind kind =
        socket_message_parse(data + 1, size - 1, flags, fds, fd_count, &message, err, sizeof err);
    if (kind == SOCKET_MESSAGE_NONE || kind != message.kind)
        abort();
    socket_message_close(&message);
    for (size_t i = 0; i < fd_count; i++)
        if (fcntl(fds[i], F_GETFD) != -1)
            abort(); /* a descriptor neither kept nor closed */
    return 0;
}

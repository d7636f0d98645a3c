/*
 * socket_message.h - what the shims send on the socket memslope record
 * gives them (SHM_ENV_SOCKET; see common/shm_layout.h, "Messages on
 * SHM_ENV_SOCKET"): region hand-overs and, in no-ptrace mode, the exit
 * check's request. The bytes and descriptors come from the target, so every
 * message is validated; one that does not validate is rejected with a
 * message saying why, and its descriptors are closed.
 */
#ifndef MEMSLOPE_SOCKET_MESSAGE_H
#define MEMSLOPE_SOCKET_MESSAGE_H

#include <stddef.h>

#include "../common/shm_layout.h"

/* Most descriptors one datagram may bring (more are a malformed message,
 * still received whole so that all of them are closed). */
#define SOCKET_MESSAGE_MAX_FDS 8u

enum socket_message_kind {
    SOCKET_MESSAGE_NONE = 0,   /* nothing waiting */
    SOCKET_MESSAGE_REGION,     /* region_fd: an image's memfd */
    SOCKET_MESSAGE_EXIT_CHECK, /* exit_check, mem_fd, maps_fd */
    SOCKET_MESSAGE_REJECTED,   /* malformed: err says why; nothing is kept open */
};

struct socket_message {
    enum socket_message_kind kind;
    int region_fd;
    struct shm_exit_check_request exit_check;
    int mem_fd, maps_fd;       /* regular files, as /proc/PID/mem and /proc/PID/maps are */
};

/* Classifies one datagram: its bytes, recvmsg's msg_flags (MSG_TRUNC,
 * MSG_CTRUNC) and the descriptors it carried, which the message takes
 * over: kept in *message when it validates, closed otherwise. Returns the
 * kind (never NONE); REJECTED with a message in err. */
enum socket_message_kind socket_message_parse(const void *data, size_t length, int msg_flags, const int *fds,
                                              size_t fd_count, struct socket_message *message, char *err,
                                              size_t err_size);

/* Receives and classifies the next datagram waiting on socket, without
 * blocking: NONE when there is none. */
enum socket_message_kind socket_message_receive(int socket, struct socket_message *message, char *err,
                                                size_t err_size);

/* Closes the descriptors the message still holds (each set to -1). */
void socket_message_close(struct socket_message *message);

#endif

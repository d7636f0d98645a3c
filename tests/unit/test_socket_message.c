/* Unit tests of the messages on the shims' socket (tracer/socket_message.h):
 * region hand-overs and exit-check requests are accepted; anything short,
 * long, of another magic or version, or with the wrong descriptors is
 * rejected with a message, its descriptors closed. Also a round trip
 * through a real socket pair with the shim's sender (shm_send_fds). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/shm_region.h"
#include "../../tracer/socket_message.h"

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1;
}

/* A regular file, as /proc/self/mem and /proc/self/maps are. */
static int regular_fd(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static struct shm_exit_check_request valid_request(void)
{
    struct shm_exit_check_request request;
    memset(&request, 0, sizeof request);
    request.magic = SHM_EXIT_CHECK_MAGIC;
    request.version = SHM_EXIT_CHECK_VERSION;
    request.pid = 1234;
    request.tid = 1235;
    request.register_count = SHM_EXIT_CHECK_REGISTERS;
    request.stack_pointer = 0x7ffc00001000ull;
    request.registers[0] = 0x5555deadbeefull;
    return request;
}

/* Parses and expects a rejection whose message contains needle, with
 * every descriptor closed. */
static void expect_rejected(const void *data, size_t length, int flags, int *fds, size_t count, const char *needle)
{
    struct socket_message message;
    char err[512] = "";
    assert_int_equal(socket_message_parse(data, length, flags, fds, count, &message, err, sizeof err),
                     SOCKET_MESSAGE_REJECTED);
    assert_int_equal(message.kind, SOCKET_MESSAGE_REJECTED);
    assert_non_null(strstr(err, needle));
    assert_non_null(strstr(err, "descriptors closed"));
    for (size_t i = 0; i < count; i++)
        assert_false(is_open(fds[i]));
    assert_int_equal(message.mem_fd, -1);
    assert_int_equal(message.maps_fd, -1);
    assert_int_equal(message.region_fd, -1);
}

static void region_hand_over_is_accepted(void **state)
{
    (void)state;
    int fd = regular_fd();
    const char kind = SHM_MESSAGE_REGION;
    struct socket_message message;
    char err[256];
    assert_int_equal(socket_message_parse(&kind, 1, 0, &fd, 1, &message, err, sizeof err), SOCKET_MESSAGE_REGION);
    assert_int_equal(message.region_fd, fd);
    assert_true(is_open(fd));
    socket_message_close(&message);
    assert_false(is_open(fd));
    assert_int_equal(message.region_fd, -1);
}

static void region_hand_over_with_two_fds_is_rejected(void **state)
{
    (void)state;
    int fds[2] = {regular_fd(), regular_fd()};
    const char kind = SHM_MESSAGE_REGION;
    expect_rejected(&kind, 1, 0, fds, 2, "region hand-over with 2 descriptors");
}

static void exit_check_is_accepted(void **state)
{
    (void)state;
    struct shm_exit_check_request request = valid_request();
    int fds[2] = {regular_fd(), regular_fd()};
    struct socket_message message;
    char err[256];
    assert_int_equal(socket_message_parse(&request, sizeof request, 0, fds, 2, &message, err, sizeof err),
                     SOCKET_MESSAGE_EXIT_CHECK);
    assert_int_equal(message.mem_fd, fds[0]);
    assert_int_equal(message.maps_fd, fds[1]);
    assert_int_equal(message.exit_check.pid, 1234);
    assert_int_equal(message.exit_check.stack_pointer, 0x7ffc00001000ull);
    assert_int_equal(message.exit_check.registers[0], 0x5555deadbeefull);
    socket_message_close(&message);
    assert_false(is_open(fds[0]));
    assert_false(is_open(fds[1]));
}

static void short_exit_check_is_rejected(void **state)
{
    (void)state;
    struct shm_exit_check_request request = valid_request();
    int fds[2] = {regular_fd(), regular_fd()};
    char expected[64];
    snprintf(expected, sizeof expected, "of 40 bytes (expected %zu)", sizeof request);
    expect_rejected(&request, 40, 0, fds, 2, expected);
}

static void truncated_message_is_rejected(void **state)
{
    (void)state;
    struct shm_exit_check_request request = valid_request();
    int fds[2] = {regular_fd(), regular_fd()};
    expect_rejected(&request, sizeof request, MSG_TRUNC, fds, 2, "too long");
    int fd = regular_fd();
    expect_rejected(&request, sizeof request, MSG_CTRUNC, &fd, 1, "too many descriptors");
}

static void wrong_magic_or_version_is_rejected(void **state)
{
    (void)state;
    struct shm_exit_check_request request = valid_request();
    request.magic ^= 1;
    int fds[2] = {regular_fd(), regular_fd()};
    expect_rejected(&request, sizeof request, 0, fds, 2, "neither a region hand-over nor an exit-check request");
    request = valid_request();
    request.version = 99;
    int more[2] = {regular_fd(), regular_fd()};
    expect_rejected(&request, sizeof request, 0, more, 2, "of version 99");
}

static void wrong_fields_are_rejected(void **state)
{
    (void)state;
    struct shm_exit_check_request request = valid_request();
    request.register_count = SHM_EXIT_CHECK_REGISTERS + 1;
    int fds[2] = {regular_fd(), regular_fd()};
    expect_rejected(&request, sizeof request, 0, fds, 2, "7 registers");
    request = valid_request();
    request.stack_pointer = 0;
    int more[2] = {regular_fd(), regular_fd()};
    expect_rejected(&request, sizeof request, 0, more, 2, "stack pointer 0x0");
}

static void exit_check_needs_exactly_two_regular_files(void **state)
{
    (void)state;
    struct shm_exit_check_request request = valid_request();
    int one = regular_fd();
    expect_rejected(&request, sizeof request, 0, &one, 1, "with 1 descriptors (expected 2");
    int three[3] = {regular_fd(), regular_fd(), regular_fd()};
    expect_rejected(&request, sizeof request, 0, three, 3, "with 3 descriptors (expected 2");
    expect_rejected(&request, sizeof request, 0, NULL, 0, "with 0 descriptors (expected 2");
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    expect_rejected(&request, sizeof request, 0, pipe_fds, 2, "not both regular files");
}

static void empty_message_is_rejected(void **state)
{
    (void)state;
    expect_rejected("", 0, 0, NULL, 0, "0 bytes that are neither");
}

static int count_open_fds(void)
{
    int count = 0;
    for (int fd = 0; fd < 1024; fd++)
        count += is_open(fd);
    return count;
}

static void round_trip_through_a_socket_pair(void **state)
{
    (void)state;
    int sockets[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sockets), 0);
    int before = count_open_fds();
    struct socket_message message;
    char err[512];
    assert_int_equal(socket_message_receive(sockets[0], &message, err, sizeof err), SOCKET_MESSAGE_NONE);

    struct shm_exit_check_request request = valid_request();
    int fds[2] = {regular_fd(), regular_fd()};
    assert_int_equal(shm_send_fds(sockets[1], &request, sizeof request, fds, 2), 0);
    close(fds[0]);
    close(fds[1]);
    assert_int_equal(socket_message_receive(sockets[0], &message, err, sizeof err), SOCKET_MESSAGE_EXIT_CHECK);
    assert_int_equal(message.exit_check.tid, 1235);
    socket_message_close(&message);

    int region = regular_fd();
    assert_int_equal(shm_send_region_fd(sockets[1], region), 0);
    close(region);
    assert_int_equal(socket_message_receive(sockets[0], &message, err, sizeof err), SOCKET_MESSAGE_REGION);
    socket_message_close(&message);

    /* Longer than any message, and more descriptors than the tracer takes. */
    char long_data[200] = {0};
    int first = regular_fd();
    assert_int_equal(shm_send_fds(sockets[1], long_data, sizeof long_data, &first, 1), 0);
    close(first);
    assert_int_equal(socket_message_receive(sockets[0], &message, err, sizeof err), SOCKET_MESSAGE_REJECTED);
    assert_non_null(strstr(err, "too long"));
    int many[SOCKET_MESSAGE_MAX_FDS + 2];
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
        many[i] = regular_fd();
    char control[CMSG_SPACE(sizeof many)];
    memset(control, 0, sizeof control);
    char byte = SHM_MESSAGE_REGION;
    struct iovec iov = {&byte, 1};
    struct msghdr header = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof many);
    memcpy(CMSG_DATA(cmsg), many, sizeof many);
    assert_int_equal(sendmsg(sockets[1], &header, 0), 1);
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
        close(many[i]);
    assert_int_equal(socket_message_receive(sockets[0], &message, err, sizeof err), SOCKET_MESSAGE_REJECTED);
    assert_int_equal(socket_message_receive(sockets[0], &message, err, sizeof err), SOCKET_MESSAGE_NONE);
    /* Every descriptor that arrived was closed again. */
    assert_int_equal(count_open_fds(), before);
    close(sockets[0]);
    close(sockets[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(region_hand_over_is_accepted),
        cmocka_unit_test(region_hand_over_with_two_fds_is_rejected),
        cmocka_unit_test(exit_check_is_accepted),
        cmocka_unit_test(short_exit_check_is_rejected),
        cmocka_unit_test(truncated_message_is_rejected),
        cmocka_unit_test(wrong_magic_or_version_is_rejected),
        cmocka_unit_test(wrong_fields_are_rejected),
        cmocka_unit_test(exit_check_needs_exactly_two_regular_files),
        cmocka_unit_test(empty_message_is_rejected),
        cmocka_unit_test(round_trip_through_a_socket_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

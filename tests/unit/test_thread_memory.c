/* The memory the recording threads of an image keep outside their static
 * TLS (preload/thread_memory.h): zeroed, named so that the leak scan leaves
 * it out of its roots, no file descriptor left open, no SIGXFSZ under a
 * file size limit (memfd_file.h), errno kept when it fails. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/thread_memory.h"
#include "test_child.h"

#define SIZE (64u * 1024u)

/* The line of /proc/self/maps for the mapping that starts at memory, in
 * line (empty if none). */
static void maps_line_of(const void *memory, char *line, size_t size)
{
    char start[32];
    snprintf(start, sizeof start, "%lx-", (unsigned long)(uintptr_t)memory);
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    line[0] = '\0';
    char buffer[512];
    while (fgets(buffer, sizeof buffer, maps))
        if (strncmp(buffer, start, strlen(start)) == 0) {
            snprintf(line, size, "%s", buffer);
            break;
        }
    fclose(maps);
}

static int open_descriptors(void)
{
    DIR *fds = opendir("/proc/self/fd");
    assert_non_null(fds);
    int count = 0;
    while (readdir(fds))
        count++;
    closedir(fds);
    return count;
}

static void zeroed_named_and_no_descriptor_kept(void **state)
{
    (void)state;
    int before = open_descriptors();
    errno = 1234;
    unsigned char *memory = thread_memory_create(SIZE, "memslope-test");
    assert_non_null(memory);
    assert_int_equal(errno, 1234);
    assert_int_equal(open_descriptors(), before);
    for (size_t i = 0; i < SIZE; i++)
        assert_int_equal(memory[i], 0);
    memory[SIZE - 1] = 7;
    char line[512];
    maps_line_of(memory, line, sizeof line);
    /* leakscan/process.c leaves paths starting /memfd:memslope out of its roots */
    assert_non_null(strstr(line, " /memfd:memslope-test"));
    assert_non_null(strstr(line, "rw-s")); /* shared: a page written is one page */
    thread_memory_destroy(memory, SIZE);
    maps_line_of(memory, line, sizeof line);
    assert_string_equal(line, "");
    thread_memory_destroy(NULL, SIZE); /* nothing */
}

/* Runs check in a child (its limits stay there) and expects it to exit 0. */
static void in_a_child(int (*check)(void))
{
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(check());
    assert_int_equal(test_child_exit_status(child), 0);
}

/* Under a hard file size limit below the size, no memory and no SIGXFSZ
 * (which ends a program that does not handle it), errno as it was. */
static int refused_under_a_hard_limit(void)
{
    struct rlimit limit = {SIZE / 2, SIZE / 2};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
        return 2;
    errno = 1234;
    void *memory = thread_memory_create(SIZE, "memslope-test");
    return memory == NULL && errno == 1234 ? 0 : 1;
}

static void a_file_size_limit_refuses_without_a_signal(void **state)
{
    (void)state;
    in_a_child(refused_under_a_hard_limit);
}

/* A soft limit below the size, the hard one above: made (the soft limit
 * is raised for the ftruncate), and the soft limit is put back. */
static int made_past_a_soft_limit(void)
{
    struct rlimit limit = {SIZE / 2, RLIM_INFINITY}, after;
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
        return 2;
    void *memory = thread_memory_create(SIZE, "memslope-test");
    if (getrlimit(RLIMIT_FSIZE, &after) != 0)
        return 3;
    return memory != NULL && after.rlim_cur == SIZE / 2 && after.rlim_max == RLIM_INFINITY ? 0 : 1;
}

static void a_soft_file_size_limit_is_passed(void **state)
{
    (void)state;
    in_a_child(made_past_a_soft_limit);
}

/* No file descriptor left: no memory, errno as it was. */
static int refused_without_a_descriptor(void)
{
    struct rlimit limit = {64, 64};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
        return 2;
    while (dup(0) >= 0)
        ; /* every descriptor below the limit taken */
    errno = 1234;
    void *memory = thread_memory_create(SIZE, "memslope-test");
    return memory == NULL && errno == 1234 ? 0 : 1;
}

static void no_descriptor_no_memory_errno_kept(void **state)
{
    (void)state;
    in_a_child(refused_without_a_descriptor);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zeroed_named_and_no_descriptor_kept),
        cmocka_unit_test(a_file_size_limit_refuses_without_a_signal),
        cmocka_unit_test(a_soft_file_size_limit_is_passed),
        cmocka_unit_test(no_descriptor_no_memory_errno_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

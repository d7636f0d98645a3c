/* The memory a thread of the shim keeps outside its static TLS
 * (preload/thread_memory.h): zeroed, named so that the leak scan leaves it
 * out of its roots, private to a fork child. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/thread_memory.h"

#define SIZE (24u * 1024u)

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

static void zeroed_and_named_for_the_leak_scan(void **state)
{
    (void)state;
    unsigned char *memory = thread_memory_map(SIZE, "memslope-test");
    assert_non_null(memory);
    for (size_t i = 0; i < SIZE; i++)
        assert_int_equal(memory[i], 0);
    memory[SIZE - 1] = 7;
    char line[512];
    maps_line_of(memory, line, sizeof line);
    /* leakscan/process.c leaves paths starting /memfd:memslope out of its roots */
    assert_non_null(strstr(line, " /memfd:memslope-test"));
    assert_non_null(strstr(line, "rw-p")); /* private */
    thread_memory_unmap(memory, SIZE);
    maps_line_of(memory, line, sizeof line);
    assert_string_equal(line, "");
    thread_memory_unmap(NULL, SIZE); /* nothing */
}

/* A fork child has a copy it may write (a child made past glibc's fork
 * runs no handler to drop it) without changing its parent's. */
static void a_fork_child_writes_its_own_copy(void **state)
{
    (void)state;
    volatile unsigned char *memory = thread_memory_map(SIZE, "memslope-test");
    assert_non_null(memory);
    memory[100] = 1;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(memory[100] == 1 && (memory[100] = 2) == 2 ? 0 : 1);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(memory[100], 1);
    thread_memory_unmap((void *)memory, SIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zeroed_and_named_for_the_leak_scan),
        cmocka_unit_test(a_fork_child_writes_its_own_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

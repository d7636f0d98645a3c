/* test_leakscan_process.c - leakscan_process on a real stopped process: a
 * forked child whose "heap" is a private mapping of known blocks, with
 * pointers to them in each kind of root (and in places that are no root). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../leakscan/leakscan.h"

enum { REACH_GLOBAL, POSSIBLE, LOST_HEAD, LOST_CHILD, REACH_TLS, LOST_IN_MEMFD, REACH_STACK, LOST_PLAIN, N_BLOCKS };
#define BLOCK_SIZE 64u
#define HEAP_SIZE (1u << 20)

uint64_t global_root;
uint64_t global_interior;
__thread uint64_t tls_root;

static uint64_t block_address(uint8_t *heap, int i)
{
    return (uint64_t)(uintptr_t)(heap + 4096 + (size_t)i * 256);
}

/* Keeps REACH_STACK's address in this frame only, then blocks. */
static __attribute__((noinline)) void hold_on_stack_and_wait(uint8_t *heap, int ready_fd)
{
    volatile uint64_t on_stack = block_address(heap, REACH_STACK);
    if (write(ready_fd, "r", 1) != 1)
        _exit(2);
    for (;;)
        pause();
    (void)on_stack;
}

/* Stores every pointer; its frame (and any stale copy of an address) is
 * gone once it returns and the stack below is scrubbed. */
static __attribute__((noinline)) void plant_pointers(uint8_t *heap)
{
    global_root = block_address(heap, REACH_GLOBAL);
    global_interior = block_address(heap, POSSIBLE) + 8;
    uint64_t child_address = block_address(heap, LOST_CHILD);
    memcpy((void *)(uintptr_t)block_address(heap, LOST_HEAD), &child_address, 8);
    tls_root = block_address(heap, REACH_TLS);
    int fd = memfd_create("memslope-test", 0);
    if (fd < 0 || ftruncate(fd, 4096) < 0)
        _exit(2);
    uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED)
        _exit(2);
    shared[3] = block_address(heap, LOST_IN_MEMFD); /* the profiler's memory is no root */
}

static __attribute__((noinline)) void scrub_stack(void)
{
    volatile char area[16384];
    memset((char *)area, 0, sizeof area);
}

static void child(uint8_t *heap, int ready_fd)
{
    plant_pointers(heap);
    scrub_stack();
    hold_on_stack_and_wait(heap, ready_fd);
}

static void test_roots_of_a_stopped_process(void **state)
{
    (void)state;
    uint8_t *heap = mmap(NULL, HEAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(heap != MAP_FAILED);
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipe_fds[0]);
        child(heap, pipe_fds[1]);
        _exit(0);
    }
    close(pipe_fds[1]);
    char byte;
    assert_int_equal(read(pipe_fds[0], &byte, 1), 1);
    close(pipe_fds[0]);

    struct leakscan_block blocks[N_BLOCKS];
    for (int i = N_BLOCKS - 1; i >= 0; i--) /* any order */
        blocks[N_BLOCKS - 1 - i] = (struct leakscan_block){.address = block_address(heap, i), .size = BLOCK_SIZE,
                                                           .stack_id = (uint32_t)i, .category = 99};
    struct leakscan_stopped stopped;
    char err[512] = "";
    assert_int_equal(leakscan_stop_process(pid, &stopped, err, sizeof err), 0);
    struct leakscan_totals totals;
    int rc = leakscan_process(pid, stopped.tids, stopped.tid_count, blocks, N_BLOCKS, &totals, err, sizeof err);
    leakscan_detach(&stopped);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    munmap(heap, HEAP_SIZE);
    if (rc != 0)
        fail_msg("leakscan_process: %s", err);

    uint32_t expected[N_BLOCKS] = {
        [REACH_GLOBAL] = TRACE_LEAK_REACHABLE, [POSSIBLE] = TRACE_LEAK_POSSIBLE,
        [LOST_HEAD] = TRACE_LEAK_DEFINITE,    [LOST_CHILD] = TRACE_LEAK_INDIRECT,
        [REACH_TLS] = TRACE_LEAK_REACHABLE,   [LOST_IN_MEMFD] = TRACE_LEAK_DEFINITE,
        [REACH_STACK] = TRACE_LEAK_REACHABLE, [LOST_PLAIN] = TRACE_LEAK_DEFINITE,
    };
    for (int i = 0; i < N_BLOCKS; i++) {
        const struct leakscan_block *b = &blocks[i];
        if (b->category != expected[b->stack_id])
            fail_msg("block %u: category %s, expected %s", b->stack_id, leakscan_category_name(b->category),
                     leakscan_category_name(expected[b->stack_id]));
    }
    assert_int_equal(totals.blocks[TRACE_LEAK_DEFINITE], 3);
    assert_int_equal(totals.blocks[TRACE_LEAK_INDIRECT], 1);
    assert_int_equal(totals.blocks[TRACE_LEAK_POSSIBLE], 1);
    assert_int_equal(totals.blocks[TRACE_LEAK_REACHABLE], 3);
    assert_int_equal(totals.bytes[TRACE_LEAK_DEFINITE], 3 * BLOCK_SIZE);
}

static void test_no_such_process(void **state)
{
    (void)state;
    struct leakscan_stopped stopped;
    char err[512] = "";
    assert_int_equal(leakscan_stop_process(0x3ffffffe, &stopped, err, sizeof err), -1);
    assert_non_null(strstr(err, "no process with pid"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roots_of_a_stopped_process),
        cmocka_unit_test(test_no_such_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

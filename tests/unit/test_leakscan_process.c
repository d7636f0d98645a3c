/* test_leakscan_process.c - leakscan_process on a real stopped process: a
 * forked child whose "heap" is a private mapping of known blocks, with
 * pointers to them in each kind of root (and in places that are no root);
 * and leakscan_process_handover on the same child, not stopped, reading
 * only through the /proc/self/mem and maps it handed over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../leakscan/leakscan.h"
#include "../../preload/shm_region.h"

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

/* What the child hands over instead of being stopped (the no-ptrace exit
 * check): its stack pointer, and its own /proc/self/mem and maps. */
static void hand_over_and_wait(int socket_fd, uint64_t stack_pointer)
{
    int fds[2] = {open("/proc/self/mem", O_RDONLY | O_CLOEXEC), open("/proc/self/maps", O_RDONLY | O_CLOEXEC)};
    if (fds[0] < 0 || fds[1] < 0 || shm_send_fds(socket_fd, &stack_pointer, sizeof stack_pointer, fds, 2) < 0)
        _exit(2);
    for (;;)
        pause();
}

/* Keeps REACH_STACK's address in this frame only, then blocks (or hands
 * itself over on socket_fd when it is not -1). */
static __attribute__((noinline)) void hold_on_stack_and_wait(uint8_t *heap, int ready_fd, int socket_fd)
{
    volatile uint64_t on_stack = block_address(heap, REACH_STACK);
    if (socket_fd >= 0)
        hand_over_and_wait(socket_fd, (uint64_t)(uintptr_t)&on_stack);
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

/* A heap at an address no earlier test used, left mapped to the end: the
 * child of each test is a fork of this process, and this process's freed
 * memory (ASan's heap, a root in the child, which lists only the test's
 * own blocks) may still hold an earlier test's block addresses, copied
 * there by its scans; a heap mapped at the same place again would have
 * them point into it. */
static uint8_t *fresh_heap(size_t size)
{
    uint8_t *heap = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(heap != MAP_FAILED);
    return heap;
}

static __attribute__((noinline)) void scrub_stack(void)
{
    volatile char area[16384];
    memset((char *)area, 0, sizeof area);
}

static void child(uint8_t *heap, int ready_fd, int socket_fd)
{
    plant_pointers(heap);
    scrub_stack();
    hold_on_stack_and_wait(heap, ready_fd, socket_fd);
}

static void fill_blocks(struct leakscan_block *blocks, uint8_t *heap)
{
    for (int i = N_BLOCKS - 1; i >= 0; i--) /* any order */
        blocks[N_BLOCKS - 1 - i] = (struct leakscan_block){.address = block_address(heap, i), .size = BLOCK_SIZE,
                                                           .stack_id = (uint32_t)i, .category = 99};
}

static void expect_categories(const struct leakscan_block *blocks, const struct leakscan_totals *totals)
{
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
    assert_int_equal(totals->blocks[TRACE_LEAK_DEFINITE], 3);
    assert_int_equal(totals->blocks[TRACE_LEAK_INDIRECT], 1);
    assert_int_equal(totals->blocks[TRACE_LEAK_POSSIBLE], 1);
    assert_int_equal(totals->blocks[TRACE_LEAK_REACHABLE], 3);
    assert_int_equal(totals->bytes[TRACE_LEAK_DEFINITE], 3 * BLOCK_SIZE);
}

/* The same child, not stopped: it hands over its /proc/self/mem and maps
 * and its stack pointer, and the scan reads through those alone. */
static void test_roots_handed_over(void **state)
{
    (void)state;
    /* Blocks at other addresses than the test before: its frames left
     * copies of its addresses in the stack this test's frames reuse. */
    uint8_t *region = fresh_heap(2 * HEAP_SIZE);
    uint8_t *heap = region + HEAP_SIZE;
    int sockets[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sockets), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sockets[0]);
        child(heap, -1, sockets[1]);
        _exit(0);
    }
    close(sockets[1]);
    uint64_t stack_pointer = 0;
    struct iovec iov = {&stack_pointer, sizeof stack_pointer};
    char control[CMSG_SPACE(2 * sizeof(int))];
    struct msghdr header = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    assert_int_equal(recvmsg(sockets[0], &header, MSG_CMSG_CLOEXEC), (ssize_t)sizeof stack_pointer);
    int fds[2];
    memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&header)), sizeof fds);
    close(sockets[0]);

    struct leakscan_block blocks[N_BLOCKS];
    fill_blocks(blocks, heap);
    const uint64_t register_words[] = {0, 1, 2};
    struct leakscan_handover handover = {fds[0], fds[1], stack_pointer, register_words, 3, NULL};
    struct leakscan_totals totals;
    char err[512] = "";
    int rc = leakscan_process_handover(pid, &handover, blocks, N_BLOCKS, &totals, NULL, err, sizeof err);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
    if (rc != 0)
        fail_msg("leakscan_process_handover: %s", err);
    expect_categories(blocks, &totals);
}

static void test_roots_of_a_stopped_process(void **state)
{
    (void)state;
    uint8_t *heap = fresh_heap(HEAP_SIZE);
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipe_fds[0]);
        child(heap, pipe_fds[1], -1);
        _exit(0);
    }
    close(pipe_fds[1]);
    char byte;
    assert_int_equal(read(pipe_fds[0], &byte, 1), 1);
    close(pipe_fds[0]);

    struct leakscan_block blocks[N_BLOCKS];
    fill_blocks(blocks, heap);
    struct leakscan_stopped stopped;
    char err[512] = "";
    assert_int_equal(leakscan_stop_process(pid, &stopped, err, sizeof err), 0);
    struct leakscan_totals totals;
    int rc = leakscan_process(pid, stopped.tids, stopped.tid_count, blocks, N_BLOCKS, &totals, err, sizeof err);
    leakscan_detach(&stopped);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (rc != 0)
        fail_msg("leakscan_process: %s", err);
    expect_categories(blocks, &totals);
}

/* ---- a snapshot: the memory as it was when taken -------------------- */

/* As child(), but instead of waiting for good, it waits to be told to
 * drop the global root (REACH_GLOBAL then has no pointer left), says it
 * did, and waits. */
static __attribute__((noinline)) void hold_on_stack_until_told(uint8_t *heap, int ready_fd, int command_fd)
{
    volatile uint64_t on_stack = block_address(heap, REACH_STACK);
    char command;
    if (write(ready_fd, "r", 1) != 1 || read(command_fd, &command, 1) != 1)
        _exit(2);
    global_root = 0;
    if (write(ready_fd, "d", 1) != 1)
        _exit(2);
    for (;;)
        pause();
    (void)on_stack;
}

/* A snapshot taken while the child is stopped classifies as the child was
 * then, after the child has run on and dropped a pointer (which a scan in
 * place then sees); over its byte limit, none is taken. */
static void test_snapshot_of_a_stopped_process(void **state)
{
    (void)state;
    uint8_t *heap = fresh_heap(HEAP_SIZE);
    int ready[2], command[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(command), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        plant_pointers(heap);
        scrub_stack();
        hold_on_stack_until_told(heap, ready[1], command[0]);
        _exit(0);
    }
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);

    struct leakscan_block blocks[N_BLOCKS], later[N_BLOCKS];
    fill_blocks(blocks, heap);
    fill_blocks(later, heap);
    struct leakscan_stopped stopped;
    char err[512] = "";
    assert_int_equal(leakscan_stop_process(pid, &stopped, err, sizeof err), 0);
    struct leakscan_snapshot *snapshot = NULL;
    int too_large = leakscan_snapshot_take(pid, stopped.tids, stopped.tid_count, NULL, blocks, N_BLOCKS, NULL, NULL, 4096, NULL,
                                           &snapshot, err, sizeof err);
    int taken = leakscan_snapshot_take(pid, stopped.tids, stopped.tid_count, NULL, blocks, N_BLOCKS, NULL, NULL, 1ull << 30,
                                       NULL, &snapshot, err, sizeof err);
    leakscan_detach(&stopped);
    assert_int_equal(too_large, 1);
    if (taken != 0)
        fail_msg("leakscan_snapshot_take: %s", err);
    assert_true(leakscan_snapshot_bytes(snapshot) >= HEAP_SIZE / 256);

    assert_int_equal(write(command[1], "x", 1), 1);
    assert_int_equal(read(ready[0], &byte, 1), 1);
    assert_int_equal(byte, 'd');
    struct leakscan_totals totals;
    assert_int_equal(leakscan_stop_process(pid, &stopped, err, sizeof err), 0);
    int in_place = leakscan_process(pid, stopped.tids, stopped.tid_count, later, N_BLOCKS, &totals, err, sizeof err);
    leakscan_detach(&stopped);
    int classified = leakscan_snapshot_classify(snapshot, &totals, NULL, err, sizeof err);
    leakscan_snapshot_free(snapshot);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    close(command[0]);
    close(command[1]);
    assert_int_equal(in_place, 0);
    for (int i = 0; i < N_BLOCKS; i++)
        if (later[i].stack_id == REACH_GLOBAL)
            assert_int_equal(later[i].category, TRACE_LEAK_DEFINITE); /* the pointer is gone now */
    if (classified != 0)
        fail_msg("leakscan_snapshot_classify: %s", err);
    expect_categories(blocks, &totals); /* as it was */
}

/* The caller sorting the blocks itself, on another thread while the copy
 * is taken (leak_check.c): take reads no block of a process without a
 * reservation, and asks for them sorted first when it has one (a mapping
 * of 257 GiB here, never touched); the categories are the same. */
struct sort_hook {
    struct leakscan_block *blocks;
    int calls;
};

static void sort_in_hook(void *arg)
{
    struct sort_hook *hook = arg;
    hook->calls++;
    leakscan_sort_blocks(hook->blocks, N_BLOCKS);
}

/* Whether this process has a reservation already (AddressSanitizer's
 * shadow memory is one): its children have it too. */
static int has_reservation(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long long start, end;
        char perms[8];
        int path = 0;
        if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perms, &path) >= 3 &&
            perms[0] == 'r' && perms[1] == 'w' && end - start > (256ull << 30) &&
            (line[path] == '\n' || line[path] == '\0'))
            found = 1;
    }
    fclose(maps);
    return found;
}

static void test_snapshot_of_blocks_the_caller_sorts(void **state)
{
    (void)state;
    int reserved_already = has_reservation();
    for (int reserve = 0; reserve < 2; reserve++) {
        uint8_t *heap = fresh_heap(HEAP_SIZE);
        const size_t reservation_size = 257ull << 30;
        void *reservation = reserve ? mmap(NULL, reservation_size, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                    : NULL;
        assert_true(reservation != MAP_FAILED);
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child(heap, ready[1], -1);
        char byte;
        assert_int_equal(read(ready[0], &byte, 1), 1);
        struct leakscan_block blocks[N_BLOCKS];
        fill_blocks(blocks, heap); /* in reverse: unsorted */
        struct sort_hook hook = {blocks, 0};
        struct leakscan_stopped stopped;
        char err[512] = "";
        assert_int_equal(leakscan_stop_process(pid, &stopped, err, sizeof err), 0);
        struct leakscan_snapshot *snapshot = NULL;
        int taken = leakscan_snapshot_take(pid, stopped.tids, stopped.tid_count, NULL, blocks, N_BLOCKS, sort_in_hook,
                                           &hook, 1ull << 30, NULL, &snapshot, err, sizeof err);
        leakscan_detach(&stopped);
        int calls_during_take = hook.calls;
        if (taken == 0)
            sort_in_hook(&hook); /* the caller's thread, done */
        struct leakscan_totals totals;
        int classified = taken == 0 ? leakscan_snapshot_classify(snapshot, &totals, NULL, err, sizeof err) : -1;
        leakscan_snapshot_free(snapshot);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
            if (reservation)
            munmap(reservation, reservation_size);
        close(ready[0]);
        close(ready[1]);
        if (taken != 0 || classified != 0)
            fail_msg("snapshot %s a reservation: %s", reserve ? "with" : "without", err);
        assert_int_equal(calls_during_take, reserve || reserved_already);
        expect_categories(blocks, &totals);
        /* the next child is forked with this stack: no block address in it */
        explicit_bzero(blocks, sizeof blocks);
    }
}

/* ---- what the shim tells: allocator ranges and its TLS ---------------- */

/* Two pymalloc-like arenas with a frame stack between them, one mapping as
 * the kernel would merge them: blocks live in the arenas only. */
#define ARENA (1u << 20)
#define FRAMES (16u << 10)
#define MERGED (2 * ARENA + FRAMES)
enum { FRAME_LOCAL, FRAME_ITEM, STALE_IN_ARENA, CACHED_BY_SHIM, CACHED_IN_OTHER_THREAD, N_ARENA_BLOCKS };
static const uint64_t arena_block_offset[N_ARENA_BLOCKS] = {0x4030, ARENA + FRAMES + 0x4030, 0x4070, 0x40b0, 0x40f0};
/* Where a thread's TCB sits in the frame stack (a TCB can share a mapping
 * with an arena: the first thread's static TLS does). */
#define OTHER_TCB (ARENA + FRAMES - 0x400)
__thread uint64_t shim_cache[4]; /* stands for the shim's TLS caches */

static uint64_t arena_block(uint8_t *merged, int i)
{
    return (uint64_t)(uintptr_t)(merged + arena_block_offset[i]);
}

static uint64_t thread_pointer(void)
{
    uint64_t pointer;
    __asm__("mov %%fs:0, %0" : "=r"(pointer));
    return pointer;
}

static __attribute__((noinline)) void plant_arena_pointers(uint8_t *merged)
{
    uint64_t local = arena_block(merged, FRAME_LOCAL), item = arena_block(merged, FRAME_ITEM);
    memcpy(merged + ARENA + 0x100, &local, 8);       /* a live frame's local */
    memcpy((void *)(uintptr_t)(local + 16), &item, 8); /* the local's item */
    uint64_t stale = arena_block(merged, STALE_IN_ARENA), cached = arena_block(merged, CACHED_BY_SHIM);
    memcpy(merged + 0x8000, &stale, 8);              /* a free block in an arena */
    shim_cache[1] = cached;                          /* only the shim's TLS knows it */
    /* a thread the scan is not told of: its TCB (tcb and self point at
     * it) and the shim's TLS below it */
    uint64_t tcb = (uint64_t)(uintptr_t)(merged + OTHER_TCB), other = arena_block(merged, CACHED_IN_OTHER_THREAD);
    memcpy(merged + OTHER_TCB, &tcb, 8);
    memcpy(merged + OTHER_TCB + 16, &tcb, 8);
    int64_t offset = (int64_t)((uint64_t)(uintptr_t)shim_cache - thread_pointer());
    memcpy(merged + OTHER_TCB + offset + 8, &other, 8);
}

static void arena_child(uint8_t *merged, int ready_fd, int socket_fd)
{
    plant_arena_pointers(merged);
    scrub_stack();
    if (socket_fd >= 0)
        hand_over_and_wait(socket_fd, (uint64_t)(uintptr_t)__builtin_frame_address(0));
    if (write(ready_fd, "r", 1) != 1)
        _exit(2);
    for (;;)
        pause();
}

struct arena_setup {
    uint8_t *region, *merged;
    size_t region_size;
    struct leakscan_block blocks[N_ARENA_BLOCKS];
    struct leakscan_range ranges[2];
    struct leakscan_shim_memory shim;
};

/* offset: where in a larger mapping the arenas begin; a test after
 * another uses other addresses, since the scan before left copies of its
 * block addresses in this process's freed memory, which the child gets. */
static void arena_setup(struct arena_setup *setup, size_t offset)
{
    setup->region_size = offset + MERGED;
    setup->region = mmap(NULL, setup->region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(setup->region != MAP_FAILED);
    setup->merged = setup->region + offset;
    uint64_t base = (uint64_t)(uintptr_t)setup->merged;
    setup->ranges[0] = (struct leakscan_range){base, base + ARENA};
    setup->ranges[1] = (struct leakscan_range){base + ARENA + FRAMES, base + MERGED};
    setup->shim = (struct leakscan_shim_memory){
        .allocator_ranges = setup->ranges,
        .allocator_range_count = 2,
        .tls_offset = (int64_t)((uint64_t)(uintptr_t)shim_cache - thread_pointer()),
        .tls_size = sizeof shim_cache,
    };
    /* the other thread's copy lies in the frame stack, below its TCB */
    assert_true(setup->shim.tls_offset < 0 && setup->shim.tls_offset > -(int64_t)(FRAMES - 0x400 - 64));
}

/* After the fork: the child's copy of this stack must not hold them. */
static void fill_arena_blocks(struct arena_setup *setup)
{
    for (int i = 0; i < N_ARENA_BLOCKS; i++)
        setup->blocks[i] = (struct leakscan_block){.address = arena_block(setup->merged, i), .size = 48,
                                                   .stack_id = (uint32_t)i, .category = 99};
}

/* handed_over: the scan knows no thread but the waiting one, so it takes
 * the TCB it finds for a thread's (stopped, it knows every thread's
 * fs_base, and that TCB is just memory). */
static void expect_arena_categories(const struct arena_setup *setup, bool handed_over)
{
    const uint32_t expected[N_ARENA_BLOCKS] = {
        [FRAME_LOCAL] = TRACE_LEAK_REACHABLE, [FRAME_ITEM] = TRACE_LEAK_REACHABLE,
        [STALE_IN_ARENA] = TRACE_LEAK_DEFINITE, [CACHED_BY_SHIM] = TRACE_LEAK_DEFINITE,
        [CACHED_IN_OTHER_THREAD] = handed_over ? TRACE_LEAK_DEFINITE : TRACE_LEAK_REACHABLE,
    };
    for (int i = 0; i < N_ARENA_BLOCKS; i++) {
        const struct leakscan_block *b = &setup->blocks[i];
        if (b->category != expected[b->stack_id])
            fail_msg("block %u: category %s, expected %s", b->stack_id, leakscan_category_name(b->category),
                     leakscan_category_name(expected[b->stack_id]));
    }
}

/* The frame stack merged with the arenas is scanned, the arenas' free
 * parts and the shim's TLS are not. */
static void test_shim_memory_of_a_stopped_process(void **state)
{
    (void)state;
    struct arena_setup setup;
    arena_setup(&setup, 0);
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipe_fds[0]);
        arena_child(setup.merged, pipe_fds[1], -1);
        _exit(0);
    }
    close(pipe_fds[1]);
    char byte;
    assert_int_equal(read(pipe_fds[0], &byte, 1), 1);
    close(pipe_fds[0]);
    fill_arena_blocks(&setup);
    struct leakscan_stopped stopped;
    char err[512] = "";
    assert_int_equal(leakscan_stop_process(pid, &stopped, err, sizeof err), 0);
    int rc = leakscan_process_ex(pid, stopped.tids, stopped.tid_count, &setup.shim, setup.blocks, N_ARENA_BLOCKS,
                                 NULL, NULL, err, sizeof err);
    leakscan_detach(&stopped);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    munmap(setup.region, setup.region_size);
    if (rc != 0)
        fail_msg("leakscan_process_ex: %s", err);
    expect_arena_categories(&setup, false);
}

/* The same through a hand-over: the thread's TLS is found by its TCB. */
static void test_shim_memory_handed_over(void **state)
{
    (void)state;
    struct arena_setup setup;
    arena_setup(&setup, 4 * ARENA);
    int sockets[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sockets), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sockets[0]);
        arena_child(setup.merged, -1, sockets[1]);
        _exit(0);
    }
    close(sockets[1]);
    uint64_t stack_pointer = 0;
    struct iovec iov = {&stack_pointer, sizeof stack_pointer};
    char control[CMSG_SPACE(2 * sizeof(int))];
    struct msghdr header = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    assert_int_equal(recvmsg(sockets[0], &header, MSG_CMSG_CLOEXEC), (ssize_t)sizeof stack_pointer);
    int fds[2];
    memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&header)), sizeof fds);
    close(sockets[0]);
    fill_arena_blocks(&setup);
    struct leakscan_handover handover = {fds[0], fds[1], stack_pointer, NULL, 0, &setup.shim};
    char err[512] = "";
    int rc = leakscan_process_handover(pid, &handover, setup.blocks, N_ARENA_BLOCKS, NULL, NULL, err, sizeof err);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
    munmap(setup.region, setup.region_size);
    if (rc != 0)
        fail_msg("leakscan_process_handover: %s", err);
    expect_arena_categories(&setup, true);
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
        cmocka_unit_test(test_roots_handed_over),
        cmocka_unit_test(test_snapshot_of_a_stopped_process),
        cmocka_unit_test(test_shim_memory_of_a_stopped_process),
        cmocka_unit_test(test_shim_memory_handed_over),
        cmocka_unit_test(test_no_such_process),
        /* last: its children's stacks are the parent's, and it leaves block
         * addresses in frames the next test's child would inherit */
        cmocka_unit_test(test_snapshot_of_blocks_the_caller_sorts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

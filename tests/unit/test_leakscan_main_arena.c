/* test_leakscan_main_arena.c - leakscan_find_main_arena on a real stopped
 * child in which a thread made a glibc arena of its own, whose heap follows
 * a file's mapping: a memfd, as memslope's shared memory lies just below
 * such a heap in a fork child, or another file's read-only mapping, as a
 * library's last one may. The heap is searched then (an anonymous mapping
 * after a file's may be its .bss), and its arena looks like main_arena in
 * every way but the heap_info before it. The search must still find
 * main_arena, in libc's .data. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/proc_maps.h"
#include "../../leakscan/leakscan_internal.h"

#define PAGE 4096u

/* glibc's own malloc, past AddressSanitizer's: its arenas are the case. */
void *__libc_malloc(size_t size);
void __libc_free(void *ptr);

enum neighbour { MEMFD, FILE_IMAGE };

/* What the child tells the test. placed: the neighbour lies just below
 * the thread's heap (0: that address was taken, the case cannot be made). */
struct arenas {
    uint64_t main_arena, thread_arena, heap;
    int placed;
};

/* A chunk too large for the tcache, freed with a guard after it, goes to
 * the unsorted bin, whose fd and bk then point at the bin itself: a
 * fixed offset into main_arena. */
static uint64_t main_arena_address(void)
{
    void *big = __libc_malloc(2000), *guard = __libc_malloc(32);
    if (!big || !guard)
        _exit(2);
    __libc_free(big);
    return *(volatile uint64_t *)big - (LEAKSCAN_MSTATE_BINS - 16);
}

static void *allocate_in_thread(void *arg)
{
    void *block = __libc_malloc(100);
    __libc_free(block);
    *(uint64_t *)arg = (uint64_t)(uintptr_t)block;
    return NULL;
}

/* The thread's arena heap: 64 MiB aligned, its first word (heap_info's
 * ar_ptr) the arena. */
static uint64_t thread_heap(void)
{
    uint64_t block = 0;
    pthread_t thread;
    if (pthread_create(&thread, NULL, allocate_in_thread, &block) != 0 || pthread_join(thread, NULL) != 0)
        _exit(2);
    return block & ~(LEAKSCAN_HEAP_MAX - 1);
}

static bool map_below(uint64_t heap, enum neighbour kind)
{
    void *want = (void *)(uintptr_t)(heap - PAGE);
    int fd = kind == MEMFD ? memfd_create("memslope", 0) : open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || (kind == MEMFD && ftruncate(fd, PAGE) < 0))
        _exit(2);
    void *got = kind == MEMFD
                    ? mmap(want, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0)
                    : mmap(want, PAGE, PROT_READ, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
    return got == want;
}

static void child(enum neighbour kind, int ready_fd)
{
    struct arenas a = {.main_arena = main_arena_address()};
    a.heap = thread_heap();
    a.thread_arena = *(volatile uint64_t *)(uintptr_t)a.heap;
    a.placed = map_below(a.heap, kind);
    if (write(ready_fd, &a, sizeof a) != (ssize_t)sizeof a)
        _exit(2);
    for (;;)
        pause();
}

/* The mapping that starts at heap follows one whose path starts so. */
static void expect_neighbour(const struct proc_maps *maps, uint64_t heap, const char *path_start)
{
    for (size_t i = 1; i < maps->count; i++)
        if (maps->maps[i].start == heap) {
            assert_true(maps->maps[i - 1].end == heap);
            assert_true(strncmp(maps->maps[i - 1].path, path_start, strlen(path_start)) == 0);
            return;
        }
    fail_msg("no mapping starts at the thread's heap 0x%llx", (unsigned long long)heap);
}

/* A child made as child() says; *a what it told (a->placed 0 when it
 * told nothing). */
static pid_t start_child(enum neighbour kind, struct arenas *a)
{
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipe_fds[0]);
        child(kind, pipe_fds[1]);
    }
    close(pipe_fds[1]);
    if (read(pipe_fds[0], a, sizeof *a) != (ssize_t)sizeof *a)
        *a = (struct arenas){0};
    close(pipe_fds[0]);
    return pid;
}

/* leakscan_find_main_arena on pid, stopped meanwhile; its maps in *maps. */
static int find_main_arena_of(pid_t pid, struct proc_maps *maps, uint64_t *found, char *err, size_t err_size)
{
    struct leakscan_stopped stopped;
    if (leakscan_stop_process(pid, &stopped, err, err_size) < 0)
        return -1;
    int rc = proc_maps_read(pid, maps);
    if (rc == 0) {
        struct leakscan_target target;
        leakscan_target_open(&target, pid);
        *found = leakscan_find_main_arena(&target, maps);
        leakscan_target_close(&target);
    } else {
        snprintf(err, err_size, "cannot read /proc/%d/maps", (int)pid);
    }
    leakscan_detach(&stopped);
    return rc;
}

static void check_main_arena_found(enum neighbour kind)
{
    struct arenas a;
    pid_t pid = start_child(kind, &a);
    struct proc_maps maps = {0};
    uint64_t found = 0;
    char err[512] = "";
    int rc = a.placed ? find_main_arena_of(pid, &maps, &found, err, sizeof err) : 0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(a.heap != 0); /* the child told */
    if (!a.placed)
        skip(); /* the page below the thread's heap was taken */
    if (rc != 0)
        fail_msg("%s", err);
    expect_neighbour(&maps, a.heap, kind == MEMFD ? "/memfd:memslope" : "/");
    proc_maps_free(&maps);
    assert_true(a.thread_arena >= a.heap && a.thread_arena < a.heap + PAGE);
    if (found != a.main_arena)
        fail_msg("main_arena found at 0x%llx, not 0x%llx (the thread's arena is at 0x%llx)",
                 (unsigned long long)found, (unsigned long long)a.main_arena, (unsigned long long)a.thread_arena);
}

static void test_thread_heap_after_a_memfd(void **state)
{
    (void)state;
    check_main_arena_found(MEMFD);
}

static void test_thread_heap_after_a_file(void **state)
{
    (void)state;
    check_main_arena_found(FILE_IMAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_heap_after_a_memfd),
        cmocka_unit_test(test_thread_heap_after_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

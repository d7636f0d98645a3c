/* Unit tests of the shim's process checks (preload/shm_region.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../preload/shm_region.h"

static long tracer_of(const char *status)
{
    return shm_status_tracer_pid(status, strlen(status));
}

static void tracer_pid_is_parsed(void **state)
{
    (void)state;
    assert_int_equal(tracer_of("Name:\tx\nState:\tS\nTracerPid:\t4242\nUid:\t0\n"), 4242);
    assert_int_equal(tracer_of("Name:\tx\nTracerPid:\t0\n"), 0);
    assert_int_equal(tracer_of("Name:\tx\nTracerPid:   17"), 17);
}

static void missing_or_malformed_is_minus_one(void **state)
{
    (void)state;
    assert_int_equal(tracer_of(""), -1);
    assert_int_equal(tracer_of("Name:\tx\n"), -1);
    assert_int_equal(tracer_of("Name:\tx\nTracerPid:\t\n"), -1);
    assert_int_equal(tracer_of("TracerPid:\t5\n"), -1); /* only as a line of its own after another */
}

/* A child asks, once before its parent seizes it and once after, whether
 * the parent traces it, and whether a pid that is not its tracer does. */
static void a_process_is_traced_by_its_tracer_only(void **state)
{
    (void)state;
    int go[2], answers[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(answers), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char reply[3], byte;
        reply[0] = (char)('0' + shm_traced_by(getppid()));
        if (write(answers[1], reply, 1) != 1 || read(go[0], &byte, 1) != 1)
            _exit(1);
        reply[1] = (char)('0' + shm_traced_by(getppid()));
        reply[2] = (char)('0' + shm_traced_by(getpid()));
        _exit(write(answers[1], reply + 1, 2) == 2 ? 0 : 1);
    }
    char reply[4] = {0};
    assert_int_equal(read(answers[0], reply, 1), 1);
    assert_int_equal(ptrace(PTRACE_SEIZE, child, 0, 0), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(read(answers[0], reply + 1, 2), 2);
    assert_string_equal(reply, "010"); /* not yet; by the parent; not by itself */
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(go[0]), close(go[1]), close(answers[0]), close(answers[1]);
}

/* A zeroed region with its header (sparse: only touched pages cost). */
static void *new_region(void)
{
    void *base = mmap(NULL, SHM_TOTAL_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(base != MAP_FAILED);
    shm_region_init_header(base, 1, SHM_DEFAULT_MAX_FRAMES, 0, SHM_CLOCK_MONOTONIC_NS);
    return base;
}

/* The ranges a reader sees: entries [0, used) whose size is set. */
static size_t live_ranges(void *base, struct shm_allocator_range *out, size_t max)
{
    const struct shm_header *header = base;
    size_t n = 0;
    for (uint32_t i = 0; i < header->allocator_ranges_used; i++) {
        const struct shm_allocator_range *entry = &shm_allocator_ranges(base)[i];
        if (entry->start && entry->size && n < max)
            out[n++] = *entry;
    }
    return n;
}

static void allocator_ranges_are_added_removed_and_reused(void **state)
{
    (void)state;
    void *base = new_region();
    const struct shm_header *header = base;
    assert_int_equal(header->allocator_ranges_offset, SHM_ALLOCATOR_RANGES_OFFSET);
    assert_int_equal(header->allocator_ranges_entries, SHM_ALLOCATOR_RANGES);
    assert_true(shm_allocator_range_add(base, 0x100000, 0x100000));
    assert_true(shm_allocator_range_add(base, 0x300000, 0x100000));
    assert_false(shm_allocator_range_add(base, 0, 0x100000));
    assert_false(shm_allocator_range_add(base, 0x500000, 0));
    struct shm_allocator_range seen[4];
    assert_int_equal(live_ranges(base, seen, 4), 2);
    shm_allocator_range_remove(base, 0x100000);
    shm_allocator_range_remove(base, 0x999000); /* never added: nothing happens */
    assert_int_equal(live_ranges(base, seen, 4), 1);
    assert_int_equal(seen[0].start, 0x300000);
    assert_true(shm_allocator_range_add(base, 0x700000, 0x40000));
    assert_int_equal(header->allocator_ranges_used, 2); /* the freed entry was taken again */
    assert_int_equal(live_ranges(base, seen, 4), 2);
    munmap(base, SHM_TOTAL_SIZE);
}

static void full_table_counts_what_it_drops(void **state)
{
    (void)state;
    void *base = new_region();
    const struct shm_header *header = base;
    for (uint64_t i = 0; i < SHM_ALLOCATOR_RANGES; i++)
        assert_true(shm_allocator_range_add(base, (i + 1) << 20, 1 << 20));
    assert_false(shm_allocator_range_add(base, 1ull << 40, 1 << 20));
    assert_int_equal(header->allocator_ranges_dropped, 1);
    assert_int_equal(header->allocator_ranges_used, SHM_ALLOCATOR_RANGES);
    shm_allocator_range_remove(base, 5 << 20);
    assert_true(shm_allocator_range_add(base, 1ull << 40, 1 << 20));
    munmap(base, SHM_TOTAL_SIZE);
}

/* A fork child's region starts with its parent's ranges. */
static void allocator_ranges_are_copied(void **state)
{
    (void)state;
    void *parent = new_region(), *child = new_region();
    assert_true(shm_allocator_range_add(parent, 0x100000, 0x100000));
    assert_true(shm_allocator_range_add(parent, 0x300000, 0x100000));
    shm_allocator_range_remove(parent, 0x100000);
    shm_allocator_ranges_copy(child, parent);
    struct shm_allocator_range seen[4];
    assert_int_equal(live_ranges(child, seen, 4), 1);
    assert_int_equal(seen[0].start, 0x300000);
    assert_int_equal(seen[0].size, 0x100000);
    munmap(parent, SHM_TOTAL_SIZE);
    munmap(child, SHM_TOTAL_SIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tracer_pid_is_parsed),
        cmocka_unit_test(missing_or_malformed_is_minus_one),
        cmocka_unit_test(a_process_is_traced_by_its_tracer_only),
        cmocka_unit_test(allocator_ranges_are_added_removed_and_reused),
        cmocka_unit_test(full_table_counts_what_it_drops),
        cmocka_unit_test(allocator_ranges_are_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_region.h - a shared-memory region in this process, as the shim
 * makes it, for cmocka setups (state = the region's base), and a look at
 * which of its pages are in. Shared by the ring, stack table, consumer and
 * Python tests (included, not linked: each test is its own program).
 */
#ifndef MEMSLOPE_TEST_REGION_H
#define MEMSLOPE_TEST_REGION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../preload/shm_region.h"

static int setup_region(void **state)
{
    void *base = mmap(NULL, SHM_TOTAL_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (base == MAP_FAILED)
        return -1;
    /* small pages, as the shim's memfd has: with transparent huge pages
     * "always", a first write would map 2 MiB (the populate tests look at
     * which pages are in) */
    madvise(base, SHM_TOTAL_SIZE, MADV_NOHUGEPAGE);
    shm_region_init_header(base, (uint32_t)getpid(), 64, 0, SHM_CLOCK_MONOTONIC_NS);
    *state = base;
    return 0;
}

static int teardown_region(void **state)
{
    munmap(*state, SHM_TOTAL_SIZE);
    return 0;
}

/* Whether the 4 KiB page holding address is mapped in (mincore): what the
 * populate tests look at (preload/populate.h). */
static inline bool page_resident(const void *address)
{
    unsigned char in = 0;
    uintptr_t page = (uintptr_t)address & ~(uintptr_t)4095;
    assert_int_equal(mincore((void *)page, 4096, &in), 0);
    return in & 1;
}

#endif

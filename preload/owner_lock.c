/* owner_lock.c - see owner_lock.h. */
#include "owner_lock.h"

#include <errno.h>
#include <stdbool.h>
#include <linux/futex.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EPOCH_PAGE_SIZE 4096u

/* The page that holds this address space's epoch (MADV_WIPEONFORK): the
 * shim's global state, as everything of a lock is. Set once, then only
 * read; the mapping is inherited, its contents wiped in a fork child.
 * Nothing may unmap it or zero it (MADV_DONTNEED): the program has no
 * reason to touch a page it did not map. */
static uint32_t *epoch_page;
/* Where no page could be mapped, every thread's: an epoch that never
 * changes, so a lock cut by a fork waits there, as a mutex would. */
static uint32_t epoch_without_page = 1;
/* The kernel refused MADV_WIPEONFORK (Linux before 4.14): the child
 * handler of fork (owner_lock_forked) zeroes the epoch instead. */
static bool epoch_not_wiped;

static uint32_t *epoch_page_get(void)
{
    uint32_t *page = __atomic_load_n(&epoch_page, __ATOMIC_ACQUIRE);
    if (page)
        return page;
    int saved_errno = errno;
    void *mapped = mmap(NULL, EPOCH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t *chosen = &epoch_without_page; /* for good: threads must agree */
    if (mapped != MAP_FAILED) {
        if (madvise(mapped, EPOCH_PAGE_SIZE, MADV_WIPEONFORK) != 0)
            __atomic_store_n(&epoch_not_wiped, true, __ATOMIC_RELAXED);
        chosen = mapped;
    }
    errno = saved_errno;
    uint32_t *expected = NULL;
    if (!__atomic_compare_exchange_n(&epoch_page, &expected, chosen, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (mapped != MAP_FAILED)
            munmap(mapped, EPOCH_PAGE_SIZE); /* another thread's came first */
        errno = saved_errno;
        return expected;
    }
    return chosen;
}

void owner_lock_forked(void)
{
    uint32_t *page = __atomic_load_n(&epoch_page, __ATOMIC_ACQUIRE);
    if (page && page != &epoch_without_page && __atomic_load_n(&epoch_not_wiped, __ATOMIC_RELAXED))
        __atomic_store_n(page, 0, __ATOMIC_RELEASE);
}

/* A new epoch: differs from the parent's but by a chance of 2^-31. */
static uint32_t epoch_draw(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t mixed = ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^
                     ((uint64_t)syscall(SYS_getpid) << 40);
    mixed *= 0x9e3779b97f4a7c15ull;
    uint32_t epoch = (uint32_t)(mixed >> 33) & ~OWNER_LOCK_WAITERS;
    return epoch > 1 ? epoch : 2; /* 1 is epoch_without_page's */
}

uint32_t owner_lock_epoch(void)
{
    uint32_t *page = epoch_page_get();
    uint32_t epoch = __atomic_load_n(page, __ATOMIC_ACQUIRE);
    if (__builtin_expect(epoch != 0, 1))
        return epoch;
    int saved_errno = errno;
    uint32_t drawn = epoch_draw();
    errno = saved_errno;
    if (__atomic_compare_exchange_n(page, &epoch, drawn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return drawn;
    return epoch; /* another thread of this space drew first */
}

enum owner_lock_taken owner_lock_acquire(struct owner_lock *lock)
{
    uint32_t self = owner_lock_epoch();
    uint32_t seen = 0;
    if (__atomic_compare_exchange_n(&lock->word, &seen, self, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return OWNER_LOCK_TAKEN;
    int saved_errno = errno;
    enum owner_lock_taken taken = OWNER_LOCK_TAKEN;
    for (;;) {
        if (seen == 0) {
            /* with the bit: others may still wait */
            if (__atomic_compare_exchange_n(&lock->word, &seen, self | OWNER_LOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                break;
            continue;
        }
        if ((seen & ~OWNER_LOCK_WAITERS) != self) {
            /* taken in the space this one was forked from: nobody here holds it */
            if (__atomic_compare_exchange_n(&lock->word, &seen, self | (seen & OWNER_LOCK_WAITERS), 0,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                taken = OWNER_LOCK_TAKEN_OVER;
                break;
            }
            continue;
        }
        if (!(seen & OWNER_LOCK_WAITERS) &&
            !__atomic_compare_exchange_n(&lock->word, &seen, seen | OWNER_LOCK_WAITERS, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        syscall(SYS_futex, &lock->word, FUTEX_WAIT_PRIVATE, seen | OWNER_LOCK_WAITERS, NULL, NULL, 0);
        seen = __atomic_load_n(&lock->word, __ATOMIC_RELAXED);
    }
    errno = saved_errno;
    return taken;
}

void owner_lock_release(struct owner_lock *lock)
{
    uint32_t was = __atomic_exchange_n(&lock->word, 0, __ATOMIC_RELEASE);
    if (was & OWNER_LOCK_WAITERS) {
        int saved_errno = errno;
        /* one: a woken waiter takes the lock with the bit set again */
        syscall(SYS_futex, &lock->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        errno = saved_errno;
    }
}

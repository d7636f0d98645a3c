/*
 * owner_lock.h - a lock that knows its holder, for the shim's few locks
 * that a fork can cut in half.
 *
 * A fork copies only the thread that called it. A pthread mutex another
 * thread held at that moment stays held in the child, by nobody, and the
 * child's first wait for it is for ever. The usual cure, taking the lock
 * in a pthread_atfork prepare handler, blocks inside fork: prepare
 * handlers run in reverse registration order, so a library's handler that
 * takes its own lock first and a thread that holds that lock while it
 * waits for ours deadlock (tried in round fifteen, reverted). This lock
 * never blocks a fork. Its word is the holder's thread id, so a thread
 * that finds it taken can ask whether the holder is in its process at
 * all; in a fork child it is not, and the lock is taken over. The caller
 * learns that (owner_lock_acquire returns OWNER_LOCK_TAKEN_OVER): what the
 * lock guarded may be half updated, and is the caller's to mistrust.
 *
 * Waiting is a private futex on the word, with a waiters bit so that an
 * uncontended release makes no system call. A waiter wakes every 100 ms to
 * ask again. Usable under the shim's guard (signals blocked): it never
 * allocates, and keeps errno. Not proof against one case: a thread of the
 * child that is given the parent's holder's id after that thread exited
 * (ids wrap at pid_max) looks like the holder; the child would wait.
 */
#ifndef MEMSLOPE_OWNER_LOCK_H
#define MEMSLOPE_OWNER_LOCK_H

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct owner_lock {
    uint32_t word; /* 0: free; else the holder's thread id, | OWNER_LOCK_WAITERS */
};

#define OWNER_LOCK_INIT {0}
#define OWNER_LOCK_WAITERS 0x80000000u /* thread ids are below 2^22 (pid_max) */

enum owner_lock_taken { OWNER_LOCK_TAKEN = 0, OWNER_LOCK_TAKEN_OVER = 1 };

/* The calling thread's id, read once per thread (gettid is a system call,
 * 1 us here with PTI; a rule lookup takes the lock each time). A fork
 * child's thread inherits its parent's value: owner_lock_forked, from the
 * first child handler, forgets it. Until then (an earlier child handler)
 * the child has one thread, and its parent's id in the word is still no
 * thread of the child: a later waiter would take over, and none exists. */
extern __thread uint32_t owner_lock_cached_id;

static inline uint32_t owner_lock_thread_id(void)
{
    if (__builtin_expect(owner_lock_cached_id == 0, 0))
        owner_lock_cached_id = (uint32_t)syscall(SYS_gettid);
    return owner_lock_cached_id;
}

/* In a fork child, before it starts a thread (a pthread_atfork child handler). */
void owner_lock_forked(void);

/* Whether thread id holder is no thread of this process: a fork child's
 * copy of a lock its parent's other thread held. */
static inline int owner_lock_holder_gone(uint32_t holder)
{
    return syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)holder, 0) != 0 && errno == ESRCH;
}

static inline enum owner_lock_taken owner_lock_acquire(struct owner_lock *lock)
{
    uint32_t self = owner_lock_thread_id();
    uint32_t seen = 0;
    if (__atomic_compare_exchange_n(&lock->word, &seen, self, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return OWNER_LOCK_TAKEN;
    int saved_errno = errno;
    enum owner_lock_taken taken = OWNER_LOCK_TAKEN;
    for (;;) {
        if (seen == 0) {
            if (__atomic_compare_exchange_n(&lock->word, &seen, self | OWNER_LOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                break; /* with the bit: others may still wait */
            continue;
        }
        uint32_t holder = seen & ~OWNER_LOCK_WAITERS;
        /* holder == self: a thread taking the lock twice, or given the
         * gone holder's id (see the top): waiting would be for ever */
        if (holder == self || owner_lock_holder_gone(holder)) {
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
        struct timespec timeout = {0, 100 * 1000 * 1000};
        syscall(SYS_futex, &lock->word, FUTEX_WAIT_PRIVATE, seen | OWNER_LOCK_WAITERS, &timeout, NULL, 0);
        seen = __atomic_load_n(&lock->word, __ATOMIC_RELAXED);
    }
    errno = saved_errno;
    return taken;
}

static inline void owner_lock_release(struct owner_lock *lock)
{
    uint32_t was = __atomic_exchange_n(&lock->word, 0, __ATOMIC_RELEASE);
    if (was & OWNER_LOCK_WAITERS) {
        int saved_errno = errno;
        syscall(SYS_futex, &lock->word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
        errno = saved_errno;
    }
}

#endif

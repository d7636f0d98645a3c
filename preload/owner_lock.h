/*
 * owner_lock.h - a lock that knows which address space took it, for the
 * shim's few locks that a fork can cut in half.
 *
 * A fork copies only the thread that called it. A pthread mutex another
 * thread held at that moment stays held in the child, by nobody, and the
 * child's first wait for it is for ever. The usual cure, taking the lock
 * in a pthread_atfork prepare handler, blocks inside fork: prepare
 * handlers run in reverse registration order, so a library's handler that
 * takes its own lock first and a thread that holds that lock while it
 * waits for ours deadlock (tried in round fifteen, reverted).
 *
 * This lock never blocks a fork. Its word holds the holder's address
 * space's epoch: a number kept in a page marked MADV_WIPEONFORK, which the
 * kernel zeroes in the child of any fork (fork, _Fork, a raw clone without
 * CLONE_VM), handlers or not, and leaves alone for threads and vfork,
 * which share the memory. The first lock taken in a wiped space draws a new
 * epoch. A thread that finds the lock held under another epoch is in a
 * fork child, and the holder in the parent: it takes the lock over, and
 * the caller is told (OWNER_LOCK_TAKEN_OVER): what the lock guarded may be
 * half updated, and is the caller's to mistrust. A holder of its own epoch
 * (another thread, or the parent of a vfork child) is waited for.
 *
 * Waiting is a private futex on the word, with a waiters bit so that an
 * uncontended release makes no system call. Usable under the shim's guard
 * (signals blocked): it never allocates (the epoch page is an mmap), and
 * keeps errno. Where MADV_WIPEONFORK is refused (Linux before 4.14) the
 * shim's fork child handler calls owner_lock_forked instead, which covers
 * fork() but not a raw fork system call; where no page can be mapped at
 * all, no epoch ever changes and a lock cut by a fork waits, as a mutex
 * would.
 */
#ifndef MEMSLOPE_OWNER_LOCK_H
#define MEMSLOPE_OWNER_LOCK_H

#include <stdint.h>

struct owner_lock {
    uint32_t word; /* 0: free; else the holder's epoch, | OWNER_LOCK_WAITERS */
};

#define OWNER_LOCK_INIT {0}
#define OWNER_LOCK_WAITERS 0x80000000u

enum owner_lock_taken { OWNER_LOCK_TAKEN = 0, OWNER_LOCK_TAKEN_OVER = 1 };

/* This address space's epoch: nonzero, below OWNER_LOCK_WAITERS, and new
 * in each fork child. */
uint32_t owner_lock_epoch(void);

/* From a fork child handler: a new epoch where the kernel does not wipe
 * the page (else nothing). */
void owner_lock_forked(void);

enum owner_lock_taken owner_lock_acquire(struct owner_lock *lock);
void owner_lock_release(struct owner_lock *lock);

#endif

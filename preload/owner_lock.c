/* owner_lock.c - see owner_lock.h: the per-thread id it caches. */
#include "owner_lock.h"

__thread uint32_t owner_lock_cached_id __attribute__((tls_model("initial-exec"), visibility("hidden")));

void owner_lock_forked(void)
{
    owner_lock_cached_id = 0;
}

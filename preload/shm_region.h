/*
 * shm_region.h - creating the shared-memory region of one process image.
 */
#ifndef MEMSLOPE_SHM_REGION_H
#define MEMSLOPE_SHM_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/shm_layout.h"

/* Fills the header of a zeroed region and stores ready = 1 (release).
 * clock_source: enum shm_clock_source of the events to come (set before
 * ready: the tracer reads the clock the same way from its first drain). */
void shm_region_init_header(void *base, uint32_t pid, uint32_t max_frames, uint64_t sample_rate,
                            uint32_t clock_source);

/* memfd_create(SHM_MEMFD_NAME, MFD_CLOEXEC), ftruncate to SHM_TOTAL_SIZE,
 * mmap MAP_SHARED, fill the header. Returns the mapping and stores the fd
 * (kept open: the tracer finds the region through /proc/PID/fd), or NULL on
 * failure. Calls no allocator and preserves errno. */
void *shm_region_create(int *fd_out, uint32_t pid, uint32_t max_frames, uint64_t sample_rate, uint32_t clock_source);

/* The allocator ranges (shm_layout.h): memory an allocator owns whose
 * every block is recorded. add: false when start or size is 0, or when the
 * table is full (counted in allocator_ranges_dropped). remove: forgets the
 * range that starts at start, if any. copy: every range of from into to (a
 * fork child's fresh region: the child has its parent's memory). Lock-free,
 * no allocator; remove is linear in the entries in use, and so is add once
 * a range was removed. */
bool shm_allocator_range_add(void *base, uint64_t start, uint64_t size);
void shm_allocator_range_remove(void *base, uint64_t start);
void shm_allocator_ranges_copy(void *to, void *from);

/* Parses a decimal environment value without the allocator or locale;
 * returns fallback for NULL, empty or malformed text. */
uint64_t shm_parse_u64(const char *text, uint64_t fallback);

/* The TracerPid line of a /proc/PID/status text; -1 when absent. */
long shm_status_tracer_pid(const char *status, size_t length);

/* Whether this process is traced by tracer (its /proc/self/status names
 * it): a fork child or an exec'd program that memslope does not follow is
 * not, and must not record, since nobody would drain its rings. Uses only
 * system calls. */
int shm_traced_by(pid_t tracer);

/* Whether the calling thread is known to be traced by another than tracer
 * (its /proc/thread-self/status, read, names another or none): memslope
 * let it go when the command ended (a thread beside a main thread that
 * ended stays in a process still traced). 0 when it cannot tell. Uses
 * only system calls; errno kept. */
int shm_thread_let_go(pid_t tracer);

/* Most descriptors one message carries. */
#define SHM_SEND_FDS_MAX 4u

/* Sends one datagram of length bytes with fd_count (1 to SHM_SEND_FDS_MAX)
 * descriptors (SCM_RIGHTS) over the unix socket socket_fd, waiting for
 * room if the socket was made non-blocking. System calls only (no
 * allocator); 0, or -1, errno preserved either way. */
int shm_send_fds(int socket_fd, const void *data, size_t length, const int *fds, size_t fd_count);

/* The region hand-over: one byte SHM_MESSAGE_REGION and region_fd. */
int shm_send_region_fd(int socket_fd, int region_fd);

#endif

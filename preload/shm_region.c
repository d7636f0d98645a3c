/*
 * shm_region.c - the memfd behind a process image's shared region.
 */
#include "shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfd_file.h"

/* How long a send waits for room on a socket made non-blocking. */
#define SEND_WAIT_MS 1000

_Static_assert(sizeof(struct shm_header) <= SHM_HEADER_SIZE, "header fits its page");
_Static_assert(sizeof(struct shm_event) == 32, "event ABI is 32 bytes");
_Static_assert(offsetof(struct shm_thread_slot, read_pos) == 64, "the producer's fields fill one cache line");
_Static_assert(sizeof(struct shm_held_bucket) == 64, "a held set's bucket is one cache line");
_Static_assert((SHM_RING_EVENTS & (SHM_RING_EVENTS - 1)) == 0, "ring size is a power of two");
_Static_assert((SHM_STACK_INDEX_SLOTS & (SHM_STACK_INDEX_SLOTS - 1)) == 0, "index size is a power of two");
_Static_assert(SHM_STACK_TABLE_ENTRIES <= SHM_STACK_INDEX_SLOTS / 4 * 3, "the index stays at most 3/4 full");
_Static_assert((SHM_PYTHON_CODE_ENTRIES & (SHM_PYTHON_CODE_ENTRIES - 1)) == 0, "code table size is a power of two");
_Static_assert(SHM_PYTHON_CODE_ENTRIES <= 0x10000000u, "a code index fits a Python frame word");

void shm_region_init_header(void *base, uint32_t pid, uint32_t max_frames, uint64_t sample_rate,
                            uint32_t clock_source)
{
    struct shm_header *header = base;
    header->magic = SHM_MAGIC;
    header->version = SHM_VERSION;
    header->header_size = SHM_HEADER_SIZE;
    header->total_size = SHM_TOTAL_SIZE;
    header->pid = pid;
    header->max_frames = max_frames;
    header->slots_offset = SHM_SLOTS_OFFSET;
    header->slot_size = SHM_SLOT_SIZE;
    header->max_threads = SHM_MAX_THREADS;
    header->ring_events = SHM_RING_EVENTS;
    header->stack_table_offset = SHM_STACK_TABLE_OFFSET;
    header->stack_table_entries = SHM_STACK_TABLE_ENTRIES;
    header->stack_index_offset = SHM_STACK_INDEX_OFFSET;
    header->stack_index_slots = SHM_STACK_INDEX_SLOTS;
    header->stack_entries_used = 1;
    header->frame_pool_frames = SHM_FRAME_POOL_FRAMES;
    header->frame_pool_offset = SHM_FRAME_POOL_OFFSET;
    header->sample_rate = sample_rate;
    header->name_pool_offset = SHM_NAME_POOL_OFFSET;
    header->name_pool_bytes = SHM_NAME_POOL_BYTES;
    header->clock_source = clock_source;
    header->python_code_offset = SHM_PYTHON_CODE_OFFSET;
    header->python_code_entries = SHM_PYTHON_CODE_ENTRIES;
    header->python_text_offset = SHM_PYTHON_TEXT_OFFSET;
    header->python_text_bytes = SHM_PYTHON_TEXT_BYTES;
    header->allocator_ranges_offset = SHM_ALLOCATOR_RANGES_OFFSET;
    header->allocator_ranges_entries = SHM_ALLOCATOR_RANGES;
    __atomic_store_n(&header->ready, 1, __ATOMIC_RELEASE);
}

void *shm_region_create(int *fd_out, uint32_t pid, uint32_t max_frames, uint64_t sample_rate, uint32_t clock_source)
{
    int saved_errno = errno;
    void *base = NULL;
    int fd = memfd_of_size(SHM_MEMFD_NAME, SHM_TOTAL_SIZE);
    if (fd < 0)
        goto out;
    base = mmap(NULL, SHM_TOTAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        base = NULL;
        close(fd);
        goto out;
    }
    shm_region_init_header(base, pid, max_frames, sample_rate, clock_source);
    *fd_out = fd;
out:
    errno = saved_errno;
    return base;
}

static bool claim_range_entry(struct shm_allocator_range *entry, uint64_t start, uint64_t size)
{
    uint64_t free_start = 0;
    if (!__atomic_compare_exchange_n(&entry->start, &free_start, start, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return false;
    __atomic_store_n(&entry->size, size, __ATOMIC_RELEASE);
    return true;
}

bool shm_allocator_range_add(void *base, uint64_t start, uint64_t size)
{
    struct shm_header *header = base;
    struct shm_allocator_range *table = shm_allocator_ranges(base);
    if (start == 0 || size == 0)
        return false;
    uint32_t used = __atomic_load_n(&header->allocator_ranges_used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; __atomic_load_n(&header->allocator_ranges_free, __ATOMIC_RELAXED) > 0 && i < used &&
                         i < SHM_ALLOCATOR_RANGES;
         i++) {
        if (__atomic_load_n(&table[i].start, __ATOMIC_RELAXED) == 0 && claim_range_entry(&table[i], start, size)) {
            __atomic_fetch_sub(&header->allocator_ranges_free, 1, __ATOMIC_RELAXED);
            return true;
        }
    }
    for (;;) {
        uint32_t index = __atomic_fetch_add(&header->allocator_ranges_used, 1, __ATOMIC_ACQ_REL);
        if (index >= SHM_ALLOCATOR_RANGES) {
            __atomic_store_n(&header->allocator_ranges_used, SHM_ALLOCATOR_RANGES, __ATOMIC_RELEASE);
            __atomic_fetch_add(&header->allocator_ranges_dropped, 1, __ATOMIC_RELAXED);
            return false;
        }
        if (claim_range_entry(&table[index], start, size))
            return true;
    }
}

void shm_allocator_range_remove(void *base, uint64_t start)
{
    struct shm_header *header = base;
    struct shm_allocator_range *table = shm_allocator_ranges(base);
    uint32_t used = __atomic_load_n(&header->allocator_ranges_used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; start != 0 && i < used && i < SHM_ALLOCATOR_RANGES; i++) {
        if (__atomic_load_n(&table[i].start, __ATOMIC_RELAXED) == start) {
            __atomic_store_n(&table[i].size, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&table[i].start, 0, __ATOMIC_RELEASE);
            __atomic_fetch_add(&header->allocator_ranges_free, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

void shm_allocator_ranges_copy(void *to, void *from)
{
    const struct shm_header *header = from;
    const struct shm_allocator_range *table = shm_allocator_ranges(from);
    uint32_t used = __atomic_load_n(&header->allocator_ranges_used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < used && i < SHM_ALLOCATOR_RANGES; i++) {
        uint64_t start = __atomic_load_n(&table[i].start, __ATOMIC_ACQUIRE);
        uint64_t size = __atomic_load_n(&table[i].size, __ATOMIC_ACQUIRE);
        if (start && size)
            shm_allocator_range_add(to, start, size);
    }
}

uint64_t shm_parse_u64(const char *text, uint64_t fallback)
{
    if (!text || !*text)
        return fallback;
    uint64_t value = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9')
            return fallback;
        uint64_t digit = (uint64_t)(*c - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return fallback;
        value = value * 10 + digit;
    }
    return value;
}

long shm_status_tracer_pid(const char *status, size_t length)
{
    static const char key[] = "\nTracerPid:";
    for (size_t i = 0; i + sizeof key - 1 <= length; i++) {
        if (memcmp(status + i, key, sizeof key - 1) != 0)
            continue;
        size_t j = i + sizeof key - 1;
        while (j < length && (status[j] == ' ' || status[j] == '\t'))
            j++;
        long value = 0;
        int digits = 0;
        for (; j < length && status[j] >= '0' && status[j] <= '9' && digits < 10; j++, digits++)
            value = value * 10 + (status[j] - '0');
        return digits ? value : -1;
    }
    return -1;
}

/* The TracerPid of status_path's thread or process; -1 when it cannot be
 * read (a failed open or read, interrupted or not: nothing to conclude). */
static long tracer_pid_in(const char *status_path)
{
    char status[4096];
    int fd;
    do
        fd = open(status_path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    ssize_t length;
    do
        length = read(fd, status, sizeof status);
    while (length < 0 && errno == EINTR);
    close(fd);
    return length > 0 ? shm_status_tracer_pid(status, (size_t)length) : -1;
}

int shm_traced_by(pid_t tracer)
{
    int saved_errno = errno;
    long traced_by = tracer_pid_in("/proc/self/status");
    errno = saved_errno;
    return traced_by == (long)tracer;
}

int shm_thread_let_go(pid_t tracer)
{
    int saved_errno = errno;
    long traced_by = tracer_pid_in("/proc/thread-self/status");
    errno = saved_errno;
    return traced_by >= 0 && traced_by != (long)tracer;
}

int shm_send_fds(int socket_fd, const void *data, size_t length, const int *fds, size_t fd_count)
{
    if (fd_count == 0 || fd_count > SHM_SEND_FDS_MAX || length == 0)
        return -1;
    int saved_errno = errno;
    struct iovec iov = {.iov_base = (void *)data, .iov_len = length};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(SHM_SEND_FDS_MAX * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                             .msg_controllen = CMSG_SPACE(fd_count * sizeof(int))};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
    memcpy(CMSG_DATA(cmsg), fds, fd_count * sizeof(int));
    ssize_t sent;
    for (;;) {
        sent = sendmsg(socket_fd, &message, MSG_NOSIGNAL);
        if (sent >= 0)
            break;
        if (errno == EINTR)
            continue;
        /* The program may have made our end non-blocking: wait for room. */
        struct pollfd writable = {.fd = socket_fd, .events = POLLOUT};
        if (errno != EAGAIN || poll(&writable, 1, SEND_WAIT_MS) != 1)
            break;
    }
    errno = saved_errno;
    return sent == (ssize_t)length ? 0 : -1;
}

int shm_send_region_fd(int socket_fd, int region_fd)
{
    const char kind = SHM_MESSAGE_REGION;
    return shm_send_fds(socket_fd, &kind, 1, &region_fd, 1);
}

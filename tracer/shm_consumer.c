/* shm_consumer.c - see shm_consumer.h. */
#include "shm_consumer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "../common/shm_layout.h"

/* How often slots not known to be active are looked at: a thread's first
 * events wait at most this long (only if its ring fills meanwhile). */
#define FULL_SCAN_INTERVAL_NS 20000000ull
/* Events consumed from one ring between two read_pos updates (power of two). */
#define RELEASE_EVERY 4096u

void shm_consumer_init(struct shm_consumer *consumer)
{
    memset(consumer, 0, sizeof *consumer);
}

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static uint64_t read_ticks(void)
{
#if defined(__x86_64__)
    _mm_lfence();
    uint64_t ticks = __rdtsc();
    _mm_lfence(); /* read before the slots are looked at (see slot_floors) */
    return ticks;
#else
    return 0;
#endif
}

/* Ticks between the two TSC reads around the clock's under which a pair
 * is taken at once (a clean read here takes a few hundred). */
#define CLOCK_PAIR_TICKS_CLEAN 4096u
#define CLOCK_PAIR_TRIES 4

/* A (ticks, ns) pair: the clock read between two TSC reads, the ticks
 * their middle, the narrowest of a few tries. Read plainly, one after the
 * other, an interruption between the two (the tracer preempted, its
 * virtual processor descheduled) put every event converted with the pair
 * off by as long; events of one block converted in two drains then
 * disagreed (fixtures/handoff_end.c on a loaded machine: a free placed
 * 16 us before its allocation, and the block left live). */
static void read_clock_pair(uint64_t *ns, uint64_t *ticks)
{
    uint64_t narrowest = UINT64_MAX;
    for (int try = 0; try < CLOCK_PAIR_TRIES && narrowest > CLOCK_PAIR_TICKS_CLEAN; try++) {
        uint64_t before = read_ticks(), now = monotonic_ns(), after = read_ticks();
        if (after - before < narrowest) {
            narrowest = after - before;
            *ns = now;
            *ticks = before + narrowest / 2;
        }
    }
}

/* Takes a fresh (ticks, ns) pair and the rate since attach; waits out the
 * first half millisecond once, so the rate is right from the first drain. */
static void calibrate_clock(struct shm_consumer *consumer)
{
    do {
        read_clock_pair(&consumer->now_ns, &consumer->now_ticks);
    } while (consumer->now_ns - consumer->base_ns < 500000 && !consumer->ns_per_tick_q32);
    if (consumer->now_ticks > consumer->base_ticks)
        consumer->ns_per_tick_q32 = (uint64_t)((double)(consumer->now_ns - consumer->base_ns) * 4294967296.0 /
                                               (double)(consumer->now_ticks - consumer->base_ticks));
}

/* An event's time in CLOCK_MONOTONIC nanoseconds: the calibration point
 * minus the ticks since the event, at the calibrated rate. In integers
 * (the rate in 32.32 fixed point): this runs for every event, and the
 * floating-point version took a quarter of the drain's instructions. A
 * stamp may be later than the calibration (published since). */
static uint64_t event_time_ns(const struct shm_consumer *consumer, int tsc, uint64_t raw)
{
    if (!tsc)
        return raw;
    int64_t ticks_ago = (int64_t)(consumer->now_ticks - raw);
    int64_t ns_ago = (int64_t)(((__int128)ticks_ago * (__int128)consumer->ns_per_tick_q32) >> 32);
    int64_t ns = (int64_t)consumer->now_ns - ns_ago;
    return ns > 0 ? (uint64_t)ns : 0;
}

/* A region is usable once the shim has published a header that matches the
 * layout this tracer was built with. */
static int header_valid(const struct shm_header *header, pid_t pid)
{
    return __atomic_load_n(&header->ready, __ATOMIC_ACQUIRE) == 1 && header->magic == SHM_MAGIC &&
           header->version == SHM_VERSION && header->total_size == SHM_TOTAL_SIZE &&
           header->slots_offset == SHM_SLOTS_OFFSET && header->slot_size == SHM_SLOT_SIZE &&
           header->max_threads == SHM_MAX_THREADS && header->ring_events == SHM_RING_EVENTS &&
           header->stack_table_offset == SHM_STACK_TABLE_OFFSET &&
           header->stack_table_entries == SHM_STACK_TABLE_ENTRIES &&
           header->stack_index_offset == SHM_STACK_INDEX_OFFSET && header->stack_index_slots == SHM_STACK_INDEX_SLOTS &&
           header->frame_pool_offset == SHM_FRAME_POOL_OFFSET &&
           header->frame_pool_frames == SHM_FRAME_POOL_FRAMES && header->pid == (uint32_t)pid;
}

/* Maps a region's memfd (the descriptor stays the caller's). pid: the
 * process whose region it must be, or 0 for any (then *pid_out says). */
static int map_region(struct shm_consumer *consumer, int fd, pid_t pid, uint64_t skip_inode, pid_t *pid_out)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_ino == skip_inode || (uint64_t)st.st_size < SHM_TOTAL_SIZE)
        return 0;
    void *base = mmap(NULL, SHM_TOTAL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return -1;
    const struct shm_header *header = base;
    pid_t owner = (pid_t)header->pid;
    if ((pid && owner != pid) || !header_valid(header, owner)) {
        munmap(base, SHM_TOTAL_SIZE);
        return 0;
    }
    consumer->base = base;
    consumer->size = SHM_TOTAL_SIZE;
    read_clock_pair(&consumer->base_ns, &consumer->base_ticks);
    consumer->inode = (uint64_t)st.st_ino;
    if (pid_out)
        *pid_out = owner;
    return 1;
}

/* Maps the memfd open in the target as /proc/PID/fd/NAME if it is our region. */
static int try_map_fd(struct shm_consumer *consumer, pid_t pid, const char *fd_name, uint64_t skip_inode)
{
    char path[384], link[256];
    snprintf(path, sizeof path, "/proc/%d/fd/%s", (int)pid, fd_name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0)
        return 0;
    link[n] = '\0';
    if (strncmp(link, "/memfd:" SHM_MEMFD_NAME " ", strlen("/memfd:" SHM_MEMFD_NAME " ")) != 0)
        return 0;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int found = map_region(consumer, fd, pid, skip_inode, NULL);
    close(fd);
    return found;
}

int shm_consumer_attach_fd(struct shm_consumer *consumer, int fd, pid_t *pid)
{
    return map_region(consumer, fd, 0, 0, pid);
}

int shm_consumer_attach(struct shm_consumer *consumer, pid_t pid, uint64_t skip_inode)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    int found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        found = try_map_fd(consumer, pid, entry->d_name, skip_inode);
    }
    closedir(dir);
    return found;
}

_Static_assert(SHM_STACK_NONE == RECORDER_UNSAMPLED, "the recorder knows the shim's id of no backtrace");

/* Frames of a stack id, checked against the layout: the target's memory is
 * not trusted to be intact (a buggy program may scribble over it). A stack
 * whose outer frames are another's span gives both spans. They are the
 * region's own, mapped until the consumer is detached, which the session
 * does after the image's recorder is written and freed; the program could
 * still write over them, which would change words, never where they are. */
static uint32_t lookup_stack(void *context, uint32_t stack_id, const uint64_t **frames, const uint64_t **tail,
                             uint32_t *tail_count)
{
    struct shm_consumer *consumer = context;
    void *base = consumer->base;
    if (stack_id == SHM_STACK_NONE || stack_id >= SHM_STACK_TABLE_ENTRIES)
        return 0;
    const struct shm_stack_entry *entry = &shm_stack_table(base)[stack_id];
    if (__atomic_load_n(&entry->state, __ATOMIC_ACQUIRE) != SHM_STACK_READY)
        return 0;
    uint32_t depth = entry->depth, offset = entry->frame_offset, shared = entry->tail_count;
    uint32_t own = depth - shared, tail_offset = entry->tail_offset;
    if (depth == 0 || depth > SHM_MAX_FRAMES_LIMIT || shared > depth || offset > SHM_FRAME_POOL_FRAMES - own ||
        tail_offset > SHM_FRAME_POOL_FRAMES - shared)
        return 0;
    const uint64_t *pool = shm_frame_pool(base);
    *frames = pool + offset;
    *tail = pool + tail_offset;
    *tail_count = shared;
    return depth;
}

static void apply_event(struct shm_consumer *consumer, struct recorder *recorder, const struct shm_event *event,
                        uint64_t time_ns)
{
    switch (event->kind) {
    case SHM_EV_ALLOC:
        /* A stack id past the table would make the recorder index (and
         * grow its map) by a number the target chose. */
        if (event->stack_id >= SHM_STACK_TABLE_ENTRIES) {
            consumer->invalid_events++;
            break;
        }
        if (__builtin_expect(event->flags & SHM_EVENT_HELD, 0)) {
            if (event->flags & SHM_EVENT_HELD_KEPT)
                recorder_held_kept(recorder, time_ns, event->addr, event->size);
            else
                recorder_held_alloc(recorder, time_ns, event->addr, event->size);
            break;
        }
        recorder_alloc(recorder, time_ns, event->addr, event->size, event->stack_id, lookup_stack, consumer);
        break;
    case SHM_EV_FREE:
        if (__builtin_expect(event->flags & SHM_EVENT_HELD, 0))
            recorder_held_free(recorder, time_ns, event->addr, event->size);
        else
            recorder_free_block(recorder, time_ns, event->addr);
        break;
    case SHM_EV_CASE_BEGIN:
        if (event->addr < SHM_NAME_POOL_BYTES && event->size <= SHM_NAME_POOL_BYTES - event->addr)
            recorder_case_begin(recorder, time_ns, shm_name_pool(consumer->base) + event->addr, (size_t)event->size);
        else
            recorder_case_begin(recorder, time_ns, "?", 1);
        break;
    case SHM_EV_ITERATION:
        recorder_iteration(recorder, time_ns);
        break;
    case SHM_EV_CASE_END:
        recorder_case_end(recorder, time_ns);
        break;
    default:
        consumer->invalid_events++;
        break;
    }
}

struct ring_cursor {
    struct shm_thread_slot *slot;
    uint64_t position, end;
    uint64_t floor; /* the slot's floor (see slot_floors) */
    uint32_t index; /* the slot's, as the recorder's source */
};

/* The event a ring position stands for (positions only grow; the ring wraps). */
static inline const struct shm_event *ring_event(const struct shm_thread_slot *slot, uint64_t position)
{
    return &slot->ring[position & (SHM_RING_EVENTS - 1)];
}

/* Lists the slots in use or holding events, looked at after the clock
 * read clock_now: a slot found free, or past the high-water mark, can only
 * hold events published after it (their floor, see slot_floors). */
static void refresh_active_slots(struct shm_consumer *consumer, uint64_t clock_now)
{
    consumer->active_count = 0;
    const struct shm_header *header = consumer->base;
    consumer->seen_producers = __atomic_load_n(&header->producers, __ATOMIC_ACQUIRE);
    uint32_t high_water = __atomic_load_n(&header->slots_high_water, __ATOMIC_ACQUIRE);
    if (high_water > SHM_MAX_THREADS)
        high_water = SHM_MAX_THREADS; /* the target's memory is not trusted */
    for (uint32_t i = consumer->seen_high_water; i < high_water; i++)
        consumer->slot_floors[i] = consumer->unclaimed_floor; /* claimed since the last look */
    /* the mark only rises; one that seems to fall is the target's scribble,
     * and slots under the old mark keep their floors */
    if (high_water < consumer->seen_high_water)
        high_water = consumer->seen_high_water;
    for (uint32_t i = 0; i < high_water; i++) {
        struct shm_thread_slot *slot = shm_slot(consumer->base, i);
        if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != SHM_SLOT_FREE ||
            __atomic_load_n(&slot->write_pos, __ATOMIC_ACQUIRE) != slot->read_pos)
            consumer->active_slots[consumer->active_count++] = i;
        else
            consumer->slot_floors[i] = clock_now;
    }
    consumer->seen_high_water = high_water;
    consumer->unclaimed_floor = clock_now;
}

/* Whether every slot must be looked at in this drain: asked to, the first
 * time, now and then, and when threads claimed slots since the last look
 * (their first events are then drained at once, not up to 20 ms later). */
static int slots_need_look(const struct shm_consumer *consumer, int full, uint64_t now)
{
    const struct shm_header *header = consumer->base;
    return full || !consumer->last_full_scan_ns || now - consumer->last_full_scan_ns >= FULL_SCAN_INTERVAL_NS ||
           __atomic_load_n(&header->slots_high_water, __ATOMIC_RELAXED) != consumer->seen_high_water ||
           __atomic_load_n(&header->producers, __ATOMIC_RELAXED) != consumer->seen_producers;
}

/* Tells the producer there is room again, and wakes it if it sleeps. */
static void release_ring(struct shm_thread_slot *slot, uint64_t position)
{
    __atomic_store_n(&slot->read_pos, position, __ATOMIC_RELEASE);
    __atomic_add_fetch(&slot->read_seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&slot->producer_waiting, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &slot->read_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A retired slot whose ring is empty goes back to the pool. */
static void recycle_if_retired(struct shm_thread_slot *slot)
{
    uint32_t retired = SHM_SLOT_RETIRED;
    if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) == SHM_SLOT_RETIRED &&
        __atomic_load_n(&slot->write_pos, __ATOMIC_ACQUIRE) == slot->read_pos)
        __atomic_compare_exchange_n(&slot->state, &retired, SHM_SLOT_FREE, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Where the event at the cursor's head goes in time: its stamp, but a
 * repeated stamp no earlier than the ring's floor (see slot_floors). */
static uint64_t head_time(const struct ring_cursor *cursor)
{
    const struct shm_event *head = ring_event(cursor->slot, cursor->position);
    uint64_t t = head->time_ns;
    if ((head->flags & SHM_EVENT_STAMP_REPEATED) && t < cursor->floor)
        t = cursor->floor;
    return t;
}

/* Events between a live-table prefetch and the event it is for: enough
 * to cover a miss to memory with the work of the events in between. */
#define PREFETCH_AHEAD 8u

/* Applies the events of one cursor from its head while they come no later
 * than `until`, the earliest head of the other cursors. */
static size_t consume_run(struct shm_consumer *consumer, struct recorder *recorder, struct ring_cursor *cursor,
                          uint64_t time, uint64_t until, int tsc)
{
    size_t consumed = 0;
    recorder->source = cursor->index;
    for (;;) {
        /* a copy: the target may write over its ring while the bounds of
         * the copied fields are checked */
        struct shm_event event = *ring_event(cursor->slot, cursor->position);
        /* The ring's own events are read in order (the hardware prefetches
         * those); the live-table slots they land on are random. A later
         * event of another ring may be applied first: the prefetch is
         * only wasted then. */
        if (cursor->end - cursor->position > PREFETCH_AHEAD)
            recorder_prefetch(recorder, ring_event(cursor->slot, cursor->position + PREFETCH_AHEAD)->addr);
        cursor->position++;
        apply_event(consumer, recorder, &event, event_time_ns(consumer, tsc, time));
        consumed++;
        /* Give room back as we go: a producer waiting on a full ring
         * resumes after a few thousand events, not after the whole batch. */
        if ((cursor->position & (RELEASE_EVERY - 1)) == 0)
            release_ring(cursor->slot, cursor->position);
        if (cursor->position == cursor->end || (time = head_time(cursor)) > until)
            return consumed;
    }
}

/* Merges the committed events of every cursor by time stamp. Events of one
 * ring are already in order; across rings the stamps order a free before
 * the allocation that reused its address (see shm_layout.h). Runs of one
 * ring that come before every other ring's head are applied without
 * looking at the others again. */
static size_t merge_cursors(struct shm_consumer *consumer, struct recorder *recorder, struct ring_cursor *cursors,
                            size_t count, int tsc)
{
    size_t consumed = 0;
    for (;;) {
        struct ring_cursor *next = NULL;
        uint64_t next_time = 0, until = UINT64_MAX;
        for (size_t i = 0; i < count; i++) {
            struct ring_cursor *c = &cursors[i];
            if (c->position == c->end)
                continue;
            uint64_t t = head_time(c);
            if (!next || t < next_time) {
                if (next)
                    until = next_time;
                next = c, next_time = t;
            } else if (t < until) {
                until = t;
            }
        }
        if (!next)
            return consumed;
        consumed += consume_run(consumer, recorder, next, next_time, until, tsc);
    }
}

struct shm_held_seen *shm_consumer_held_seen(struct shm_consumer *consumer, uint32_t index)
{
    if (index >= SHM_MAX_THREADS)
        return NULL;
    if (!consumer->held_seen && !(consumer->held_seen = calloc(SHM_MAX_THREADS, sizeof *consumer->held_seen)))
        return NULL;
    return &consumer->held_seen[index];
}

/* Counts slot index as running in the rate window (rate_active). */
static void mark_active(struct shm_consumer *consumer, uint32_t index)
{
    if (index < SHM_MAX_THREADS)
        consumer->rate_active[index / 64] |= 1ull << (index % 64);
}

/* Counts the pairs each thread's held set took care of since the last
 * look, and the bytes the sets hold now (common/shm_layout.h, "The held
 * set"). Every slot below the high-water mark: a slot freed since keeps
 * its counters, and a thread that only freed held blocks sent no event. */
static uint64_t account_held(struct shm_consumer *consumer, struct recorder *recorder, uint64_t now)
{
    uint64_t new_pairs = 0;
    /* summed over every slot: a block held in one set may be freed by
     * another thread, whose slot counts the pair */
    uint64_t in_bytes = 0, gone_bytes = 0;
    for (uint32_t i = 0; i < consumer->seen_high_water; i++) {
        const struct shm_thread_slot *slot = shm_slot(consumer->base, i);
        uint64_t pairs = __atomic_load_n(&slot->held_pairs, __ATOMIC_RELAXED);
        uint64_t in = __atomic_load_n(&slot->held_in_bytes, __ATOMIC_RELAXED);
        if (!pairs && !in)
            continue;
        struct shm_held_seen *seen = shm_consumer_held_seen(consumer, i);
        if (!seen)
            return new_pairs;
        uint64_t pair_bytes = __atomic_load_n(&slot->held_pair_bytes, __ATOMIC_RELAXED);
        uint64_t out = __atomic_load_n(&slot->held_out_bytes, __ATOMIC_RELAXED);
        if (pairs > seen->pairs || in != seen->in_seen)
            mark_active(consumer, i);
        seen->in_seen = in;
        if (pairs > seen->pairs) { /* the target's memory is not trusted: never backwards */
            recorder_held_pairs(recorder, pairs - seen->pairs, pair_bytes - seen->pair_bytes);
            new_pairs += pairs - seen->pairs;
            seen->pairs = pairs;
            seen->pair_bytes = pair_bytes;
        }
        in_bytes += in;
        gone_bytes += out + pair_bytes + seen->taken_bytes;
    }
    uint64_t held = in_bytes > gone_bytes ? in_bytes - gone_bytes : 0;
    if (held != recorder->held_bytes)
        recorder_set_held_bytes(recorder, held, now);
    return new_pairs;
}

uint32_t shm_hold_next(uint64_t rate, uint32_t active, uint32_t processors, uint32_t wanted, int *uncrowded)
{
    uint32_t next;
    if (processors && active >= processors)
        next = rate > SHM_HOLD_CROWDED_ON_RATE ? 1 : rate < SHM_HOLD_CROWDED_OFF_RATE ? 0 : wanted;
    else /* between the two rates, only holding that the uncrowded rate started goes on */
        next = rate > SHM_HOLD_ON_RATE ? 1 : rate < SHM_HOLD_OFF_RATE ? 0 : wanted && *uncrowded;
    *uncrowded = next && (rate > SHM_HOLD_ON_RATE || *uncrowded);
    return next;
}

/* How long the rate that decides hold_wanted is measured over. */
#define HOLD_RATE_WINDOW_NS 20000000ull

/* Asks the image's threads to hold their unsampled blocks while its
 * allocations and frees (held pairs counted, so that holding does not
 * hide the rate that started it) come fast enough: shm_layout.h,
 * hold_wanted: faster than SHM_HOLD_ON_RATE, or SHM_HOLD_CROWDED_ON_RATE
 * when as many threads ran in the window as there are processors. */
static void update_hold_wanted(struct shm_consumer *consumer, uint64_t events, uint64_t now)
{
    consumer->rate_events += events;
    if (!consumer->rate_since_ns || now < consumer->rate_since_ns) {
        consumer->rate_since_ns = now;
        consumer->rate_events = 0;
        memset(consumer->rate_active, 0, sizeof consumer->rate_active);
        return;
    }
    uint64_t span = now - consumer->rate_since_ns;
    if (span < HOLD_RATE_WINDOW_NS)
        return;
    uint64_t rate = (uint64_t)((double)consumer->rate_events * 1e9 / (double)span);
    struct shm_header *header = consumer->base;
    uint32_t wanted = __atomic_load_n(&header->hold_wanted, __ATOMIC_RELAXED);
    uint32_t active = 0;
    for (size_t i = 0; i < SHM_MAX_THREADS / 64; i++)
        active += (uint32_t)__builtin_popcountll(consumer->rate_active[i]);
    memset(consumer->rate_active, 0, sizeof consumer->rate_active);
    uint32_t next = shm_hold_next(rate, active, consumer->processors, wanted, &consumer->hold_uncrowded);
    if (next != wanted)
        __atomic_store_n(&header->hold_wanted, next, __ATOMIC_RELAXED);
    consumer->rate_since_ns = now;
    consumer->rate_events = 0;
}

size_t shm_consumer_drain(struct shm_consumer *consumer, struct recorder *recorder, int full)
{
    if (!consumer->base)
        return 0;
    if (!consumer->slot_floors && !(consumer->slot_floors = calloc(SHM_MAX_THREADS, sizeof *consumer->slot_floors)))
        return 0; /* out of memory: the events wait in their rings */
    if (!consumer->active_slots &&
        !(consumer->active_slots = malloc(SHM_MAX_THREADS * sizeof *consumer->active_slots)))
        return 0;
    /* The clock is read before the slots and their write positions: see
     * slot_floors. Events published after that reading convert to times
     * after now_ns. */
    uint64_t now = monotonic_ns();
    const struct shm_header *header = consumer->base;
    int tsc = __atomic_load_n(&header->clock_source, __ATOMIC_RELAXED) == SHM_CLOCK_TSC;
    if (tsc)
        calibrate_clock(consumer);
    uint64_t clock_now = tsc ? consumer->now_ticks : now;
    if (slots_need_look(consumer, full, now)) {
        refresh_active_slots(consumer, clock_now);
        consumer->last_full_scan_ns = now;
    }
    struct ring_cursor cursors[SHM_MAX_THREADS];
    size_t count = 0;
    for (size_t i = 0; i < consumer->active_count; i++) {
        uint32_t index = consumer->active_slots[i];
        struct shm_thread_slot *slot = shm_slot(consumer->base, index);
        uint64_t end = __atomic_load_n(&slot->write_pos, __ATOMIC_ACQUIRE);
        uint64_t position = slot->read_pos;
        if (end - position > SHM_RING_EVENTS) /* corrupted by the target: skip what cannot be real */
            position = end - SHM_RING_EVENTS;
        cursors[count++] = (struct ring_cursor){slot, position, end, consumer->slot_floors[index], index};
        if (position != end) /* the merge takes every cursor to its end */
            mark_active(consumer, index);
        /* consume_run prefetches PREFETCH_AHEAD events ahead: these first */
        for (uint64_t p = position; p != end && p - position < PREFETCH_AHEAD; p++)
            recorder_prefetch(recorder, ring_event(slot, p)->addr);
    }
    size_t consumed = merge_cursors(consumer, recorder, cursors, count, tsc);
    update_hold_wanted(consumer, consumed + 2 * account_held(consumer, recorder, now), now);
    for (size_t i = 0; i < count; i++) {
        if (clock_now > consumer->slot_floors[cursors[i].index])
            consumer->slot_floors[cursors[i].index] = clock_now;
        if (cursors[i].end != cursors[i].slot->read_pos)
            release_ring(cursors[i].slot, cursors[i].end);
        recycle_if_retired(cursors[i].slot);
    }
    consumer->events += consumed;
    return consumed;
}

uint32_t shm_consumer_producers(const struct shm_consumer *consumer)
{
    if (!consumer->base)
        return 0;
    return __atomic_load_n(&((const struct shm_header *)consumer->base)->producers, __ATOMIC_RELAXED);
}

int shm_consumer_doorbell_refused(const struct shm_consumer *consumer)
{
    return consumer->base &&
           __atomic_load_n(&((const struct shm_header *)consumer->base)->doorbell_refused, __ATOMIC_RELAXED) != 0;
}

struct shm_counters shm_consumer_counters(const struct shm_consumer *consumer)
{
    if (!consumer->base)
        return (struct shm_counters){0};
    const struct shm_header *header = consumer->base;
    /* the outcome first (acquire): the shim stores its thread count before
     * it, and an initializer list's order of evaluation is unspecified */
    uint32_t outcome = __atomic_load_n(&header->freeres_outcome, __ATOMIC_ACQUIRE);
    return (struct shm_counters){
        .stacks_dropped = __atomic_load_n(&header->stacks_dropped, __ATOMIC_RELAXED),
        .slots_exhausted = __atomic_load_n(&header->slots_exhausted, __ATOMIC_RELAXED),
        .freeres_outcome = outcome,
        .freeres_other_threads = __atomic_load_n(&header->freeres_other_threads, __ATOMIC_RELAXED),
    };
}

/* Most bytes of TLS and farthest offset from the thread pointer believed:
 * the target writes the region. */
#define SHIM_TLS_MAX (1ull << 20)
#define SHIM_TLS_OFFSET_MAX (1ll << 30)

int shm_consumer_shim_memory(const struct shm_consumer *consumer, struct leakscan_shim_memory *memory,
                             struct leakscan_range **ranges)
{
    memset(memory, 0, sizeof *memory);
    *ranges = NULL;
    if (!consumer->base)
        return 0;
    const struct shm_header *header = consumer->base;
    int64_t tls_offset = __atomic_load_n(&header->shim_tls_offset, __ATOMIC_RELAXED);
    uint64_t tls_size = __atomic_load_n(&header->shim_tls_size, __ATOMIC_RELAXED);
    if (tls_size <= SHIM_TLS_MAX && tls_offset >= -SHIM_TLS_OFFSET_MAX && tls_offset <= SHIM_TLS_OFFSET_MAX) {
        memory->tls_offset = tls_offset;
        memory->tls_size = tls_size;
    }
    /* the target's word: at worst a heuristic on or off that should not be */
    memory->python_version = __atomic_load_n(&header->python_version, __ATOMIC_RELAXED);
    uint32_t used = __atomic_load_n(&header->allocator_ranges_used, __ATOMIC_ACQUIRE);
    if (used > SHM_ALLOCATOR_RANGES)
        used = SHM_ALLOCATOR_RANGES;
    *ranges = malloc((used ? used : 1) * sizeof **ranges);
    if (!*ranges)
        return -1;
    const struct shm_allocator_range *table = shm_allocator_ranges(consumer->base);
    size_t n = 0;
    for (uint32_t i = 0; i < used; i++) {
        uint64_t start = __atomic_load_n(&table[i].start, __ATOMIC_ACQUIRE);
        uint64_t size = __atomic_load_n(&table[i].size, __ATOMIC_ACQUIRE);
        if (start && size && start + size > start)
            (*ranges)[n++] = (struct leakscan_range){start, start + size};
    }
    memory->allocator_ranges = *ranges;
    memory->allocator_range_count = n;
    return 0;
}

void shm_consumer_detach(struct shm_consumer *consumer)
{
    if (consumer->base)
        munmap(consumer->base, consumer->size);
    free(consumer->active_slots);
    free(consumer->held_seen);
    free(consumer->slot_floors);
    shm_consumer_init(consumer);
}

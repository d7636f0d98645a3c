/*
 * tsc_check.c - whether the TSC reads in step on every processor
 * (tsc_check.h). The check is the kernel's own idea (check_tsc_warp in
 * arch/x86/kernel/tsc_sync.c): two processors hand one clock reading back
 * and forth, and each reading taken after seeing the other's must not be
 * lower than it.
 */
#include "tsc_check.h"
#include "session.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* Handovers per pair of processors: a handover costs ~0.2 µs between two
 * processors here, so a pair takes ~0.2 ms when both run. */
#define WARP_ROUNDS 500u
/* Fewer handovers than this (the other processor busy with other work,
 * as on a loaded CI machine) prove nothing: the monotonic clock is kept. */
#define WARP_ROUNDS_NEEDED 100u
/* The whole check's time when every pair is slow. */
#define WARP_BUDGET_NS 20000000ull
#define WARP_PAIR_BUDGET_MIN_NS 200000ull
/* Processors checked against the first at most, spread over the others:
 * two thread creations and 500 handovers each (a TSC out of step is a
 * socket's or a host's, not one processor's). */
#define WARP_PAIRS_MAX 64
/* How long a kept verdict holds (tsc_orders_events_cached): a virtual
 * machine restored from a snapshot on another host keeps its boot id. */
#define VERDICT_LIFE_S 600

static const char *flags_line(const char *cpuinfo)
{
    for (const char *line = cpuinfo; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, "flags", 5) == 0) {
            const char *colon = strchr(line, ':');
            const char *end = strchr(line, '\n');
            if (colon && (!end || colon < end))
                return colon + 1;
        }
    }
    return NULL;
}

static bool line_has_word(const char *line, const char *word)
{
    size_t length = strlen(word);
    for (const char *at = line; (at = strstr(at, word)) != NULL; at += length) {
        const char *end = strchr(line, '\n');
        if (end && at > end)
            return false;
        bool starts = at == line || at[-1] == ' ' || at[-1] == '\t';
        bool ends = at[length] == ' ' || at[length] == '\n' || at[length] == '\0';
        if (starts && ends)
            return true;
    }
    return false;
}

bool cpuinfo_says_tsc_constant(const char *cpuinfo)
{
    const char *flags = flags_line(cpuinfo);
    return flags && line_has_word(flags, "constant_tsc") && line_has_word(flags, "nonstop_tsc");
}

#if defined(__x86_64__)

/* A small file's text, at most size - 1 bytes, NUL-terminated: its
 * length, or -1 (text empty) when it cannot be read. */
static ssize_t read_text(const char *path, char *text, size_t size)
{
    text[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t length = 0;
    ssize_t n = 0;
    while (length < size - 1 && (n = read(fd, text + length, size - 1 - length)) > 0)
        length += (size_t)n;
    close(fd);
    text[length] = '\0';
    return n < 0 && length == 0 ? -1 : (ssize_t)length;
}

struct warp_shared {
    _Alignas(64) uint64_t handed; /* the last reading handed over */
    uint32_t turn;                /* which side reads next */
    uint32_t stop;                /* a side ran out of time */
    uint64_t rounds;              /* handovers by side 0 */
    uint64_t deadline_ns, max_rounds;
};

struct warp_side {
    struct warp_shared *shared;
    uint32_t me;
    uint64_t behind_ticks; /* taken off this side's readings (tests) */
    uint64_t backward_ticks;
};

/* A TSC read that happens after every earlier load, as the kernel's
 * rdtsc_ordered does it. */
static inline uint64_t ordered_tsc(void)
{
    _mm_mfence();
    _mm_lfence();
    uint64_t ticks = __rdtsc();
    _mm_lfence();
    return ticks;
}

static bool wait_for_turn(struct warp_shared *shared, uint32_t me)
{
    for (uint32_t spins = 1;; spins++) {
        if (__atomic_load_n(&shared->turn, __ATOMIC_ACQUIRE) == me)
            return true;
        if (spins % 1024 == 0) {
            if (__atomic_load_n(&shared->stop, __ATOMIC_RELAXED))
                return false;
            if (session_now_ns() > shared->deadline_ns) {
                __atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);
                return false;
            }
        }
        _mm_pause();
    }
}

static void *warp_side_run(void *arg)
{
    struct warp_side *side = arg;
    struct warp_shared *shared = side->shared;
    for (uint64_t round = 0; round < shared->max_rounds; round++) {
        if (!wait_for_turn(shared, side->me))
            break;
        uint64_t handed = __atomic_load_n(&shared->handed, __ATOMIC_RELAXED);
        uint64_t now = ordered_tsc() - side->behind_ticks;
        if (now < handed && handed - now > side->backward_ticks)
            side->backward_ticks = handed - now;
        __atomic_store_n(&shared->handed, now, __ATOMIC_RELAXED);
        if (side->me == 0)
            shared->rounds++;
        __atomic_store_n(&shared->turn, !side->me, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int start_pinned(pthread_t *thread, int cpu, struct warp_side *side)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    if (rc == 0)
        rc = pthread_create(thread, &attr, warp_side_run, side);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

int tsc_warp_between(int cpu_a, int cpu_b, uint64_t b_behind_ticks, uint64_t max_rounds, uint64_t budget_ns,
                     struct tsc_warp *warp)
{
    struct warp_shared shared_line = {.deadline_ns = session_now_ns() + budget_ns, .max_rounds = max_rounds};
    struct warp_shared *shared = &shared_line;
    struct warp_side sides[2] = {{shared, 0, 0, 0}, {shared, 1, b_behind_ticks, 0}};
    pthread_t threads[2];
    if (start_pinned(&threads[0], cpu_a, &sides[0]) < 0)
        return -1;
    if (start_pinned(&threads[1], cpu_b, &sides[1]) < 0) {
        __atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);
        pthread_join(threads[0], NULL);
        return -1;
    }
    pthread_join(threads[0], NULL);
    pthread_join(threads[1], NULL);
    warp->rounds = shared->rounds;
    warp->backward_ticks = sides[0].backward_ticks > sides[1].backward_ticks ? sides[0].backward_ticks
                                                                             : sides[1].backward_ticks;
    return 0;
}

static bool kernel_clocksource_is_tsc(void)
{
    char name[16];
    read_text("/sys/devices/system/clocksource/clocksource0/current_clocksource", name, sizeof name);
    return strcmp(name, "tsc") == 0 || strcmp(name, "tsc\n") == 0;
}

static bool processors_say_tsc_constant(void)
{
    char text[16384]; /* the first processor's lines are enough */
    return read_text("/proc/cpuinfo", text, sizeof text) > 0 && cpuinfo_says_tsc_constant(text);
}

enum verdict { VERDICT_NONE = -1, VERDICT_MONOTONIC = 0, VERDICT_TSC = 1 };

/* The check itself: a verdict, or none when a pair could not hand over
 * often enough to tell. The first processor this process may run on
 * against every configured one (at most WARP_PAIRS_MAX, spread), not only
 * those of its affinity: a program started under `taskset` may widen its
 * own within its cpuset. A processor it can never run on (pinning
 * refused) is left out; pinning refused on one it may run on proves
 * nothing. */
static enum verdict check_processors(void)
{
    if (!processors_say_tsc_constant())
        return VERDICT_MONOTONIC;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0)
        return VERDICT_MONOTONIC;
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    int count = configured > 0 && configured <= CPU_SETSIZE ? (int)configured : CPU_SETSIZE, first = 0;
    while (!CPU_ISSET(first, &allowed))
        first++;
    int stride = count - 1 > WARP_PAIRS_MAX ? (count - 1 + WARP_PAIRS_MAX - 1) / WARP_PAIRS_MAX : 1;
    int pairs = (count - 1) / stride + 1;
    uint64_t pair_budget = WARP_BUDGET_NS / (uint64_t)pairs;
    if (pair_budget < WARP_PAIR_BUDGET_MIN_NS)
        pair_budget = WARP_PAIR_BUDGET_MIN_NS;
    enum verdict verdict = VERDICT_TSC;
    for (int n = 1; n < count; n += stride) {
        int cpu = (first + n) % count;
        struct tsc_warp warp;
        if (tsc_warp_between(first, cpu, 0, WARP_ROUNDS, pair_budget, &warp) < 0) {
            if (CPU_ISSET(cpu, &allowed))
                return VERDICT_NONE;
            continue;
        }
        if (warp.backward_ticks != 0)
            return VERDICT_MONOTONIC;
        if (warp.rounds < WARP_ROUNDS_NEEDED)
            verdict = VERDICT_NONE;
    }
    return verdict;
}

bool tsc_orders_events(void)
{
    return kernel_clocksource_is_tsc() || check_processors() == VERDICT_TSC;
}

/* What a kept verdict is for: this boot, these processors allowed. */
static int verdict_key(char *key, size_t size)
{
    char boot[64];
    if (read_text("/proc/sys/kernel/random/boot_id", boot, sizeof boot) < 32)
        return -1;
    boot[strcspn(boot, "\n")] = '\0';
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -1;
    int last = CPU_SETSIZE - 1;
    while (last > 0 && !CPU_ISSET(last, &allowed))
        last--;
    size_t length = (size_t)snprintf(key, size, "%s ", boot);
    for (int group = last / 4; group >= 0 && length + 2 < size; group--) { /* the mask in hex */
        unsigned nibble = 0;
        for (int bit = 0; bit < 4; bit++)
            nibble |= (unsigned)(CPU_ISSET(group * 4 + bit, &allowed) != 0) << bit;
        key[length++] = "0123456789abcdef"[nibble];
    }
    key[length] = '\0';
    return length + 2 < size ? 0 : -1;
}

static long long now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (long long)now.tv_sec;
}

static enum verdict read_verdict(const char *file, const char *key)
{
    char line[1024];
    ssize_t n = read_text(file, line, sizeof line);
    size_t key_length = strlen(key);
    if (n <= (ssize_t)key_length || memcmp(line, key, key_length) != 0 || line[key_length] != ' ')
        return VERDICT_NONE;
    char *verdict;
    long long checked = strtoll(line + key_length + 1, &verdict, 10);
    long long age = now_seconds() - checked;
    if (*verdict != ' ' || age < 0 || age >= VERDICT_LIFE_S)
        return VERDICT_NONE; /* too old (or from the future): check again */
    verdict++;
    if (strcmp(verdict, "tsc\n") == 0)
        return VERDICT_TSC;
    if (strcmp(verdict, "monotonic\n") == 0)
        return VERDICT_MONOTONIC;
    return VERDICT_NONE; /* damaged or another format: check again */
}

/* Written beside it and renamed over it: a reader sees a whole line. */
static void keep_verdict(const char *file, const char *key, enum verdict verdict)
{
    char temporary[4096];
    if (snprintf(temporary, sizeof temporary, "%s.%d", file, (int)getpid()) >= (int)sizeof temporary)
        return;
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char line[1024];
    int length = snprintf(line, sizeof line, "%s %lld %s\n", key, now_seconds(),
                          verdict == VERDICT_TSC ? "tsc" : "monotonic");
    int written = length > 0 && length < (int)sizeof line && write(fd, line, (size_t)length) == length;
    close(fd);
    if (!written || rename(temporary, file) != 0)
        unlink(temporary);
}

bool tsc_orders_events_cached(const char *file)
{
    if (kernel_clocksource_is_tsc())
        return true;
    char key[512];
    if (!file || verdict_key(key, sizeof key) < 0)
        return check_processors() == VERDICT_TSC;
    enum verdict verdict = read_verdict(file, key);
    if (verdict != VERDICT_NONE)
        return verdict == VERDICT_TSC;
    verdict = check_processors();
    if (verdict != VERDICT_NONE)
        keep_verdict(file, key, verdict);
    return verdict == VERDICT_TSC;
}

#else

int tsc_warp_between(int cpu_a, int cpu_b, uint64_t b_behind_ticks, uint64_t max_rounds, uint64_t budget_ns,
                     struct tsc_warp *warp)
{
    (void)cpu_a, (void)cpu_b, (void)b_behind_ticks, (void)max_rounds, (void)budget_ns;
    *warp = (struct tsc_warp){0, 0};
    return -1;
}

bool tsc_orders_events(void)
{
    return false;
}

bool tsc_orders_events_cached(const char *file)
{
    (void)file;
    return false;
}

#endif

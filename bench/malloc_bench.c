/* malloc_bench - a malloc-heavy workload for measuring allocation tracers.
 *
 *   malloc_bench [-t THREADS] [-n OPS] [-w WORKING_SET] [-s SITES] [-S SEED] [-W WORK]
 *
 * Each of THREADS threads (1: the main thread itself, no pthread_create)
 * keeps WORKING_SET slots of live blocks and performs OPS operations. One
 * operation picks a random slot, frees the block in it (if any: so blocks are
 * freed in random order, not LIFO) and mallocs a new block of a random size
 * in [16, 4096] through one of SITES distinct allocation sites, each reached
 * through a chain of noinline functions so that the backtrace at malloc is
 * about 11 frames deep (main, run_thread, worker, 7 chain levels, the site).
 * The block is written (first and last byte) and read back before it is
 * freed. At the end every remaining block is freed. -W WORK adds WORK steps
 * of the random generator after each operation (about a nanosecond each):
 * the program's own work between allocations, 0 by default.
 *
 * Random numbers come from a xorshift generator with a fixed seed (per thread:
 * SEED + thread index), so every run performs exactly the same calls.
 *
 * stdout: one line, a checksum of the values read back (deterministic).
 * stderr: one line with the exact number of malloc and free calls the
 *         benchmark made itself, so a tracer's totals can be checked.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MAX_SITES 64
#define MIN_SIZE 16
#define MAX_SIZE 4096

/* A compiler barrier after each call keeps the calls out of tail position,
 * so every level keeps its own frame at -O2. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

typedef void *(*site_fn)(size_t size, unsigned tag);

/* SITE(n): a distinct function with its own malloc call. */
#define SITE(n)                                                     \
    static NOINLINE void *site_##n(size_t size, unsigned tag) {     \
        unsigned char *p = malloc(size);                            \
        KEEP_FRAME();                                               \
        if (!p) abort();                                            \
        p[0] = (unsigned char)(tag + (n));                          \
        p[size - 1] = (unsigned char)(tag >> 8);                    \
        return p;                                                   \
    }
#define SITE8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7)
SITE8(1) SITE8(2) SITE8(3) SITE8(4) SITE8(5) SITE8(6) SITE8(7) SITE8(8)

#define S8(a) site_##a##0, site_##a##1, site_##a##2, site_##a##3, \
              site_##a##4, site_##a##5, site_##a##6, site_##a##7
static site_fn const sites[MAX_SITES] = {S8(1), S8(2), S8(3), S8(4), S8(5), S8(6), S8(7), S8(8)};

/* The chain: level_1 -> level_2 -> ... -> level_7 -> sites[site]. */
static NOINLINE void *level_7(size_t size, unsigned site, unsigned tag) {
    void *p = sites[site](size, tag);
    KEEP_FRAME();
    return p;
}
#define LEVEL(n, next)                                                     \
    static NOINLINE void *level_##n(size_t size, unsigned site, unsigned tag) { \
        void *p = level_##next(size, site, tag);                          \
        KEEP_FRAME();                                                      \
        return p;                                                          \
    }
LEVEL(6, 7) LEVEL(5, 6) LEVEL(4, 5) LEVEL(3, 4) LEVEL(2, 3) LEVEL(1, 2)

struct worker {
    unsigned index;
    uint64_t ops, working_set, nsites, seed, work;
    uint64_t mallocs, frees, checksum;
};

static inline uint64_t next_random(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

struct block { unsigned char *p; uint32_t size; };

static NOINLINE void worker_loop(struct worker *w) {
    struct block *slot = calloc(w->working_set, sizeof *slot);
    if (!slot) abort();
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ (w->seed + w->index * 0x100000001B3ull);
    uint64_t sum = 0, mallocs = 0, frees = 0;
    for (uint64_t i = 0; i < w->ops; i++) {
        uint64_t r = next_random(&rng);
        struct block *b = &slot[r % w->working_set];
        if (b->p) {
            sum += b->p[0] + ((uint64_t)b->p[b->size - 1] << 8) + b->size;
            free(b->p);
            frees++;
        }
        uint64_t r2 = next_random(&rng);
        size_t size = MIN_SIZE + (size_t)(r2 % (MAX_SIZE - MIN_SIZE + 1));
        unsigned site = (unsigned)((r2 >> 32) % w->nsites);
        b->p = level_1(size, site, (unsigned)(r2 >> 16));
        b->size = (uint32_t)size;
        mallocs++;
        /* -W: the program's own work between allocations (0 by default:
         * nothing but allocation, the worst case for a recorder) */
        for (uint64_t k = 0; k < w->work; k++)
            sum += next_random(&rng) >> 60;
    }
    for (uint64_t j = 0; j < w->working_set; j++) {
        if (slot[j].p) {
            sum += slot[j].p[0] + slot[j].size;
            free(slot[j].p);
            frees++;
        }
    }
    free(slot);
    w->mallocs = mallocs + 1; /* the slot array */
    w->frees = frees + 1;
    w->checksum = sum;
}

static NOINLINE void *run_thread(void *arg) {
    worker_loop(arg);
    KEEP_FRAME();
    return NULL;
}

static uint64_t parse_u64(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (*s == '\0' || *end != '\0') {
        fprintf(stderr, "malloc_bench: bad %s: %s\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    uint64_t threads = 1, ops = 1000000, working_set = 4096, nsites = 8, seed = 1, work = 0;
    int c;
    while ((c = getopt(argc, argv, "t:n:w:s:S:W:")) != -1) {
        switch (c) {
        case 't': threads = parse_u64(optarg, "thread count"); break;
        case 'n': ops = parse_u64(optarg, "operation count"); break;
        case 'w': working_set = parse_u64(optarg, "working set"); break;
        case 's': nsites = parse_u64(optarg, "site count"); break;
        case 'S': seed = parse_u64(optarg, "seed"); break;
        case 'W': work = parse_u64(optarg, "work per operation"); break;
        default:
            fprintf(stderr, "usage: malloc_bench [-t THREADS] [-n OPS per thread] "
                            "[-w WORKING_SET] [-s SITES 1-64] [-S SEED] [-W WORK]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || working_set < 1 || nsites < 1 || nsites > MAX_SITES) {
        fprintf(stderr, "malloc_bench: need 1-256 threads, working set >= 1, 1-64 sites\n");
        return 2;
    }
    /* Fixed storage for the workers: the benchmark's own bookkeeping is not
     * allocated with malloc (only the slot arrays, which are counted). */
    static struct worker workers[256];
    static pthread_t tids[256];
    for (uint64_t i = 0; i < threads; i++)
        workers[i] = (struct worker){.index = (unsigned)i, .ops = ops, .working_set = working_set,
                                     .nsites = nsites, .seed = seed, .work = work};
    if (threads == 1) {
        run_thread(&workers[0]);
    } else {
        for (uint64_t i = 0; i < threads; i++)
            if (pthread_create(&tids[i], NULL, run_thread, &workers[i]) != 0) {
                fprintf(stderr, "malloc_bench: pthread_create failed\n");
                return 1;
            }
        for (uint64_t i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    }
    uint64_t mallocs = 0, frees = 0, checksum = 0;
    for (uint64_t i = 0; i < threads; i++) {
        mallocs += workers[i].mallocs;
        frees += workers[i].frees;
        checksum = checksum * 1000003u + workers[i].checksum;
    }
    /* The benchmark's own CPU time, without a tracer's: what the shim costs
     * inside the program, apart from the tracer's share of the machine. */
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu_s = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                   (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    fprintf(stderr, "malloc_bench: threads=%llu ops=%llu mallocs=%llu frees=%llu cpu_s=%.3f\n",
            (unsigned long long)threads, (unsigned long long)ops,
            (unsigned long long)mallocs, (unsigned long long)frees, cpu_s);
    printf("checksum %016llx\n", (unsigned long long)checksum);
    return 0;
}

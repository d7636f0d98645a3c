/*
 * classify_bench.c - the leak classification alone (leakscan_classify) on
 * a synthetic in-memory heap: BLOCKS blocks of SIZE bytes laid out like
 * glibc's (16-byte headers between them), one word in four pointing at a
 * random block, all reachable from one root array. Prints the scan rate.
 *
 *   classify_bench [BLOCKS [SIZE [POINTER_EVERY]]]   default 4000000 256 4
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../leakscan/leakscan.h"

struct image {
    uint64_t base, length;
    const uint8_t *bytes;
};

static const void *image_view(void *context, uint64_t address, size_t length)
{
    const struct image *m = context;
    if (address < m->base || address + length > m->base + m->length)
        return NULL;
    return m->bytes + (address - m->base);
}

static int image_read(void *context, uint64_t address, void *buffer, size_t length)
{
    const void *view = image_view(context, address, length);
    if (view)
        memcpy(buffer, view, length);
    else
        memset(buffer, 0, length);
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
    size_t size = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    size_t every = argc > 3 ? strtoull(argv[3], NULL, 10) : 4;
    size_t stride = size + 16, root_bytes = count * 8;
    struct image m = {.base = 0x100000000ull, .length = count * stride + root_bytes};
    uint8_t *bytes = calloc(1, m.length);
    struct leakscan_block *blocks = calloc(count, sizeof *blocks);
    if (!bytes || !blocks)
        return 1;
    m.bytes = bytes;
    uint64_t state = 88172645463325252ull;
    for (size_t i = 0; i < count; i++)
        blocks[i] = (struct leakscan_block){.address = m.base + 16 + i * stride, .size = size};
    for (size_t i = 0; i < count; i++) {
        uint64_t *w = (uint64_t *)(bytes + 16 + i * stride);
        for (size_t k = 0; k < size / 8; k++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            w[k] = k % every == 0 ? blocks[state % count].address : (state & 0xffffffffu);
        }
    }
    uint64_t *roots = (uint64_t *)(bytes + count * stride);
    for (size_t i = 0; i < count; i++)
        roots[i] = blocks[i].address;
    struct leakscan_range root = {m.base + count * stride, m.base + m.length};
    struct leakscan_image image = {.memory = {.read = image_read, .view = image_view, .context = &m},
                                   .roots = &root, .root_count = 1};
    struct leakscan_totals totals;
    struct leakscan_stats stats;
    char err[256];
    double t0 = now();
    if (leakscan_classify(&image, blocks, count, &totals, &stats, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double seconds = now() - t0;
    double scanned = (double)(stats.root_bytes + stats.block_bytes);
    printf("classify: %zu blocks x %zu B, a pointer every %zu words: %.1f MiB scanned in %.3f s CPU = %.2f GB/s; "
           "%llu reachable\n",
           count, size, every, scanned / (1 << 20), seconds, scanned / seconds / 1e9,
           (unsigned long long)totals.blocks[TRACE_LEAK_REACHABLE]);
    free(bytes);
    free(blocks);
    return 0;
}

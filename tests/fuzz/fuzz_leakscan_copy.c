/* fuzz_leakscan_copy.c - libFuzzer target: the leak scan of any memory
 * (its words are the program's, so untrusted) read directly and through
 * the copy a case check takes (leakscan/memory_copy.c), which must
 * classify every block the same; again as a CPython process (the version
 * from the header), directly, which may only raise a block's category,
 * and through the copy, which must match a direct scan of what the copy
 * holds; the direct scan looks words up as its
 * size makes it (at once, here), the one through the copy through the
 * pipeline, so the two lookups are compared too. The input is the memory of a 64 KiB heap
 * and a 4 KiB root area, after a header that places up to 64 blocks in
 * the heap (sorted, overlaps clipped) and a root range that need not
 * start or end on a word; a spare buffer, too small or too large, is
 * offered to the copy when the header asks. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../leakscan/leakscan_internal.h"

#define HEAP 0x100000000ull
#define HEAP_SIZE 65536u
#define ROOT 0x200000000ull
#define ROOT_SIZE 4096u
#define MAX_BLOCKS 64u

struct image {
    uint8_t heap[HEAP_SIZE], root[ROOT_SIZE];
};

/* The part of [address, address + length) inside one area, copied. */
static void read_area(const uint8_t *area, uint64_t base, size_t size, uint64_t address, uint8_t *out,
                      size_t length)
{
    uint64_t from = address > base ? address : base, to = address + length < base + size ? address + length : base + size;
    if (from < to)
        memcpy(out + (from - address), area + (from - base), (size_t)(to - from));
}

static int image_read(void *context, uint64_t address, void *buffer, size_t length)
{
    const struct image *image = context;
    memset(buffer, 0, length);
    read_area(image->heap, HEAP, HEAP_SIZE, address, buffer, length);
    read_area(image->root, ROOT, ROOT_SIZE, address, buffer, length);
    return 0;
}

static int compare_addresses(const void *a, const void *b)
{
    const struct leakscan_block *x = a, *y = b;
    return x->address < y->address ? -1 : x->address > y->address;
}

/* Up to MAX_BLOCKS blocks from the header (4 bytes each), sorted, none
 * overlapping the one before. */
static size_t place_blocks(const uint8_t *header, size_t count, struct leakscan_block *blocks)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t offset = (uint32_t)header[4 * i] | (uint32_t)header[4 * i + 1] << 8;
        uint32_t size = ((uint32_t)header[4 * i + 2] | (uint32_t)(header[4 * i + 3] & 0x0f) << 8);
        blocks[i] = (struct leakscan_block){HEAP + offset, size, (uint32_t)i, 0};
    }
    qsort(blocks, count, sizeof *blocks, compare_addresses);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        struct leakscan_block b = blocks[i];
        if (b.address + b.size > HEAP + HEAP_SIZE)
            b.size = HEAP + HEAP_SIZE - b.address;
        if (kept && leakscan_block_end(&blocks[kept - 1]) > b.address)
            continue;
        b.stack_id = (uint32_t)kept;
        blocks[kept++] = b;
    }
    return kept;
}

/* A block's rank: lost, possibly lost, still reachable. */
static int rank(uint32_t category)
{
    return category == TRACE_LEAK_REACHABLE ? 2 : category == TRACE_LEAK_POSSIBLE ? 1 : 0;
}

/* The python heuristic and CPython 3.12's immortal roots read the words
 * the memory holds as objects and types; they only ever make a block more
 * reachable than memcheck's rules alone (classified is `plain`'s result). */
static void check_python_only_raises(const struct leakscan_image *plain, const struct leakscan_block *classified,
                                     size_t n, unsigned version_choice)
{
    static const uint32_t versions[4] = {0x030a0000, 0x030b0000, 0x030c0000, 0x030d0000};
    struct leakscan_image python = *plain;
    python.python_version = versions[version_choice];
    struct leakscan_block blocks[MAX_BLOCKS];
    memcpy(blocks, classified, n * sizeof *blocks);
    char err[256];
    if (leakscan_classify(&python, blocks, n, NULL, NULL, err, sizeof err) != 0)
        abort();
    for (size_t i = 0; i < n; i++)
        if (blocks[i].stack_id != classified[i].stack_id || rank(blocks[i].category) < rank(classified[i].category))
            abort();
}

/* The fuzzed memory as the copy holds it: the root range, and the heap's
 * pages that hold blocks (memory_copy.c); zeros elsewhere. */
struct held {
    const struct image *image;
    struct leakscan_range root;
    uint32_t pages; /* a bit per heap page that holds a block */
};

static int held_read(void *context, uint64_t address, void *buffer, size_t length)
{
    const struct held *h = context;
    image_read((void *)h->image, address, buffer, length);
    for (size_t i = 0; i < length; i++) {
        uint64_t at = address + i;
        bool in_root = at >= h->root.start && at < h->root.end;
        bool in_page = at >= HEAP && at < HEAP + HEAP_SIZE && (h->pages >> ((at - HEAP) / 4096) & 1);
        if (!in_root && !in_page)
            ((uint8_t *)buffer)[i] = 0;
    }
    return 0;
}

/* The CPython pass reads types and objects wherever the words point: from
 * the copy it must see what a direct scan of the memory the copy holds
 * sees, block for block. */
static void check_python_copy(const struct leakscan_image *plain, const struct leakscan_image *from_copy,
                              const struct leakscan_block *placed, size_t n, unsigned version_choice)
{
    static const uint32_t versions[4] = {0x030a0000, 0x030b0000, 0x030c0000, 0x030d0000};
    struct held held = {(const struct image *)plain->memory.context, plain->roots[0], 0};
    for (size_t i = 0; i < n; i++) {
        uint64_t last = placed[i].address + (placed[i].size ? placed[i].size : 1) - 1;
        for (uint64_t page = (placed[i].address - HEAP) / 4096; page <= (last - HEAP) / 4096 && page < 32; page++)
            held.pages |= 1u << page;
    }
    struct leakscan_image direct = *plain, copied = *from_copy;
    direct.memory = (struct leakscan_memory){.read = held_read, .context = &held};
    direct.python_version = copied.python_version = versions[version_choice];
    struct leakscan_block a[MAX_BLOCKS], b[MAX_BLOCKS];
    memcpy(a, placed, n * sizeof *a);
    memcpy(b, placed, n * sizeof *b);
    char err[256];
    if (leakscan_classify(&direct, a, n, NULL, NULL, err, sizeof err) != 0 ||
        leakscan_classify(&copied, b, n, NULL, NULL, err, sizeof err) != 0)
        abort();
    for (size_t i = 0; i < n; i++)
        if (a[i].stack_id != b[i].stack_id || a[i].category != b[i].category)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    size_t count = data[0] % (MAX_BLOCKS + 1);
    size_t header = 6 + 4 * count;
    if (size < header)
        return 0;
    static struct image image;
    memset(&image, 0, sizeof image);
    size_t rest = size - header;
    memcpy(image.heap, data + header, rest < HEAP_SIZE ? rest : HEAP_SIZE);
    if (rest > HEAP_SIZE)
        memcpy(image.root, data + header + HEAP_SIZE, rest - HEAP_SIZE < ROOT_SIZE ? rest - HEAP_SIZE : ROOT_SIZE);

    struct leakscan_block direct[MAX_BLOCKS], copied[MAX_BLOCKS];
    size_t n = place_blocks(data + 6, count, direct);
    memcpy(copied, direct, n * sizeof *direct);
    uint32_t from = data[1] | (uint32_t)(data[2] & 0x0f) << 8, length = data[3] | (uint32_t)(data[4] & 0x0f) << 8;
    uint64_t root_end = ROOT + from + length < ROOT + ROOT_SIZE ? ROOT + from + length : ROOT + ROOT_SIZE;
    struct leakscan_range root = {ROOT + from, root_end > ROOT + from ? root_end : ROOT + from};
    uint64_t words[2] = {HEAP + (data[5] & 0xf0) * 16u, HEAP + (data[5] & 0x0f) * 256u + 8};

    struct leakscan_image plain = {.memory = {.read = image_read, .context = &image},
                                   .roots = &root, .root_count = 1, .root_words = words, .root_word_count = 2};
    struct leakscan_totals totals_direct, totals_copied;
    char err[256];
    int rc_direct = leakscan_classify(&plain, direct, n, &totals_direct, NULL, err, sizeof err);

    struct leakscan_buffer spare = {0};
    if (data[5] & 0x80) { /* a spare of a page, grown by the copy; or of 4 MiB, larger than four times */
        size_t spare_size = data[5] & 0x40 ? 4u << 20 : 4096u;
        void *bytes = mmap(NULL, spare_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (bytes == MAP_FAILED)
            abort();
        memset(bytes, 0xa5, spare_size); /* stale bytes of an earlier copy */
        spare = (struct leakscan_buffer){.bytes = bytes, .size = spare_size};
    }
    struct leakscan_copy copy;
    if (leakscan_copy_take(&copy, &plain.memory, &root, 1, copied, n, 1u << 30, &spare) != 0)
        abort();
    leakscan_buffer_free(&spare);
    struct leakscan_image from_copy = plain;
    from_copy.word_lookup = LEAKSCAN_WORDS_PIPELINED;
    leakscan_copy_as_memory(&copy, &from_copy.memory);
    int rc_copied = leakscan_classify(&from_copy, copied, n, &totals_copied, NULL, err, sizeof err);
    if (rc_copied == 0)
        check_python_copy(&plain, &from_copy, copied, n, data[2] >> 4 & 3);
    leakscan_copy_free(&copy);

    if (rc_direct != rc_copied)
        abort();
    if (rc_direct == 0) {
        for (size_t i = 0; i < n; i++)
            if (direct[i].stack_id != copied[i].stack_id || direct[i].category != copied[i].category)
                abort();
        if (memcmp(&totals_direct, &totals_copied, sizeof totals_direct) != 0)
            abort();
        check_python_only_raises(&plain, direct, n, data[2] >> 4 & 3);
    }
    return 0;
}

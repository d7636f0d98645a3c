/*
 * heap_graph.c - a large heap for the leak-scan benchmark: BLOCKS blocks of
 * SIZE bytes (default 4,000,000 x 256 = about 1 GiB of user memory), each
 * holding pointers to random other blocks (one word in four; the rest
 * random non-pointer data), all reachable from a global index, except
 * every hundredth block, dropped from the index (found again or not,
 * depending on the random pointers). Prints "pid N ready" and waits for
 * stdin to end (mode wait) or exits at once (mode exit, for memcheck).
 *
 *   heap_graph [BLOCKS [SIZE [wait|exit]]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void **index_of_blocks;

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

int main(int argc, char **argv)
{
    size_t blocks = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
    size_t size = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    int wait = argc > 3 ? strcmp(argv[3], "exit") != 0 : 1;
    size_t words = size / 8;
    uint64_t state = 88172645463325252ull;
    index_of_blocks = malloc(blocks * sizeof *index_of_blocks);
    for (size_t i = 0; i < blocks; i++)
        index_of_blocks[i] = malloc(size);
    for (size_t i = 0; i < blocks; i++) {
        uint64_t *w = index_of_blocks[i];
        for (size_t k = 0; k < words; k++)
            w[k] = k % 4 == 0 ? (uint64_t)(uintptr_t)index_of_blocks[next_random(&state) % blocks]
                              : next_random(&state) & 0xffffffffu;
    }
    for (size_t i = 0; i < blocks; i += 100)
        index_of_blocks[i] = NULL;
    printf("pid %d ready: %zu blocks of %zu bytes\n", (int)getpid(), blocks, size);
    fflush(stdout);
    if (wait) {
        char byte;
        while (read(0, &byte, 1) == 1)
            ;
    }
    return 0;
}

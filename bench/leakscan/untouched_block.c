/*
 * untouched_block.c - a program with one large block it never writes
 * (issue 19: the leak scan once read every byte of it). Usage:
 *   untouched_block GIB exit    allocate GIB GiB, write its first word, exit
 *   untouched_block GIB wait    the same, print "ready", wait for stdin to close
 * The block stays reachable from a global, so the scan must visit it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *volatile block;

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: untouched_block GIB exit|wait\n");
        return 2;
    }
    size_t size = (size_t)strtoul(argv[1], NULL, 10) << 30;
    block = malloc(size);
    if (!block) {
        fprintf(stderr, "untouched_block: cannot allocate %s GiB\n", argv[1]);
        return 1;
    }
    block[0] = 1;
    if (strcmp(argv[2], "wait") == 0) {
        printf("ready\n");
        fflush(stdout);
        while (getchar() != EOF)
            ;
    }
    return 0;
}

/*
 * read_set.h - the memory a computation read, and what it held: enough to
 * tell later, by reading those words again, that the computation would
 * give the same result (preload/capture_cache.h keeps whole backtraces
 * this way).
 *
 * The words are kept in the order they were read, and checked in that
 * order, stopping at the first that differs: a computation that chases
 * pointers reads later words at addresses it found in earlier ones, and
 * only while those still hold what they held is the next address one the
 * computation itself would read now (and so one safe to read). A field
 * narrower than a word is kept as the aligned word around it with a mask:
 * an aligned word never crosses a page, so reading it is as safe as
 * reading the field.
 */
#ifndef MEMSLOPE_READ_SET_H
#define MEMSLOPE_READ_SET_H

#include <stdbool.h>
#include <stdint.h>

/* Enough for a backtrace of about 20 native frames and 10 Python frames
 * (fast_unwind: one or two words a frame; python_runtime: nine). */
#define READ_SET_MAX 128u

struct read_set_word {
    uint64_t address; /* 8-aligned */
    uint64_t expected;
    uint64_t mask; /* the bits read */
};

struct read_set {
    uint32_t count;
    bool overflow; /* more words were read than it holds: it tells nothing */
    struct read_set_word words[READ_SET_MAX];
};

static inline void read_set_clear(struct read_set *set)
{
    set->count = 0;
    set->overflow = false;
}

/* The adders take a NULL set, and then keep nothing: one walk of memory
 * serves both ways. */
static inline void read_set_add_masked(struct read_set *set, uint64_t address, uint64_t expected, uint64_t mask)
{
    if (!set)
        return;
    if (set->count == READ_SET_MAX) {
        set->overflow = true;
        return;
    }
    set->words[set->count++] = (struct read_set_word){address, expected & mask, mask};
}

/* A whole word the computation read at address (8-aligned). */
static inline void read_set_add_word(struct read_set *set, uint64_t address, uint64_t value)
{
    read_set_add_masked(set, address, value, ~0ull);
}

/* A field of width bytes (1 to 8) at address: the aligned words around
 * it, masked to the field. */
static inline void read_set_add_field(struct read_set *set, uint64_t address, uint32_t width)
{
    while (set && width > 0) {
        uint64_t aligned = address & ~7ull;
        uint32_t offset = (uint32_t)(address & 7), here = 8 - offset < width ? 8 - offset : width;
        uint64_t mask = (here == 8 ? ~0ull : ((1ull << (here * 8)) - 1)) << (offset * 8);
        read_set_add_masked(set, aligned, *(const uint64_t *)(uintptr_t)aligned, mask);
        address += here;
        width -= here;
    }
}

static inline bool read_set_word_changed(const struct read_set_word *word)
{
    return ((*(const uint64_t *)(uintptr_t)word->address ^ word->expected) & word->mask) != 0;
}

/* Whether every word still holds what it held, read in order (each
 * compared before the next is read). Four at a time: a hit checks about
 * forty, and the loop's own count was a quarter of its instructions. */
static inline bool read_set_holds(const struct read_set_word *words, uint32_t count)
{
    const struct read_set_word *word = words, *end = words + count;
    for (; end - word >= 4; word += 4)
        if (read_set_word_changed(&word[0]) || read_set_word_changed(&word[1]) ||
            read_set_word_changed(&word[2]) || read_set_word_changed(&word[3]))
            return false;
    for (; word < end; word++)
        if (read_set_word_changed(word))
            return false;
    return true;
}

#endif

/*
 * word_map.h - a map from 64-bit words (addresses, frame words) to 64-bit
 * values: open addressing with linear probing, at most half full, no
 * deletion.
 *
 * For the tracer's per-address lookups over every frame of every new
 * stack (hundreds of thousands at a Python process's end), where uthash's
 * chained buckets cost ~280 instructions a lookup (a byte-wise hash, a
 * walk of several entries with a memcmp each): here a multiply, a shift
 * and usually one slot. Any word is a key, 0 included.
 */
#ifndef MEMSLOPE_WORD_MAP_H
#define MEMSLOPE_WORD_MAP_H

#include <stddef.h>
#include <stdint.h>

struct word_map_slot {
    uint64_t key;
    uint64_t value;
};

struct word_map {
    struct word_map_slot *slots; /* capacity slots; key 0 marks an empty one */
    size_t capacity;             /* power of two, or 0 before the first insert */
    unsigned shift;              /* 64 - log2(capacity): a key's slot is the product's top bits */
    size_t count;                /* keys, the zero key included */
    int has_zero;                /* the key 0 lives here, not in slots */
    uint64_t zero_value;
};

void word_map_init(struct word_map *map);
void word_map_free(struct word_map *map);

/* The value of key, or NULL when absent; valid until the next insert. */
uint64_t *word_map_find(const struct word_map *map, uint64_t key);

/* Sets key's value (inserting it, or replacing its value). 0, or -1 when
 * out of memory (the map is unchanged). */
int word_map_put(struct word_map *map, uint64_t key, uint64_t value);

/* Walks the entries in no particular order: *position starts at 0;
 * returns 0 after the last one. */
int word_map_next(const struct word_map *map, size_t *position, uint64_t *key, uint64_t *value);

#endif

/* word_map.c - see word_map.h. */
#include "word_map.h"

#include <stdlib.h>

#define FIRST_CAPACITY 64u

void word_map_init(struct word_map *map)
{
    *map = (struct word_map){0};
}

void word_map_free(struct word_map *map)
{
    free(map->slots);
    word_map_init(map);
}

/* Fibonacci hashing: the top bits of the product depend on every bit of
 * the key, so addresses that differ only in their low bits (neighbouring
 * return addresses) or only in their high ones (Python frame words) spread. */
static size_t slot_of(uint64_t key, unsigned shift)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> shift);
}

uint64_t *word_map_find(const struct word_map *map, uint64_t key)
{
    if (key == 0)
        return map->has_zero ? (uint64_t *)&map->zero_value : NULL;
    if (!map->capacity)
        return NULL;
    for (size_t i = slot_of(key, map->shift);; i = (i + 1) & (map->capacity - 1)) {
        struct word_map_slot *slot = &map->slots[i];
        if (slot->key == key)
            return &slot->value;
        if (slot->key == 0)
            return NULL;
    }
}

static void place(struct word_map_slot *slots, size_t capacity, unsigned shift, uint64_t key, uint64_t value)
{
    size_t i = slot_of(key, shift);
    while (slots[i].key != 0)
        i = (i + 1) & (capacity - 1);
    slots[i] = (struct word_map_slot){key, value};
}

static int grow(struct word_map *map)
{
    size_t capacity = map->capacity ? map->capacity * 2 : FIRST_CAPACITY;
    unsigned shift = 64u - (unsigned)__builtin_ctzll(capacity);
    struct word_map_slot *slots = calloc(capacity, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < map->capacity; i++)
        if (map->slots[i].key != 0)
            place(slots, capacity, shift, map->slots[i].key, map->slots[i].value);
    free(map->slots);
    map->slots = slots;
    map->capacity = capacity;
    map->shift = shift;
    return 0;
}

int word_map_put(struct word_map *map, uint64_t key, uint64_t value)
{
    uint64_t *found = word_map_find(map, key);
    if (found) {
        *found = value;
        return 0;
    }
    if (key == 0) {
        map->has_zero = 1;
        map->zero_value = value;
        map->count++;
        return 0;
    }
    size_t in_slots = map->count - (size_t)map->has_zero;
    if ((in_slots + 1) * 2 > map->capacity && grow(map) < 0)
        return -1;
    place(map->slots, map->capacity, map->shift, key, value);
    map->count++;
    return 0;
}

int word_map_next(const struct word_map *map, size_t *position, uint64_t *key, uint64_t *value)
{
    /* position 0 is the zero key, slot i is position i + 1 */
    if (*position == 0) {
        *position = 1;
        if (map->has_zero) {
            *key = 0;
            *value = map->zero_value;
            return 1;
        }
    }
    for (; *position <= map->capacity; (*position)++) {
        const struct word_map_slot *slot = &map->slots[*position - 1];
        if (slot->key != 0) {
            (*position)++;
            *key = slot->key;
            *value = slot->value;
            return 1;
        }
    }
    return 0;
}

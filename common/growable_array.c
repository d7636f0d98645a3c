/* growable_array.c - see growable_array.h. */
#include "growable_array.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAPACITY 16

int growable_array_grow(void *items, size_t *capacity, size_t needed, size_t item_size)
{
    if (needed <= *capacity)
        return 0;
    if (*capacity > SIZE_MAX / 2)
        return -1;
    size_t grown = *capacity ? *capacity * 2 : FIRST_CAPACITY;
    while (grown < needed) {
        if (grown > SIZE_MAX / 2)
            return -1;
        grown *= 2;
    }
    if (item_size && grown > SIZE_MAX / item_size)
        return -1;
    /* The caller's pointer is read and written through memcpy: items may
     * point at any type of pointer. */
    void *array;
    memcpy(&array, items, sizeof array);
    void *resized = realloc(array, grown * item_size);
    if (!resized)
        return -1;
    memcpy(items, &resized, sizeof resized);
    *capacity = grown;
    return 0;
}

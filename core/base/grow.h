/* core/base/grow.h — room for one more item in an array that doubles as it fills (base/grow.c). */
#ifndef KHOST_CORE_GROW_H
#define KHOST_CORE_GROW_H

#include <stddef.h>
#include <stdint.h>

/* items (of size bytes each) reallocated to twice *cap, or to first when *cap is 0. Returns the new array and
 * sets *cap; NULL when out of memory, with items and *cap untouched so the caller's array stays valid. */
void *kh_grow(void *items, int *cap, size_t size, int first);
/* item (size bytes) copied to the end of an array of *n items, the array grown by kh_grow when full. items is
 * the address of the array's pointer (any T **), read and written with memcpy so one function serves every T.
 * 0 ok; -1 out of memory, nothing changed. */
int kh_append(void *items, int *n, int *cap, const void *item, size_t size, int first);
/* The same growth for an int64_t capacity. */
void *kh_grow64(void *items, int64_t *cap, size_t size, int64_t first);
#endif

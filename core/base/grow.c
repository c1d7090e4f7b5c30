/* core/base/grow.c — the doubling growth every list of the host shares (records, plans, caches, modules). */
#include "base/grow.h"

#include <stdlib.h>
#include <string.h>

void *kh_grow64(void *items, int64_t *cap, size_t size, int64_t first) {
    int64_t n = *cap ? *cap * 2 : first;
    void *v = realloc(items, (size_t)n * size);
    if (v) *cap = n;
    return v;
}

void *kh_grow(void *items, int *cap, size_t size, int first) {
    int64_t n = *cap;
    void *v = kh_grow64(items, &n, size, first);
    if (v) *cap = (int)n;
    return v;
}

int kh_append(void *items, int *n, int *cap, const void *item, size_t size, int first) {
    char *v;
    memcpy(&v, items, sizeof v);
    if (*n == *cap) {
        if (!(v = kh_grow(v, cap, size, first))) return -1;
        memcpy(items, &v, sizeof v);
    }
    memcpy(v + (size_t)*n * size, item, size);
    (*n)++;
    return 0;
}

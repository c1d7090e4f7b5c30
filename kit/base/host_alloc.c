/* kit/base/host_alloc.c — a backend's long-lived buffers: zeroed, through the host's allocator when it lends
 * one (accounted, aligned), else 64-byte aligned from the C library. */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/alloc.h"

void *kh_host_alloc(const kh_host_api *h, size_t bytes) {
    if (bytes == 0) bytes = 64;
    void *p = h && h->alloc ? h->alloc(bytes) : aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p) memset(p, 0, bytes);
    return p;
}

void kh_host_free(const kh_host_api *h, void *p) {
    if (!p) return;
    if (h && h->alloc && h->free) h->free(p);
    else free(p);
}

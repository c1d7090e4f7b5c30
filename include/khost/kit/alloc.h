/* khost/kit/alloc.h — a backend's long-lived buffers through the host's allocator (kit/base/host_alloc.c). */
#ifndef KHOST_KIT_ALLOC_H
#define KHOST_KIT_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"
#include "khost/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend's long-lived buffer: zeroed, from the host's allocator when it has one, else 64-byte aligned;
 * released with kh_host_free through the same host. */
void *kh_host_alloc(const kh_host_api *h, size_t bytes);
void kh_host_free(const kh_host_api *h, void *p);

/* The device memory a backend holds for one model, counted at its own allocation calls: every GPU path
 * allocates at compile and frees only when the model is freed, so what it holds never falls before the end
 * and `now` is also the peak. */
typedef struct kh_mem_count {
    int64_t now, peak;
} kh_mem_count;

static inline void kh_mem_count_add(kh_mem_count *c, int64_t bytes) {
    c->now += bytes;
    if (c->now > c->peak) c->peak = c->now;
}

/* kh_backend_api.memory_info from a count: fills what out's struct_size covers; counted == 0 (a cpu session,
 * whose memory the process's peak RSS already holds) leaves the figures at -1. */
kh_status kh_mem_count_report(const kh_mem_count *c, int counted, const char *what, kh_memory_info *out);

#ifdef __cplusplus
}
#endif
#endif

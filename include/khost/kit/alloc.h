/* khost/kit/alloc.h — a backend's long-lived buffers through the host's allocator (kit/base/host_alloc.c). */
#ifndef KHOST_KIT_ALLOC_H
#define KHOST_KIT_ALLOC_H

#include <stddef.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend's long-lived buffer: zeroed, from the host's allocator when it has one, else 64-byte aligned;
 * released with kh_host_free through the same host. */
void *kh_host_alloc(const kh_host_api *h, size_t bytes);
void kh_host_free(const kh_host_api *h, void *p);

#ifdef __cplusplus
}
#endif
#endif

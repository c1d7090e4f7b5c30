/* core/devices/devices.h — device enumeration and activation through the CUDA driver API, dlopen'ed at run time.
 *
 * libcuda.so.1 is opened with dlopen ($KHOST_LIBCUDA overrides the name; tests point it at a missing file
 * to simulate a machine without a driver). `cpu` is always device 0 of the list. No link-time CUDA.
 */
#ifndef KHOST_CORE_DEVICES_H
#define KHOST_CORE_DEVICES_H

#include <stddef.h>

#include "khost/backend.h"

typedef struct kh_devices {
    kh_device *v; int n;    /* v[0] is the cpu */
    int driver_version;     /* 0 when no driver */
    char note[256];         /* why there are no CUDA devices ("libcuda.so.1 not found", "cuInit: ...") */
} kh_devices;

void kh_devices_enumerate(kh_devices *out); /* never fails: at least the cpu */
void kh_devices_free(kh_devices *d);
/* "cpu", "cuda:N", "cuda" (first CUDA device), "auto"/"default" (first CUDA device, else cpu), or a PCI
 * bus id. NULL with err ("unknown device 'cuda:3': 1 CUDA device(s) present") when not found. */
kh_device *kh_devices_find(kh_devices *d, const char *spec, char *err, size_t errlen);
/* Retain the primary context and make it current on this thread (no-op for the cpu). */
int kh_device_activate(kh_devices *d, kh_device *dev, char *err, size_t errlen);
/* Make it current again (before each backend call from another thread) and release it at the end. */
int kh_device_make_current(kh_devices *d, const kh_device *dev);
void kh_device_release(kh_devices *d, kh_device *dev);
/* Free and total memory of a CUDA device whose primary context is current (cuMemGetInfo); -1 for the cpu,
 * a driver without the call, or a failure. */
int kh_device_mem_info(const kh_device *dev, int64_t *free_bytes, int64_t *total_bytes);
/* "13.0" style version of the driver API; empty when none. */
void kh_devices_driver_string(const kh_devices *d, char *buf, size_t n);
#endif

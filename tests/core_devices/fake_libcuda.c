/* tests/core_devices/fake_libcuda.c — a stand-in for libcuda.so.1 so core/devices/devices.c can be tested without
 * a GPU. Two devices with known attributes; FAKE_CUDA_MODE=nodevice makes cuInit fail as a driver without
 * GPUs does. Built in variants: FAKE_NO_RELEASE_V2 (a pre-CUDA-11 driver, only cuDevicePrimaryCtxRelease)
 * and FAKE_NO_TOTALMEM (a broken library missing a required symbol). fake_cuda_state() lets the test see
 * the retain counts and the current context, which a real driver does not expose.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef struct fake_ctx { int device; } *CUcontext;

static struct fake_ctx ctxs[2] = {{0}, {1}};
static int retained[2];
static int initialised;
static _Thread_local CUcontext current;

/* Test hook: retain count of a device, and the current context's device (-1 when none). */
API void fake_cuda_state(int dev, int *retain_count, int *current_device);
API void fake_cuda_state(int dev, int *retain_count, int *current_device) {
    *retain_count = dev >= 0 && dev < 2 ? retained[dev] : -1;
    *current_device = current ? current->device : -1;
}

#define E(fn, ...) API CUresult fn(__VA_ARGS__); API CUresult fn(__VA_ARGS__)

E(cuInit, unsigned int flags) {
    const char *m = getenv("FAKE_CUDA_MODE");
    if (flags != 0) return 1; /* CUDA_ERROR_INVALID_VALUE */
    if (m && strcmp(m, "nodevice") == 0) return 100;
    initialised = 1;
    return 0;
}
E(cuDriverGetVersion, int *v) { *v = 12040; return 0; }
E(cuDeviceGetCount, int *n) {
    if (!initialised) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    *n = 2;
    return 0;
}
E(cuDeviceGet, CUdevice *d, int ordinal) {
    if (!initialised) return 3;
    if (ordinal < 0 || ordinal > 1) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *d = ordinal;
    return 0;
}
E(cuDeviceGetName, char *name, int len, CUdevice d) {
    const char *n = d == 0 ? "Fake GPU A" : "Fake GPU B";
    if (len < 1) return 1;
    strncpy(name, n, (size_t)len - 1);
    name[len - 1] = 0;
    return 0;
}
E(cuDeviceGetAttribute, int *v, int attr, CUdevice d) {
    switch (attr) {
    case 75: *v = d == 0 ? 9 : 8; return 0;    /* compute capability major */
    case 76: *v = 0; return 0;                  /* minor */
    case 16: *v = d == 0 ? 132 : 108; return 0; /* multiprocessors */
    case 50: *v = d == 0 ? 0 : 1; return 0;     /* PCI domain */
    case 33: *v = d == 0 ? 0x3b : 0xaf; return 0; /* PCI bus */
    case 34: *v = 0; return 0;                  /* PCI device */
    default: return 1;
    }
}
#ifndef FAKE_NO_TOTALMEM
E(cuDeviceTotalMem_v2, size_t *bytes, CUdevice d) {
    *bytes = d == 0 ? (size_t)150754820096ull : (size_t)42505273344ull;
    return 0;
}
#endif
E(cuMemGetInfo_v2, size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = (size_t)150000000000ull, *total_bytes = (size_t)150754820096ull;
    return 0;
}
E(cuDevicePrimaryCtxRetain, CUcontext *c, CUdevice d) {
    if (d < 0 || d > 1) return 101;
    retained[d]++;
    *c = &ctxs[d];
    return 0;
}
static CUresult release(CUdevice d) {
    if (d < 0 || d > 1 || retained[d] <= 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    retained[d]--;
    return 0;
}
#ifndef FAKE_NO_RELEASE_V2
E(cuDevicePrimaryCtxRelease_v2, CUdevice d) { return release(d); }
E(cuDevicePrimaryCtxRelease, CUdevice d) { (void)d; return 999; /* must not be used when _v2 exists */ }
#else
E(cuDevicePrimaryCtxRelease, CUdevice d) { return release(d); }
#endif
E(cuCtxSetCurrent, CUcontext c) {
    current = c;
    return 0;
}
E(cuGetErrorName, CUresult r, const char **s) {
    switch (r) {
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    default: *s = NULL; return 1;
    }
}
E(cuGetErrorString, CUresult r, const char **s) {
    switch (r) {
    case 100: *s = "no CUDA-capable device is detected"; return 0;
    case 101: *s = "invalid device ordinal"; return 0;
    default: *s = NULL; return 1;
    }
}

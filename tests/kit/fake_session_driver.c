/* tests/kit/fake_session_driver.c — a stand-in for libcuda.so.1 with every entry point of the kit's driver table
 * (khost/kit/cuda_driver.h), so kh_cuda_session_open can be tested without a GPU. Two devices: 0 is compute
 * capability 9.0, 1 is 8.0. Contexts, primary-context retains and streams are counted; fake_session_state()
 * lets the test see them (a real driver does not expose them). Memory is host memory (see below); the code
 * runner's entry points fail loudly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef struct fake_ctx { int device; } *CUcontext;
struct fake_obj { int live; };
typedef struct fake_obj *CUstream;

static struct fake_ctx ctxs[2] = {{0}, {1}};
static struct fake_obj streams[8];
static int retained[2], streams_live, initialised;
static _Thread_local CUcontext current;

/* Test hooks: the retain count of a device, the current context's device (-1: none), live streams; and the
 * context a test may make current itself, as the host does. */
API void fake_session_state(int dev, int *retains, int *current_device, int *live_streams);
API void fake_session_state(int dev, int *retains, int *current_device, int *live_streams) {
    *retains = dev >= 0 && dev < 2 ? retained[dev] : -1;
    *current_device = current ? current->device : -1;
    *live_streams = streams_live;
}
API void *fake_session_context(int dev);
API void *fake_session_context(int dev) { return dev >= 0 && dev < 2 ? &ctxs[dev] : NULL; }

#define E(fn, ...) API CUresult fn(__VA_ARGS__); API CUresult fn(__VA_ARGS__)
#define NOT_USED 801 /* CUDA_ERROR_NOT_SUPPORTED: a session must not call it */

E(cuInit, unsigned int flags) {
    if (flags) return 1;
    initialised = 1;
    return 0;
}
E(cuDriverGetVersion, int *v) { *v = 13000; return 0; }
E(cuGetErrorName, CUresult r, const char **s) {
    *s = r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : r == 101 ? "CUDA_ERROR_INVALID_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
E(cuGetErrorString, CUresult r, const char **s) {
    *s = r == 2 ? "out of memory" : r == 101 ? "invalid device ordinal" : "unknown error";
    return 0;
}
E(cuDeviceGetCount, int *n) {
    if (!initialised) return 3;
    *n = 2;
    return 0;
}
E(cuDeviceGet, CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal > 1) return 101;
    *d = ordinal;
    return 0;
}
E(cuDeviceGetAttribute, int *v, int attr, CUdevice d) {
    if (d < 0 || d > 1) return 101;
    if (attr == 75) *v = d == 0 ? 9 : 8; /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    else if (attr == 76) *v = 0;          /* ..._MINOR */
    else return 1;
    return 0;
}
E(cuDeviceGetName, char *name, int len, CUdevice d) {
    if (d < 0 || d > 1 || len < 1) return 101;
    strncpy(name, d == 0 ? "Fake H100" : "Fake A100", (size_t)len - 1);
    name[len - 1] = 0;
    return 0;
}
E(cuDeviceTotalMem_v2, size_t *bytes, CUdevice d) {
    if (d < 0 || d > 1) return 101;
    *bytes = (size_t)80 << 30;
    return 0;
}
E(cuDevicePrimaryCtxRetain, CUcontext *c, CUdevice d) {
    if (d < 0 || d > 1) return 101;
    retained[d]++;
    *c = &ctxs[d];
    return 0;
}
E(cuDevicePrimaryCtxRelease_v2, CUdevice d) {
    if (d < 0 || d > 1 || retained[d] == 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    retained[d]--;
    return 0;
}
E(cuCtxGetCurrent, CUcontext *c) {
    *c = current;
    return 0;
}
E(cuCtxSetCurrent, CUcontext c) {
    current = c;
    return 0;
}
E(cuCtxGetDevice, CUdevice *d) {
    if (!current) return 201;
    *d = current->device;
    return 0;
}
/* The first free object of a pool of 8, counted in *live; NULL when all are taken. */
static struct fake_obj *take(struct fake_obj *pool, int *live) {
    for (int i = 0; i < 8; i++)
        if (!pool[i].live) {
            pool[i].live = 1;
            ++*live;
            return &pool[i];
        }
    return NULL;
}

E(cuStreamCreate, CUstream *s, unsigned int flags) {
    (void)flags;
    if (!current) return 201;
    *s = take(streams, &streams_live);
    return *s ? 0 : 2;
}
E(cuStreamDestroy_v2, CUstream s) {
    if (!s || !s->live) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    s->live = 0;
    streams_live--;
    return 0;
}
E(cuStreamSynchronize, CUstream s) { return s && s->live ? 0 : 400; }

/* Memory, copies and events, for the graph runtime's device storage (test_grt_device.c): "device" memory is host
 * memory here, so a test can read what was uploaded. Live buffers and events are counted, and
 * fake_memory_fail_at(k) makes the k-th cuMemAlloc from now fail as out of memory (CUDA_ERROR_OUT_OF_MEMORY). */
static int dev_live, host_live, events_live, fail_at;
API void fake_memory_state(int *dev, int *host, int *events);
API void fake_memory_state(int *dev, int *host, int *events) {
    *dev = dev_live;
    *host = host_live;
    *events = events_live;
}
API void fake_memory_fail_at(int k);
API void fake_memory_fail_at(int k) { fail_at = k; }

E(cuMemGetInfo_v2, size_t *fr, size_t *tot) {
    *fr = (size_t)1 << 30;
    *tot = (size_t)80 << 30;
    return 0;
}
E(cuMemAlloc_v2, unsigned long long *p, size_t n) {
    if (fail_at > 0 && --fail_at == 0) return 2;
    void *q = malloc(n);
    if (!q) return 2;
    memset(q, 0xA5, n); /* not zero: the storage must clear what it allocates */
    *p = (unsigned long long)(uintptr_t)q;
    dev_live++;
    return 0;
}
E(cuMemFree_v2, unsigned long long p) {
    if (!p) return 1;
    free((void *)(uintptr_t)p);
    dev_live--;
    return 0;
}
E(cuMemAllocHost_v2, void **p, size_t n) {
    if (!(*p = malloc(n))) return 2;
    host_live++;
    return 0;
}
E(cuMemFreeHost, void *p) {
    free(p);
    host_live--;
    return 0;
}
E(cuMemcpyHtoDAsync_v2, unsigned long long d, const void *h, size_t n, CUstream s) {
    if (!s || !s->live) return 400;
    memcpy((void *)(uintptr_t)d, h, n);
    return 0;
}
E(cuMemcpyDtoHAsync_v2, void *h, unsigned long long d, size_t n, CUstream s) {
    if (!s || !s->live) return 400;
    memcpy(h, (const void *)(uintptr_t)d, n);
    return 0;
}
E(cuMemsetD8Async, unsigned long long d, unsigned char c, size_t n, CUstream s) {
    if (!s || !s->live) return 400;
    memset((void *)(uintptr_t)d, c, n);
    return 0;
}
static struct fake_obj events[8];
E(cuEventCreate, struct fake_obj **e, unsigned f) {
    (void)f;
    *e = take(events, &events_live);
    return *e ? 0 : 2;
}
E(cuEventDestroy_v2, struct fake_obj *e) {
    if (!e || !e->live) return 400;
    e->live = 0;
    events_live--;
    return 0;
}
E(cuEventRecord, struct fake_obj *e, CUstream s) { return e && e->live && s && s->live ? 0 : 400; }
E(cuEventSynchronize, struct fake_obj *e) { return e && e->live ? 0 : 400; }
E(cuStreamWaitEvent, CUstream s, struct fake_obj *e, unsigned f) { return s && s->live && e && e->live && !f ? 0 : 400; }
/* The code runner's entry points: present (the table needs them), never called in these tests. */
E(cuModuleLoadData, void **m, const void *img) { (void)m, (void)img; return NOT_USED; }
E(cuModuleUnload, void *m) { (void)m; return NOT_USED; }
E(cuModuleGetFunction, void **f, void *m, const char *n) { (void)f, (void)m, (void)n; return NOT_USED; }
E(cuLaunchKernel, void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g, unsigned sh,
  CUstream s, void **p, void **x) {
    (void)f, (void)a, (void)b, (void)c, (void)d, (void)e, (void)g, (void)sh, (void)s, (void)p, (void)x;
    return NOT_USED;
}

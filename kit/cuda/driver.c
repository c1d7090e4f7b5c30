/* kit/cuda/driver.c — the driver table of khost/kit/cuda_driver.h, loaded once per process. */
#include "khost/kit/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "khost/kit/cuda_pick.h"

kh_cu_driver kh_cu;
static int g_tried;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct sym_def {
    void **slot;
    const char *name;
    int optional;
} sym_def;

static void load_driver(void) {
    const char *name = getenv("KHOST_LIBCUDA"); /* the core's choice: dlopen then returns the core's handle */
    if (!name || !*name) name = "libcuda.so.1";
    snprintf(kh_cu.lib, sizeof kh_cu.lib, "%s", name);
    void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(kh_cu.why, sizeof kh_cu.why, "no CUDA driver (%s not loadable): no CUDA device", name);
        return;
    }
    const sym_def syms[] = {
        {(void **)&kh_cu.Init, "cuInit", 0}, {(void **)&kh_cu.DriverGetVersion, "cuDriverGetVersion", 0},
        {(void **)&kh_cu.GetErrorName, "cuGetErrorName", 0}, {(void **)&kh_cu.GetErrorString, "cuGetErrorString", 0},
        {(void **)&kh_cu.DeviceGetCount, "cuDeviceGetCount", 0}, {(void **)&kh_cu.DeviceGet, "cuDeviceGet", 0},
        {(void **)&kh_cu.DeviceGetAttribute, "cuDeviceGetAttribute", 0},
        {(void **)&kh_cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0},
        {(void **)&kh_cu.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 0},
        {(void **)&kh_cu.CtxGetCurrent, "cuCtxGetCurrent", 0}, {(void **)&kh_cu.CtxSetCurrent, "cuCtxSetCurrent", 0},
        {(void **)&kh_cu.CtxGetDevice, "cuCtxGetDevice", 0}, {(void **)&kh_cu.MemGetInfo, "cuMemGetInfo_v2", 0},
        {(void **)&kh_cu.MemAlloc, "cuMemAlloc_v2", 0}, {(void **)&kh_cu.MemFree, "cuMemFree_v2", 0},
        {(void **)&kh_cu.MemAllocHost, "cuMemAllocHost_v2", 0}, {(void **)&kh_cu.MemFreeHost, "cuMemFreeHost", 0},
        {(void **)&kh_cu.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 0},
        {(void **)&kh_cu.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 0},
        {(void **)&kh_cu.MemsetD8Async, "cuMemsetD8Async", 0}, {(void **)&kh_cu.StreamCreate, "cuStreamCreate", 0},
        {(void **)&kh_cu.StreamDestroy, "cuStreamDestroy_v2", 0},
        {(void **)&kh_cu.StreamSynchronize, "cuStreamSynchronize", 0}, {(void **)&kh_cu.EventCreate, "cuEventCreate", 0},
        {(void **)&kh_cu.EventDestroy, "cuEventDestroy_v2", 0}, {(void **)&kh_cu.EventRecord, "cuEventRecord", 0},
        {(void **)&kh_cu.EventSynchronize, "cuEventSynchronize", 0},
        {(void **)&kh_cu.ModuleLoadData, "cuModuleLoadData", 0}, {(void **)&kh_cu.ModuleUnload, "cuModuleUnload", 0},
        {(void **)&kh_cu.ModuleGetFunction, "cuModuleGetFunction", 0},
        {(void **)&kh_cu.LaunchKernel, "cuLaunchKernel", 0},
        {(void **)&kh_cu.FuncGetParamInfo, "cuFuncGetParamInfo", 1},
    };
    for (size_t k = 0; k < sizeof syms / sizeof syms[0]; k++) {
        *syms[k].slot = dlsym(dl, syms[k].name);
        if (!*syms[k].slot && !syms[k].optional) {
            snprintf(kh_cu.why, sizeof kh_cu.why, "%s has no %s (a driver older than the API khost uses)", name,
                     syms[k].name);
            return; /* never dlclose'd: libcuda's threads and handlers must not outlive its code */
        }
    }
    char e[160];
    CUresult r = kh_cu.Init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(kh_cu.why, sizeof kh_cu.why, "no CUDA device (cuInit: %s)", kh_cu_result_text(r, e, sizeof e));
        return;
    }
    if ((r = kh_cu.DriverGetVersion(&kh_cu.version)) != CUDA_SUCCESS) {
        snprintf(kh_cu.why, sizeof kh_cu.why, "cuDriverGetVersion: %s", kh_cu_result_text(r, e, sizeof e));
        return;
    }
    kh_cu.ready = 1;
}

int kh_cu_load(char *why, size_t n) {
    pthread_mutex_lock(&g_lock);
    if (!g_tried) {
        g_tried = 1;
        load_driver();
    }
    pthread_mutex_unlock(&g_lock);
    if (!kh_cu.ready && why && n) snprintf(why, n, "%s", kh_cu.why);
    return kh_cu.ready;
}

const char *kh_cu_result_text(CUresult r, char *buf, size_t n) {
    const char *name = NULL, *desc = NULL;
    if (kh_cu.GetErrorName && kh_cu.GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (kh_cu.GetErrorString && kh_cu.GetErrorString(r, &desc) != CUDA_SUCCESS) desc = NULL;
    return kh_cu_errtext((int)r, name, desc, buf, n);
}

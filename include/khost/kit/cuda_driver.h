/* khost/kit/cuda_driver.h — the CUDA driver API for the backends' GPU halves, resolved at run time.
 *
 * The core loads libcuda.so.1 with dlopen and keeps its function table to itself; a backend gets the device's
 * primary context in kh_device.cu_context, retained by the host and current on the calling thread. This table
 * opens the same library ($KHOST_LIBCUDA, else libcuda.so.1: dlopen returns the handle the core already holds)
 * and resolves the entry points by their versioned names (cuMemAlloc_v2, ...) with cuda.h's own prototypes
 * (__typeof__), so every call is type-checked and no module links libcuda (it loads where the driver is
 * missing, and says so). Unverified on a GPU. */
#ifndef KHOST_KIT_CUDA_DRIVER_H
#define KHOST_KIT_CUDA_DRIVER_H

#include <stddef.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kh_cu_driver {
    int ready;
    char why[384];      /* why not ready */
    char lib[256];
    int version;        /* cuDriverGetVersion */
    __typeof__(&cuInit) Init;
    __typeof__(&cuDriverGetVersion) DriverGetVersion;
    __typeof__(&cuGetErrorName) GetErrorName;
    __typeof__(&cuGetErrorString) GetErrorString;
    __typeof__(&cuDeviceGetCount) DeviceGetCount;
    __typeof__(&cuDeviceGet) DeviceGet;
    __typeof__(&cuDeviceGetAttribute) DeviceGetAttribute;
    __typeof__(&cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain;
    __typeof__(&cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease;
    __typeof__(&cuCtxGetCurrent) CtxGetCurrent;
    __typeof__(&cuCtxSetCurrent) CtxSetCurrent;
    __typeof__(&cuCtxGetDevice) CtxGetDevice;
    __typeof__(&cuMemGetInfo) MemGetInfo;
    __typeof__(&cuMemAlloc) MemAlloc;
    __typeof__(&cuMemFree) MemFree;
    __typeof__(&cuMemAllocHost) MemAllocHost;
    __typeof__(&cuMemFreeHost) MemFreeHost;
    __typeof__(&cuMemcpyHtoDAsync) MemcpyHtoDAsync;
    __typeof__(&cuMemcpyDtoHAsync) MemcpyDtoHAsync;
    __typeof__(&cuMemsetD8Async) MemsetD8Async;
    __typeof__(&cuStreamCreate) StreamCreate;
    __typeof__(&cuStreamDestroy) StreamDestroy;
    __typeof__(&cuStreamSynchronize) StreamSynchronize;
    __typeof__(&cuEventCreate) EventCreate;
    __typeof__(&cuEventDestroy) EventDestroy;
    __typeof__(&cuEventRecord) EventRecord;
    __typeof__(&cuEventSynchronize) EventSynchronize;
    __typeof__(&cuModuleLoadData) ModuleLoadData;
    __typeof__(&cuModuleUnload) ModuleUnload;
    __typeof__(&cuModuleGetFunction) ModuleGetFunction;
    __typeof__(&cuLaunchKernel) LaunchKernel;
    __typeof__(&cuFuncGetParamInfo) FuncGetParamInfo; /* optional (driver 12.4+): kernel parameters checked */
} kh_cu_driver;

/* The module's table (one per module: the kit is linked statically). */
extern kh_cu_driver kh_cu;
/* Load the table once per process (and cuInit): 1 when ready, else 0 with the reason in why. */
int kh_cu_load(char *why, size_t n);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" through the loaded driver's own names. */
const char *kh_cu_result_text(CUresult r, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif

/* khost/kit/cuda_driver.h — the one table of CUDA driver API entry points, resolved at run time: the host's
 * device enumeration and context handling (core/devices) and the backends' GPU halves use it alike.
 *
 * Nothing links libcuda: the table opens $KHOST_LIBCUDA, else libcuda.so.1 (in a module dlopen returns the
 * handle the host already holds), and resolves each entry point by its versioned name (cuMemAlloc_v2, ...), so
 * everything loads where the driver is missing and says so. Each process image (the host, each module, each
 * GPU half) has its own copy (the kit is linked statically), loaded once.
 *
 * The header needs no CUDA toolkit: the host builds without one. Where <cuda.h> was included first (the GPU
 * halves), every member has cuda.h's own prototype (__typeof__), so every call is type-checked, and
 * kit/cuda/libs.c asserts at compile time that the prototypes written below are the same types; elsewhere they
 * are the driver's stable C ABI written out here (CUresult an enum, CUdevice an int, the handles pointers to the
 * structs cuda.h names, a device pointer 64 bits). Unverified on a GPU. */
#ifndef KHOST_KIT_CUDA_DRIVER_H
#define KHOST_KIT_CUDA_DRIVER_H

#include <stddef.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CUDA_VERSION /* <cuda.h> came first */
typedef CUresult kh_CUresult;
typedef CUdevice_attribute kh_CUdevice_attribute;
typedef CUdevice kh_CUdevice;
typedef CUcontext kh_CUcontext;
typedef CUstream kh_CUstream;
typedef CUevent kh_CUevent;
typedef CUmodule kh_CUmodule;
typedef CUfunction kh_CUfunction;
typedef CUdeviceptr kh_CUdeviceptr;
#define KH_CU_MEMBER(member, cu_name, params) __typeof__(&cu_name) member
#else
/* cuda.h's enums have no negative values: their type is unsigned int's (GCC, Clang), so both views of the table
 * have compatible member types. */
typedef unsigned int kh_CUresult;
typedef unsigned int kh_CUdevice_attribute;
typedef int kh_CUdevice;
typedef struct CUctx_st *kh_CUcontext;
typedef struct CUstream_st *kh_CUstream;
typedef struct CUevent_st *kh_CUevent;
typedef struct CUmod_st *kh_CUmodule;
typedef struct CUfunc_st *kh_CUfunction;
typedef unsigned long long kh_CUdeviceptr;
#define KH_CU_MEMBER(member, cu_name, params) kh_CUresult(*member) params
#endif

#define KH_CUDA_SUCCESS 0
#define KH_CUDA_ERROR_OUT_OF_MEMORY 2
#define KH_CUDA_ERROR_NO_DEVICE 100

/* CUdevice_attribute values (cuda.h; part of the driver's ABI). */
enum {
    KH_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    KH_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    KH_CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    KH_CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    KH_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    KH_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
};

/* What an entry point is needed for: the host's devices (a driver without it is not usable at all), an
 * executor (a driver without it leaves the GPU halves unavailable), or nothing (used when present). */
enum { KH_CU_HOST = 0, KH_CU_EXEC = 1, KH_CU_OPTIONAL = 2 };

/* X(member, cuda.h name, versioned symbol, need, parameters) for every entry point. */
#define KH_CU_ENTRIES(X)                                                                                          \
    X(Init, cuInit, "cuInit", KH_CU_HOST, (unsigned int))                                                         \
    X(DriverGetVersion, cuDriverGetVersion, "cuDriverGetVersion", KH_CU_HOST, (int *))                            \
    X(GetErrorName, cuGetErrorName, "cuGetErrorName", KH_CU_OPTIONAL, (kh_CUresult, const char **))               \
    X(GetErrorString, cuGetErrorString, "cuGetErrorString", KH_CU_OPTIONAL, (kh_CUresult, const char **))         \
    X(DeviceGetCount, cuDeviceGetCount, "cuDeviceGetCount", KH_CU_HOST, (int *))                                  \
    X(DeviceGet, cuDeviceGet, "cuDeviceGet", KH_CU_HOST, (kh_CUdevice *, int))                                    \
    X(DeviceGetName, cuDeviceGetName, "cuDeviceGetName", KH_CU_HOST, (char *, int, kh_CUdevice))                  \
    X(DeviceGetAttribute, cuDeviceGetAttribute, "cuDeviceGetAttribute", KH_CU_HOST, (int *, kh_CUdevice_attribute, kh_CUdevice))    \
    X(DeviceTotalMem, cuDeviceTotalMem, "cuDeviceTotalMem_v2", KH_CU_HOST, (size_t *, kh_CUdevice))               \
    X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", KH_CU_HOST,                   \
      (kh_CUcontext *, kh_CUdevice))                                                                              \
    X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", KH_CU_HOST,             \
      (kh_CUdevice))                                                                                              \
    X(CtxGetCurrent, cuCtxGetCurrent, "cuCtxGetCurrent", KH_CU_EXEC, (kh_CUcontext *))                            \
    X(CtxSetCurrent, cuCtxSetCurrent, "cuCtxSetCurrent", KH_CU_HOST, (kh_CUcontext))                              \
    X(CtxGetDevice, cuCtxGetDevice, "cuCtxGetDevice", KH_CU_EXEC, (kh_CUdevice *))                                \
    X(MemGetInfo, cuMemGetInfo, "cuMemGetInfo_v2", KH_CU_OPTIONAL, (size_t *, size_t *))                          \
    X(MemAlloc, cuMemAlloc, "cuMemAlloc_v2", KH_CU_EXEC, (kh_CUdeviceptr *, size_t))                              \
    X(MemFree, cuMemFree, "cuMemFree_v2", KH_CU_EXEC, (kh_CUdeviceptr))                                           \
    X(MemAllocHost, cuMemAllocHost, "cuMemAllocHost_v2", KH_CU_EXEC, (void **, size_t))                           \
    X(MemFreeHost, cuMemFreeHost, "cuMemFreeHost", KH_CU_EXEC, (void *))                                          \
    X(MemcpyHtoDAsync, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", KH_CU_EXEC,                                     \
      (kh_CUdeviceptr, const void *, size_t, kh_CUstream))                                                        \
    X(MemcpyDtoHAsync, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", KH_CU_EXEC,                                     \
      (void *, kh_CUdeviceptr, size_t, kh_CUstream))                                                              \
    X(MemsetD8Async, cuMemsetD8Async, "cuMemsetD8Async", KH_CU_EXEC,                                              \
      (kh_CUdeviceptr, unsigned char, size_t, kh_CUstream))                                                       \
    X(StreamCreate, cuStreamCreate, "cuStreamCreate", KH_CU_EXEC, (kh_CUstream *, unsigned int))                  \
    X(StreamDestroy, cuStreamDestroy, "cuStreamDestroy_v2", KH_CU_EXEC, (kh_CUstream))                            \
    X(StreamSynchronize, cuStreamSynchronize, "cuStreamSynchronize", KH_CU_EXEC, (kh_CUstream))                   \
    X(StreamWaitEvent, cuStreamWaitEvent, "cuStreamWaitEvent", KH_CU_EXEC, (kh_CUstream, kh_CUevent, unsigned int)) \
    X(EventCreate, cuEventCreate, "cuEventCreate", KH_CU_EXEC, (kh_CUevent *, unsigned int))                      \
    X(EventDestroy, cuEventDestroy, "cuEventDestroy_v2", KH_CU_EXEC, (kh_CUevent))                                \
    X(EventRecord, cuEventRecord, "cuEventRecord", KH_CU_EXEC, (kh_CUevent, kh_CUstream))                         \
    X(EventSynchronize, cuEventSynchronize, "cuEventSynchronize", KH_CU_EXEC, (kh_CUevent))                       \
    X(ModuleLoadData, cuModuleLoadData, "cuModuleLoadData", KH_CU_EXEC, (kh_CUmodule *, const void *))            \
    X(ModuleUnload, cuModuleUnload, "cuModuleUnload", KH_CU_EXEC, (kh_CUmodule))                                  \
    X(ModuleGetFunction, cuModuleGetFunction, "cuModuleGetFunction", KH_CU_EXEC,                                  \
      (kh_CUfunction *, kh_CUmodule, const char *))                                                               \
    X(LaunchKernel, cuLaunchKernel, "cuLaunchKernel", KH_CU_EXEC,                                                 \
      (kh_CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,         \
       unsigned int, kh_CUstream, void **, void **))                                                              \
    /* driver 12.4+: kernel parameters checked where present */                                                   \
    X(FuncGetParamInfo, cuFuncGetParamInfo, "cuFuncGetParamInfo", KH_CU_OPTIONAL,                                 \
      (kh_CUfunction, size_t, size_t *, size_t *))

#define KH_CU_DECLARE_MEMBER(member, cu_name, symbol, need, params) KH_CU_MEMBER(member, cu_name, params);

typedef struct kh_cu_driver {
    int host_ready;     /* the host's entry points resolved and cuInit succeeded */
    int ready;          /* and every executor entry point too */
    char why[384];      /* why not host_ready / not ready */
    char lib[256];
    int version;        /* cuDriverGetVersion (asked before cuInit: a driver without devices still says) */
    KH_CU_ENTRIES(KH_CU_DECLARE_MEMBER)
} kh_cu_driver;

/* This image's table. */
extern kh_cu_driver kh_cu;
/* Load the table once per image (and cuInit). kh_cu_load: 1 when an executor can run (ready), else 0 with the
 * reason in why; kh_cu_load_host: 1 when the host can enumerate and activate devices (host_ready). */
int kh_cu_load(char *why, size_t n);
int kh_cu_load_host(char *why, size_t n);
/* "CUDA_ERROR_OUT_OF_MEMORY: out of memory" through the loaded driver's own names. */
const char *kh_cu_result_text(kh_CUresult r, char *buf, size_t n);
/* A failed driver call as a status: KH_ERR_NOMEM for out of memory, KH_ERR_DEVICE for the rest. */
kh_status kh_cu_status(kh_CUresult r);

#ifdef __cplusplus
}
#endif
#endif

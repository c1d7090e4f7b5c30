/* core/devices/cuda_driver.h — the few CUDA driver API declarations the core resolves with dlsym.
 *
 * The core must build on machines without a CUDA toolkit, so it never includes <cuda.h>. These are the
 * driver's stable C ABI: CUresult is an enum (int-sized) in cuda.h, CUdevice an int, CUcontext an opaque
 * pointer; the attribute numbers below are part of that ABI and have not changed since they were added.
 * Only what core/devices/devices.c calls is declared here; tests/core_devices/fake_libcuda.c implements the same
 * signatures to exercise the code without a GPU.
 */
#ifndef KHOST_CORE_CUDA_DRIVER_H
#define KHOST_CORE_CUDA_DRIVER_H

#include <stddef.h>

typedef int kh_CUresult;
typedef int kh_CUdevice;
typedef struct kh_CUctx_st *kh_CUcontext;

#define KH_CUDA_SUCCESS 0
#define KH_CUDA_ERROR_NO_DEVICE 100

/* CUdevice_attribute values (cuda.h). */
enum {
    KH_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    KH_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    KH_CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    KH_CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    KH_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    KH_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
};

typedef kh_CUresult (*kh_cuInit_fn)(unsigned int flags);
typedef kh_CUresult (*kh_cuDriverGetVersion_fn)(int *version);
typedef kh_CUresult (*kh_cuDeviceGetCount_fn)(int *count);
typedef kh_CUresult (*kh_cuDeviceGet_fn)(kh_CUdevice *dev, int ordinal);
typedef kh_CUresult (*kh_cuDeviceGetName_fn)(char *name, int len, kh_CUdevice dev);
typedef kh_CUresult (*kh_cuDeviceGetAttribute_fn)(int *value, int attrib, kh_CUdevice dev);
typedef kh_CUresult (*kh_cuDeviceTotalMem_fn)(size_t *bytes, kh_CUdevice dev); /* the _v2 symbol */
typedef kh_CUresult (*kh_cuDevicePrimaryCtxRetain_fn)(kh_CUcontext *ctx, kh_CUdevice dev);
typedef kh_CUresult (*kh_cuDevicePrimaryCtxRelease_fn)(kh_CUdevice dev);
typedef kh_CUresult (*kh_cuCtxSetCurrent_fn)(kh_CUcontext ctx);
typedef kh_CUresult (*kh_cuGetErrorString_fn)(kh_CUresult error, const char **str);
typedef kh_CUresult (*kh_cuGetErrorName_fn)(kh_CUresult error, const char **str);
typedef kh_CUresult (*kh_cuMemGetInfo_fn)(size_t *free_bytes, size_t *total_bytes); /* the _v2 symbol */

#endif

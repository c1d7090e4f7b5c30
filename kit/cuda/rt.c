/* kit/cuda/rt.c — CUDA runtime errors as text and the runtime's capability probe (see khost/kit/cuda.h); apart from libs.c so that a module without
 * the runtime (theano: the driver API only) never pulls it in from the static kit. */
#include "khost/kit/cuda.h"

#include <stdio.h>

int kh_cudart_usable(int *count, size_t *dnn, char *why, size_t n) {
    int rt = 0, drv = 0;
    *count = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0 when libcuda.so.1 cannot be loaded */
    *dnn = cudnnGetVersion();
    if (drv == 0) {
        snprintf(why, n, "no CUDA driver (libcuda.so.1 not loadable): no CUDA device");
        return 0;
    }
    if (drv < rt) {
        snprintf(why, n, "CUDA driver %d.%d is older than the runtime %d.%d built in", drv / 1000, (drv % 1000) / 10,
                 rt / 1000, (rt % 1000) / 10);
        return 0;
    }
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess || *count == 0) {
        snprintf(why, n, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
        cudaGetLastError();
        *count = 0;
        return 0;
    }
    if (*dnn / 10000 != CUDNN_MAJOR) {
        snprintf(why, n, "cuDNN %zu loaded, built against %d.x", *dnn, CUDNN_MAJOR);
        return 0;
    }
    return 1;
}

const char *kh_cudart_errtext(cudaError_t e, char *buf, size_t n) {
    snprintf(buf, n, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    return buf;
}

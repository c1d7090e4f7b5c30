/* th_cuda_exec.h — internals of theano's GPU runner (th_cuda_session.c, th_cuda_model.c, th_cuda_run.c).
 *
 * The driver API. The core loads libcuda.so.1 with dlopen and keeps its function table to itself; what a
 * backend gets is the device's primary context in kh_device.cu_context, retained by the host and current on the
 * calling thread. So the runner opens the same library ($KHOST_LIBCUDA, else libcuda.so.1: dlopen returns the
 * handle the core already holds) and resolves the entry points it needs by their versioned names (cuMemAlloc_v2,
 * ...), with cuda.h's own prototypes (__typeof__) so every call is type-checked. It creates no context: it runs on
 * the current one (the host's primary context); only where nothing is current (a test harness that opens the
 * plugin without the host) it retains the device's primary context itself, as the CUDA runtime's cudaSetDevice
 * would, and releases it at close. cuBLAS and cuDNN run on that context and the session's stream.
 *
 * Errors: every driver, cuBLAS, cuDNN and NVRTC status is checked and reported as
 * "theano <op> (node i, layer l) on cuda:N: CUDA_ERROR_... (cuLaunchKernel of k12_relu)". Out-of-memory statuses
 * are KH_ERR_NOMEM, the rest KH_ERR_DEVICE. */
#ifndef TH_CUDA_EXEC_H
#define TH_CUDA_EXEC_H

#include <cublas_v2.h>
#include <cuda.h>
#include <cudnn.h>

#include "th_cuda.h"
#include "th_cuda_plan.h"

/* --- the driver table ----------------------------------------------------------------------------------- */
typedef struct th_cu_driver {
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
    __typeof__(&cuFuncGetParamInfo) FuncGetParamInfo; /* optional (driver 12.4+): the kernels' parameters checked */
} th_cu_driver;

extern th_cu_driver th_cu;
/* Load the driver table once per process (and cuInit): 1 when ready, else 0 with the reason. */
int th_cu_load(char *why, size_t n);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
const char *th_cu_errtext(CUresult r, char *buf, size_t n);

/* --- session and model state ---------------------------------------------------------------------------- */
struct th_cuda_session {
    CUdevice dev;
    CUcontext ctx;       /* the primary context the runner works in */
    int retained;        /* 1: the runner retained it (nothing was current at open) */
    int cc;              /* compute capability, 90 for 9.0 */
    char arch[16];       /* "sm_90": what NVRTC compiles for */
    CUstream stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    int tf32;            /* kh_device.math is KH_MATH_TF32: cuBLAS TF32 tensor-op math, cuDNN default math */
    /* the cuDNN algorithm of every convolution of the last compiled model's training function, for the record's
     * environment: "L<layer>.<fwd|bwd_data|bwd_filter>=<algo>[~ when non-deterministic] ..." ("..." if cut) */
    char conv_algos[256];
};

/* cuDNN state of one convolution entry */
typedef struct thc_conv {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int algo;
    int64_t desc_n;      /* the batch the tensor descriptors describe */
} thc_conv;

typedef struct thc_fn {
    th_cu_plan plan;
    CUmodule mod;
    CUfunction *func;    /* per plan entry: the kernel (kernel entries) */
    CUdeviceptr *argp;   /* per plan entry: TH_CU_MAX_ARGS resolved pointer arguments */
    thc_conv **conv;     /* per plan entry: cuDNN state (convolution entries) */
    CUdeviceptr *pers;   /* the function's accumulators */
    int32_t n_pers;
} thc_fn;

struct th_cuda_model {
    th_cuda_session *cs;
    CUdeviceptr arena, scratch, met, ws;
    int64_t arena_bytes, scratch_bytes;
    size_t ws_bytes;
    CUdeviceptr *w, *s1, *s2;    /* per variable */
    CUdeviceptr feed[3];         /* x, labels, dy */
    size_t feed_bytes[3];        /* at max_batch */
    void *pin[2];                /* pinned staging, alternating: x | labels | dy */
    CUevent staged[2];           /* the upload from pin[k] has finished */
    int next_pin;
    double *h_met;               /* pinned (4) */
    int64_t samples[2];
    int32_t idx_bound, label_bound;
    int sync_each;               /* TH_CUDA_SYNC_EACH_OP=1: synchronise after every plan entry */
    double nvrtc_s, load_s;
    int32_t kernels;
    thc_fn fn[KH_GFN_COUNT];
};

/* --- errors ----------------------------------------------------------------------------------------------- */
kh_status thc_fail(th_model *m, int f, int32_t node, const char *what, kh_status st, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
kh_status thc_err_cu(th_model *m, int f, int32_t node, const char *what, CUresult e, const char *call);
kh_status thc_err_blas(th_model *m, int f, int32_t node, const char *what, cublasStatus_t e, const char *call);
kh_status thc_err_dnn(th_model *m, int f, int32_t node, const char *what, cudnnStatus_t e, const char *call);

#define THC_CU(m, f, i, what, call)                                                              \
    do {                                                                                         \
        CUresult e_ = (call);                                                                    \
        if (e_ != CUDA_SUCCESS) return thc_err_cu((m), (f), (i), (what), e_, #call);             \
    } while (0)
#define THC_BLAS(m, f, i, what, call)                                                            \
    do {                                                                                         \
        cublasStatus_t e_ = (call);                                                              \
        if (e_ != CUBLAS_STATUS_SUCCESS) return thc_err_blas((m), (f), (i), (what), e_, #call);  \
    } while (0)
#define THC_DNN(m, f, i, what, call)                                                             \
    do {                                                                                         \
        cudnnStatus_t e_ = (call);                                                               \
        if (e_ != CUDNN_STATUS_SUCCESS) return thc_err_dnn((m), (f), (i), (what), e_, #call);    \
    } while (0)

/* cuMemAlloc with an out-of-memory message naming the buffer, its size and the device's free memory; zeroed */
kh_status thc_alloc(th_model *m, CUdeviceptr *p, size_t bytes, const char *what);
void thc_free(CUdeviceptr p);
/* make the session's context current on this thread (the host normally has) */
kh_status thc_bind(th_model *m, const char *what);

/* th_cuda_run.c: the device address of a plan reference, and of a node's value */
CUdeviceptr thc_addr(th_model *m, int f, const th_cu_ref *r);
/* cuDNN descriptors and algorithms of every convolution entry of function f (at compile) */
kh_status thc_prepare_convs(th_model *m, int f);
void thc_release_convs(th_model *m, int f);

#endif

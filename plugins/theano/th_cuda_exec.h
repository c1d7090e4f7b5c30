/* th_cuda_exec.h — internals of theano's GPU runner (th_cuda_session.c, th_cuda_model.c, th_cuda_run.c).
 *
 * The driver API, through the kit's table resolved at run time (khost/kit/cuda_driver.h: the library the core
 * loaded, no link-time libcuda), and no CUDA runtime. The session is the kit's (kh_cuda_session_open): the
 * host's primary context, current on the calling thread, never a new one; one stream; cuBLAS and cuDNN on it.
 *
 * Errors: every driver, cuBLAS, cuDNN and NVRTC status is checked and reported as
 * "theano <op> (node i, layer l) on cuda:N: CUDA_ERROR_... (cuLaunchKernel of k12_relu)". Out-of-memory statuses
 * are KH_ERR_NOMEM, the rest KH_ERR_DEVICE. */
#ifndef TH_CUDA_EXEC_H
#define TH_CUDA_EXEC_H

#include <cublas_v2.h>
#include <cuda.h>
#include <cudnn.h>

#include "khost/kit/cuda.h"
#include "khost/kit/cuda_driver.h"
#include "khost/kit/graph_runtime_cuda.h"
#include "th_cuda.h"
#include "th_cuda_plan.h"

/* --- session and model state ---------------------------------------------------------------------------- */
struct th_cuda_session {
    kh_cuda_session k;   /* the host's primary context, the stream, cuBLAS and cuDNN (the kit opens it) */
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
} thc_fn;

struct th_cuda_model {
    th_cuda_session *cs;
    kh_grt_dev dev;              /* the graph runtime's device storage: arena, variables, feeds, metrics */
    CUdeviceptr scratch, ws;
    int64_t scratch_bytes;
    size_t ws_bytes;
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

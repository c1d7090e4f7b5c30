/* khost/kit/cuda.h — the kit's CUDA helper for the backends' GPU paths (library khost_kit_cuda, built only where
 * cuDNN and cuBLAS are found: cmake/KhostCudaLibs.cmake): library errors as "name: description" and their
 * status, cuBLAS and cuDNN handles bound to the session's stream in the session's math mode, the libraries'
 * version string for a record's environment, and the cuDNN convolution algorithm choice of the graph backends
 * (deterministic first, the fastest working one with a warning, the candidates logged when none works).
 * A backend's session on a device (the host's primary context, streams, handles, the environment string) is
 * opened here once for all three backends, through the driver table of khost/kit/cuda_driver.h.
 * Plain-C parts (candidate choice, driver error text): khost/kit/cuda_pick.h. Unverified on a GPU. */
#ifndef KHOST_KIT_CUDA_H
#define KHOST_KIT_CUDA_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "khost/abi.h"
#include "khost/backend.h"
#include "khost/kit/alloc.h"
#include "khost/kit/cuda_pick.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "CUDNN_STATUS_BAD_PARAM: <cuDNN's last error message>" (the name alone when cuDNN has no message). */
const char *kh_cudnn_errtext(cudnnStatus_t e, char *buf, size_t n);
/* "CUBLAS_STATUS_ALLOC_FAILED: <cublasGetStatusString>". */
const char *kh_cublas_errtext(cublasStatus_t e, char *buf, size_t n);
/* "cudaErrorMemoryAllocation: out of memory" (needs the CUDA runtime: kit/cuda/rt.c). */
const char *kh_cudart_errtext(cudaError_t e, char *buf, size_t n);
/* Whether a backend linking the CUDA runtime can run here: a driver no older than the runtime, a device, and
 * the cuDNN major version built against. 1 with *count devices and cuDNN's version in *dnn; else 0 and why
 * ("no CUDA driver (libcuda.so.1 not loadable): no CUDA device", ...). Creates no context (kit/cuda/rt.c). */
int kh_cudart_usable(int *count, size_t *dnn, char *why, size_t n);
/* The status a failure maps to: KH_ERR_NOMEM for an allocation failure, else KH_ERR_DEVICE. */
kh_status kh_cudnn_status(cudnnStatus_t e);
kh_status kh_cublas_status(cublasStatus_t e);

/* cuBLAS and cuDNN handles on the calling thread's current context, both bound to stream; cuBLAS in the
 * session's math (tf32 = 0: CUBLAS_DEFAULT_MATH, never TF32 for FP32 GEMMs; 1: CUBLAS_TF32_TENSOR_OP_MATH).
 * On failure nothing is left created and err says which call failed and why. */
kh_status kh_cuda_handles(cudaStream_t stream, int tf32, cublasHandle_t *blas, cudnnHandle_t *dnn, char *err,
                          size_t errlen);
/* "cudnn=9.10.2 cublas=13.0.0" (cuBLAS's version read through blas; "cublas=?" when NULL). */
void kh_cuda_lib_versions(cublasHandle_t blas, char *buf, size_t n);

/* A backend's session on a CUDA device. The context is the device's primary context: the host's, current on
 * the calling thread during every backend call (an error when another context is current); only where nothing
 * is current (a harness that opens the backend without the host) it is retained here, as cudaSetDevice would,
 * and released at close. No context is ever created. The CUDA runtime, where a backend uses it, runs on that
 * same current context. A CUstream is a cudaStream_t. */
typedef struct kh_cuda_session {
    CUdevice dev;
    CUcontext ctx;
    int retained;        /* 1: retained here (nothing was current at open) */
    int cc;              /* compute capability, 90 for 9.0 */
    char arch[16];       /* "sm_90" */
    int tf32;            /* kh_device.math is KH_MATH_TF32: cuBLAS TF32 tensor-op math, cuDNN default math */
    CUstream stream;     /* compute: kernels, cuBLAS, cuDNN */
    CUstream copy;       /* host-to-device uploads, when asked for; else NULL */
    cublasHandle_t blas;
    cudnnHandle_t dnn;
} kh_cuda_session;

typedef struct kh_cuda_open_opts {
    const char *plugin;  /* the module's name, first word of every message: "cntk open on cuda:0: ..." */
    int min_arch;        /* lowest compute capability of the compiled kernels (90: sm_90); 0 = any (code
                            generated for the device at run time) */
    int copy_stream;     /* 1: also create the upload stream */
} kh_cuda_open_opts;

/* Open cs on dev (kh_device.ordinal, .math): the driver, the ordinal, the context as above, the architecture
 * (kh_cuda_arch_check), the math (fp32 or tf32), the streams, and cuBLAS and cuDNN bound to the compute
 * stream (kh_cuda_handles). On failure nothing is left held and err names the call and its error;
 * KH_ERR_NOMEM for an allocation failure, KH_ERR_UNSUPPORTED where the device or driver cannot serve. */
kh_status kh_cuda_session_open(const kh_device *dev, const kh_cuda_open_opts *o, kh_cuda_session *cs /* out */,
                               char *err, size_t errlen);
/* Synchronise, then release what open made (safe on a zeroed or half-opened session); a context retained at
 * open is made not current again before it is released. */
void kh_cuda_session_close(kh_cuda_session *cs);
/* A device buffer of every GPU half, through the driver table: at least 256 bytes, zeroed on stream, its size
 * added to count; an out-of-memory (KH_ERR_NOMEM) or other failure (KH_ERR_DEVICE) writes "out of device memory
 * for <what> (x MiB; y of z MiB free)" into why, with *p 0. kh_cuda_buffer_free takes 0. */
kh_status kh_cuda_buffer_alloc(kh_mem_count *count, CUstream stream, CUdeviceptr *p, size_t bytes, const char *what,
                               char *why, size_t n);
void kh_cuda_buffer_free(CUdeviceptr p);
/* Double-buffered input staging, the one every GPU half uses: two pinned host buffers of `bytes` used in turn.
 * A run takes the next one (kh_cuda_stage_next waits until its previous upload finished, so the host fills batch
 * i+1 while the device still works on batch i and no more than two are queued), fills it, uploads parts of it
 * (kh_cuda_stage_upload, on the copy stream) and makes the compute stream wait for them (kh_cuda_stage_ready).
 * With a separate copy stream an upload into a slot's device buffers also waits until the compute stream has
 * released that slot (kh_cuda_stage_release after the work that reads it); with copy == compute everything is in
 * stream order and release is not needed. Errors: the status, and the driver call and its text in why. */
typedef struct kh_cuda_stage {
    CUstream compute, copy;
    void *pin[2];
    CUevent uploaded[2], consumed[2];
    size_t bytes;
    int next, cur;
} kh_cuda_stage;
kh_status kh_cuda_stage_init(kh_cuda_stage *s, CUstream compute, CUstream copy, size_t bytes, char *why, size_t n);
void kh_cuda_stage_free(kh_cuda_stage *s); /* synchronises the copy stream; safe on a zeroed one */
kh_status kh_cuda_stage_next(kh_cuda_stage *s, int *k, void **pin, char *why, size_t n);
kh_status kh_cuda_stage_upload(kh_cuda_stage *s, int k, CUdeviceptr dst, size_t off, size_t bytes, char *why, size_t n);
kh_status kh_cuda_stage_ready(kh_cuda_stage *s, int k, char *why, size_t n);
kh_status kh_cuda_stage_release(kh_cuda_stage *s, char *why, size_t n);
/* A backend's CUDA session state: size zeroed bytes whose first member is a kh_cuda_session, opened on dev after
 * the device kind's capabilities say it is usable (caps(c) fills c->available and c->note; unusable is
 * KH_ERR_UNSUPPORTED "<plugin> open on <device>: <note>"). *out is NULL after a failure, with nothing held.
 * kh_cuda_session_free closes and frees one (NULL is fine). */
kh_status kh_cuda_session_new(const kh_device *dev, const kh_cuda_open_opts *o, void (*caps)(kh_caps *c), size_t size,
                              void **out, char *err, size_t errlen);
void kh_cuda_session_free(void *state);
/* The environment words every GPU record carries: "driver=13.0 cudnn=9.10.2 cublas=13.0.0 device=\"NVIDIA
 * H200\" cc=9.0 math=fp32" (driver and libraries as loaded; cs may be NULL before open). */
void kh_cuda_session_env(const kh_cuda_session *cs, const kh_device *dev, char *buf, size_t n);

/* One direction of a convolution. */
typedef enum kh_conv_dir { KH_CONV_FWD = 0, KH_CONV_BWD_DATA = 1, KH_CONV_BWD_FILTER = 2 } kh_conv_dir;
/* "fwd", "bwd_data", "bwd_filter" */
const char *kh_conv_dir_name(kh_conv_dir d);

/* How a backend chooses a convolution's algorithm (cntk, tensorflow and theano: one rule). */
typedef struct kh_conv_choice_opts {
    int deterministic;   /* [plugin X] deterministic: prefer deterministic algorithms */
    int tf32;            /* the session's math is tf32: tensor-core TF32 candidates are usable */
    size_t ws_cap;       /* largest workspace a candidate may need */
    const kh_host_api *host; /* for the fallback warning and the candidate list (may be NULL) */
    const char *plugin;  /* the log's module name */
    const char *where;   /* "Conv2D node 3": names the convolution in the log */
} kh_conv_choice_opts;

/* cuDNN's heuristics (the _v7 queries) for direction d of the convolution described by x, w, conv, y, ranked
 * fastest first, and the choice among them (kh_algo_pick). Usable: status success, FMA or default math (with
 * tf32 also CUDNN_TENSOR_OP_MATH; never ..._ALLOW_CONVERSION, which may round to FP16), not FFT or non-fused
 * Winograd (their FP32 error is beyond the parity tolerances), workspace within ws_cap. A non-deterministic
 * fallback is logged as a warning; none usable is KH_ERR_UNSUPPORTED with the candidates in err (and logged).
 * A failing query is its cuDNN status (kh_cudnn_status) with err naming it. *algo and *det on success. */
kh_status kh_cudnn_conv_choose(cudnnHandle_t h, kh_conv_dir d, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                               cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                               const kh_conv_choice_opts *o, int *algo, int *det, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

/* kit/cuda/libs.c — see khost/kit/cuda.h: cuBLAS and cuDNN errors, handles, versions and the convolution
 * algorithm choice. Unverified on a GPU. */
#include "khost/kit/cuda.h"

#include <stdio.h>
#include <string.h>

#include "khost/kit/status.h"
#include "khost/kit/cuda_driver.h"

/* The driver table's prototypes, written out for builds without the toolkit, are cuda.h's own. */
#define KH_CU_SAME_AS_CUDA_H(member, cu_name, symbol, need, params)                                              \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&cu_name), kh_CUresult(*) params),                   \
                   "khost/kit/cuda_driver.h: the prototype of " #member " is not cuda.h's");
KH_CU_ENTRIES(KH_CU_SAME_AS_CUDA_H)

const char *kh_cudnn_errtext(cudnnStatus_t e, char *buf, size_t n) {
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last); /* cuDNN 9: the message of the last failure on this thread */
    if (last[0]) snprintf(buf, n, "%s: %s", cudnnGetErrorString(e), last);
    else snprintf(buf, n, "%s", cudnnGetErrorString(e));
    return buf;
}

const char *kh_cublas_errtext(cublasStatus_t e, char *buf, size_t n) {
    snprintf(buf, n, "%s: %s", cublasGetStatusName(e), cublasGetStatusString(e));
    return buf;
}

kh_status kh_cudnn_status(cudnnStatus_t e) { return e == CUDNN_STATUS_ALLOC_FAILED ? KH_ERR_NOMEM : KH_ERR_DEVICE; }
kh_status kh_cublas_status(cublasStatus_t e) { return e == CUBLAS_STATUS_ALLOC_FAILED ? KH_ERR_NOMEM : KH_ERR_DEVICE; }

kh_status kh_cuda_handles(cudaStream_t stream, int tf32, cublasHandle_t *blas, cudnnHandle_t *dnn, char *err,
                          size_t errlen) {
    char t[320];
    *blas = NULL;
    *dnn = NULL;
    const char *what = "cublasCreate";
    cublasStatus_t be = cublasCreate(blas);
    if (be == CUBLAS_STATUS_SUCCESS) what = "cublasSetStream", be = cublasSetStream(*blas, stream);
    if (be == CUBLAS_STATUS_SUCCESS)
        what = "cublasSetMathMode",
        be = cublasSetMathMode(*blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (be != CUBLAS_STATUS_SUCCESS) {
        if (*blas) cublasDestroy(*blas);
        *blas = NULL;
        return kh_errf(err, errlen, kh_cublas_status(be), "%s: %s", what, kh_cublas_errtext(be, t, sizeof t));
    }
    what = "cudnnCreate";
    cudnnStatus_t de = cudnnCreate(dnn);
    if (de == CUDNN_STATUS_SUCCESS) what = "cudnnSetStream", de = cudnnSetStream(*dnn, stream);
    if (de != CUDNN_STATUS_SUCCESS) {
        if (*dnn) cudnnDestroy(*dnn);
        cublasDestroy(*blas);
        *dnn = NULL;
        *blas = NULL;
        return kh_errf(err, errlen, kh_cudnn_status(de), "%s: %s", what, kh_cudnn_errtext(de, t, sizeof t));
    }
    return KH_OK;
}

void kh_cuda_lib_versions(cublasHandle_t blas, char *buf, size_t n) {
    size_t dv = cudnnGetVersion();
    int bv = 0;
    if (blas && cublasGetVersion(blas, &bv) == CUBLAS_STATUS_SUCCESS)
        snprintf(buf, n, "cudnn=%zu.%zu.%zu cublas=%d.%d.%d", dv / 10000, (dv % 10000) / 100, dv % 100, bv / 10000,
                 (bv % 10000) / 100, bv % 100);
    else snprintf(buf, n, "cudnn=%zu.%zu.%zu cublas=?", dv / 10000, (dv % 10000) / 100, dv % 100);
}

const char *kh_conv_dir_name(kh_conv_dir d) {
    return d == KH_CONV_FWD ? "fwd" : d == KH_CONV_BWD_DATA ? "bwd_data" : "bwd_filter";
}

/* The math types a candidate may use: FMA (strict FP32) or cuDNN's default, which with the descriptor set to
 * FMA is FMA; with --math tf32 (the descriptor at CUDNN_DEFAULT_MATH) also tensor-core TF32. Never
 * CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: it may round FP32 data down to FP16. */
static int math_ok(cudnnMathType_t t, int tf32) {
    return t == CUDNN_FMA_MATH || t == CUDNN_DEFAULT_MATH || (tf32 && t == CUDNN_TENSOR_OP_MATH);
}

/* FFT and non-fused Winograd: their FP32 error (~1e-4 relative) is beyond the parity tolerances */
static int accurate(kh_conv_dir d, int a) {
    if (d == KH_CONV_FWD)
        return a != CUDNN_CONVOLUTION_FWD_ALGO_FFT && a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
               a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    if (d == KH_CONV_BWD_DATA)
        return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT && a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
               a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT && a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
           a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

/* the perf structs of the three directions share these members */
#define KH_CANDS(perf, n)                                                                                      \
    for (int k_ = 0; k_ < (n); k_++) {                                                                         \
        cand[k_].algo = (int)(perf)[k_].algo;                                                                  \
        cand[k_].det = (perf)[k_].determinism == CUDNN_DETERMINISTIC;                                          \
        cand[k_].memory = (perf)[k_].memory;                                                                   \
        cand[k_].ok = (perf)[k_].status == CUDNN_STATUS_SUCCESS && math_ok((perf)[k_].mathType, o->tf32) &&    \
                      (perf)[k_].memory <= o->ws_cap && accurate(d, cand[k_].algo);                            \
    }

kh_status kh_cudnn_conv_choose(cudnnHandle_t h, kh_conv_dir d, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                               cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                               const kh_conv_choice_opts *o, int *algo, int *det, char *err, size_t errlen) {
    kh_algo_cand cand[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT +
                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int got = 0;
    cudnnStatus_t st;
    const char *call;
    *algo = -1;
    *det = 0;
    if (d == KH_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        call = "cudnnGetConvolutionForwardAlgorithm_v7";
        st = cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, p);
        if (st == CUDNN_STATUS_SUCCESS) KH_CANDS(p, got);
    } else if (d == KH_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        call = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
        st = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                         p);
        if (st == CUDNN_STATUS_SUCCESS) KH_CANDS(p, got);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        call = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
        st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                           &got, p);
        if (st == CUDNN_STATUS_SUCCESS) KH_CANDS(p, got);
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        char t[320];
        return kh_errf(err, errlen, kh_cudnn_status(st), "%s: %s", call, kh_cudnn_errtext(st, t, sizeof t));
    }
    int fallback = 0, k = kh_algo_pick(cand, got, o->deterministic, &fallback);
    const char *plugin = o->plugin ? o->plugin : "kit", *where = o->where ? o->where : "convolution";
    if (k < 0) {
        char list[512];
        kh_algo_list(cand, got, list, sizeof list);
        if (o->host && o->host->log)
            o->host->log(KH_LOG_ERROR, plugin, "%s (%s): cuDNN candidates: %s", where, kh_conv_dir_name(d), list);
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED,
                       "cuDNN offers no working %s algorithm for this shape (%d candidates: %s)",
                       o->tf32 ? "FMA or TF32" : "FMA", got, list);
    }
    if (fallback && o->host && o->host->log)
        o->host->log(KH_LOG_WARN, plugin,
                     "%s (%s): cuDNN offers no deterministic working algorithm; using algorithm %d "
                     "(non-deterministic: results may differ in the last bits run to run)",
                     where, kh_conv_dir_name(d), cand[k].algo);
    *algo = cand[k].algo;
    *det = cand[k].det;
    return KH_OK;
}

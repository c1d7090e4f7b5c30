/* cuda/session.c — the CUDA device kind of the cntk backend: capabilities (is a driver and a device
 * there?), sessions (streams, cuBLAS and cuDNN handles on the host's primary context), the environment
 * string, and the shared helpers of the executor: error text, checked allocation, row-major GEMM.
 *
 * Contexts: the host retains the device's primary context and makes it current before every call; the kit's
 * session (kh_cuda_session_open) checks it is that one and creates none. The CUDA runtime (linked statically,
 * so the module loads where libcuda.so.1 is missing) runs on the context current on the thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/exec.h"
#include "khost/kit/cuda.h"
#include "khost/kit/status.h"

#ifndef CNTK_CUDA_MIN_ARCH
#define CNTK_CUDA_MIN_ARCH 90 /* lowest SASS/PTX target compiled in (CMake passes it from KHOST_CUDA_ARCHS) */
#endif

// --- capabilities ----------------------------------------------------------------------------------------
void cntk_cuda_caps(kh_caps *c) {
    int count = 0;
    size_t dnn = 0;
    c->available = 0;
    if (!kh_cudart_usable(&count, &dnn, c->note, sizeof c->note)) return;
    c->available = 1;
    snprintf(c->note, sizeof c->note, "cuDNN %zu.%zu conv/RNN, cuBLAS GEMM, NCHW; sm_%d+ (%d device%s)", dnn / 10000,
             (dnn % 10000) / 100, CNTK_CUDA_MIN_ARCH, count, count == 1 ? "" : "s");
}

// --- sessions --------------------------------------------------------------------------------------------
kh_status cntk_cuda_open(cntk_session *s, char *err, size_t errlen) {
    const kh_cuda_open_opts o = {.plugin = "cntk", .min_arch = CNTK_CUDA_MIN_ARCH, .copy_stream = 1};
    return kh_cuda_session_new(&s->base.dev, &o, cntk_cuda_caps, sizeof(cntk_cuda_sess), (void **)&s->cuda, err, errlen);
}

void cntk_cuda_close(cntk_session *s) {
    kh_cuda_session_free(s->cuda);
    cudaGetLastError(); /* the runtime's sticky error must not reach the next session */
    s->cuda = NULL;
}

kh_status cntk_cuda_environment(cntk_session *s, char *buf, size_t n) {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    char common[320];
    kh_cuda_session_env(s->cuda ? &s->cuda->k : NULL, &s->base.dev, common, sizeof common);
    snprintf(buf, n, "cuda_runtime=%d.%d %s", rt / 1000, (rt % 1000) / 10, common);
    return KH_OK;
}

// --- errors ----------------------------------------------------------------------------------------------
static kh_status report(ccu_model *m, const ccu_layer *L, const char *op, kh_status st, const char *name,
                        const char *call) {
    char fn[96];
    kh_call_name(call, fn, sizeof fn);
    if (L) return cntk_layer_fail(m->s, st, L->p->spec.kind, L->p->index, op, "%s (%s)", name, fn);
    return cntk_fail(m->s, st, op, "%s (%s)", name, fn);
}

kh_status ccu_err_cuda(ccu_model *m, const ccu_layer *L, const char *op, cudaError_t e, const char *call) {
    cudaGetLastError(); /* clear a non-sticky error so later calls report their own */
    kh_status st = e == cudaErrorMemoryAllocation ? KH_ERR_NOMEM : KH_ERR_DEVICE;
    char t[320];
    return report(m, L, op, st, kh_cudart_errtext(e, t, sizeof t), call);
}

kh_status ccu_err_dnn(ccu_model *m, const ccu_layer *L, const char *op, cudnnStatus_t e, const char *call) {
    /* cuDNN 9 keeps a detailed message for the last failure (which argument, which limit): the kit appends it */
    char name[400];
    return report(m, L, op, kh_cudnn_status(e), kh_cudnn_errtext(e, name, sizeof name), call);
}

kh_status ccu_check_layer(ccu_model *m, const ccu_layer *L, const char *op) {
    if (!m->check_layers) return KH_OK;
    cudaError_t e = cudaStreamSynchronize(m->cs->k.stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return ccu_err_cuda(m, L, op, e, "cudaStreamSynchronize(after the layer)");
    return KH_OK;
}

kh_status ccu_err_blas(ccu_model *m, const ccu_layer *L, const char *op, cublasStatus_t e, const char *call) {
    char t[320];
    return report(m, L, op, kh_cublas_status(e), kh_cublas_errtext(e, t, sizeof t), call);
}

// --- memory ----------------------------------------------------------------------------------------------
kh_status ccu_malloc(ccu_model *m, const ccu_layer *L, void **p, size_t bytes, const char *what) {
    CUdeviceptr d = 0;
    char why[300];
    kh_status st = kh_cuda_buffer_alloc(m->dev_mem, m->cs->k.stream, &d, bytes, what, why, sizeof why);
    *p = (void *)(uintptr_t)d;
    if (st == KH_OK) return st;
    if (L) return cntk_layer_fail(m->s, st, L->p->spec.kind, L->p->index, "compile", "%s", why);
    return cntk_fail(m->s, st, "compile", "%s", why);
}

void ccu_free_dev(void *p) { kh_cuda_buffer_free((CUdeviceptr)(uintptr_t)p); }

void ccu_need_ws(ccu_model *m, size_t bytes) {
    if (bytes > m->ws_bytes) m->ws_bytes = bytes;
}

// --- GEMM ------------------------------------------------------------------------------------------------
kh_status ccu_gemm(ccu_model *m, const ccu_layer *L, const char *op, int trans_a, int trans_b, int64_t M,
                   int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                   float beta, float *C, int64_t ldc) {
    /* row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T: a row-major buffer read as
     * column-major is the transpose, so pass B first with its own op, then A */
    CCU_BLAS(m, L, op,
             cublasSgemm(m->cs->k.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                         (int)N, (int)M, (int)K, &alpha, B, (int)ldb, A, (int)lda, &beta, C, (int)ldc));
    return KH_OK;
}

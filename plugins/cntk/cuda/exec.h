/* cuda/exec.h — internals of the CUDA executor: session and model state, per-layer state and the
 * per-kind operation table, checked-call macros, and the kernel launchers of cuda/kernels.cu.
 *
 * Execution model
 *   - one compute stream per session (cuBLAS and cuDNN bound to it) plus one copy stream for uploads;
 *     the host's primary context is used (the kit's kh_cuda_session_open checks it), no context is created;
 *   - every device buffer is a plain cudaMalloc made at compile time for plan.max_batch and reused;
 *   - parameters live in ONE arena per model (weights, gradients, two optimizer slots: four allocations),
 *     each tensor 256-byte aligned inside it, so one fused optimizer launch updates the whole model and an
 *     LSTM's cuDNN weight space is simply one tensor of it;
 *   - gradient discipline: parameter gradients are overwritten by each backward, except the two kinds that
 *     accumulate by nature (Embedding scatter-add, cuDNN RNN weight gradients in CUDNN_WGRAD_MODE_ADD):
 *     they rely on a zeroed gradient arena, which the optimizer leaves behind (it clears g as it consumes it)
 *     and which a backward after anything else gets from one cudaMemsetAsync (g_clean flag);
 *   - activation gradients ping-pong between two buffers as on the CPU; images stay NCHW (cuDNN's layout).
 */
#ifndef KHOST_CNTK_CUDA_EXEC_H
#define KHOST_CNTK_CUDA_EXEC_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "plan/plan.h"
#include "khost/kit/cuda.h"
#include "cuda/gpu.h"
#include "cuda/kernels.h"

struct cntk_cuda_sess {
    kh_cuda_session k; /* the host's primary context, the compute stream (kernels, cuBLAS, cuDNN), the upload
                          stream (k.copy: the next batch), cuBLAS and cuDNN; the kit opens it */
};

typedef struct ccu_layer ccu_layer;
typedef struct cntk_cuda_model ccu_model;

/* One parameter tensor of the arena, in the backend's layout. */
typedef struct ccu_tensor {
    int64_t off;   /* floats from the arena base */
    int64_t numel;
} ccu_tensor;

struct ccu_ops {
    /* Create descriptors and state; declare parameter tensors (L->n_t, L->t[].numel) and workspace needs.
     * Runs before the arena exists. */
    kh_status (*setup)(ccu_model *m, ccu_layer *L);
    /* After the arena is allocated (tensor offsets known): anything that needs real weight addresses. */
    kh_status (*bind)(ccu_model *m, ccu_layer *L);
    void (*teardown)(ccu_model *m, ccu_layer *L);
    /* y = f(x) for n samples; mode: 0 inference, 1 training (dropout masks; RNN reserve space kept). */
    kh_status (*forward)(ccu_model *m, ccu_layer *L, int n, int train);
    /* dy (n, out) gradient w.r.t. y, or w.r.t. the pre-activation when `fused`; may be modified in place.
     * dx (n, in) or NULL; spare: a free (max_batch, gb_numel) buffer the layer may use as scratch. */
    kh_status (*backward)(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused);
    /* Canonical (Keras) slot <-> backend tensors, on the host: `space` is the layer's first tensor
     * (t[0], or the whole LSTM weight space) copied to host memory. NULL: slot s is tensor s, same layout. */
    void (*to_backend)(const ccu_layer *L, int slot, const float *canon, float *space);
    void (*to_canonical)(const ccu_layer *L, int slot, const float *space, float *canon);
};

struct ccu_layer {
    const cntk_layer_plan *p;
    const struct ccu_ops *ops;
    const float *x;    /* (N, in_numel) f32 input (previous y, staged input or expanded one-hot) */
    const int32_t *xi; /* (N, raw) index input (Embedding) */
    float *y;          /* (N, out_numel) */
    int n_t;           /* parameter tensors */
    ccu_tensor t[KH_MAX_SLOTS];
    int slots_in_t0;   /* 1: every canonical slot maps into t[0] through to_backend (LSTM weight space) */
    void *st;          /* kind-specific */
};

struct cntk_cuda_model {
    cntk_session *s;
    kh_mem_count *dev_mem; /* the model's count (cntk_model.dev_mem): ccu_malloc adds to it */
    cntk_cuda_sess *cs;
    const cntk_plan *plan;
    int n_layers;
    ccu_layer *L;
    /* input staging: pinned host buffers and device copies, double-buffered */
    size_t x_bytes;              /* max_batch * raw_numel * 4 */
    kh_cuda_stage stage;         /* the kit's double-buffered staging on the copy stream: x then labels */
    void *d_in[2];               /* device x (f32 or i32), per staging slot */
    int32_t *d_lab[2];
    float *xexp;                 /* (N, in0) one-hot expanded to f32 (NCHW when image-like) */
    float *gb[2];                /* ping-pong activation gradients */
    int64_t gb_numel;
    void *ws;                    /* shared cuDNN workspace (conv algorithms, RNN) */
    size_t ws_bytes;
    float *pw, *pg, *ps1, *ps2;  /* the parameter arena */
    int64_t p_numel;
    int g_clean;                 /* the gradient arena is all zero */
    double *d_met;               /* (4) TRAIN loss, correct; EVAL loss, correct */
    double *h_met;               /* pinned (4) */
    int64_t samples[2];
    uint64_t n_forward;
    int64_t iterations;
    int last_n, have_fwd, have_grad;
    int poison;                  /* CNTK_CUDA_POISON=1: NaN-fill activations at compile and each forward */
    int check_layers;            /* CNTK_CUDA_CHECK_LAYERS=1: synchronise and check after every layer */
    int verbose;                 /* CNTK_CUDA_VERBOSE=1: log the convolution algorithms chosen */
    int ws_final;                /* ws_bytes is the allocated workspace (compile has finished sizing it) */
};

/* --- errors ------------------------------------------------------------------------------------------- */
/* "cntk <kind>[i] <op> on cuda:N: <NAME> (<call>)" (L NULL: "cntk <op> on cuda:N: ..."), for cuDNN followed
 * by cuDNN's own last error text when it has one; out-of-memory statuses map to KH_ERR_NOMEM, everything
 * else to KH_ERR_DEVICE. */
kh_status ccu_err_cuda(ccu_model *m, const ccu_layer *L, const char *op, cudaError_t e, const char *call);
kh_status ccu_err_dnn(ccu_model *m, const ccu_layer *L, const char *op, cudnnStatus_t e, const char *call);
kh_status ccu_err_blas(ccu_model *m, const ccu_layer *L, const char *op, cublasStatus_t e, const char *call);

#define CCU_CUDA(m, L, op, call)                                                 \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess) return ccu_err_cuda((m), (L), (op), e_, #call);   \
    } while (0)
#define CCU_DNN(m, L, op, call)                                                  \
    do {                                                                         \
        cudnnStatus_t e_ = (call);                                               \
        if (e_ != CUDNN_STATUS_SUCCESS) return ccu_err_dnn((m), (L), (op), e_, #call); \
    } while (0)
#define CCU_BLAS(m, L, op, call)                                                 \
    do {                                                                         \
        cublasStatus_t e_ = (call);                                              \
        if (e_ != CUBLAS_STATUS_SUCCESS) return ccu_err_blas((m), (L), (op), e_, #call); \
    } while (0)

/* cudaMalloc with a clear out-of-memory message naming the buffer and the free/total device memory. */
kh_status ccu_malloc(ccu_model *m, const ccu_layer *L, void **p, size_t bytes, const char *what);
void ccu_free_dev(void *p);

/* Row-major C (m x n) = alpha op(A) op(B) + beta C through cuBLAS (column-major): computes C^T = op(B)^T
 * op(A)^T, i.e. swaps the operands — no data is transposed. */
kh_status ccu_gemm(ccu_model *m, const ccu_layer *L, const char *op, int trans_a, int trans_b, int64_t M,
                   int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                   float beta, float *C, int64_t ldc);

/* CNTK_CUDA_CHECK_LAYERS=1: wait for the stream and check for a device fault after layer L's `op`, so an
 * asynchronous fault is reported with the layer that caused it (not at the next synchronisation). */
kh_status ccu_check_layer(ccu_model *m, const ccu_layer *L, const char *op);

/* The largest cuDNN workspace any layer needs (bytes); layers call it from setup. */
void ccu_need_ws(ccu_model *m, size_t bytes);
/* Pointer of a parameter tensor in the arenas. */
static inline float *ccu_w(const ccu_model *m, const ccu_layer *L, int t) { return m->pw + L->t[t].off; }
static inline float *ccu_g(const ccu_model *m, const ccu_layer *L, int t) { return m->pg + L->t[t].off; }

/* Per-kind tables (cuda/layers.c, cuda/lstm.c). */
extern const struct ccu_ops ccu_dense_ops, ccu_conv_ops, ccu_maxpool_ops, ccu_embed_ops, ccu_lstm_ops,
    ccu_activation_ops, ccu_dropout_ops, ccu_flatten_ops, ccu_gap1d_ops;

#endif

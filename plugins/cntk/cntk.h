/* cntk.h — internal interfaces of the cntk backend ("vendor libraries" strategy).
 *
 * Two levels, so each device kind has its own executor over one plan:
 *   - the plan (cntk_plan.c): a device-independent description of a compiled model — the spec validated,
 *     every shape inferred, the activation/loss fusion decided, the backend's tensor layouts fixed
 *     (images NCHW). Nothing in it allocates device memory or knows about BLAS.
 *   - an executor per device kind: the CPU executor (cpu/model.c and one file per layer kind) owning
 *     buffers sized once for max_batch, OpenBLAS for every matrix product, a small thread pool for
 *     element-wise work; the CUDA executor (the cuda/ folder, cuDNN/cuBLAS, a separately loaded GPU half:
 *     cuda/lazy.c) implements the same entry points from the plan.
 * The ABI glue (cntk_entry.c, cntk_api.c) only routes calls to the executor of the model's device.
 */
#ifndef KHOST_CNTK_H
#define KHOST_CNTK_H

#include <stddef.h>
#include <stdint.h>

#include "khost/khost.h"
#include "khost/kit/alloc.h"
#include "khost/kit/spec.h"

#define CNTK_VERSION "0.1.0"
#define CNTK_ERRLEN 512

typedef struct cntk_pool cntk_pool;
typedef struct cntk_cuda_sess cntk_cuda_sess;   /* CUDA session state (cuda/exec.h) */
typedef struct cntk_cuda_model cntk_cuda_model; /* CUDA executor (cuda/exec.h) */

// --- session ---------------------------------------------------------------------------------------------
typedef struct kh_bsession {
    const kh_host_api *host;
    kh_device dev;
    int threads;    /* worker threads for BLAS and the pool (dev.threads, at least 1) */
    cntk_pool *pool;  /* cpu sessions only */
    int onednn_chain; /* cpu: [plugin cntk] onednn_chain (cpu/conv_onednn.c) */
    cntk_cuda_sess *cuda; /* cuda sessions only */
    char err[CNTK_ERRLEN];
} cntk_session;

/* Write "cntk <what> on <device>: <why>" into the session's error and return st. */
kh_status cntk_fail(cntk_session *s, kh_status st, const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Same for a layer: "cntk <kind>[i] <op> on <device>: <why>". */
kh_status cntk_layer_fail(cntk_session *s, kh_status st, uint32_t kind, int32_t index, const char *op,
                          const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

// --- the plan: device independent ------------------------------------------------------------------------
typedef struct cntk_layer_plan {
    int32_t index;
    kh_layer_spec spec;
    kh_layer_shapes sh;
    int32_t act;         /* activation applied at this layer's output (Dense/Conv2D fused, Activation) */
    int32_t fused_loss;  /* 1: last layer; in training its backward receives d(loss)/d(pre-activation) */
    int32_t image_in;    /* per-sample input is an image (H,W,C), stored NCHW by this backend */
    int32_t image_out;
    int32_t index_in;    /* input is i32 indices (Embedding, or the one-hot first layer) */
    int32_t onehot_in;   /* > 0: first layer reading one_hot(x, onehot_in) as a row lookup */
    int64_t in_numel, out_numel; /* per sample, as stored */
} cntk_layer_plan;

typedef struct cntk_plan {
    int32_t n_layers;
    cntk_layer_plan *layers;  /* n_layers, malloc'ed */
    kh_model_shapes shapes;
    uint32_t input_dtype;     /* KH_F32 or KH_I32 */
    int32_t input_onehot;
    int32_t raw_rank, raw_shape[3]; /* what arrives per sample (indices for one-hot models) */
    int64_t raw_numel;
    int32_t expand_onehot;    /* 1: one-hot input whose first layer cannot look rows up: expand it */
    uint32_t loss;
    kh_optimizer_spec opt;    /* Keras 2 defaults filled in for fields the spec left at zero */
    int32_t n_classes;
    int32_t max_batch;
    uint64_t seed;
    int32_t deterministic;
    int64_t out_numel;        /* per sample, model output */
    int32_t out_rank, out_shape[3];
} cntk_plan;

kh_status cntk_plan_build(cntk_session *s, const kh_model_spec *spec, const kh_compile_opts *opts,
                          cntk_plan *out);
void cntk_plan_free(cntk_plan *p);
/* Check a batch x against the plan (dtype, 1..max_batch samples, values per sample), for every executor;
 * the batch size goes to *n. */
kh_status cntk_plan_check_input(const cntk_plan *p, cntk_session *s, const kh_tensor *x, const char *op, int *n);

// --- compiled model and executor entry points ------------------------------------------------------------
typedef struct cntk_cpu_model cntk_cpu_model;

typedef struct kh_bmodel {
    cntk_session *s;
    cntk_plan plan;
    cntk_cpu_model *cpu;   /* the CPU executor (cpu sessions) */
    cntk_cuda_model *cuda; /* the CUDA executor (cuda sessions; cuda/gpu.h) */
    kh_mem_count dev_mem;  /* what the CUDA executor allocated on the device for this model (memory_info) */
} cntk_model;

/* Model-level ABI functions (cntk_api.c): validate arguments, route to the model's executor. */
kh_status cntk_api_compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts,
                           kh_bmodel **out);
void cntk_api_model_free(kh_bmodel *m);
kh_status cntk_api_set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w);
kh_status cntk_api_get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w);
kh_status cntk_api_train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
kh_status cntk_api_eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
kh_status cntk_api_predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out);
kh_status cntk_api_read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status cntk_api_sync(kh_bmodel *m);
kh_status cntk_api_memory_info(kh_bmodel *m, kh_memory_info *out);
kh_status cntk_api_forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out);
kh_status cntk_api_backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx);
kh_status cntk_api_get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g);
/* ABI 1.1: per-layer profile of training steps (cpu/profile.c; cpu only). */
kh_status cntk_api_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                           kh_profile *out);

/* The CPU executor (cpu/model.c). */
kh_status cntk_cpu_compile(cntk_model *m);
void cntk_cpu_free(cntk_cpu_model *c);
kh_status cntk_cpu_set_weight(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *w);
kh_status cntk_cpu_get_weight(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *w);
kh_status cntk_cpu_get_grad(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *g);
kh_status cntk_cpu_train(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
kh_status cntk_cpu_eval(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
kh_status cntk_cpu_predict(cntk_model *m, const kh_tensor *x, kh_tensor *out);
kh_status cntk_cpu_forward_probe(cntk_model *m, const kh_tensor *x, kh_tensor *out);
kh_status cntk_cpu_backward_probe(cntk_model *m, const kh_tensor *dy, kh_tensor *dx);
kh_status cntk_cpu_read_metrics(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset);

// --- CPU primitives shared by the layer files ------------------------------------------------------------
/* Thread pool: fn(ctx, begin, end) over [0, n) split in contiguous parts of at least `grain` items; the
 * caller runs the first part. Workers block on a condition variable (never spin), so they do not steal
 * cycles from OpenBLAS's own threads between calls. */
typedef void (*cntk_range_fn)(void *ctx, int64_t begin, int64_t end);
kh_status cntk_pool_create(int threads, cntk_pool **out);
void cntk_pool_destroy(cntk_pool *p);
void cntk_parallel_for(cntk_pool *p, int64_t n, int64_t grain, cntk_range_fn fn, void *ctx);
int cntk_pool_threads(const cntk_pool *p);
/* Workers stop spinning for the next job and block until it comes (before work that needs every core). */
void cntk_pool_park(cntk_pool *p);

/* Row-major C = alpha op(A) op(B) + beta C, through CBLAS (OpenBLAS), on the calling thread only (BLAS is
 * kept single-threaded: cpu/blas.c). Safe to call from pool workers. */
void cntk_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* The same, split over the pool when it is big enough (cpu/gemm_mt.c). Never from inside a pool job. */
void cntk_sgemm_mt(cntk_pool *pool, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
int cntk_blas_available(void);
void cntk_blas_set_threads(int n);
const char *cntk_blas_version(char *buf, size_t n); /* "openblas-0.3.21" or "none" */
/* The CPU path of this build (cpu/cpu_path.c): "onednn-2.6.3" or "openblas-im2col", and the caps note. */
const char *cntk_cpu_path(char *buf, size_t n);
/* 1 when this build's CPU convolutions are oneDNN's. */
int cntk_cpu_onednn(void);
/* The instruction set oneDNN runs on this CPU ("avx2", "avx512_core_bf16", ...); NULL without oneDNN. */
const char *cntk_onednn_isa(void);
const char *cntk_cpu_note(char *buf, size_t n);

/* Aligned, checked allocation through the host's table (64-byte aligned, zeroed). */
void *cntk_alloc(cntk_session *s, size_t bytes);
void cntk_free(cntk_session *s, void *p);

#endif

/* plan/plan.h — the bottom layer of the cntk backend ("vendor libraries" strategy): its session and model, and
 * the device-independent plan every executor runs from.
 *
 * Layers, from the bottom (tests/layers): plan/ → cpu/ → cuda/ → the module's root.
 *   - the plan (plan/plan.c): a device-independent description of a compiled model — the spec validated,
 *     every shape inferred, the activation/loss fusion decided, the backend's tensor layouts fixed
 *     (images NCHW). Nothing in it allocates device memory or knows about BLAS.
 *   - an executor per device kind: the CPU executor (cpu/model.c and one file per layer kind) owning
 *     buffers sized once for max_batch, OpenBLAS for every matrix product, a small thread pool for
 *     element-wise work; the CUDA executor (the cuda/ folder, cuDNN/cuBLAS, a separately loaded GPU half:
 *     cuda/lazy.c) implements the same entry points from the plan.
 * The session life cycle, its error text and allocator are the kit's backend-session layer
 * (khost/kit/session.h); the module's root (cntk_entry.c, cntk_api.c) describes the backend to that layer and
 * routes each model call to the executor of the model's device.
 */
#ifndef KHOST_CNTK_PLAN_H
#define KHOST_CNTK_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "khost/khost.h"
#include "khost/kit/alloc.h"
#include "khost/kit/session.h"
#include "khost/kit/spec.h"

#define CNTK_VERSION "0.1.0"

typedef struct cntk_pool cntk_pool;
typedef struct cntk_cuda_sess cntk_cuda_sess;   /* CUDA session state (cuda/exec.h) */
typedef struct cntk_cuda_model cntk_cuda_model; /* CUDA executor (cuda/exec.h) */

// --- session ---------------------------------------------------------------------------------------------
typedef struct kh_bsession {
    kh_session base;      /* the session layer's: host, dev, threads, err (first member) */
    cntk_pool *pool;      /* cpu sessions only */
    int onednn_chain;     /* cpu: [plugin cntk] onednn_chain (cpu/conv_onednn.c) */
    cntk_cuda_sess *cuda; /* cuda sessions only */
} cntk_session;

static inline kh_session *cntk_base(cntk_session *s) { return (kh_session *)s; }

/* "cntk <what> on <device>: <why>" into the session's error, returning st; the same for a layer:
 * "cntk <kind>[i] <op> on <device>: <why>". */
#define cntk_fail(s, ...) kh_session_fail(cntk_base(s), __VA_ARGS__)
#define cntk_layer_fail(s, ...) kh_session_layer_fail(cntk_base(s), __VA_ARGS__)
/* Aligned, checked, zeroed allocation through the host's table. */
#define cntk_alloc(s, bytes) kh_session_alloc(cntk_base(s), bytes)
#define cntk_free(s, p) kh_session_free(cntk_base(s), p)

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
    cntk_session *s;       /* first member (khost/kit/session.h: the compile frame sets it) */
    cntk_plan plan;
    cntk_cpu_model *cpu;   /* the CPU executor (cpu sessions) */
    cntk_cuda_model *cuda; /* the CUDA executor (cuda sessions; cuda/gpu.h) */
    kh_mem_count dev_mem;  /* what the CUDA executor allocated on the device for this model (memory_info) */
} cntk_model;

// --- executors ------------------------------------------------------------------------------------------
/* One device kind's executor: the CPU's (cpu/exec.c) and the CUDA one the GPU half exports (cuda/half.c).
 * open sets the device state of a session the session layer filled (host, dev, threads); the model calls run
 * from m->plan, after cntk_api.c's checks. The session keeps its executor (s->base.exec). */
typedef struct cntk_exec {
    void (*caps)(kh_caps *c); /* available and note of the device kind (cntk_entry.c fills the layer set) */
    kh_status (*open)(cntk_session *s, char *err, size_t errlen);
    void (*close)(cntk_session *s);
    kh_status (*environment)(cntk_session *s, char *buf, size_t n);
    kh_status (*compile)(cntk_model *m);
    void (*free_model)(cntk_model *m); /* also after a failed compile */
    kh_status (*set_weight)(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *w);
    kh_status (*get_weight)(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *w);
    kh_status (*get_grad)(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *g);
    kh_status (*train)(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
    kh_status (*eval)(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
    kh_status (*predict)(cntk_model *m, const kh_tensor *x, kh_tensor *out);
    kh_status (*forward_probe)(cntk_model *m, const kh_tensor *x, kh_tensor *out);
    kh_status (*backward_probe)(cntk_model *m, const kh_tensor *dy, kh_tensor *dx);
    kh_status (*read_metrics)(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
    kh_status (*sync)(cntk_model *m);
} cntk_exec;

static inline const cntk_exec *cntk_exec_of(const cntk_session *s) { return (const cntk_exec *)s->base.exec; }

/* Copy a per-sample (C,H,W) tensor to (H,W,C) and back, for n samples (plan/layout.c: the CPU executor's and
 * the CUDA half's host-side copies). */
void cntk_nchw_to_nhwc(const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w);
void cntk_nhwc_to_nchw(const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w);

#endif

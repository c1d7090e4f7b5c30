/* cpu/cpu.h — the CPU executor: per-layer state, the per-kind operation table, the model's buffers.
 *
 * Buffer discipline: everything is allocated once in cntk_cpu_compile for plan.max_batch and reused.
 *   - every layer owns its output y (N, out_numel) because backward passes need saved activations;
 *   - activation gradients ping-pong between two model-wide buffers gb[0], gb[1] sized for the largest
 *     layer tensor: layer i reads dy from one and writes dx into the other;
 *   - one shared scratch area (im2col columns, ...) sized for the layer that needs most, and with oneDNN
 *     one shared scratchpad for its primitives (cpu/onednn.c);
 *   - parameter gradients live beside their weights (Embedding: only the touched rows, see cntk_param).
 * Conventions (llm.c style): activation gradients overwrite, parameter gradients are overwritten by each
 * backward (no accumulation across batches), dy buffers handed to backward are the executor's scratch and
 * may be modified in place.
 */
#ifndef KHOST_CNTK_CPU_H
#define KHOST_CNTK_CPU_H

#include "plan/plan.h"
#include "khost/kit/clock.h"

/* ABI 1.1: per-layer profile of training steps (cpu/profile.c; cpu only). */
kh_status cntk_api_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                           kh_profile *out);

/* The CPU executor (cpu/model.c), with its session side (cpu/session.c: the BLAS and pool settings). */
extern const cntk_exec cntk_cpu_exec;
void cntk_cpu_caps(kh_caps *c);
kh_status cntk_cpu_open(cntk_session *s, char *err, size_t errlen);
void cntk_cpu_close(cntk_session *s);
kh_status cntk_cpu_environment(cntk_session *s, char *buf, size_t n);

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

/* One parameter tensor in the backend's layout, with its gradient and optimizer slots. */
typedef struct cntk_param {
    float *w;        /* (numel) backend layout (Conv2D: [F, C*kh*kw]; others canonical) */
    float *g;        /* (numel) dense gradient; NULL when the gradient is kept as rows (Embedding) */
    float *s1, *s2;  /* optimizer slots: RMSprop a / Adam m, v / Adadelta a, d (NULL if unused) */
    int64_t numel;
    /* Row-sparse gradient (Embedding): only rows touched by the batch carry a gradient; the optimizer still
     * visits every row (Keras applies Adam densely), treating untouched rows as g = 0. */
    int64_t rows, cols;
    int32_t *row_slot;  /* (rows) index into grow, -1 = untouched */
    int32_t *touched;   /* (max touched) row ids in first-touch order */
    float *grow;        /* (max touched, cols) gradient rows */
    int64_t n_touched;
} cntk_param;

typedef struct cntk_cpu_layer cntk_cpu_layer;
typedef struct cntk_dnnl cntk_dnnl; /* cpu/onednn.h */

typedef struct cntk_cpu_ops {
    /* Allocate the layer's state and parameters (prm[].w/g are allocated by the model, from plan shapes,
     * before setup); declare shared scratch with cntk_cpu_need_scratch. */
    kh_status (*setup)(cntk_cpu_model *m, cntk_cpu_layer *L);
    void (*teardown)(cntk_cpu_model *m, cntk_cpu_layer *L);
    /* y = f(x) for n samples; train selects dropout masks and keeps what backward needs. */
    kh_status (*forward)(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train);
    /* dy (N, out): gradient w.r.t. y, or w.r.t. the pre-activation when `fused` (softmax/sigmoid folded into
     * the loss). Writes dx (N, in) when non-NULL and overwrites the parameter gradients. */
    kh_status (*backward)(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused);
    /* Canonical (Keras) <-> backend weight layout; NULL means identical (plain copy). */
    void (*to_backend)(const cntk_cpu_layer *L, int slot, const float *canon, float *dst);
    void (*to_canonical)(const cntk_cpu_layer *L, int slot, const float *src, float *canon);
} cntk_cpu_ops;

struct cntk_cpu_layer {
    const cntk_layer_plan *p;
    const cntk_cpu_ops *ops;
    const float *x;     /* (N, in_numel) input: the previous layer's y or the staged model input */
    const int32_t *xi;  /* (N, raw_numel) index input when p->index_in */
    float *y;           /* (N, out_numel) output */
    int32_t n_params;
    cntk_param prm[KH_MAX_SLOTS];
    void *st;           /* kind-specific saved values and scratch */
    /* The oneDNN layout hand-off between chained layers, as data each layer publishes at its setup (set up in
     * model order, so a producer's is there when its consumer is set up) and its consumers read: the blocked
     * layout (a const dnnl_memory_desc_t *) this layer writes y and reads dy in when a consumer may take them as
     * they are, else NULL; and whether this layer was made to read its input in its producer's layout. */
    const void *dnnl_out;
    int dnnl_takes_in;
};

struct cntk_cpu_model {
    cntk_session *s;
    const cntk_plan *plan;
    int32_t n_layers;
    cntk_cpu_layer *L;
    float *xin;          /* (max_batch, in_numel) staged f32 input: NCHW images, or expanded one-hot */
    int32_t *xidx;       /* (max_batch, raw_numel) staged indices */
    int32_t *labels;     /* (max_batch) */
    float *gb[2];        /* (max_batch, gb_numel) ping-pong activation gradients */
    int64_t gb_numel;
    float *scratch;      /* (scratch_numel) shared scratch */
    int64_t scratch_numel;
    uint64_t n_forward;  /* forwards run (any mode), as the reference kit counts them: with the seed and the
                            layer index it seeds the dropout masks */
    int64_t iterations;  /* optimizer steps taken (Keras's `iterations`) */
    kh_metrics met[2];   /* TRAIN, EVAL */
    int32_t last_n;      /* batch of the last training-mode forward (probes) */
    int32_t have_fwd, have_grad;
    cntk_dnnl *dnnl;     /* oneDNN engine, stream and scratchpad (cpu/onednn.h); NULL on the im2col path */
    double *prof;        /* NULL unless profiling (cpu/profile.c): per layer the forward seconds, the backward
                            seconds and the weight gradient's part of them, [3 * n_layers]; the drivers test it once
                            per layer */
    uint8_t *prof_split; /* while profiling, per layer: its backward timed its weight gradient apart */
};

/* Profiling (cpu/profile.c): a clock read that costs nothing unless profile is timing steps, and the seconds since
 * t0 counted as layer L's weight gradient (the rest of its backward is its input gradient). */
static inline double cntk_prof_clock(const cntk_cpu_model *m) { return m->prof ? kh_now() : 0; }
void cntk_prof_weight_grad(cntk_cpu_model *m, const cntk_cpu_layer *L, double t0);

/* Per-kind tables (one file each). */
extern const cntk_cpu_ops cntk_cpu_dense_ops, cntk_cpu_conv_ops, cntk_cpu_maxpool_ops, cntk_cpu_embed_ops,
    cntk_cpu_lstm_ops, cntk_cpu_activation_ops, cntk_cpu_dropout_ops, cntk_cpu_flatten_ops,
    cntk_cpu_gap1d_ops;

void cntk_cpu_need_scratch(cntk_cpu_model *m, int64_t numel);
/* The layer whose output layer i reads through element-wise layers only (Activation other than softmax,
 * indifferent to how its tensor is laid out); -1 when that is the model's input (cpu/activation.c). */
int32_t cntk_cpu_source_layer(const cntk_cpu_model *m, int32_t i);

/* Element-wise activation helpers (cpu/act.c), all through khost/kit/formulas.h.
 * rows x cols tensors; softmax is over each row. */
void cntk_act_forward(cntk_cpu_model *m, int act, float *y, int64_t rows, int64_t cols);
/* dy <- dL/dz given dL/dy and y = act(z), in place. */
void cntk_act_backward(cntk_cpu_model *m, int act, const float *y, float *dy, int64_t rows, int64_t cols);
/* y[r, :] += b for each row, then the activation (one pass over y). */
void cntk_bias_act_forward(cntk_cpu_model *m, int act, const float *b, float *y, int64_t rows, int64_t cols);
/* Out of place: y = act(x) (softmax by rows); dx = dL/dz from dy and y (dy may be modified). */
void cntk_act_forward_from(cntk_cpu_model *m, int act, const float *x, float *y, int64_t rows, int64_t cols);
void cntk_act_backward_to(cntk_cpu_model *m, int act, const float *y, float *dy, float *dx, int64_t rows,
                          int64_t cols);
/* One contiguous span, activation hoisted out of the loop (not softmax); _map forms may be out of place. */
void cntk_act_span(int act, float *y, int64_t n);
void cntk_act_grad_span(int act, const float *y, float *dy, int64_t n);
void cntk_act_map(int act, const float *x, float *y, int64_t n);
void cntk_act_grad_map(int act, const float *y, const float *dy, float *dx, int64_t n);
/* db[j] = sum_r dz[r, j] */
void cntk_colsum(const float *dz, int64_t rows, int64_t cols, float *db);

/* Loss and metrics (cpu/loss.c): add to met; when dz is non-NULL write d(mean loss)/d(pre-activation). */
kh_status cntk_loss_eval(cntk_cpu_model *m, const float *y, const int32_t *labels, int n, kh_metrics *met,
                         float *dz);
/* One optimizer step over every parameter (cpu/optim.c). */
void cntk_optim_step(cntk_cpu_model *m);
/* Allocate optimizer slots for a parameter (cpu/optim.c). */
kh_status cntk_optim_alloc(cntk_cpu_model *m, cntk_param *p);

/* Layers after a oneDNN max pooling that hands its output on in a channel-blocked layout (nChw<cb>c; NHWC is
 * cb = C) to a oneDNN convolution or, through Flatten, to a oneDNN Dense (cpu/conv_onednn.c, dense_onednn.c):
 * Dropout stores its mask and output in that layout, still drawing the masks in the Keras (H, W, C) order
 * (cpu/dropout.c); Flatten passes an NHWC tensor on as it is (cpu/flatten.c). */
void cntk_dropout_store_blocked(cntk_cpu_layer *L, int64_t cb);
void cntk_flatten_pass_nhwc(cntk_cpu_layer *L);

#endif

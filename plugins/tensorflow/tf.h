/* tf.h — internals of the tensorflow backend: the dataflow-executor strategy over khost's graph layer.
 *
 * A model is the four graph functions of kh_graph_lower (train, eval, predict, probe), each with its memory
 * plan; one arena per model (sized for the largest function: only one runs at a time), variables with their
 * optimizer slots, and the persistent GatherGrad accumulators. Executors run one function at a time:
 *   cpu  — tf_exec.c: TensorFlow's executor logic (pending counts, ready queue, cheap ops inline, expensive
 *          ops to the pool, intra-op parallelism inside big kernels) with the kernels of tf_ops_cpu_*.c;
 *   cuda — tf_cuda_*.c: the same graph on one stream, one kernel or library call per op.
 */
#ifndef KHOST_TF_H
#define KHOST_TF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "khost/backend.h"
#include "khost/kit/graph.h"
#include "khost/kit/graph_runtime.h"

#define TF_VERSION "0.1.0"
#define TF_ALIGN 64

typedef struct tf_pool tf_pool;
typedef struct tf_cuda_model tf_cuda_model;
typedef struct tf_cuda_session tf_cuda_session;

/* Executor settings ([plugin tensorflow] in the registry). */
typedef struct tf_settings {
    int inter_op;        /* 1: nodes run in graph order on the calling thread; > 1 (default: the device's
                            threads): independent expensive nodes run at once on the pool */
    int intra_op;        /* parts one kernel may split into (default: the device's threads) */
    int64_t inline_cost; /* ops estimated below this many flops run inline on the thread that readied them */
    int deterministic;   /* GPU: 1 (default) prefer deterministic cuDNN algorithms, 0 take the fastest working */
} tf_settings;

/* A session: the graph runtime's (host, device, threads, error text) first. */
typedef struct tf_session {
    kh_grt_session rt;
    tf_settings set;
    tf_pool *pool;       /* cpu: threads - 1 workers; the calling thread is the last one */
    tf_cuda_session *cuda;
} tf_session;

struct tf_fn;
typedef struct tf_run tf_run;
/* A CPU kernel: runs node `i` of function `f` for the run's batch; returns a status (error text in the run). */
typedef kh_status (*tf_kernel)(tf_run *r, int32_t i);

/* A part of a function the executor can run by itself (the probe runs forward and backward separately). */
typedef struct tf_part {
    int32_t n_nodes;     /* nodes in this part */
    int32_t *init_pending; /* per node: predecessors inside the part (data + control edges) */
    int32_t n_roots;
    int32_t *roots;      /* nodes with no predecessor in the part */
    uint8_t *member;     /* per node */
} tf_part;

/* A compiled function. */
typedef struct tf_fn {
    kh_graph *g;
    kh_gplan plan;
    int32_t n;
    int32_t *succ_off, *succ; /* successors (data consumers + control edges), CSR */
    void **out;          /* per node: its value's storage */
    const void **in_ptr; /* per input slot (graph->ins order): the input value's storage */
    uint8_t *expensive;  /* per node: run on the pool rather than inline */
    float **partials;    /* per node: Conv2DBackpropFilter's per-part filter gradients (NULL for other ops):
                            its own buffer, since two filter gradients may run at once */
    tf_kernel *kernel;   /* per node (CPU) */
    int64_t *flops;      /* per node at max_batch (cost estimate) */
    double *prof_s;      /* NULL unless profiling (tf_profile.c): per node, seconds summed over runs */
    tf_part parts[2];    /* [0] all nodes; probe: [0] forward (phase 0), [1] backward (phase > 0) */
    int32_t n_parts;
    _Atomic int32_t *pending; /* run-time counts */
} tf_fn;

/* A model: the graph runtime's first (lowered graphs, counters; on the cpu the host storage the plans lay out:
 * variables with their slots, one arena, accumulators, feeds), then the executors' state. */
typedef struct tf_model {
    kh_grt_model rt;
    tf_session *s;       /* rt.s as this backend's session */
    tf_fn fn[KH_GFN_COUNT];
    float *im2col;       /* per-thread scratch for convolution: threads x im2col_floats */
    int64_t im2col_floats;
    tf_cuda_model *cuda;
    uint32_t *layer_kinds; /* spec layer kinds (profile rows); n = rt.mg.shapes.n_layers */
} tf_model;

/* The state of one run of a function (stack-allocated by the executor). */
struct tf_run {
    tf_model *m;
    tf_fn *f;
    int64_t n;           /* batch */
    double lr;           /* the step's learning rate (Apply ops) */
    uint64_t drop_key_counter; /* dropout counter for this run */
    _Atomic int32_t remaining;
    _Atomic int32_t failed;
    char err[384];
};

// --- errors and memory: the graph runtime's --------------------------------------------------------------
#define tf_fail(s, ...) kh_grt_fail(&(s)->rt, __VA_ARGS__)
static inline void *tf_alloc(tf_session *s, size_t bytes) { return kh_grt_alloc(&s->rt, bytes); }
static inline void tf_free(tf_session *s, void *p) { kh_grt_free(&s->rt, p); }

// --- thread pool (tf_pool.c) --------------------------------------------------------------------------------
/* `workers` threads; the calling thread works too, so threads in use never exceed workers + 1. */
kh_status tf_pool_create(int workers, tf_pool **out);
void tf_pool_destroy(tf_pool *p);
int tf_pool_workers(const tf_pool *p);
/* Queue fn(arg) for any thread; tf_pool_work_until runs queued tasks on the caller until *counter == 0. */
void tf_pool_submit(tf_pool *p, void (*fn)(void *arg, int32_t i), void *arg, int32_t i);
void tf_pool_work_until_zero(tf_pool *p, _Atomic int32_t *counter);
/* fn(ctx, begin, end) over [0, n) in at most `parts` contiguous parts of at least `grain` items, run by the
 * caller and whichever workers are idle (parts nobody picked up are run by the caller). */
typedef void (*tf_range_fn)(void *ctx, int64_t begin, int64_t end, int worker_slot);
void tf_parallel_for(tf_pool *p, int64_t n, int64_t grain, int parts, tf_range_fn fn, void *ctx);
/* This thread's slot in [0, workers] (the caller of the executor is 0): indexes per-thread scratch. */
int tf_pool_slot(void);

// --- the CPU executor (tf_exec.c) ---------------------------------------------------------------------------
kh_status tf_exec_prepare(tf_model *m, tf_fn *f); /* successors, pending counts, costs, kernels */
void tf_exec_release(tf_model *m, tf_fn *f);
/* Run part `part` of function f for a batch of n; dropout masks are keyed by `counter`. */
kh_status tf_exec_run(tf_model *m, tf_fn *f, int part, int64_t n, double lr, uint64_t counter);

// --- CPU kernels (tf_ops_cpu_*.c) ---------------------------------------------------------------------------
tf_kernel tf_cpu_kernel(uint32_t op);
int64_t tf_op_flops(const kh_graph *g, int32_t i); /* cost estimate at max_batch */
/* Per-thread im2col scratch a function's convolutions need (floats per thread), and the filter-gradient
 * partials of node i (floats per part; 0 for other ops). */
void tf_cpu_scratch_needs(const kh_graph *g, int64_t *im2col_floats);
int64_t tf_cpu_filter_partial_floats(const kh_graph *g, int32_t i);
kh_status tf_run_fail(tf_run *r, int32_t i, kh_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static inline float *tf_out(tf_run *r, int32_t i) { return (float *)r->f->out[i]; }
static inline const float *tf_in(tf_run *r, int32_t i, int k) {
    return (const float *)r->f->in_ptr[r->f->g->nodes[i].in_off + k];
}
static inline const kh_gnode *tf_node(tf_run *r, int32_t i) { return &r->f->g->nodes[i]; }
static inline const kh_gnode *tf_in_node(tf_run *r, int32_t i, int k) {
    return &r->f->g->nodes[kh_graph_inputs(r->f->g, i)[k]];
}
static inline int64_t tf_numel(tf_run *r, int32_t node) { return kh_graph_numel(r->f->g, node, r->n); }

/* BLAS (tf_blas.c): row-major C = alpha op(A) op(B) + beta C on the calling thread; the pool-split version. */
int tf_blas_available(void);
void tf_blas_single_threaded(void);
const char *tf_blas_version(char *buf, size_t n);
void tf_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
              const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void tf_sgemm_par(tf_run *r, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

// --- the backend's compile step and CPU executor for the graph runtime (tf_model.c) --------------------------
kh_status tf_prepare(kh_grt_model *m, const kh_model_spec *spec);
void tf_release(kh_grt_model *m);
extern const kh_grt_exec tf_cpu_exec;
/* ABI 1.1: per-layer and per-op-kind profile of training steps (tf_profile.c; cpu only). */
kh_status tf_api_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                         kh_profile *out);

#endif

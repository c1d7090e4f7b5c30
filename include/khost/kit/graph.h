/* khost/kit/graph.h — the graph layer of the helper library: an IR of primitive ops with static shapes, the
 * lowering of a kh_model_spec to it, reverse-mode autodiff, and a memory plan. Graph backends (tensorflow,
 * theano, third-party ones) build their executable form from this and only write kernels or code generators.
 *
 * The IR
 *   A graph is a list of nodes in topological order (a node's inputs always have smaller ids). Every node
 *   produces one value: dtype f32 or i32, a static shape of rank 1..4. A value whose leading axis is the
 *   batch (`batched`) is allocated for max_batch rows and computed for the n rows of each call; every other
 *   dimension is fixed when the graph is built. Layouts are TensorFlow's: images NHWC, sequences (N, T, C),
 *   weights in Keras's canonical layouts (Conv2D kernels HWIO), so variables hold exactly what set_weight gets.
 *   Ops are TensorFlow 1.x's primitive set for these models; the gradient ops (…Grad, Conv2DBackprop…) are
 *   ordinary nodes that autodiff emits.
 *
 * Functions
 *   kh_graph_lower() builds the four functions of a model, each its own graph over the same variables:
 *   train (forward in training mode, loss, metrics, gradients, one Apply op per variable), eval (inference
 *   forward, loss and metrics), predict (inference forward, the model output) and probe (training forward,
 *   and the backward from an output gradient fed as input: khost verify's forward/backward/get_grad).
 *   Recurrent layers are unrolled per time step into primitive ops (Slice, MatMul, BiasAdd, Sigmoid, Tanh,
 *   Mul, Add, Concat) — never a fused cell: every shape is static, so the unrolled graph is what
 *   Keras-on-TensorFlow's while_loop ran step by step. With kh_graph_lower_opts.rnn_scan an LSTM direction
 *   is instead a scan (Theano's strategy): the input projection of all steps as one MatMul of a rank-3
 *   operand, then one LstmScan op holding the time loop (and LstmScanGrad / LstmScanGradU in the backward).
 *
 * Runtime contract for kernels (what an executor owes the ops)
 *   - batched values hold n rows (n <= max_batch) at run time; kernels read n from the executor;
 *   - Variable nodes read the variable's storage; Input nodes read the staged batch;
 *   - Apply* ops update their variable and its slots in place, using the step's learning rate
 *     (kh_optimizer_step_lr) and, for a GatherGrad gradient, zero the gradient rows they consumed;
 *   - GatherGrad accumulates into a persistent, zero-initialised buffer (KH_GVAL_PERSISTENT) that its one
 *     consumer, the Apply op, clears again;
 *   - Dropout / DropoutGrad draw the mask from kh_dropout_keep (khost/kit/counter_rng.h) keyed by (seed, the
 *     function's forward counter, the op's salt, the element index), so the gradient recomputes the mask;
 *   - metric ops (LossSum, CorrectCount) write one f32 into their output; the executor accumulates them.
 */
#ifndef KHOST_GRAPH_H
#define KHOST_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"
#include "khost/backend.h"
#include "khost/kit/spec.h"
#include "khost/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KH_G_MAX_RANK 4

typedef enum kh_gop {
    /* leaves */
    KH_GOP_INPUT = 1,   /* a fed value: the batch x, labels, or the probe's output gradient; attr.input_id */
    KH_GOP_VARIABLE,    /* model parameter (attr.layer, attr.slot) */
    KH_GOP_ZEROS,       /* constant zero of its shape (a gradient that is identically zero) */
    /* linear algebra */
    KH_GOP_MATMUL,      /* (M,K)x(K,N); attr.transpose_a/b transpose the operands as stored. An operand of rank 3
                           is the matrix of its leading axes flattened into rows: (N,T,K)x(K,M) -> (N,T,M),
                           batched when the left operand is (rows at run time: n*T); with transpose_a, a rank-3
                           left and a rank-3 right operand of the same leading axes (N,T,K)^T x (N,T,M) -> (K,M),
                           not batched: the sum over the n*T rows (transpose_b 0). Nothing else takes rank 3. */
    KH_GOP_BIAS_ADD,    /* x (..., C) + b (C) */
    KH_GOP_BIAS_ADD_GRAD, /* dy (..., C) -> (C): sum over every axis but the last */
    /* element-wise, same shapes */
    KH_GOP_ADD,
    KH_GOP_ADDN,        /* any number of inputs */
    KH_GOP_SUB,
    KH_GOP_MUL,
    KH_GOP_NEG,
    KH_GOP_RELU,
    KH_GOP_SIGMOID,
    KH_GOP_TANH,
    KH_GOP_RELU_GRAD,   /* (y, dy) -> dy * relu'(y) */
    KH_GOP_SIGMOID_GRAD, /* (y, dy) -> dy * y (1 - y) */
    KH_GOP_TANH_GRAD,   /* (y, dy) -> dy * (1 - y^2) */
    /* rows */
    KH_GOP_SOFTMAX,     /* over the last axis */
    KH_GOP_SOFTMAX_GRAD, /* (y, dy) -> y * (dy - sum(y * dy)) per row */
    /* images, NHWC */
    KH_GOP_CONV2D,      /* x (N,H,W,C), w (KH,KW,C,F), attr.padding, attr.strides (0 = 1) */
    KH_GOP_CONV2D_BACKPROP_INPUT,  /* (w, dy) -> dx; attr.shape_of = x's node */
    KH_GOP_CONV2D_BACKPROP_FILTER, /* (x, dy) -> dw */
    KH_GOP_MAXPOOL,     /* x (N,H,W,C); attr.window, attr.strides, attr.padding */
    KH_GOP_MAXPOOL_GRAD, /* (x, dy) -> dx: each dy to the first maximum of its window (row-major) */
    /* shapes and sequences */
    KH_GOP_RESHAPE,     /* same data, new shape (a view: no copy) */
    KH_GOP_SLICE,       /* x along attr.axis from attr.begin, attr.size elements */
    KH_GOP_CONCAT,      /* inputs along attr.axis, in order */
    KH_GOP_REVERSE,     /* x reversed along attr.axis */
    KH_GOP_MEAN,        /* mean over attr.axis (removed) */
    KH_GOP_MEAN_GRAD,   /* dy -> dx broadcast along attr.axis of size attr.size, divided by it */
    KH_GOP_GATHER,      /* (table (V,D), idx i32 (...)) -> (..., D) */
    KH_GOP_GATHER_GRAD, /* (idx, dy) -> (V,D) dense gradient, accumulated into a persistent buffer */
    /* regularisation */
    KH_GOP_DROPOUT,     /* inverted dropout, attr.rate, attr.salt */
    KH_GOP_DROPOUT_GRAD, /* dy -> dx with the same mask */
    /* losses (Keras 2: probabilities clipped to [1e-7, 1-1e-7], gradient zero where the clip binds) */
    KH_GOP_SOFTMAX_XENT,      /* (logits (N,C), labels i32 (N), probs (N,C)) -> per-sample loss (N) */
    KH_GOP_SOFTMAX_XENT_GRAD, /* (probs, labels, dloss (N)) -> dlogits (N,C) */
    KH_GOP_SIGMOID_XENT,      /* (logits (N,1), labels, probs (N,1)) -> per-sample loss (N) */
    KH_GOP_SIGMOID_XENT_GRAD, /* (probs, labels, dloss (N)) -> dlogits (N,1) */
    KH_GOP_FILL_BATCH,  /* (N) of 1/n: the gradient of the batch mean w.r.t. each sample's loss */
    /* metrics: one f32 each, accumulated by the executor */
    KH_GOP_LOSS_SUM,    /* loss (N) -> sum */
    KH_GOP_CORRECT_COUNT, /* (probs (N,C) or (N,1), labels) -> number correct (argmax / p > 0.5) */
    /* training ops: (variable, gradient) -> the variable (updated in place with its slots) */
    KH_GOP_APPLY_GRADIENT_DESCENT,
    KH_GOP_APPLY_RMSPROP,
    KH_GOP_APPLY_ADAM,
    KH_GOP_APPLY_ADADELTA,
    /* a fused element-wise loop (graph optimisers emit it; lowering never does): inputs per attr.expr's
     * kh_gexpr, each full-size or a vector over the last axis; output the shape of the first full input */
    KH_GOP_ELEMWISE,
    /* recurrences as scans (kh_graph_lower_opts.rnn_scan): one op holds the time loop of an LSTM direction.
     * S (N,T,6,U) holds per step t: [0] h, [1] c, then the gate activations [2] i, [3] f, [4] g, [5] o that the
     * gradient reuses. Only h and c of S may be read where gradients flow: LstmScanGrad ignores components
     * 2..5 of dS, so a differentiable reader of i, f, g or o would get a wrong gradient silently. */
    KH_GOP_LSTM_SCAN,   /* (xw (N,T,4U): x W + b of every step, U (U,4U) the recurrent kernel) -> S (N,T,6,U):
                           h_{-1} = c_{-1} = 0; z = xw[:,t] + h_{t-1} U; i, f, g, o = sigmoid, sigmoid, tanh,
                           sigmoid of z's quarters (Keras's gate order); c = f c_{t-1} + i g; h = o tanh(c) */
    KH_GOP_LSTM_SCAN_GRAD, /* (S, U, dS) -> dXW (N,T,4U): backpropagation through time with dS[:,:,0] as dh and
                              dS[:,:,1] as dc (components 2..5 of dS ignored) */
    KH_GOP_LSTM_SCAN_GRAD_U, /* (S, dXW) -> (U,4U): the sum over t of h_{t-1}^T dXW[:,t] (h_{-1} = 0) */
    KH_GOP_END
} kh_gop;

typedef enum kh_gval_flags {
    KH_GVAL_BATCHED = 1u << 0,    /* leading axis is the batch: n rows at run time */
    KH_GVAL_PERSISTENT = 1u << 1, /* lives across calls outside the arena (GatherGrad accumulators) */
    KH_GVAL_OUTPUT = 1u << 2      /* read by the caller after the run: never reused, never written in place */
} kh_gval_flags;

typedef struct kh_gattr {
    int32_t transpose_a, transpose_b; /* MatMul */
    int32_t axis, begin, size;        /* Slice, Concat, Reverse, Mean, MeanGrad */
    int32_t window[2], strides[2];    /* MaxPool; Conv2D and its gradients: strides (0 = 1) */
    int32_t padding;                  /* kh_padding: Conv2D, MaxPool and their gradients */
    float rate;                       /* Dropout */
    int32_t salt;                     /* Dropout: the layer index, part of the mask's key */
    int32_t layer, slot;              /* Variable; every op: the model layer it came from (-1: none) */
    int32_t input_id;                 /* Input: which fed value (kh_ginput) */
    int32_t shape_of;                 /* Conv2DBackpropInput, MaxPoolGrad, Reshape: the node whose shape to produce
                                         (-1 when the shape is given explicitly) */
    int32_t expr;                     /* Elemwise: index into graph->exprs */
} kh_gattr;

/* The program of an Elemwise node: instructions over its inputs, evaluated per element. An operand k >= 0 is
 * instruction k's value, k < 0 is input -1-k (read at the element's index, or at index % C for a vector over
 * the last axis, C the output's last dimension). Instructions are element-wise kh_gop codes (Add, Sub, Mul,
 * Neg, Relu, Sigmoid, Tanh, their *Grad forms taking (y, dy), Dropout/DropoutGrad with rate and salt, whose
 * element index is the element's index in the output); the last instruction is the result. The bounds keep a
 * fused loop's operand count within what a compiler keeps in registers. */
#define KH_GEXPR_MAX_IN 8
#define KH_GEXPR_MAX_OPS 32
typedef struct kh_gexpr_op {
    uint32_t op;
    int32_t a, b;  /* b unused by unary ops */
    float rate;    /* Dropout, DropoutGrad */
    int32_t salt;
} kh_gexpr_op;
typedef struct kh_gexpr {
    int32_t n_in;
    uint8_t vec[KH_GEXPR_MAX_IN]; /* 1: input j is a vector over the last axis (a bias) */
    int32_t n_ops;
    kh_gexpr_op ops[KH_GEXPR_MAX_OPS];
} kh_gexpr;

typedef enum kh_ginput {
    KH_GIN_X = 0,      /* the batch (N, ...) f32, or i32 indices */
    KH_GIN_LABELS = 1, /* (N) i32 */
    KH_GIN_DY = 2      /* probe: the gradient of the model output */
} kh_ginput;

typedef struct kh_gnode {
    uint32_t op;       /* kh_gop */
    uint32_t dtype;    /* KH_F32 or KH_I32 */
    uint32_t flags;    /* kh_gval_flags */
    int32_t rank;
    int64_t dims[KH_G_MAX_RANK]; /* dims[0] is max_batch when batched */
    int32_t n_in;
    int32_t in_off;    /* inputs are graph->ins[in_off .. in_off + n_in) */
    kh_gattr attr;
    int32_t phase;     /* 0 forward, 1 loss/metrics, 2 backward, 3 apply (for plans and display) */
} kh_gnode;

typedef struct kh_graph {
    int32_t n_nodes, cap_nodes;
    kh_gnode *nodes;
    int32_t n_ins, cap_ins;
    int32_t *ins;
    int64_t max_batch;
    int32_t n_outputs;
    int32_t outputs[8];  /* named results: see the KH_GOUT_* indices */
    int32_t keep_forward; /* plan: values of phase-0 nodes stay intact to the end (the probe function runs
                             its backward part more than once per forward) */
    char err[256];       /* why the last add failed */
    int32_t n_exprs, cap_exprs;
    kh_gexpr *exprs;     /* programs of Elemwise nodes */
} kh_graph;

/* --- building graphs ---------------------------------------------------------------------------------- */
kh_status kh_graph_init(kh_graph *g, int64_t max_batch);
void kh_graph_release(kh_graph *g);
/* Append a node; its shape and dtype are inferred from the inputs and attributes (Input, Variable, Zeros,
 * Reshape and FillBatch take theirs from `rank`/`dims`/`dtype`/`flags`, others ignore them). Returns the node
 * id, or -1 with g->err set ("matmul: inner dimensions 128 and 64 differ"). */
int32_t kh_graph_add(kh_graph *g, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *attr,
                     uint32_t dtype, int32_t rank, const int64_t *dims, uint32_t flags);
/* Store an Elemwise program; returns its index for attr.expr, or -1 with g->err set. */
int32_t kh_graph_add_expr(kh_graph *g, const kh_gexpr *e);
/* Whether an op is element-wise (same index in, same index out; Elemwise candidates for fusion). */
int kh_gop_elementwise(uint32_t op);
static inline const int32_t *kh_graph_inputs(const kh_graph *g, int32_t node) {
    return g->ins + g->nodes[node].in_off;
}
/* Whether two values have the same rank and dimensions. */
int kh_graph_same_shape(const kh_gnode *a, const kh_gnode *b);
/* Elements of a node's value for a batch of n (n ignored when not batched). */
int64_t kh_graph_numel(const kh_graph *g, int32_t node, int64_t n);
/* A default attribute block: layer -1, shape_of -1, everything else 0. */
kh_gattr kh_gattr_none(void);
const char *kh_gop_name(uint32_t op);
/* Whether the op writes its result into the buffer of input `i` safely (element-wise, same size). */
int kh_gop_inplace_ok(uint32_t op, int32_t i);

/* --- autodiff ------------------------------------------------------------------------------------------ */
/* Reverse-mode gradients of `y` seeded with `dy` (a node of y's shape) with respect to each of wrt[0..n):
 * appends the gradient nodes (phase 2) and writes their ids to grads[] (-1 where y does not depend on it).
 * A value read by several nodes gets the sum of its gradients (AddN); a value read only through Slices
 * along one axis that tile it gets their Concat (TensorFlow's gradient of Unstack is Stack). */
kh_status kh_graph_gradients(kh_graph *g, int32_t y, int32_t dy, const int32_t *wrt, int32_t n, int32_t *grads);

/* --- lowering ------------------------------------------------------------------------------------------ */
typedef enum kh_gfn { KH_GFN_TRAIN = 0, KH_GFN_EVAL = 1, KH_GFN_PREDICT = 2, KH_GFN_PROBE = 3, KH_GFN_COUNT } kh_gfn;
/* outputs[] of each function:
 *   train:   [0] loss sum, [1] correct count (the Apply ops are the sinks)
 *   eval:    [0] loss sum, [1] correct count
 *   predict: [0] model output
 *   probe:   [0] model output, [1] input gradient (-1 for index input); gradients: see kh_model_graphs */
#define KH_GOUT_LOSS_SUM 0
#define KH_GOUT_CORRECT 1
#define KH_GOUT_Y 0
#define KH_GOUT_DX 1

typedef struct kh_gvar {
    int32_t layer, slot;
    int64_t numel;
    int32_t rank;
    int64_t dims[4];
    const char *name;
} kh_gvar;

typedef struct kh_model_graphs {
    kh_graph fn[KH_GFN_COUNT];
    kh_model_shapes shapes;   /* kh_spec_infer's shapes */
    int32_t n_vars;
    kh_gvar *vars;            /* one per (layer, slot), in layer order */
    int32_t *probe_grads;     /* n_vars: node in the probe graph holding each variable's gradient */
    kh_optimizer_spec opt;    /* defaults resolved (kh_optimizer_resolve) */
    uint32_t loss;
    int32_t deterministic;    /* dropout ops are not emitted */
    uint32_t input_dtype;
    int32_t input_rank;       /* the model's real input per sample (one-hot expanded by the host) */
    int32_t input_shape[3];
    int64_t input_numel;      /* per sample */
    int32_t out_rank;
    int32_t out_shape[3];
    int64_t out_numel;        /* per sample */
} kh_model_graphs;

typedef struct kh_graph_lower_opts {
    int64_t max_batch;
    int32_t deterministic;    /* 1: no dropout in any function */
    int32_t onehot_input;     /* 1: the backend takes index input and expands it as the first op (not
                                 implemented by the lowering: 0 means the host expands one-hot input) */
    int32_t rnn_scan;         /* 0 (default): recurrent layers unrolled per time step into primitive ops;
                                 1: each LSTM direction is one scan: xw = BiasAdd(MatMul(x (N,T,C), W), b) for
                                 all steps at once, S = LstmScan(xw, U), the h sequence Reshape(Slice(S, axis 2,
                                 0, 1)) to (N,T,U) or the last step's h Slice(S, axis 1, T-1, 1) then axis 2,
                                 reshaped to (N,U); Reverse on axis 1 around it for the backward direction, as
                                 unrolled. The same values and gradients as unrolled. */
} kh_graph_lower_opts;

/* Lower a spec to its four functions. Unsupported features (Conv2D strides other than 1, softmax over image
 * channels, a loss without its output activation) are KH_ERR_UNSUPPORTED with "layer N (kind): why". */
kh_status kh_graph_lower(const kh_model_spec *spec, const kh_graph_lower_opts *opts, kh_model_graphs *out,
                         char *err, size_t errlen);
void kh_model_graphs_free(kh_model_graphs *m);
/* What kh_graph_lower can lower, as a backend's capabilities: every layer kind and activation, the three
 * losses, the four optimizers, Conv2D 'same', LSTM sequences, predict and the verify probes, NHWC images (no
 * one-hot input expansion). A graph backend fills the rest (available, note). */
void kh_graph_caps(kh_caps *c);
/* Index into m->vars of (layer, slot), or -1. */
int32_t kh_model_graphs_var(const kh_model_graphs *m, int32_t layer, int32_t slot);

/* The bounds a device path checks a staged batch against before it trusts indices on the device: the smallest
 * Gather table of g (*idx_bound, 0 when none) and the smallest class count of its cross-entropies
 * (*label_bound: 2 for a sigmoid's one column; 0 when none). A bound already set is only ever lowered. */
void kh_graph_feed_bounds(const kh_graph *g, int32_t *idx_bound, int32_t *label_bound);
/* What a backend checks of a model call's tensors (the reason in `why`, without the backend's prefix): the batch
 * x (its count in *n), n labels (each a class of the output), an output buffer of n * per floats, and a weight
 * tensor for (layer, slot) (its index in m->vars in *v). */
kh_status kh_model_graphs_check_x(const kh_model_graphs *m, int64_t max_batch, const kh_tensor *x, int64_t *n,
                                  char *why, size_t len);
kh_status kh_model_graphs_check_labels(const kh_model_graphs *m, const kh_tensor *y, int64_t n, char *why,
                                       size_t len);
kh_status kh_model_graphs_check_out(const kh_tensor *out, int64_t n, int64_t per, char *why, size_t len);
kh_status kh_model_graphs_check_weight(const kh_model_graphs *m, int32_t layer, int32_t slot, const kh_tensor *t,
                                       int32_t *v, char *why, size_t len);

/* The optimizer schedule the Apply ops use: kh_optimizer_resolve / kh_optimizer_step_lr (khost/kit/optimizer.h). */

/* --- memory plan --------------------------------------------------------------------------------------- */
typedef enum kh_gstore {
    KH_GSTORE_ARENA = 0,    /* offset into the function's arena */
    KH_GSTORE_VARIABLE = 1, /* the variable's own storage (Variable and Apply nodes) */
    KH_GSTORE_FEED = 2,     /* the caller's staged input */
    KH_GSTORE_PERSISTENT = 3, /* a persistent buffer (GatherGrad): persistent index in `offset` */
    KH_GSTORE_NONE = 4      /* no storage (metric-free sinks) */
} kh_gstore;

typedef struct kh_gplan_entry {
    uint32_t store;   /* kh_gstore */
    int64_t offset;   /* bytes into the arena (ARENA), or persistent index (PERSISTENT) */
    int64_t bytes;    /* at max_batch */
    int32_t inplace_of; /* node whose buffer this one reuses in place (-1: none) */
} kh_gplan_entry;

typedef struct kh_gplan {
    int32_t n_nodes;
    kh_gplan_entry *e;        /* one per node */
    int64_t arena_bytes;      /* the arena this function needs */
    int64_t naive_bytes;      /* every value its own buffer: what reuse saved */
    /* Control edges the plan adds so that a parallel executor never writes a reused buffer while its
     * previous value is still read: node ctrl_to[i] waits for node ctrl_from[i]. */
    int32_t n_ctrl;
    int32_t *ctrl_from, *ctrl_to;
    int32_t n_persistent;
    int64_t *persistent_bytes; /* n_persistent, at their fixed size */
} kh_gplan;

/* Plan every value of g (at g->max_batch): a topological order, liveness, first-fit reuse in one arena
 * (offsets aligned to `align` bytes, a power of two >= 16), in-place for element-wise ops whose input has no
 * other reader, and the control edges reuse implies. Computed once per compiled function. */
kh_status kh_graph_plan(const kh_graph *g, int64_t align, kh_gplan *out);
void kh_gplan_free(kh_gplan *p);

/* --- reading graphs ------------------------------------------------------------------------------------ */
/* Consumers of every node as CSR arrays: consumers of node i are cons[off[i] .. off[i+1]). Caller frees both
 * with free(). */
kh_status kh_graph_consumers(const kh_graph *g, int32_t **off, int32_t **cons);
/* One line per node ("%12 = matmul(%3, %7) f32[128,512] layer 1"), for debugging and describe output. */
void kh_graph_dump(const kh_graph *g, void (*line)(void *ctx, const char *text), void *ctx);
/* Number of nodes of each op, for "ops before/after" summaries: counts[KH_GOP_END]. */
void kh_graph_op_counts(const kh_graph *g, int32_t *counts);

/* --- the float64 reference interpreter ----------------------------------------------------------------- */
/* Evaluate every node of g in float64, for a batch of n: values[i] is malloc'ed numel doubles (i32 values as
 * doubles). feeds[KH_GIN_*] give the inputs (NULL when unused); vars[v] the variables (by index of the
 * variable table passed as var_of(layer, slot) -> pointer). Apply ops are evaluated as their update of the
 * given variable storage (state in `slots`). Used by tests as the oracle of the ops' semantics. */
typedef struct kh_graph_ref_env {
    const double *feeds[3];
    double *(*var)(void *ctx, int32_t layer, int32_t slot); /* variable storage, updated by Apply ops */
    double *(*slot)(void *ctx, int32_t layer, int32_t slot, int k); /* optimizer slot k of that variable */
    void *ctx;
    uint64_t seed;       /* dropout key */
    uint64_t counter;    /* dropout forward counter */
    double lr;           /* the step's lr (kh_optimizer_step_lr) */
    kh_optimizer_spec opt;
} kh_graph_ref_env;
kh_status kh_graph_eval_ref(const kh_graph *g, int64_t n, const kh_graph_ref_env *env, double **values,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

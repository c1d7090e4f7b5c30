/* tf_cuda_plan.h — the host-side decisions of the CUDA executor, in plain C so they are unit-tested on any
 * machine (tests/backend/cuda_host): where every node's value lives on the device (from the same memory plans as
 * the CPU path), which launch each op kind gets, and the cuDNN geometry of convolutions and pooling. */
#ifndef KHOST_TF_CUDA_PLAN_H
#define KHOST_TF_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "khost/kit/graph.h"

/* --- device layout ------------------------------------------------------------------------------------- */
typedef enum tf_cu_base {
    TF_CU_BASE_ARENA = 0,  /* offset bytes into the model's device arena */
    TF_CU_BASE_VAR = 1,    /* variable `index` (into mg->vars) */
    TF_CU_BASE_FEED = 2,   /* staged input `index` (kh_ginput) */
    TF_CU_BASE_PERSISTENT = 3, /* the function's persistent buffer `index` */
    TF_CU_BASE_NONE = 4    /* no storage */
} tf_cu_base;

typedef struct tf_cu_ref {
    uint8_t base;          /* tf_cu_base */
    int32_t index;
    int64_t offset;        /* bytes from the base */
    int64_t bytes;         /* the node's value at max_batch */
} tf_cu_ref;

typedef struct tf_cu_layout {
    int64_t arena_bytes;             /* max over the functions' plan.arena_bytes: one function runs at a time */
    int32_t n_nodes[KH_GFN_COUNT];
    tf_cu_ref *ref[KH_GFN_COUNT];    /* per node of each function (NULL for an absent function) */
} tf_cu_layout;

/* Resolve every node as tf_model.c's resolve() does on the CPU: a Reshape is its input, an in-place node is
 * the node it reuses, then the plan's store. plans[f] is ignored where mg->fn[f] has no nodes. */
kh_status tf_cu_layout_build(const kh_model_graphs *mg, const kh_gplan *plans, tf_cu_layout *out, char *err,
                             size_t errlen);
void tf_cu_layout_free(tf_cu_layout *l);

/* --- launch table -------------------------------------------------------------------------------------- */
typedef enum tf_cu_kind {
    TF_CU_NONE = 0,       /* no launch known: compiling a graph with it fails */
    TF_CU_NOOP,           /* Input, Variable (storage only), Reshape (a view) */
    TF_CU_ZEROS,
    TF_CU_MATMUL,         /* cuBLAS */
    TF_CU_BIAS_ADD, TF_CU_BIAS_ADD_GRAD,
    TF_CU_EW,             /* unary / binary element-wise */
    TF_CU_ADDN,
    TF_CU_SOFTMAX, TF_CU_SOFTMAX_GRAD,
    TF_CU_CONV_FWD, TF_CU_CONV_BWD_DATA, TF_CU_CONV_BWD_FILTER, /* cuDNN */
    TF_CU_MAXPOOL, TF_CU_MAXPOOL_GRAD,
    TF_CU_SLICE, TF_CU_CONCAT, TF_CU_REVERSE, TF_CU_MEAN, TF_CU_MEAN_GRAD,
    TF_CU_GATHER, TF_CU_GATHER_GRAD,
    TF_CU_DROPOUT,        /* Dropout and DropoutGrad: the same masked scaling */
    TF_CU_XENT, TF_CU_XENT_GRAD, TF_CU_FILL_BATCH,
    TF_CU_LOSS_SUM, TF_CU_CORRECT,
    TF_CU_APPLY,
    TF_CU_KIND_END
} tf_cu_kind;

uint32_t tf_cu_op_kind(uint32_t op);
/* Nodes of the IR that tensorflow's kernels, CPU and CUDA alike, do not implement: MatMul with a rank-3 operand
 * and the LSTM scan ops, the forms of kh_graph_lower_opts.rnn_scan (tensorflow lowers recurrences unrolled and
 * never asks for them). Returns 1 with the reason in why (the model's compile fails with it), else 0. It lives
 * here because this file is plain C that the tests link; tf_model.c applies it on both paths. */
int tf_node_refused(const kh_graph *g, int32_t node, char *why, size_t n);
/* "cublas", "cudnn", "kernel" or "none": what runs an op kind (descriptions, tests) */
const char *tf_cu_kind_library(uint32_t kind);

/* --- convolution and pooling geometry ---------------------------------------------------------------- */
typedef struct tf_cu_geom {
    int32_t N, H, W, C;        /* input (N, H, W, C) */
    int32_t KH, KW, F;         /* kernel / window; F output channels (pooling: F == C) */
    int32_t SH, SW;
    int32_t OH, OW;
    int32_t pad_top, pad_bottom, pad_left, pad_right; /* TensorFlow's: total = max((o-1)s + k - i, 0), top = total/2 */
    int32_t asym;              /* 1: bottom != top or right != left (cuDNN pads symmetrically only) */
} tf_cu_geom;

/* The geometry of a Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool or MaxPoolGrad node for a batch
 * of n. KH_ERR_INVALID for other ops or inconsistent shapes. */
kh_status tf_cu_geom_of(const kh_graph *g, int32_t node, int64_t n, tf_cu_geom *out);

#endif

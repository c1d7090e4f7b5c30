/* tf_cuda_ops.c — one launch per op of the tensorflow CUDA executor:
 *   MatMul       cuBLAS SGEMM, row-major through the column-major API by swapping the operands (C^T = B^T A^T),
 *                transposes as cuBLAS ops, no copies; the session's math (set at open: CUBLAS_DEFAULT_MATH,
 *                FP32 with FMA; --math tf32: CUBLAS_TF32_TENSOR_OP_MATH)
 *   Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter
 *                cuDNN in NHWC, one algorithm per node chosen ONCE at compile time by the *_v7 heuristics
 *                (no trial runs; kh_cudnn_conv_choose of khost/kit/cuda.h): deterministic first, the session's
 *                math (FMA; with --math tf32 also TF32 tensor cores), without FFT / non-fused Winograd (their
 *                FP32 error exceeds the parity tolerance) and under TFC_WS_CAP of workspace; one shared
 *                workspace. cuDNN's NHWC filter layout is (F, KH, KW, C), the graph's
 *                variables are HWIO (KH, KW, C, F): the filter is transposed into a scratch buffer before the
 *                call (and the filter gradient transposed back after it). cuDNN pads symmetrically, so for
 *                TensorFlow's asymmetric 'same' (an even kernel) the input is padded into a scratch buffer
 *                and convolved 'valid' (the input gradient computed padded, then cropped)
 *   MaxPool, MaxPoolGrad
 *                own kernels: cuDNN's max-pooling backward does not promise TensorFlow's tie rule (the first
 *                maximum in row-major window order), which the CPU path and the reference kit follow
 *   everything else: own kernels (tf_cuda_kernels.cu) with the CPU kernels' semantics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/counter_rng.h"
#include "khost/kit/cuda.h"
#include "tf_cuda_exec.h"

#define TFC_WS_CAP ((size_t)512 << 20) /* the largest workspace one algorithm may ask for */

static const float k_one = 1.0f, k_zero = 0.0f;

#define CM(m) ((m)->cuda)
#define STREAM(m) ((m)->cuda->cs->k.stream)
#define G(m, f) (&(m)->rt.mg.fn[(f)])

static void *dptr(tf_model *m, int f, int32_t node) { return CM(m)->fn[f].ptr[node]; }
static void *din(tf_model *m, int f, int32_t i, int k) { return dptr(m, f, kh_graph_inputs(G(m, f), i)[k]); }
static int64_t numel(tf_model *m, int f, int32_t node, int64_t n) { return kh_graph_numel(G(m, f), node, n); }
static const kh_gnode *in_node(tf_model *m, int f, int32_t i, int k) {
    return &G(m, f)->nodes[kh_graph_inputs(G(m, f), i)[k]];
}

// --- convolutions: compile-time state ------------------------------------------------------------------------
/* Tensor descriptors for a batch of n, and the chosen algorithm's workspace for it. */
static kh_status conv_descs(tf_model *m, int f, int32_t i, tfc_conv *c, int64_t n, size_t *ws) {
    const tf_cu_geom *g = &c->g;
    cudnnHandle_t h = CM(m)->cs->k.dnn;
    if (c->desc_n != n) {
        TFC_DNN(m, G(m, f), i, "run",
                cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)n, g->C, c->Hp, c->Wp));
        TFC_DNN(m, G(m, f), i, "run",
                cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)n, g->F, g->OH, g->OW));
        c->desc_n = n;
    }
    uint32_t op = G(m, f)->nodes[i].op;
    *ws = 0;
    if (op == KH_GOP_CONV2D)
        TFC_DNN(m, G(m, f), i, "run",
                cudnnGetConvolutionForwardWorkspaceSize(h, c->xd, c->wd, c->cd, c->yd, (cudnnConvolutionFwdAlgo_t)c->algo,
                                                        ws));
    else if (op == KH_GOP_CONV2D_BACKPROP_INPUT)
        TFC_DNN(m, G(m, f), i, "run",
                cudnnGetConvolutionBackwardDataWorkspaceSize(h, c->wd, c->yd, c->cd, c->xd,
                                                             (cudnnConvolutionBwdDataAlgo_t)c->algo, ws));
    else
        TFC_DNN(m, G(m, f), i, "run",
                cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c->xd, c->yd, c->cd, c->wd,
                                                               (cudnnConvolutionBwdFilterAlgo_t)c->algo, ws));
    return KH_OK;
}

/* The algorithm of convolution node i, chosen once by the kit (khost/kit/cuda.h: cuDNN's heuristics ranked
 * fastest first; with [plugin tensorflow] deterministic = 1, the default, the first working deterministic one,
 * else the first working one with a warning; none working: the candidates logged and named in the error). The
 * choices of the training function (or of predict alone) go into the record's cudnn_algos. */
static kh_status choose_algo(tf_model *m, int f, int32_t i, tfc_conv *c) {
    const kh_graph *g = G(m, f);
    uint32_t op = g->nodes[i].op;
    kh_conv_dir d = op == KH_GOP_CONV2D ? KH_CONV_FWD : op == KH_GOP_CONV2D_BACKPROP_INPUT ? KH_CONV_BWD_DATA
                                                                                          : KH_CONV_BWD_FILTER;
    char where[64], why[600];
    snprintf(where, sizeof where, "%s node %d", kh_gop_name(op), i);
    kh_conv_choice_opts o = {.deterministic = m->s->set.deterministic != 0, .tf32 = CM(m)->cs->k.tf32,
                             .ws_cap = TFC_WS_CAP, .host = m->s->rt.host, .plugin = "tensorflow", .where = where};
    kh_status st = kh_cudnn_conv_choose(CM(m)->cs->k.dnn, d, c->xd, c->wd, c->cd, c->yd, &o, &c->algo, &c->det, why,
                                        sizeof why);
    if (st != KH_OK) return tfc_fail(m, g, i, "compile", st, "%s", why);
    if (f == KH_GFN_TRAIN || (f == KH_GFN_PREDICT && !G(m, KH_GFN_TRAIN)->n_nodes))
        kh_algo_record(CM(m)->cs->conv_algos, sizeof CM(m)->cs->conv_algos, g->nodes[i].attr.layer,
                       kh_conv_dir_name(d), c->algo, c->det);
    return KH_OK;
}

static kh_status prepare_conv(tf_model *m, int f, int32_t i) {
    const kh_graph *g = G(m, f);
    tfc_conv *c = calloc(1, sizeof *c);
    if (!c) return tfc_fail(m, g, i, "compile", KH_ERR_NOMEM, "out of host memory");
    CM(m)->fn[f].conv[i] = c;
    if (tf_cu_geom_of(g, i, m->rt.max_batch, &c->g) != KH_OK)
        return tfc_fail(m, g, i, "compile", KH_ERR_INTERNAL, "inconsistent convolution shapes");
    const tf_cu_geom *q = &c->g;
    c->asym = q->asym;
    c->Hp = q->asym ? q->H + q->pad_top + q->pad_bottom : q->H;
    c->Wp = q->asym ? q->W + q->pad_left + q->pad_right : q->W;
    if (c->asym) {
        int64_t xf = (int64_t)q->N * c->Hp * c->Wp * q->C;
        if (xf > CM(m)->xpad_floats) CM(m)->xpad_floats = xf;
    }
    int64_t wf = (int64_t)q->KH * q->KW * q->C * q->F;
    if (wf > CM(m)->wt_floats) CM(m)->wt_floats = wf;
    TFC_DNN(m, g, i, "compile", cudnnCreateTensorDescriptor(&c->xd));
    TFC_DNN(m, g, i, "compile", cudnnCreateTensorDescriptor(&c->yd));
    TFC_DNN(m, g, i, "compile", cudnnCreateFilterDescriptor(&c->wd));
    TFC_DNN(m, g, i, "compile", cudnnCreateConvolutionDescriptor(&c->cd));
    TFC_DNN(m, g, i, "compile",
            cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, q->F, q->C, q->KH, q->KW));
    TFC_DNN(m, g, i, "compile",
            cudnnSetConvolution2dDescriptor(c->cd, c->asym ? 0 : q->pad_top, c->asym ? 0 : q->pad_left, q->SH, q->SW, 1,
                                            1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* the session's math: FMA only (fp32; refused math is an error, not a silent fallback), or cuDNN's default,
     * which allows TF32 tensor cores for FP32 data (tf32) */
    TFC_DNN(m, g, i, "compile",
            cudnnSetConvolutionMathType(c->cd, CM(m)->cs->k.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    c->desc_n = 0;
    TFC_DNN(m, g, i, "compile",
            cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, q->N, q->C, c->Hp, c->Wp));
    TFC_DNN(m, g, i, "compile",
            cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, q->N, q->F, q->OH, q->OW));
    c->desc_n = q->N;
    int on, oc, oh, ow;
    TFC_DNN(m, g, i, "compile", cudnnGetConvolution2dForwardOutputDim(c->cd, c->xd, c->wd, &on, &oc, &oh, &ow));
    if (on != q->N || oc != q->F || oh != q->OH || ow != q->OW)
        return tfc_fail(m, g, i, "compile", KH_ERR_INTERNAL, "cuDNN output %dx%dx%dx%d, the graph says %dx%dx%dx%d", on,
                        oh, ow, oc, q->N, q->OH, q->OW, q->F);
    return choose_algo(m, f, i, c);
}

kh_status tfc_prepare_node(tf_model *m, int f, int32_t i) {
    const kh_graph *g = G(m, f);
    uint32_t op = g->nodes[i].op, kind = tf_cu_op_kind(op);
    if (kind == TF_CU_NONE)
        return tfc_fail(m, g, i, "compile", KH_ERR_UNSUPPORTED, "no CUDA launch for op %s", kh_gop_name(op));
    if (kind == TF_CU_ADDN && g->nodes[i].n_in < 1)
        return tfc_fail(m, g, i, "compile", KH_ERR_INTERNAL, "AddN without inputs");
    if (kind == TF_CU_CONV_FWD || kind == TF_CU_CONV_BWD_DATA || kind == TF_CU_CONV_BWD_FILTER)
        return prepare_conv(m, f, i);
    if (kind == TF_CU_MAXPOOL || kind == TF_CU_MAXPOOL_GRAD) {
        tf_cu_geom q;
        if (tf_cu_geom_of(g, i, m->rt.max_batch, &q) != KH_OK)
            return tfc_fail(m, g, i, "compile", KH_ERR_INTERNAL, "inconsistent pooling shapes");
    }
    return KH_OK;
}

void tfc_release_node(tf_model *m, int f, int32_t i) {
    tfc_conv *c = CM(m)->fn[f].conv ? CM(m)->fn[f].conv[i] : NULL;
    if (!c) return;
    if (c->xd) cudnnDestroyTensorDescriptor(c->xd);
    if (c->yd) cudnnDestroyTensorDescriptor(c->yd);
    if (c->wd) cudnnDestroyFilterDescriptor(c->wd);
    if (c->cd) cudnnDestroyConvolutionDescriptor(c->cd);
    free(c);
    CM(m)->fn[f].conv[i] = NULL;
}

// --- launches ------------------------------------------------------------------------------------------------
static kh_status run_conv(tf_model *m, int f, int32_t i, int64_t n) {
    const kh_graph *g = G(m, f);
    tf_cuda_model *cm = CM(m);
    tfc_conv *c = cm->fn[f].conv[i];
    size_t ws = 0;
    kh_status st = conv_descs(m, f, i, c, n, &ws);
    if (st != KH_OK) return st;
    if (ws > cm->ws_bytes)
        return tfc_fail(m, g, i, "run", KH_ERR_INTERNAL, "batch %lld needs %zu B of cuDNN workspace, %zu B allocated",
                        (long long)n, ws, cm->ws_bytes);
    cudnnHandle_t h = cm->cs->k.dnn;
    const tf_cu_geom *q = &c->g;
    int64_t K = (int64_t)q->KH * q->KW * q->C, F = q->F;
    uint32_t op = g->nodes[i].op;
    /* asymmetric padding: x (forward, filter gradient) padded into xpad; the input gradient computed there */
    const float *x = op == KH_GOP_CONV2D_BACKPROP_INPUT ? NULL : din(m, f, i, 0);
    if (c->asym && x) {
        TFC_CUDA(m, g, i, "run", tfk_pad_nhwc(STREAM(m), x, cm->xpad, n, q->H, q->W, q->C, c->Hp, c->Wp, q->pad_top,
                                              q->pad_left));
        x = cm->xpad;
    }
    switch (op) {
    case KH_GOP_CONV2D: /* (x, w) -> y */
        TFC_CUDA(m, g, i, "run", tfk_transpose(STREAM(m), din(m, f, i, 1), cm->wt, K, F));
        TFC_DNN(m, g, i, "run",
                cudnnConvolutionForward(h, &k_one, c->xd, x, c->wd, cm->wt, c->cd,
                                        (cudnnConvolutionFwdAlgo_t)c->algo, cm->ws, cm->ws_bytes, &k_zero, c->yd,
                                        dptr(m, f, i)));
        break;
    case KH_GOP_CONV2D_BACKPROP_INPUT: /* (w, dy) -> dx */
        TFC_CUDA(m, g, i, "run", tfk_transpose(STREAM(m), din(m, f, i, 0), cm->wt, K, F));
        TFC_DNN(m, g, i, "run",
                cudnnConvolutionBackwardData(h, &k_one, c->wd, cm->wt, c->yd, din(m, f, i, 1), c->cd,
                                             (cudnnConvolutionBwdDataAlgo_t)c->algo, cm->ws, cm->ws_bytes, &k_zero,
                                             c->xd, c->asym ? (void *)cm->xpad : dptr(m, f, i)));
        if (c->asym)
            TFC_CUDA(m, g, i, "run", tfk_crop_nhwc(STREAM(m), cm->xpad, dptr(m, f, i), n, q->H, q->W, q->C, c->Hp,
                                                   c->Wp, q->pad_top, q->pad_left));
        break;
    default: /* (x, dy) -> dw */
        TFC_DNN(m, g, i, "run",
                cudnnConvolutionBackwardFilter(h, &k_one, c->xd, x, c->yd, din(m, f, i, 1), c->cd,
                                               (cudnnConvolutionBwdFilterAlgo_t)c->algo, cm->ws, cm->ws_bytes, &k_zero,
                                               c->wd, cm->wt));
        TFC_CUDA(m, g, i, "run", tfk_transpose(STREAM(m), cm->wt, dptr(m, f, i), F, K));
        break;
    }
    return KH_OK;
}

/* row-major C (M, N) = op(A) op(B): column-major C^T = op(B)^T op(A)^T, so B goes first with its own op */
static kh_status run_matmul(tf_model *m, int f, int32_t i, int64_t n) {
    const kh_graph *g = G(m, f);
    const kh_gnode *nd = &g->nodes[i], *A = in_node(m, f, i, 0), *B = in_node(m, f, i, 1);
    int ta = nd->attr.transpose_a, tb = nd->attr.transpose_b;
    int64_t cols_a = A->dims[1], cols_b = B->dims[1];
    int64_t rows_a = numel(m, f, kh_graph_inputs(g, i)[0], n) / cols_a;
    int64_t rows_b = numel(m, f, kh_graph_inputs(g, i)[1], n) / cols_b;
    int64_t M = ta ? cols_a : rows_a, K = ta ? rows_a : cols_a, N = tb ? rows_b : cols_b;
    if (M <= 0 || N <= 0) return KH_OK;
    if (K <= 0) {
        TFC_CUDA(m, g, i, "run", tfk_zero(STREAM(m), dptr(m, f, i), M * N));
        return KH_OK;
    }
    TFC_BLAS(m, g, i, "run",
             cublasSgemm(CM(m)->cs->k.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
                         (int)K, &k_one, din(m, f, i, 1), (int)cols_b, din(m, f, i, 0), (int)cols_a, &k_zero,
                         dptr(m, f, i), (int)N));
    return KH_OK;
}

static int ew_code(uint32_t op) {
    switch (op) {
    case KH_GOP_ADD: return TFK_ADD;
    case KH_GOP_SUB: return TFK_SUB;
    case KH_GOP_MUL: return TFK_MUL;
    case KH_GOP_NEG: return TFK_NEG;
    case KH_GOP_RELU: return TFK_RELU;
    case KH_GOP_SIGMOID: return TFK_SIGMOID;
    case KH_GOP_TANH: return TFK_TANH;
    case KH_GOP_RELU_GRAD: return TFK_RELU_GRAD;
    case KH_GOP_SIGMOID_GRAD: return TFK_SIGMOID_GRAD;
    default: return TFK_TANH_GRAD;
    }
}

static int opt_code(uint32_t op) {
    switch (op) {
    case KH_GOP_APPLY_RMSPROP: return TFK_RMSPROP;
    case KH_GOP_APPLY_ADAM: return TFK_ADAM;
    case KH_GOP_APPLY_ADADELTA: return TFK_ADADELTA;
    default: return TFK_SGD;
    }
}

/* (outer, len, inner) of node x around `axis` for a batch of n (as tf_ops_cpu_shape.c) */
static void around(const kh_gnode *x, int axis, int64_t n, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= (d == 0 && (x->flags & KH_GVAL_BATCHED)) ? n : x->dims[d];
    *len = x->dims[axis];
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
}

static kh_status run_apply(tf_model *m, int f, int32_t i, int64_t n, double lr) {
    const kh_graph *g = G(m, f);
    const kh_gnode *nd = &g->nodes[i];
    tf_cuda_model *cm = CM(m);
    int32_t v = kh_model_graphs_var(&m->rt.mg, nd->attr.layer, nd->attr.slot);
    if (v < 0) return tfc_fail(m, g, i, "run", KH_ERR_INTERNAL, "no variable (%d, %d)", nd->attr.layer, nd->attr.slot);
    const kh_optimizer_spec *o = &m->rt.mg.opt;
    tfk_opt k = {opt_code(nd->op), (float)lr, o->rho, o->beta_1, o->beta_2, o->epsilon};
    float *grad = din(m, f, i, 1);
    TFC_CUDA(m, g, i, "run", tfk_apply(STREAM(m), k, KH_DEVPTR(cm->dev.w[v]), KH_DEVPTR(cm->dev.s1[v]),
                                       KH_DEVPTR(cm->dev.s2[v]), grad, m->rt.mg.vars[v].numel));
    int32_t gnode = kh_graph_inputs(g, i)[1];
    const kh_gnode *gn = &g->nodes[gnode];
    if (gn->op == KH_GOP_GATHER_GRAD) { /* leave the accumulator zero for the next step */
        int32_t idx = kh_graph_inputs(g, gnode)[0];
        TFC_CUDA(m, g, i, "run", tfk_zero_rows(STREAM(m), dptr(m, f, idx), grad, numel(m, f, idx, n), gn->dims[1]));
    }
    return KH_OK;
}

static kh_status run_addn(tf_model *m, int f, int32_t i, int64_t n) {
    const kh_graph *g = G(m, f);
    int k = g->nodes[i].n_in;
    float *y = dptr(m, f, i);
    int64_t cnt = numel(m, f, i, n);
    const float *in[TFK_ADDN_MAX];
    int first = k < TFK_ADDN_MAX ? k : TFK_ADDN_MAX;
    for (int j = 0; j < first; j++) in[j] = din(m, f, i, j);
    TFC_CUDA(m, g, i, "run", tfk_addn(STREAM(m), in, first, y, cnt));
    /* more inputs than one launch takes: y += the next TFK_ADDN_MAX - 1 */
    for (int j = first; j < k; j += TFK_ADDN_MAX - 1) {
        int c = 1;
        in[0] = y;
        for (; c < TFK_ADDN_MAX && j + c - 1 < k; c++) in[c] = din(m, f, i, j + c - 1);
        TFC_CUDA(m, g, i, "run", tfk_addn(STREAM(m), in, c, y, cnt));
    }
    return KH_OK;
}

static kh_status run_shape(tf_model *m, int f, int32_t i, int64_t n, uint32_t kind) {
    const kh_graph *g = G(m, f);
    const kh_gnode *nd = &g->nodes[i];
    cudaStream_t s = STREAM(m);
    float *y = dptr(m, f, i);
    int64_t outer, len, inner;
    switch (kind) {
    case TF_CU_SLICE:
        around(in_node(m, f, i, 0), nd->attr.axis, n, &outer, &len, &inner);
        TFC_CUDA(m, g, i, "run",
                 tfk_copy2d(s, y, nd->attr.size * inner, (const float *)din(m, f, i, 0) + nd->attr.begin * inner,
                            len * inner, outer, nd->attr.size * inner));
        break;
    case TF_CU_CONCAT: {
        int64_t pos = 0;
        around(nd, nd->attr.axis, n, &outer, &len, &inner);
        for (int k = 0; k < nd->n_in; k++) {
            int64_t lk = in_node(m, f, i, k)->dims[nd->attr.axis];
            TFC_CUDA(m, g, i, "run", tfk_copy2d(s, y + pos * inner, len * inner, din(m, f, i, k), lk * inner, outer,
                                                lk * inner));
            pos += lk;
        }
        break;
    }
    case TF_CU_REVERSE:
        around(in_node(m, f, i, 0), nd->attr.axis, n, &outer, &len, &inner);
        TFC_CUDA(m, g, i, "run", tfk_reverse(s, din(m, f, i, 0), y, outer, len, inner));
        break;
    case TF_CU_MEAN:
        around(in_node(m, f, i, 0), nd->attr.axis, n, &outer, &len, &inner);
        TFC_CUDA(m, g, i, "run", tfk_mean(s, din(m, f, i, 0), y, outer, len, inner));
        break;
    default: /* TF_CU_MEAN_GRAD */
        around(nd, nd->attr.axis, n, &outer, &len, &inner);
        TFC_CUDA(m, g, i, "run", tfk_mean_grad(s, din(m, f, i, 0), y, outer, len, inner));
        break;
    }
    return KH_OK;
}

static kh_status run_pool(tf_model *m, int f, int32_t i, int64_t n, int grad) {
    const kh_graph *g = G(m, f);
    tf_cu_geom q;
    if (tf_cu_geom_of(g, i, n, &q) != KH_OK) return tfc_fail(m, g, i, "run", KH_ERR_INTERNAL, "bad pooling geometry");
    tfk_pool p = {q.N, q.H, q.W, q.C, q.OH, q.OW, q.KH, q.KW, q.SH, q.SW, q.pad_top, q.pad_left};
    if (grad) TFC_CUDA(m, g, i, "run", tfk_maxpool_grad(STREAM(m), din(m, f, i, 0), din(m, f, i, 1), dptr(m, f, i), p));
    else TFC_CUDA(m, g, i, "run", tfk_maxpool(STREAM(m), din(m, f, i, 0), dptr(m, f, i), p));
    return KH_OK;
}

kh_status tfc_launch(tf_model *m, int f, int32_t i, int64_t n, double lr, uint64_t counter) {
    const kh_graph *g = G(m, f);
    const kh_gnode *nd = &g->nodes[i];
    cudaStream_t s = STREAM(m);
    float *y = dptr(m, f, i);
    int64_t cnt = numel(m, f, i, n);
    int64_t last = nd->dims[nd->rank - 1];
    switch ((tf_cu_kind)tf_cu_op_kind(nd->op)) {
    case TF_CU_NOOP: return KH_OK;
    case TF_CU_ZEROS: TFC_CUDA(m, g, i, "run", tfk_zero(s, y, cnt)); return KH_OK;
    case TF_CU_MATMUL: return run_matmul(m, f, i, n);
    case TF_CU_BIAS_ADD:
        TFC_CUDA(m, g, i, "run", tfk_bias_add(s, din(m, f, i, 0), din(m, f, i, 1), y, cnt / last, last));
        return KH_OK;
    case TF_CU_BIAS_ADD_GRAD: {
        int64_t c = nd->dims[0];
        TFC_CUDA(m, g, i, "run", tfk_bias_add_grad(s, din(m, f, i, 0), y, numel(m, f, kh_graph_inputs(g, i)[0], n) / c, c));
        return KH_OK;
    }
    case TF_CU_EW:
        TFC_CUDA(m, g, i, "run", tfk_ew(s, ew_code(nd->op), din(m, f, i, 0), nd->n_in > 1 ? din(m, f, i, 1) : NULL, y, cnt));
        return KH_OK;
    case TF_CU_ADDN: return run_addn(m, f, i, n);
    case TF_CU_SOFTMAX: TFC_CUDA(m, g, i, "run", tfk_softmax(s, din(m, f, i, 0), y, cnt / last, last)); return KH_OK;
    case TF_CU_SOFTMAX_GRAD:
        TFC_CUDA(m, g, i, "run", tfk_softmax_grad(s, din(m, f, i, 0), din(m, f, i, 1), y, cnt / last, last));
        return KH_OK;
    case TF_CU_CONV_FWD: case TF_CU_CONV_BWD_DATA: case TF_CU_CONV_BWD_FILTER: return run_conv(m, f, i, n);
    case TF_CU_MAXPOOL: return run_pool(m, f, i, n, 0);
    case TF_CU_MAXPOOL_GRAD: return run_pool(m, f, i, n, 1);
    case TF_CU_SLICE: case TF_CU_CONCAT: case TF_CU_REVERSE: case TF_CU_MEAN: case TF_CU_MEAN_GRAD:
        return run_shape(m, f, i, n, tf_cu_op_kind(nd->op));
    case TF_CU_GATHER: {
        int32_t idx = kh_graph_inputs(g, i)[1];
        TFC_CUDA(m, g, i, "run", tfk_gather(s, din(m, f, i, 0), din(m, f, i, 1), y, numel(m, f, idx, n),
                                            in_node(m, f, i, 0)->dims[1]));
        return KH_OK;
    }
    case TF_CU_GATHER_GRAD: {
        int32_t idx = kh_graph_inputs(g, i)[0];
        TFC_CUDA(m, g, i, "run", tfk_gather_grad(s, din(m, f, i, 0), din(m, f, i, 1), y, numel(m, f, idx, n), nd->dims[1]));
        return KH_OK;
    }
    case TF_CU_DROPOUT: {
        uint64_t key = kh_crng_key(m->rt.seed, counter, (uint64_t)nd->attr.salt);
        TFC_CUDA(m, g, i, "run", tfk_dropout(s, din(m, f, i, 0), y, cnt, key, nd->attr.rate,
                                             (float)(1.0 / (1.0 - (double)nd->attr.rate))));
        return KH_OK;
    }
    case TF_CU_XENT:
        TFC_CUDA(m, g, i, "run", tfk_xent(s, din(m, f, i, 2), din(m, f, i, 1), y, n, in_node(m, f, i, 0)->dims[1]));
        return KH_OK;
    case TF_CU_XENT_GRAD:
        TFC_CUDA(m, g, i, "run", tfk_xent_grad(s, din(m, f, i, 0), din(m, f, i, 1), din(m, f, i, 2), y, n, nd->dims[1]));
        return KH_OK;
    case TF_CU_FILL_BATCH: TFC_CUDA(m, g, i, "run", tfk_fill_batch(s, y, n)); return KH_OK;
    case TF_CU_LOSS_SUM: {
        double *met = CM(m)->fn[f].met;
        TFC_CUDA(m, g, i, "run", tfk_loss_sum(s, din(m, f, i, 0), n, y, met));
        return KH_OK;
    }
    case TF_CU_CORRECT: {
        double *met = CM(m)->fn[f].met;
        const kh_gnode *p = in_node(m, f, i, 0);
        TFC_CUDA(m, g, i, "run", tfk_correct(s, din(m, f, i, 0), din(m, f, i, 1), n, p->dims[p->rank - 1], y,
                                             met ? met + 1 : NULL));
        return KH_OK;
    }
    case TF_CU_APPLY: return run_apply(m, f, i, n, lr);
    case TF_CU_NONE: case TF_CU_KIND_END: break;
    }
    return tfc_fail(m, g, i, "run", KH_ERR_INTERNAL, "no CUDA launch for op %s", kh_gop_name(nd->op));
}

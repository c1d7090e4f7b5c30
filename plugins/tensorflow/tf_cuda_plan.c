/* tf_cuda_plan.c — see tf_cuda_plan.h. No CUDA here: this is what the CPU tests check of the GPU path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/geometry.h"
#include "khost/kit/status.h"
#include "tf_cuda_plan.h"

// --- layout -----------------------------------------------------------------------------------------------
static kh_status layout_fn(const kh_model_graphs *mg, const kh_graph *g, const kh_gplan *p, tf_cu_ref *ref,
                           char *err, size_t errlen) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const kh_gplan_entry *e = &p->e[i];
        tf_cu_ref *r = &ref[i];
        r->bytes = e->bytes;
        if (nd->op == KH_GOP_RESHAPE || e->inplace_of >= 0) {
            int32_t src = nd->op == KH_GOP_RESHAPE ? kh_graph_inputs(g, i)[0] : e->inplace_of;
            if (src < 0 || src >= i) return kh_errf(err, errlen, KH_ERR_INTERNAL, "node %d reuses node %d", i, src);
            r->base = ref[src].base, r->index = ref[src].index, r->offset = ref[src].offset;
            continue;
        }
        r->offset = 0;
        r->index = 0;
        switch (e->store) {
        case KH_GSTORE_ARENA:
            r->base = TF_CU_BASE_ARENA;
            r->offset = e->offset;
            break;
        case KH_GSTORE_PERSISTENT:
            r->base = TF_CU_BASE_PERSISTENT;
            r->index = (int32_t)e->offset;
            if (r->index < 0 || r->index >= p->n_persistent)
                return kh_errf(err, errlen, KH_ERR_INTERNAL, "node %d: persistent buffer %d of %d", i, r->index,
                               p->n_persistent);
            break;
        case KH_GSTORE_VARIABLE:
            r->base = TF_CU_BASE_VAR;
            r->index = kh_model_graphs_var(mg, nd->attr.layer, nd->attr.slot);
            if (r->index < 0)
                return kh_errf(err, errlen, KH_ERR_INTERNAL, "node %d: no variable (%d, %d)", i, nd->attr.layer,
                               nd->attr.slot);
            break;
        case KH_GSTORE_FEED:
            r->base = TF_CU_BASE_FEED;
            r->index = nd->attr.input_id;
            if (r->index < KH_GIN_X || r->index > KH_GIN_DY)
                return kh_errf(err, errlen, KH_ERR_INTERNAL, "node %d: input %d", i, r->index);
            break;
        default:
            r->base = TF_CU_BASE_NONE;
            break;
        }
    }
    return KH_OK;
}

kh_status tf_cu_layout_build(const kh_model_graphs *mg, const kh_gplan *plans, tf_cu_layout *out, char *err,
                             size_t errlen) {
    memset(out, 0, sizeof *out);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        const kh_graph *g = &mg->fn[f];
        if (g->n_nodes == 0) continue;
        if (plans[f].n_nodes != g->n_nodes) {
            tf_cu_layout_free(out);
            return kh_errf(err, errlen, KH_ERR_INTERNAL, "function %d: plan of %d nodes, graph of %d", f,
                           plans[f].n_nodes, g->n_nodes);
        }
        if (plans[f].arena_bytes > out->arena_bytes) out->arena_bytes = plans[f].arena_bytes;
        out->ref[f] = calloc((size_t)g->n_nodes, sizeof *out->ref[f]);
        if (!out->ref[f]) {
            tf_cu_layout_free(out);
            return kh_errf(err, errlen, KH_ERR_NOMEM, "out of host memory for the device layout");
        }
        out->n_nodes[f] = g->n_nodes;
        kh_status st = layout_fn(mg, g, &plans[f], out->ref[f], err, errlen);
        if (st != KH_OK) {
            tf_cu_layout_free(out);
            return st;
        }
    }
    return KH_OK;
}

void tf_cu_layout_free(tf_cu_layout *l) {
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        free(l->ref[f]);
        l->ref[f] = NULL;
        l->n_nodes[f] = 0;
    }
}

// --- launch table -----------------------------------------------------------------------------------------
uint32_t tf_cu_op_kind(uint32_t op) {
    switch ((kh_gop)op) {
    case KH_GOP_INPUT: case KH_GOP_VARIABLE: case KH_GOP_RESHAPE: return TF_CU_NOOP;
    case KH_GOP_ZEROS: return TF_CU_ZEROS;
    case KH_GOP_MATMUL: return TF_CU_MATMUL;
    case KH_GOP_BIAS_ADD: return TF_CU_BIAS_ADD;
    case KH_GOP_BIAS_ADD_GRAD: return TF_CU_BIAS_ADD_GRAD;
    case KH_GOP_ADD: case KH_GOP_SUB: case KH_GOP_MUL: case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_SIGMOID:
    case KH_GOP_TANH: case KH_GOP_RELU_GRAD: case KH_GOP_SIGMOID_GRAD: case KH_GOP_TANH_GRAD: return TF_CU_EW;
    case KH_GOP_ADDN: return TF_CU_ADDN;
    case KH_GOP_SOFTMAX: return TF_CU_SOFTMAX;
    case KH_GOP_SOFTMAX_GRAD: return TF_CU_SOFTMAX_GRAD;
    case KH_GOP_CONV2D: return TF_CU_CONV_FWD;
    case KH_GOP_CONV2D_BACKPROP_INPUT: return TF_CU_CONV_BWD_DATA;
    case KH_GOP_CONV2D_BACKPROP_FILTER: return TF_CU_CONV_BWD_FILTER;
    case KH_GOP_MAXPOOL: return TF_CU_MAXPOOL;
    case KH_GOP_MAXPOOL_GRAD: return TF_CU_MAXPOOL_GRAD;
    case KH_GOP_SLICE: return TF_CU_SLICE;
    case KH_GOP_CONCAT: return TF_CU_CONCAT;
    case KH_GOP_REVERSE: return TF_CU_REVERSE;
    case KH_GOP_MEAN: return TF_CU_MEAN;
    case KH_GOP_MEAN_GRAD: return TF_CU_MEAN_GRAD;
    case KH_GOP_GATHER: return TF_CU_GATHER;
    case KH_GOP_GATHER_GRAD: return TF_CU_GATHER_GRAD;
    case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD: return TF_CU_DROPOUT;
    case KH_GOP_SOFTMAX_XENT: case KH_GOP_SIGMOID_XENT: return TF_CU_XENT;
    case KH_GOP_SOFTMAX_XENT_GRAD: case KH_GOP_SIGMOID_XENT_GRAD: return TF_CU_XENT_GRAD;
    case KH_GOP_FILL_BATCH: return TF_CU_FILL_BATCH;
    case KH_GOP_LOSS_SUM: return TF_CU_LOSS_SUM;
    case KH_GOP_CORRECT_COUNT: return TF_CU_CORRECT;
    case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM:
    case KH_GOP_APPLY_ADADELTA: return TF_CU_APPLY;
    case KH_GOP_LSTM_SCAN: case KH_GOP_LSTM_SCAN_GRAD: case KH_GOP_LSTM_SCAN_GRAD_U: /* tf_node_refused */
    case KH_GOP_ELEMWISE: /* a graph optimiser's fused op: tensorflow runs primitive ops */
    case KH_GOP_END: break;
    }
    return TF_CU_NONE;
}

int tf_node_refused(const kh_graph *g, int32_t node, char *why, size_t n) {
    const kh_gnode *nd = &g->nodes[node];
    const int32_t *in = kh_graph_inputs(g, node);
    switch (nd->op) {
    case KH_GOP_MATMUL:
        if (g->nodes[in[0]].rank == 2 && g->nodes[in[1]].rank == 2) return 0;
        snprintf(why, n, "node %d (matmul): an operand of rank %d; tensorflow's MatMul kernels take matrices only "
                 "(rank-3 operands are the rnn_scan lowering's form)", node,
                 g->nodes[in[0]].rank != 2 ? g->nodes[in[0]].rank : g->nodes[in[1]].rank);
        return 1;
    case KH_GOP_LSTM_SCAN: case KH_GOP_LSTM_SCAN_GRAD: case KH_GOP_LSTM_SCAN_GRAD_U:
        snprintf(why, n, "node %d (%s): tensorflow runs recurrences unrolled and has no scan kernel", node,
                 kh_gop_name(nd->op));
        return 1;
    case KH_GOP_ELEMWISE:
        snprintf(why, n, "node %d (elemwise): tensorflow runs primitive ops, not fused programs", node);
        return 1;
    default: return 0;
    }
}

const char *tf_cu_kind_library(uint32_t kind) {
    switch (kind) {
    case TF_CU_NONE: return "none";
    case TF_CU_NOOP: return "storage";
    case TF_CU_MATMUL: return "cublas";
    case TF_CU_CONV_FWD: case TF_CU_CONV_BWD_DATA: case TF_CU_CONV_BWD_FILTER: return "cudnn";
    default: return kind < TF_CU_KIND_END ? "kernel" : "none";
    }
}

// --- geometry ---------------------------------------------------------------------------------------------
kh_status tf_cu_geom_of(const kh_graph *g, int32_t node, int64_t n, tf_cu_geom *out) {
    memset(out, 0, sizeof *out);
    if (node < 0 || node >= g->n_nodes) return KH_ERR_INVALID;
    const kh_gnode *nd = &g->nodes[node];
    const int32_t *in = kh_graph_inputs(g, node);
    int32_t xn, wn = -1;
    switch (nd->op) {
    case KH_GOP_CONV2D: xn = in[0], wn = in[1]; break;
    case KH_GOP_CONV2D_BACKPROP_INPUT: xn = nd->attr.shape_of, wn = in[0]; break;
    case KH_GOP_CONV2D_BACKPROP_FILTER: xn = in[0], wn = nd->attr.shape_of; break;
    case KH_GOP_MAXPOOL: case KH_GOP_MAXPOOL_GRAD: xn = in[0]; break;
    default: return KH_ERR_INVALID;
    }
    if (xn < 0 || xn >= g->n_nodes || (wn >= g->n_nodes)) return KH_ERR_INVALID;
    const kh_gnode *X = &g->nodes[xn];
    if (X->rank != 4) return KH_ERR_INVALID;
    int64_t KH, KW, F, SH, SW;
    if (wn >= 0) {
        const kh_gnode *W = &g->nodes[wn];
        if (W->rank != 4 || W->dims[2] != X->dims[3]) return KH_ERR_INVALID;
        KH = W->dims[0], KW = W->dims[1], F = W->dims[3];
        /* a convolution's unset stride (0) is 1, as the IR's shape inference and the reference read it; the
         * gradient nodes carry their forward op's strides */
        SH = nd->attr.strides[0] > 0 ? nd->attr.strides[0] : 1;
        SW = nd->attr.strides[1] > 0 ? nd->attr.strides[1] : 1;
    } else {
        KH = nd->attr.window[0], KW = nd->attr.window[1], F = X->dims[3];
        SH = nd->attr.strides[0], SW = nd->attr.strides[1];
    }
    kh_conv2d_dims d;
    kh_status st = kh_conv2d_geometry(&d, n, X->dims[1], X->dims[2], X->dims[3], KH, KW, F, SH, SW,
                                          nd->attr.padding);
    if (st != KH_OK) return st;
    int64_t th = (d.OH - 1) * d.SH + d.KH - d.H, tw = (d.OW - 1) * d.SW + d.KW - d.W;
    if (nd->attr.padding != KH_PAD_SAME) th = tw = 0;
    th = th > 0 ? th : 0;
    tw = tw > 0 ? tw : 0;
    if (d.pad_top > th || d.pad_left > tw) return KH_ERR_INVALID;
    out->N = (int32_t)n, out->H = (int32_t)d.H, out->W = (int32_t)d.W, out->C = (int32_t)d.C;
    out->KH = (int32_t)d.KH, out->KW = (int32_t)d.KW, out->F = (int32_t)d.OC;
    out->SH = (int32_t)d.SH, out->SW = (int32_t)d.SW, out->OH = (int32_t)d.OH, out->OW = (int32_t)d.OW;
    out->pad_top = (int32_t)d.pad_top, out->pad_bottom = (int32_t)(th - d.pad_top);
    out->pad_left = (int32_t)d.pad_left, out->pad_right = (int32_t)(tw - d.pad_left);
    out->asym = out->pad_top != out->pad_bottom || out->pad_left != out->pad_right;
    /* the node's own shape must agree (the output for forward ops, x for the gradients of x, w for dw) */
    const kh_gnode *Y = nd;
    if (nd->op == KH_GOP_CONV2D || nd->op == KH_GOP_MAXPOOL) {
        if (Y->dims[1] != d.OH || Y->dims[2] != d.OW || Y->dims[3] != d.OC) return KH_ERR_INVALID;
    } else if (nd->op == KH_GOP_CONV2D_BACKPROP_FILTER) {
        if (Y->rank != 4 || Y->dims[0] != KH || Y->dims[1] != KW || Y->dims[3] != F) return KH_ERR_INVALID;
    } else if (Y->dims[1] != d.H || Y->dims[2] != d.W || Y->dims[3] != d.C) {
        return KH_ERR_INVALID;
    }
    return KH_OK;
}

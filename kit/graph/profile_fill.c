/* kit/graph/profile_fill.c — the profile rows of a graph backend (tensorflow's executor, theano's generated code)
 * from the seconds each node of the training graph took: per model layer (kh_gnode.attr.layer) and per op kind,
 * forward / backward / update by the node's phase, and each row's backward split into the input and the weight
 * gradient (ABI 1.5) by which nodes only the parameter updates need. */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph.h"
#include "khost/kit/profile.h"
#include "khost/kit/status.h"

/* Ops that form a weight's gradient, and the ones that only carry it on (sums over time steps, reshapes). */
static int weight_grad_op(uint32_t op) {
    switch (op) {
    case KH_GOP_MATMUL:
    case KH_GOP_CONV2D_BACKPROP_FILTER:
    case KH_GOP_BIAS_ADD_GRAD:
    case KH_GOP_GATHER_GRAD:
    case KH_GOP_LSTM_SCAN_GRAD_U:
    case KH_GOP_ADDN:
    case KH_GOP_ADD:
    case KH_GOP_RESHAPE:
    case KH_GOP_CONCAT:
    case KH_GOP_SLICE: return 1;
    default: return 0;
    }
}

static int apply_op(uint32_t op) {
    return op == KH_GOP_APPLY_GRADIENT_DESCENT || op == KH_GOP_APPLY_RMSPROP || op == KH_GOP_APPLY_ADAM ||
           op == KH_GOP_APPLY_ADADELTA;
}

/* The largest layer index of any node, plus one. */
static int32_t layer_count(const kh_graph *g) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].attr.layer >= n) n = g->nodes[i].attr.layer + 1;
    return n;
}

/* Mark the backward nodes that only parameter updates need (out[i] = 1): a phase-2 node that forms a gradient
 * of a weight (MatMul, Conv2DBackpropFilter, BiasAddGrad, GatherGrad, LstmScanGradU) or sums, reshapes or joins
 * one (AddN, Add, Reshape, Concat, Slice), of a layer with weights (or of none), every one of whose readers is an
 * Apply op or such a node. The other phase-2 nodes are the input gradient's. */
static kh_status weight_grad_nodes(const kh_graph *g, uint8_t *out) {
    int32_t n = g->n_nodes, layers = layer_count(g);
    /* read[i]: some node reads i; other[i]: a reader of i is neither an Apply op nor a weight-gradient node.
     * Readers come after what they read, so walking backwards decides every reader of i before i. A node of a
     * layer without weights (a Flatten's reshape on the way to an Embedding's gradient) is never one. */
    uint8_t *read = calloc((size_t)n + 1, 1), *other = calloc((size_t)n + 1, 1);
    uint8_t *weights = calloc((size_t)layers + 1, 1);
    if (!read || !other || !weights) {
        free(read);
        free(other);
        free(weights);
        return KH_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n; i++)
        if (g->nodes[i].op == KH_GOP_VARIABLE && g->nodes[i].attr.layer >= 0) weights[g->nodes[i].attr.layer] = 1;
    for (int32_t i = n - 1; i >= 0; i--) {
        const kh_gnode *nd = &g->nodes[i];
        int32_t l = nd->attr.layer;
        out[i] = nd->phase == 2 && weight_grad_op(nd->op) && read[i] && !other[i] && (l < 0 || weights[l]);
        const int32_t *in = kh_graph_inputs(g, i);
        int feeds_update = out[i] || apply_op(nd->op);
        for (int32_t k = 0; k < nd->n_in; k++) {
            if (in[k] < 0 || in[k] >= i) continue; /* a malformed graph: inputs come first */
            read[in[k]] = 1;
            if (!feeds_update) other[in[k]] = 1;
        }
    }
    free(read);
    free(other);
    free(weights);
    return KH_OK;
}

static void add(kh_profile_row *r, double *grad, int32_t phase, int weight, double t) {
    if (phase <= 1) r->forward_s += t;
    else if (phase == 2) {
        r->backward_s += t;
        grad[weight ? 1 : 0] += t;
    } else r->optimizer_s += t;
    r->calls++;
}

static void new_row(kh_profile_row *r, int32_t layer, const char *what) {
    memset(r, 0, sizeof *r);
    r->layer = layer;
    strncpy(r->what, what, sizeof r->what - 1);
}

kh_status kh_graph_profile_fill(const kh_graph *g, int (*works)(const void *ctx, int32_t node), const void *ctx,
                                const uint32_t *layer_kinds, int32_t n_layers, const double *node_s, int32_t steps,
                                double total_s, kh_profile *out) {
    int32_t cap = out->cap_rows > 0 ? out->cap_rows : 0;
    uint8_t *wgrad = calloc((size_t)g->n_nodes + 1, 1);
    double *grad = calloc((size_t)cap * 2 + 2, sizeof *grad); /* per row: input, weight seconds */
    if (!wgrad || !grad || weight_grad_nodes(g, wgrad) != KH_OK) {
        free(wgrad);
        free(grad);
        return KH_ERR_NOMEM;
    }
    out->n_rows = 0;
    for (int32_t l = 0; l < n_layers && out->n_rows < cap; l++)
        new_row(&out->rows[out->n_rows++], l, kh_layer_kind_name(layer_kinds[l]));
    int32_t layer_rows = out->n_rows;
    int32_t kind_row[KH_GOP_END];
    for (int k = 0; k < KH_GOP_END; k++) kind_row[k] = -1;
    double in_layers = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        if (!works(ctx, i)) continue; /* no work, no time */
        int32_t l = nd->attr.layer;
        if (l >= 0 && l < layer_rows) {
            add(&out->rows[l], &grad[2 * l], nd->phase, wgrad[i], node_s[i]);
            in_layers += node_s[i];
        }
        if (nd->op >= KH_GOP_END) continue;
        if (kind_row[nd->op] < 0) {
            if (out->n_rows >= cap) continue;
            kind_row[nd->op] = out->n_rows;
            new_row(&out->rows[out->n_rows++], -1, kh_gop_name(nd->op));
        }
        int32_t r = kind_row[nd->op];
        add(&out->rows[r], &grad[2 * r], nd->phase, wgrad[i], node_s[i]);
    }
    for (int32_t r = 0; r < out->n_rows; r++) kh_profile_set_grad(out, r, grad[2 * r], grad[2 * r + 1]);
    kh_profile_close(out, steps, total_s, in_layers);
    free(wgrad);
    free(grad);
    return KH_OK;
}

/* passes/constfold.c — constant folding. The only constants gradients create are Zeros (a gradient that is
 * identically zero: the unused part of a Slice, a branch the loss does not reach); they are pushed through
 * every op they annihilate, dropped from sums, and an Add or Sub with a zero operand becomes its other
 * operand. Apply ops keep their zero gradients (momentum-style optimizers still move the weights). */
#include "th_passes.h"

static int annihilated_by(uint32_t op, int j) {
    switch (op) {
    case KH_GOP_MUL: case KH_GOP_MATMUL: return 1;
    case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_TANH: case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD:
    case KH_GOP_RESHAPE: case KH_GOP_SLICE: case KH_GOP_REVERSE: case KH_GOP_MEAN: case KH_GOP_MEAN_GRAD:
    case KH_GOP_BIAS_ADD_GRAD:
        return j == 0;
    case KH_GOP_RELU_GRAD: case KH_GOP_SIGMOID_GRAD: case KH_GOP_TANH_GRAD: case KH_GOP_SOFTMAX_GRAD:
    case KH_GOP_CONV2D_BACKPROP_INPUT: case KH_GOP_CONV2D_BACKPROP_FILTER: case KH_GOP_MAXPOOL_GRAD:
    case KH_GOP_LSTM_SCAN_GRAD_U:
        return j == 1;
    case KH_GOP_LSTM_SCAN_GRAD: return j == 2;
    default: return 0;
    }
}

kh_status th_pass_constfold(th_rw *r, int32_t *changed) {
    const kh_graph *g = r->src;
    for (int32_t i = 0; i < g->n_nodes && r->st == KH_OK; i++) {
        const kh_gnode *n = &g->nodes[i];
        const int32_t *in = kh_graph_inputs(g, i);
        int32_t m[KH_GEXPR_MAX_IN * 8];
        int zero[KH_GEXPR_MAX_IN * 8], nz = 0, wide = n->n_in > (int)(sizeof m / sizeof m[0]);
        for (int j = 0; j < n->n_in && !wide; j++) {
            m[j] = r->map[in[j]];
            zero[j] = r->dst->nodes[m[j]].op == KH_GOP_ZEROS;
            nz += zero[j];
        }
        if (wide || nz == 0 || n->op == KH_GOP_ZEROS) {
            r->map[i] = th_rw_copy(r, i, NULL, 0);
            continue;
        }
        int fold = 0;
        for (int j = 0; j < n->n_in; j++) fold |= zero[j] && annihilated_by(n->op, j);
        if (n->op == KH_GOP_CONCAT || n->op == KH_GOP_ADDN) fold = nz == n->n_in;
        if (n->op == KH_GOP_ADD || n->op == KH_GOP_SUB) fold = nz == 2;
        if (fold) {
            r->map[i] = th_rw_zeros(r, i);
            ++*changed;
        } else if ((n->op == KH_GOP_ADD && nz == 1) || (n->op == KH_GOP_SUB && zero[1])) {
            r->map[i] = m[zero[0] ? 1 : 0];
            ++*changed;
        } else if (n->op == KH_GOP_ADDN) {
            int32_t keep[KH_GEXPR_MAX_IN * 8], k = 0;
            for (int j = 0; j < n->n_in; j++)
                if (!zero[j]) keep[k++] = m[j];
            r->map[i] = k == 1 ? keep[0] : th_rw_add(r, KH_GOP_ADDN, keep, k, &n->attr, n->dtype, 0, NULL, n->flags, n->phase);
            ++*changed;
        } else {
            r->map[i] = th_rw_copy(r, i, NULL, 0);
        }
    }
    return r->st;
}

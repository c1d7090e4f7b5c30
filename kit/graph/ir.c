/* kit/graph/ir.c — the graph IR: nodes, shape inference per op, and reading helpers (consumers, dump).
 * Every shape is checked when a node is added, so a lowering bug surfaces as "matmul: inner dimensions
 * differ" at compile time, never as a kernel reading past a buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph.h"

// --- names and op properties ---------------------------------------------------------------------------
static const char *const g_names[KH_GOP_END] = {
    [KH_GOP_INPUT] = "input", [KH_GOP_VARIABLE] = "variable", [KH_GOP_ZEROS] = "zeros",
    [KH_GOP_MATMUL] = "matmul", [KH_GOP_BIAS_ADD] = "bias_add", [KH_GOP_BIAS_ADD_GRAD] = "bias_add_grad",
    [KH_GOP_ADD] = "add", [KH_GOP_ADDN] = "add_n", [KH_GOP_SUB] = "sub", [KH_GOP_MUL] = "mul",
    [KH_GOP_NEG] = "neg", [KH_GOP_RELU] = "relu", [KH_GOP_SIGMOID] = "sigmoid", [KH_GOP_TANH] = "tanh",
    [KH_GOP_RELU_GRAD] = "relu_grad", [KH_GOP_SIGMOID_GRAD] = "sigmoid_grad", [KH_GOP_TANH_GRAD] = "tanh_grad",
    [KH_GOP_SOFTMAX] = "softmax", [KH_GOP_SOFTMAX_GRAD] = "softmax_grad", [KH_GOP_CONV2D] = "conv2d",
    [KH_GOP_CONV2D_BACKPROP_INPUT] = "conv2d_backprop_input",
    [KH_GOP_CONV2D_BACKPROP_FILTER] = "conv2d_backprop_filter", [KH_GOP_MAXPOOL] = "maxpool",
    [KH_GOP_MAXPOOL_GRAD] = "maxpool_grad", [KH_GOP_RESHAPE] = "reshape", [KH_GOP_SLICE] = "slice",
    [KH_GOP_CONCAT] = "concat", [KH_GOP_REVERSE] = "reverse", [KH_GOP_MEAN] = "mean",
    [KH_GOP_MEAN_GRAD] = "mean_grad", [KH_GOP_GATHER] = "gather", [KH_GOP_GATHER_GRAD] = "gather_grad",
    [KH_GOP_DROPOUT] = "dropout", [KH_GOP_DROPOUT_GRAD] = "dropout_grad", [KH_GOP_SOFTMAX_XENT] = "softmax_xent",
    [KH_GOP_SOFTMAX_XENT_GRAD] = "softmax_xent_grad", [KH_GOP_SIGMOID_XENT] = "sigmoid_xent",
    [KH_GOP_SIGMOID_XENT_GRAD] = "sigmoid_xent_grad", [KH_GOP_FILL_BATCH] = "fill_batch",
    [KH_GOP_LOSS_SUM] = "loss_sum", [KH_GOP_CORRECT_COUNT] = "correct_count",
    [KH_GOP_APPLY_GRADIENT_DESCENT] = "apply_gradient_descent", [KH_GOP_APPLY_RMSPROP] = "apply_rmsprop",
    [KH_GOP_APPLY_ADAM] = "apply_adam", [KH_GOP_APPLY_ADADELTA] = "apply_adadelta",
    [KH_GOP_ELEMWISE] = "elemwise",
    [KH_GOP_LSTM_SCAN] = "lstm_scan", [KH_GOP_LSTM_SCAN_GRAD] = "lstm_scan_grad",
    [KH_GOP_LSTM_SCAN_GRAD_U] = "lstm_scan_grad_u",
};

const char *kh_gop_name(uint32_t op) { return op > 0 && op < KH_GOP_END && g_names[op] ? g_names[op] : "?"; }

int kh_gop_inplace_ok(uint32_t op, int32_t i) {
    switch (op) {
    case KH_GOP_ADD: case KH_GOP_SUB: case KH_GOP_MUL: case KH_GOP_ADDN:
    case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_SIGMOID: case KH_GOP_TANH:
    case KH_GOP_BIAS_ADD: case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD:
        return i == 0;
    case KH_GOP_RELU_GRAD: case KH_GOP_SIGMOID_GRAD: case KH_GOP_TANH_GRAD:
        return i == 1; /* overwrite dy, keep y */
    case KH_GOP_ELEMWISE:
        return 1; /* every input is read at an element before that element is written (the plan checks sizes) */
    default: return 0;
    }
}

int kh_gop_elementwise(uint32_t op) {
    switch (op) {
    case KH_GOP_ADD: case KH_GOP_ADDN: case KH_GOP_SUB: case KH_GOP_MUL: case KH_GOP_NEG: case KH_GOP_RELU:
    case KH_GOP_SIGMOID: case KH_GOP_TANH: case KH_GOP_RELU_GRAD: case KH_GOP_SIGMOID_GRAD: case KH_GOP_TANH_GRAD:
    case KH_GOP_BIAS_ADD: case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD: case KH_GOP_ELEMWISE:
        return 1;
    default: return 0;
    }
}

kh_gattr kh_gattr_none(void) {
    kh_gattr a;
    memset(&a, 0, sizeof a);
    a.layer = -1;
    a.slot = -1;
    a.shape_of = -1;
    a.expr = -1;
    return a;
}

// --- building ------------------------------------------------------------------------------------------
kh_status kh_graph_init(kh_graph *g, int64_t max_batch) {
    memset(g, 0, sizeof *g);
    if (max_batch < 1) return KH_ERR_INVALID;
    g->max_batch = max_batch;
    for (int i = 0; i < 8; i++) g->outputs[i] = -1;
    return KH_OK;
}

void kh_graph_release(kh_graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g->ins);
    free(g->exprs);
    memset(g, 0, sizeof *g);
}

static int32_t fail(kh_graph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return 1;
    int32_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return 0;
    *p = q;
    *cap = nc;
    return 1;
}

int kh_graph_same_shape(const kh_gnode *a, const kh_gnode *b) {
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

static void copy_shape(kh_gnode *to, const kh_gnode *from) {
    to->rank = from->rank;
    memcpy(to->dims, from->dims, sizeof to->dims);
    to->flags |= from->flags & KH_GVAL_BATCHED;
}

static int64_t prod(const int64_t *d, int r) {
    int64_t p = 1;
    for (int i = 0; i < r; i++) p *= d[i];
    return p;
}

/* TensorFlow's output size for one spatial axis. */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int padding) {
    return padding == KH_PAD_SAME ? (in + s - 1) / s : (in - k) / s + 1;
}

/* Infer the shape of node n (inputs already set). Returns 0 with g->err on a mismatch. */
static int infer(kh_graph *g, kh_gnode *n, const int32_t *in) {
    const char *nm = kh_gop_name(n->op);
    const kh_gnode *a = n->n_in > 0 ? &g->nodes[in[0]] : NULL;
    const kh_gnode *b = n->n_in > 1 ? &g->nodes[in[1]] : NULL;
    const kh_gattr *t = &n->attr;
    n->dtype = KH_F32;
    switch (n->op) {
    case KH_GOP_MATMUL: {
        /* a rank-3 operand is the matrix of its leading axes flattened into rows (graph.h) */
        if (a->rank < 2 || a->rank > 3 || b->rank < 2 || b->rank > 3)
            return fail(g, "%s: operands must be matrices or (N, T, C) sequences (ranks %d and %d)", nm, a->rank,
                        b->rank) + 1;
        if (b->rank == 3 || (a->rank == 3 && t->transpose_a)) {
            /* (N,T,K)^T x (N,T,M) -> (K,M): the sum over the rows both share */
            if (a->rank != 3 || b->rank != 3 || !t->transpose_a || t->transpose_b)
                return fail(g, "%s: a rank-3 right operand, or a transposed rank-3 left one, needs both operands "
                               "of rank 3, transpose_a and no transpose_b", nm) + 1;
            if (a->dims[0] != b->dims[0] || a->dims[1] != b->dims[1] ||
                (a->flags & KH_GVAL_BATCHED) != (b->flags & KH_GVAL_BATCHED))
                return fail(g, "%s: the rank-3 operands' rows differ ((%lld, %lld) and (%lld, %lld))", nm,
                            (long long)a->dims[0], (long long)a->dims[1], (long long)b->dims[0],
                            (long long)b->dims[1]) + 1;
            n->rank = 2;
            n->dims[0] = a->dims[2];
            n->dims[1] = b->dims[2];
            return 1;
        }
        int64_t ca = a->dims[a->rank - 1]; /* rank 3 here: not transposed */
        int64_t m = t->transpose_a ? a->dims[1] : a->dims[0], k1 = t->transpose_a ? a->dims[0] : ca;
        int64_t k2 = t->transpose_b ? b->dims[1] : b->dims[0], nn = t->transpose_b ? b->dims[0] : b->dims[1];
        if (k1 != k2)
            return fail(g, "%s: inner dimensions %lld and %lld differ", nm, (long long)k1, (long long)k2) + 1;
        n->rank = a->rank;
        n->dims[0] = m;
        if (a->rank == 3) n->dims[1] = a->dims[1];
        n->dims[a->rank - 1] = nn;
        /* batched when the rows come from a batched operand that is not transposed */
        if (!t->transpose_a && (a->flags & KH_GVAL_BATCHED)) n->flags |= KH_GVAL_BATCHED;
        return 1;
    }
    case KH_GOP_BIAS_ADD:
        if (b->rank != 1 || b->dims[0] != a->dims[a->rank - 1])
            return fail(g, "%s: bias of %lld for %lld channels", nm, (long long)b->dims[0],
                        (long long)a->dims[a->rank - 1]) + 1;
        copy_shape(n, a);
        return 1;
    case KH_GOP_BIAS_ADD_GRAD:
        n->rank = 1;
        n->dims[0] = a->dims[a->rank - 1];
        return 1;
    case KH_GOP_ADD: case KH_GOP_SUB: case KH_GOP_MUL:
    case KH_GOP_RELU_GRAD: case KH_GOP_SIGMOID_GRAD: case KH_GOP_TANH_GRAD: case KH_GOP_SOFTMAX_GRAD:
        if (!kh_graph_same_shape(a, b)) return fail(g, "%s: operand shapes differ", nm) + 1;
        copy_shape(n, a);
        return 1;
    case KH_GOP_ADDN:
        for (int i = 1; i < n->n_in; i++)
            if (!kh_graph_same_shape(a, &g->nodes[in[i]])) return fail(g, "%s: operand %d has another shape", nm, i) + 1;
        copy_shape(n, a);
        return 1;
    case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_SIGMOID: case KH_GOP_TANH: case KH_GOP_SOFTMAX:
    case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD:
        copy_shape(n, a);
        return 1;
    case KH_GOP_CONV2D: {
        if (a->rank != 4 || b->rank != 4 || b->dims[2] != a->dims[3])
            return fail(g, "%s: x must be NHWC and w HWIO with matching channels", nm) + 1;
        n->rank = 4;
        n->dims[0] = a->dims[0];
        n->dims[1] = window_out(a->dims[1], b->dims[0], t->strides[0] > 0 ? t->strides[0] : 1, t->padding);
        n->dims[2] = window_out(a->dims[2], b->dims[1], t->strides[1] > 0 ? t->strides[1] : 1, t->padding);
        n->dims[3] = b->dims[3];
        if (n->dims[1] < 1 || n->dims[2] < 1) return fail(g, "%s: kernel larger than the image", nm) + 1;
        n->flags |= a->flags & KH_GVAL_BATCHED;
        return 1;
    }
    case KH_GOP_CONV2D_BACKPROP_INPUT: case KH_GOP_MAXPOOL_GRAD: {
        if (t->shape_of < 0) return fail(g, "%s: needs shape_of", nm) + 1;
        copy_shape(n, &g->nodes[t->shape_of]);
        return 1;
    }
    case KH_GOP_CONV2D_BACKPROP_FILTER: {
        if (t->shape_of < 0) return fail(g, "%s: needs shape_of (the filter)", nm) + 1;
        const kh_gnode *w = &g->nodes[t->shape_of];
        n->rank = w->rank;
        memcpy(n->dims, w->dims, sizeof n->dims);
        return 1;
    }
    case KH_GOP_MAXPOOL:
        if (a->rank != 4 || t->window[0] < 1 || t->window[1] < 1 || t->strides[0] < 1 || t->strides[1] < 1)
            return fail(g, "%s: x must be NHWC with a positive window and strides", nm) + 1;
        n->rank = 4;
        n->dims[0] = a->dims[0];
        n->dims[1] = window_out(a->dims[1], t->window[0], t->strides[0], t->padding);
        n->dims[2] = window_out(a->dims[2], t->window[1], t->strides[1], t->padding);
        n->dims[3] = a->dims[3];
        if (n->dims[1] < 1 || n->dims[2] < 1) return fail(g, "%s: window larger than the image", nm) + 1;
        n->flags |= a->flags & KH_GVAL_BATCHED;
        return 1;
    case KH_GOP_RESHAPE: {
        int64_t want = prod(a->dims, a->rank);
        if (t->shape_of >= 0) {
            const kh_gnode *s = &g->nodes[t->shape_of];
            n->rank = s->rank;
            memcpy(n->dims, s->dims, sizeof n->dims);
        }
        if (prod(n->dims, n->rank) != want) return fail(g, "%s: element counts differ", nm) + 1;
        if ((a->flags & KH_GVAL_BATCHED) && n->dims[0] == a->dims[0]) n->flags |= KH_GVAL_BATCHED;
        else if (a->flags & KH_GVAL_BATCHED) return fail(g, "%s: the batch axis must stay first", nm) + 1;
        n->dtype = a->dtype;
        return 1;
    }
    case KH_GOP_SLICE:
        if (t->axis < 0 || t->axis >= a->rank || t->begin < 0 || t->size < 1 || t->begin + t->size > a->dims[t->axis])
            return fail(g, "%s: [%d, %d) outside axis %d of size %lld", nm, t->begin, t->begin + t->size, t->axis,
                        (long long)(t->axis >= 0 && t->axis < a->rank ? a->dims[t->axis] : -1)) + 1;
        if (t->axis == 0 && (a->flags & KH_GVAL_BATCHED)) return fail(g, "%s: cannot slice the batch", nm) + 1;
        copy_shape(n, a);
        n->dims[t->axis] = t->size;
        return 1;
    case KH_GOP_CONCAT: {
        if (t->axis < 0 || t->axis >= a->rank) return fail(g, "%s: bad axis %d", nm, t->axis) + 1;
        copy_shape(n, a);
        n->dims[t->axis] = 0;
        for (int i = 0; i < n->n_in; i++) {
            const kh_gnode *x = &g->nodes[in[i]];
            if (x->rank != a->rank) return fail(g, "%s: operand %d has another rank", nm, i) + 1;
            for (int d = 0; d < a->rank; d++)
                if (d != t->axis && x->dims[d] != a->dims[d])
                    return fail(g, "%s: operand %d differs on axis %d", nm, i, d) + 1;
            n->dims[t->axis] += x->dims[t->axis];
        }
        return 1;
    }
    case KH_GOP_REVERSE:
        if (t->axis < 1 || t->axis >= a->rank) return fail(g, "%s: bad axis %d", nm, t->axis) + 1;
        copy_shape(n, a);
        return 1;
    case KH_GOP_MEAN:
        if (t->axis < 1 || t->axis >= a->rank || a->rank < 2) return fail(g, "%s: bad axis %d", nm, t->axis) + 1;
        copy_shape(n, a);
        for (int d = t->axis; d < a->rank - 1; d++) n->dims[d] = a->dims[d + 1];
        n->rank = a->rank - 1;
        return 1;
    case KH_GOP_MEAN_GRAD:
        if (t->axis < 1 || t->axis > a->rank || t->size < 1) return fail(g, "%s: bad axis %d", nm, t->axis) + 1;
        copy_shape(n, a);
        for (int d = a->rank; d > t->axis; d--) n->dims[d] = a->dims[d - 1];
        n->dims[t->axis] = t->size;
        n->rank = a->rank + 1;
        if (n->rank > KH_G_MAX_RANK) return fail(g, "%s: rank too large", nm) + 1;
        return 1;
    case KH_GOP_GATHER:
        if (a->rank != 2 || b->dtype != KH_I32 || b->rank + 1 > KH_G_MAX_RANK)
            return fail(g, "%s: needs a (V, D) table and i32 indices", nm) + 1;
        n->rank = b->rank + 1;
        memcpy(n->dims, b->dims, sizeof n->dims);
        n->dims[b->rank] = a->dims[1];
        n->flags |= b->flags & KH_GVAL_BATCHED;
        return 1;
    case KH_GOP_GATHER_GRAD: {
        if (t->shape_of < 0) return fail(g, "%s: needs shape_of (the table)", nm) + 1;
        const kh_gnode *tab = &g->nodes[t->shape_of];
        n->rank = 2;
        n->dims[0] = tab->dims[0];
        n->dims[1] = tab->dims[1];
        n->flags |= KH_GVAL_PERSISTENT;
        return 1;
    }
    case KH_GOP_SOFTMAX_XENT: case KH_GOP_SIGMOID_XENT:
        if (a->rank != 2 || b->dtype != KH_I32 || b->rank != 1 || b->dims[0] != a->dims[0] ||
            (n->op == KH_GOP_SIGMOID_XENT && a->dims[1] != 1))
            return fail(g, "%s: logits (N, C) and N i32 labels", nm) + 1;
        n->rank = 1;
        n->dims[0] = a->dims[0];
        n->flags |= a->flags & KH_GVAL_BATCHED;
        return 1;
    case KH_GOP_SOFTMAX_XENT_GRAD: case KH_GOP_SIGMOID_XENT_GRAD:
        copy_shape(n, a);
        return 1;
    case KH_GOP_LOSS_SUM: case KH_GOP_CORRECT_COUNT:
        n->rank = 1;
        n->dims[0] = 1;
        return 1;
    case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM:
    case KH_GOP_APPLY_ADADELTA:
        if (a->op != KH_GOP_VARIABLE || !kh_graph_same_shape(a, b))
            return fail(g, "%s: needs a variable and a gradient of its shape", nm) + 1;
        copy_shape(n, a);
        n->attr.layer = a->attr.layer;
        n->attr.slot = a->attr.slot;
        return 1;
    case KH_GOP_ELEMWISE: {
        if (t->expr < 0 || t->expr >= g->n_exprs) return fail(g, "%s: no program %d", nm, t->expr) + 1;
        const kh_gexpr *e = &g->exprs[t->expr];
        if (e->n_in != n->n_in) return fail(g, "%s: program takes %d inputs, %d given", nm, e->n_in, n->n_in) + 1;
        const kh_gnode *full = NULL;
        for (int i = 0; i < n->n_in && !full; i++)
            if (!e->vec[i]) full = &g->nodes[in[i]];
        if (!full) return fail(g, "%s: no full-size input", nm) + 1;
        for (int i = 0; i < n->n_in; i++) {
            const kh_gnode *x = &g->nodes[in[i]];
            if (e->vec[i] ? (x->rank != 1 || x->dims[0] != full->dims[full->rank - 1]) : !kh_graph_same_shape(x, full))
                return fail(g, "%s: input %d does not match the output shape", nm, i) + 1;
        }
        copy_shape(n, full);
        return 1;
    }
    case KH_GOP_LSTM_SCAN: { /* (xw (N,T,4U), U (U,4U)) -> (N,T,6,U) */
        if (a->rank != 3 || b->rank != 2 || b->dims[1] != 4 * b->dims[0] || a->dims[2] != b->dims[1])
            return fail(g, "%s: needs xw (N, T, 4U) and a recurrent kernel (U, 4U); got xw of rank %d (last "
                           "axis %lld) and a kernel of rank %d (%lld x %lld)", nm, a->rank,
                        (long long)a->dims[a->rank - 1], b->rank, (long long)b->dims[0],
                        (long long)(b->rank > 1 ? b->dims[1] : 0)) + 1;
        n->rank = 4;
        n->dims[0] = a->dims[0];
        n->dims[1] = a->dims[1];
        n->dims[2] = 6;
        n->dims[3] = b->dims[0];
        n->flags |= a->flags & KH_GVAL_BATCHED;
        return 1;
    }
    case KH_GOP_LSTM_SCAN_GRAD: { /* (S (N,T,6,U), U (U,4U), dS (N,T,6,U)) -> (N,T,4U) */
        const kh_gnode *d = &g->nodes[in[2]];
        if (a->rank != 4 || a->dims[2] != 6 || b->rank != 2 || b->dims[0] != a->dims[3] ||
            b->dims[1] != 4 * a->dims[3])
            return fail(g, "%s: needs a scan's S (N, T, 6, U) and its recurrent kernel (U, 4U)", nm) + 1;
        if (!kh_graph_same_shape(a, d) || (a->flags & KH_GVAL_BATCHED) != (d->flags & KH_GVAL_BATCHED))
            return fail(g, "%s: dS must have S's shape", nm) + 1;
        n->rank = 3;
        n->dims[0] = a->dims[0];
        n->dims[1] = a->dims[1];
        n->dims[2] = 4 * a->dims[3];
        n->flags |= a->flags & KH_GVAL_BATCHED;
        return 1;
    }
    case KH_GOP_LSTM_SCAN_GRAD_U: /* (S (N,T,6,U), dXW (N,T,4U)) -> (U,4U) */
        if (a->rank != 4 || a->dims[2] != 6 || b->rank != 3 || b->dims[0] != a->dims[0] || b->dims[1] != a->dims[1] ||
            b->dims[2] != 4 * a->dims[3] || (a->flags & KH_GVAL_BATCHED) != (b->flags & KH_GVAL_BATCHED))
            return fail(g, "%s: needs a scan's S (N, T, 6, U) and dXW (N, T, 4U) of the same N and T", nm) + 1;
        n->rank = 2;
        n->dims[0] = a->dims[3];
        n->dims[1] = 4 * a->dims[3];
        return 1;
    default:
        return fail(g, "op %u has no shape rule", n->op) + 1;
    }
}

static int expected_inputs(uint32_t op) {
    switch (op) {
    case KH_GOP_INPUT: case KH_GOP_VARIABLE: case KH_GOP_ZEROS: case KH_GOP_FILL_BATCH: return 0;
    case KH_GOP_ADDN: case KH_GOP_CONCAT: case KH_GOP_ELEMWISE: return -1; /* one or more */
    case KH_GOP_BIAS_ADD_GRAD: case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_SIGMOID: case KH_GOP_TANH:
    case KH_GOP_SOFTMAX: case KH_GOP_MAXPOOL: case KH_GOP_RESHAPE: case KH_GOP_SLICE: case KH_GOP_REVERSE:
    case KH_GOP_MEAN: case KH_GOP_MEAN_GRAD: case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD: case KH_GOP_LOSS_SUM:
        return 1;
    case KH_GOP_SOFTMAX_XENT: case KH_GOP_SIGMOID_XENT: case KH_GOP_SOFTMAX_XENT_GRAD:
    case KH_GOP_SIGMOID_XENT_GRAD: case KH_GOP_LSTM_SCAN_GRAD: return 3;
    default: return 2;
    }
}

int32_t kh_graph_add(kh_graph *g, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *attr,
                     uint32_t dtype, int32_t rank, const int64_t *dims, uint32_t flags) {
    if (op == 0 || op >= KH_GOP_END) return fail(g, "unknown op %u", op);
    int want = expected_inputs(op);
    if ((want >= 0 && n_in != want) || (want < 0 && n_in < 1))
        return fail(g, "%s: %d inputs given", kh_gop_name(op), n_in);
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->n_nodes) return fail(g, "%s: input %d is not a node (%d)", kh_gop_name(op), i, in[i]);
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes) ||
        !grow((void **)&g->ins, &g->cap_ins, g->n_ins + n_in, sizeof *g->ins))
        return fail(g, "%s: out of memory", kh_gop_name(op));
    kh_gnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->attr = attr ? *attr : kh_gattr_none();
    n->n_in = n_in;
    n->in_off = g->n_ins;
    if (n_in > 0) memcpy(g->ins + g->n_ins, in, (size_t)n_in * sizeof *in);
    n->flags = flags & (KH_GVAL_BATCHED | KH_GVAL_OUTPUT);
    if (op == KH_GOP_INPUT || op == KH_GOP_VARIABLE || op == KH_GOP_ZEROS || op == KH_GOP_FILL_BATCH ||
        (op == KH_GOP_RESHAPE && (!attr || attr->shape_of < 0))) {
        if (rank < 1 || rank > KH_G_MAX_RANK || !dims) return fail(g, "%s: needs a shape", kh_gop_name(op));
        n->rank = rank;
        for (int i = 0; i < rank; i++) {
            if (dims[i] < 1) return fail(g, "%s: dimension %d is %lld", kh_gop_name(op), i, (long long)dims[i]);
            n->dims[i] = dims[i];
        }
        n->dtype = dtype ? dtype : KH_F32;
        if (op == KH_GOP_FILL_BATCH) n->flags |= KH_GVAL_BATCHED;
        if (op == KH_GOP_VARIABLE) n->flags &= ~(uint32_t)KH_GVAL_BATCHED;
        if (op != KH_GOP_RESHAPE) {
            g->n_ins += n_in;
            return g->n_nodes++;
        }
    }
    for (int i = 0; i < n_in; i++) {
        uint32_t want_dt = KH_F32;
        if ((op == KH_GOP_GATHER && i == 1) || (op == KH_GOP_GATHER_GRAD && i == 0) ||
            ((op == KH_GOP_SOFTMAX_XENT || op == KH_GOP_SIGMOID_XENT || op == KH_GOP_SOFTMAX_XENT_GRAD ||
              op == KH_GOP_SIGMOID_XENT_GRAD || op == KH_GOP_CORRECT_COUNT) && i == 1) ||
            op == KH_GOP_RESHAPE)
            want_dt = op == KH_GOP_RESHAPE ? g->nodes[in[0]].dtype : KH_I32;
        if (g->nodes[in[i]].dtype != want_dt)
            return fail(g, "%s: input %d must be %s", kh_gop_name(op), i, want_dt == KH_I32 ? "i32" : "f32");
    }
    if (!infer(g, n, in)) return -1;
    g->n_ins += n_in;
    return g->n_nodes++;
}

int32_t kh_graph_add_expr(kh_graph *g, const kh_gexpr *e) {
    if (e->n_in < 1 || e->n_in > KH_GEXPR_MAX_IN || e->n_ops < 1 || e->n_ops > KH_GEXPR_MAX_OPS)
        return fail(g, "elemwise: %d inputs and %d instructions (1..%d, 1..%d)", e->n_in, e->n_ops, KH_GEXPR_MAX_IN,
                    KH_GEXPR_MAX_OPS);
    for (int k = 0; k < e->n_ops; k++) {
        const kh_gexpr_op *o = &e->ops[k];
        int binary = o->op == KH_GOP_ADD || o->op == KH_GOP_SUB || o->op == KH_GOP_MUL || o->op == KH_GOP_RELU_GRAD ||
                     o->op == KH_GOP_SIGMOID_GRAD || o->op == KH_GOP_TANH_GRAD;
        int unary = o->op == KH_GOP_NEG || o->op == KH_GOP_RELU || o->op == KH_GOP_SIGMOID || o->op == KH_GOP_TANH ||
                    o->op == KH_GOP_DROPOUT || o->op == KH_GOP_DROPOUT_GRAD;
        if (!binary && !unary) return fail(g, "elemwise: instruction %d is %s, not element-wise", k, kh_gop_name(o->op));
        for (int s = 0; s < (binary ? 2 : 1); s++) {
            int32_t r = s ? o->b : o->a;
            if (r >= k || r < -e->n_in) return fail(g, "elemwise: instruction %d reads operand %d", k, r);
        }
    }
    if (!grow((void **)&g->exprs, &g->cap_exprs, g->n_exprs + 1, sizeof *g->exprs))
        return fail(g, "elemwise: out of memory");
    g->exprs[g->n_exprs] = *e;
    return g->n_exprs++;
}

int64_t kh_graph_numel(const kh_graph *g, int32_t node, int64_t n) {
    const kh_gnode *x = &g->nodes[node];
    int64_t e = prod(x->dims, x->rank);
    if (x->flags & KH_GVAL_BATCHED) e = e / x->dims[0] * n;
    return e;
}

// --- reading -------------------------------------------------------------------------------------------
kh_status kh_graph_consumers(const kh_graph *g, int32_t **off_out, int32_t **cons_out) {
    int32_t *off = calloc((size_t)g->n_nodes + 1, sizeof *off);
    int32_t *cons = malloc(((size_t)g->n_ins + 1) * sizeof *cons);
    int32_t *fill = calloc((size_t)g->n_nodes + 1, sizeof *fill);
    if (!off || !cons || !fill) {
        free(off);
        free(cons);
        free(fill);
        return KH_ERR_NOMEM;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) off[in[j] + 1]++;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) off[i + 1] += off[i];
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) cons[off[in[j]] + fill[in[j]]++] = i;
    }
    free(fill);
    *off_out = off;
    *cons_out = cons;
    return KH_OK;
}

void kh_graph_op_counts(const kh_graph *g, int32_t *counts) {
    memset(counts, 0, KH_GOP_END * sizeof *counts);
    for (int32_t i = 0; i < g->n_nodes; i++) counts[g->nodes[i].op]++;
}

void kh_graph_dump(const kh_graph *g, void (*line)(void *ctx, const char *text), void *ctx) {
    char buf[512];
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *n = &g->nodes[i];
        int k = snprintf(buf, sizeof buf, "%%%d = %s(", i, kh_gop_name(n->op));
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < n->n_in && k < (int)sizeof buf - 16; j++)
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%%%d", j ? ", " : "", in[j]);
        k += snprintf(buf + k, sizeof buf - (size_t)k, ") %s[", n->dtype == KH_I32 ? "i32" : "f32");
        for (int d = 0; d < n->rank && k < (int)sizeof buf - 32; d++)
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%s%lld", d ? "," : "",
                          d == 0 && (n->flags & KH_GVAL_BATCHED) ? "N=" : "", (long long)n->dims[d]);
        if (k < (int)sizeof buf - 32)
            snprintf(buf + k, sizeof buf - (size_t)k, "]%s", n->attr.layer >= 0 ? "" : "");
        if (n->attr.layer >= 0 && k < (int)sizeof buf - 32) {
            size_t len = strlen(buf);
            snprintf(buf + len, sizeof buf - len, " layer %d", n->attr.layer);
        }
        line(ctx, buf);
    }
}
